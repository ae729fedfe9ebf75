"""Every call of the binding, on SQLite and on PostgreSQL, and each error
kind as its exception class."""

from __future__ import annotations

import asyncio
import datetime
import threading

import pytest

import agent_session
from agent_session import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    SessionEndedError,
    SyncStore,
)

APP, ADA, BOB = "support", "ada", "bob"


async def test_sessions_are_created_read_listed_and_deleted(store):
    s = await store.create(APP, ADA, key="chat-1", metadata={"ticket": 7}, state={"step": 1})
    assert s["user_id"] == ADA and s["key"] == "chat-1" and s["version"] == 0
    assert (await store.get(APP, ADA, s["id"]))["metadata"] == {"ticket": 7}
    listed = await store.list(APP, ADA, metadata={"ticket": 7})
    assert [x["id"] for x in listed["items"]] == [s["id"]]
    await store.delete(APP, ADA, s["id"])
    with pytest.raises(NotFoundError):
        await store.get(APP, ADA, s["id"])


async def test_another_owners_session_is_not_found_as_an_unknown_one(store):
    s = await store.create(APP, ADA)
    with pytest.raises(NotFoundError) as theirs:
        await store.get(APP, BOB, s["id"])
    with pytest.raises(NotFoundError) as unknown:
        await store.get(APP, BOB, "no-such-session")
    assert theirs.value.kind == unknown.value.kind == "not_found"
    with pytest.raises(NotFoundError):
        await store.append(APP, BOB, s["id"], {"role": "user", "content": "hi"})
    assert (await store.get(APP, ADA, s["id"]))["event_count"] == 0


async def test_messages_round_trip_in_the_chat_shape(store):
    s = await store.create(APP, ADA)
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"order": "ORD-1"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "shipped"}
    out = await store.append(APP, ADA, s["id"], [{"role": "user", "content": "where is ORD-1?"}, call, result])
    assert out["seqs"] == [1, 2, 3] and out["written"] == 3
    messages = await store.messages(APP, ADA, s["id"])
    assert messages[0] == {"role": "user", "content": "where is ORD-1?"}
    assert messages[1]["tool_calls"][0]["function"]["name"] == "lookup"
    assert messages[2] == result


async def test_appends_are_idempotent_by_event_id(store):
    s = await store.create(APP, ADA)
    e = agent_session.event({"role": "user", "content": "once"}, id="e-1")
    first = await store.append_events(APP, ADA, s["id"], [e])
    again = await store.append_events(APP, ADA, s["id"], [e])
    assert first["seqs"] == again["seqs"] == [1]
    assert again["written"] == 0


async def test_events_read_through_filters(store):
    s = await store.create(APP, ADA)
    for n in range(30):
        role = "user" if n % 2 == 0 else "assistant"
        await store.append(APP, ADA, s["id"], {"role": role, "content": f"message {n}"})
    last = await store.events(APP, ADA, s["id"], last_n=5)
    assert [e["seq"] for e in last["items"]] == [26, 27, 28, 29, 30]
    users = await store.events(APP, ADA, s["id"], view="archive", roles=["user"], page_size=100)
    assert len(users["items"]) == 15
    after = await store.events(APP, ADA, s["id"], after=28, page_size=10)
    assert [e["seq"] for e in after["items"]] == [29, 30]


async def test_items_answer_the_kept_value_or_the_message(store):
    s = await store.create(APP, ADA)
    kept = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
    await store.append_events(
        APP,
        ADA,
        s["id"],
        [
            agent_session.event({"role": "user", "content": "plain"}),
            agent_session.event({"role": "assistant", "content": "call"}, metadata={"item": kept}),
        ],
    )
    page = await store.items(APP, ADA, s["id"], "item")
    assert page["items"] == [None, kept], "one object per item; None where an event holds none"
    [(index, plain)] = page["events"]
    assert index == 0 and plain["message"] == {"role": "user", "content": "plain"}
    assert plain["seq"] == 1, "an event without the key comes whole, with its index"
    assert not page["has_more"]
    last = await store.items(APP, ADA, s["id"], "item", last_n=1)
    assert last["items"] == [kept] and last["events"] == []
    first = await store.items(APP, ADA, s["id"], "item", page=0, page_size=1)
    assert first["items"] == [None] and first["events"] == [[0, plain]] and first["has_more"]
    with pytest.raises(NotFoundError):
        await store.items(APP, BOB, s["id"], "item")


async def test_search_finds_what_compaction_took_out_of_the_context(store):
    s = await store.create(APP, ADA)
    for n in range(8):
        await store.append(
            APP, ADA, s["id"], [{"role": "user", "content": f"order ORD-{n} is late"}, {"role": "assistant", "content": f"checking ORD-{n}"}]
        )
    compacted = await store.compact(APP, ADA, s["id"], "summarize", keep=2)
    assert compacted["compacted"] and compacted["events_after"] < compacted["events_before"]
    context = await store.messages(APP, ADA, s["id"])
    assert not any("ORD-0 is late" == m.get("content") for m in context)
    hits = await store.search(APP, ADA, "ORD-0", session_id=s["id"])
    assert any("ORD-0" in h["snippet"] for h in hits["items"])
    across = await store.search(APP, ADA, "ORD-3")
    assert {h["session_id"] for h in across["items"]} == {s["id"]}
    nothing = await store.compact(APP, ADA, s["id"], "summarize", keep=2)
    assert nothing["compacted"] is False and nothing["reason"]
    with pytest.raises(InvalidInputError) as missing:
        await store.compact(APP, ADA, s["id"], "sliding_window")
    assert missing.value.problem["field"] == "max_events"


async def test_search_any_term_and_since(store):
    s = await store.create(APP, ADA)
    await store.append(
        APP, ADA, s["id"], [{"role": "user", "content": "a plum"}, {"role": "user", "content": "a pear"}]
    )
    every = await store.search(APP, ADA, "plum pear", session_id=s["id"])
    assert every["items"] == []
    hits = await store.search(APP, ADA, "plum pear", session_id=s["id"], any=True)
    assert [h["event"]["message"]["content"] for h in hits["items"]] == ["a plum", "a pear"]
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    since_past = await store.search(APP, ADA, "plum", session_id=s["id"], since=past)
    assert len(since_past["items"]) == 1
    later = await store.search(APP, ADA, "plum pear", any=True, since="2999-01-01T00:00:00Z")
    assert later["items"] == []
    with pytest.raises(InvalidInputError):
        await store.search(APP, ADA, "plum", since="yesterday")


async def test_rewind_and_fork(store):
    s = await store.create(APP, ADA)
    await store.append(APP, ADA, s["id"], {"role": "user", "content": "first"}, invocation_id="run-1")
    await store.append(APP, ADA, s["id"], {"role": "user", "content": "second"}, invocation_id="run-2")
    fork = await store.fork(APP, ADA, s["id"])
    rewound = await store.rewind(APP, ADA, s["id"], "run-2")
    assert rewound["event_count"] == 1
    assert len(await store.messages(APP, ADA, fork["id"])) == 2, "the fork kept both"


async def test_rewind_to_a_seq_after_a_window_compaction_restores_the_turns(store):
    s = await store.create(APP, ADA)
    for n in range(1, 4):
        await store.append(
            APP, ADA, s["id"], [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}], invocation_id=f"i{n}"
        )
    assert (await store.compact(APP, ADA, s["id"], "turn_window", max_turns=1))["compacted"]
    assert [m["content"] for m in await store.messages(APP, ADA, s["id"])] == ["q3", "a3"]
    await store.rewind(APP, ADA, s["id"], seq=5)
    assert [m["content"] for m in await store.messages(APP, ADA, s["id"])] == ["q1", "a1", "q2", "a2"]
    with pytest.raises(InvalidInputError):
        await store.rewind(APP, ADA, s["id"])


async def test_state_scopes_and_patches(store):
    s = await store.create(APP, ADA, state={"step": 1, "user:lang": "fr"})
    await store.append(APP, ADA, s["id"], {"role": "user", "content": "hi"}, state_delta={"app:tier": "gold"})
    state = await store.state(APP, ADA, s["id"])
    version = (await store.get(APP, ADA, s["id"]))["version"]
    assert state == {
        "session": {"step": 1},
        "user": {"user:lang": "fr"},
        "app": {"app:tier": "gold"},
        "version": version,
    }
    patched = await store.patch_state(APP, ADA, s["id"], {"step": 2, "draft": "x"})
    assert patched["session"] == {"step": 2, "draft": "x"}
    assert patched["version"] == version + 1, "one update: one version"
    with pytest.raises(InvalidInputError):
        await store.patch_state(APP, ADA, s["id"], {"user:lang": "de"})
    assert (await store.shared_state(APP, ADA))["user"] == {"user:lang": "fr"}


async def test_versions_ends_and_resolve(store):
    s = await store.create(APP, ADA)
    with pytest.raises(ConflictError):
        await store.update(APP, ADA, s["id"], metadata={"a": 1}, expected_version=5)
    await store.end(APP, ADA, s["id"])
    with pytest.raises(SessionEndedError):
        await store.append(APP, ADA, s["id"], {"role": "user", "content": "late"})
    await store.reopen(APP, ADA, s["id"])
    first, is_new = await store.resolve(APP, ADA, "telegram:42", idle_timeout_secs=1800)
    again, again_new = await store.resolve(APP, ADA, "telegram:42", idle_timeout_secs=1800)
    assert is_new and not again_new and first["id"] == again["id"]


async def test_bad_input_names_the_field_and_stores_nothing(store):
    with pytest.raises(InvalidInputError) as bad_user:
        await store.create(APP, "a b")
    assert "user" in bad_user.value.problem["field"]
    with pytest.raises(InvalidInputError):
        await store.create(APP, ADA, ttl_secs=60, never_expires=True)
    assert (await store.list(APP, ADA))["items"] == []
    with pytest.raises(InvalidInputError):
        await agent_session.Store.open("nosuch://x")


async def test_concurrent_appends_lose_nothing(store):
    s = await store.create(APP, ADA)
    await asyncio.gather(
        *(store.append(APP, ADA, s["id"], {"role": "user", "content": f"m{n}"}) for n in range(40))
    )
    archive = await store.events(APP, ADA, s["id"], view="archive", page_size=100)
    assert [e["seq"] for e in archive["items"]] == list(range(1, 41))


def test_the_sync_store_runs_every_call_on_the_calling_thread(store_url):
    with SyncStore.open(store_url) as store:
        s = store.create(APP, ADA)
        store.append(APP, ADA, s["id"], [{"role": "user", "content": f"parcel PX-{n}"} for n in range(3)])
        assert [m["content"] for m in store.messages(APP, ADA, s["id"])] == [
            "parcel PX-0",
            "parcel PX-1",
            "parcel PX-2",
        ]
        # Calls the asynchronous store awaits on the runtime (search,
        # compaction, whole reads) finish on this thread too.
        assert store.search(APP, ADA, "PX-1", session_id=s["id"])["items"]
        assert store.compact(APP, ADA, s["id"], "sliding_window", max_events=1)["compacted"]
        assert len(store.events(APP, ADA, s["id"], view="archive", page_size=1000)["items"]) == 3
        with pytest.raises(NotFoundError):
            store.get(APP, BOB, s["id"])
        # From another thread, and from inside a running event loop, alike.
        seen = []
        worker = threading.Thread(target=lambda: seen.append(store.get(APP, ADA, s["id"])["id"]))
        worker.start()
        worker.join()
        assert seen == [s["id"]]

        async def inside_a_loop() -> str:
            return store.get(APP, ADA, s["id"])["id"]

        assert asyncio.run(inside_a_loop()) == s["id"]
        assert store.backend in ("sqlite", "postgres")
    with pytest.raises(InvalidInputError):
        SyncStore.open("nosuch://store")


async def test_quota_existence_and_expiry_errors(tmp_path):
    small = await agent_session.Store.open(f"sqlite://{tmp_path}/q.db?max_session_events=2")
    s = await small.create(APP, ADA)
    await small.append(APP, ADA, s["id"], [{"role": "user", "content": "1"}, {"role": "user", "content": "2"}])
    with pytest.raises(agent_session.QuotaExceededError) as over:
        await small.append(APP, ADA, s["id"], {"role": "user", "content": "3"})
    assert over.value.problem["limit"] == 2
    memory = await agent_session.Store.open("memory://")
    m = await memory.create(APP, ADA)
    with pytest.raises(agent_session.AlreadyExistsError):
        await memory.create(APP, ADA, id=m["id"])
    brief = await memory.create(APP, ADA, ttl_secs=1)
    await asyncio.sleep(1.2)
    # An expired session reads as absent to its owner, as everywhere.
    with pytest.raises(agent_session.NotFoundError):
        await memory.append(APP, ADA, brief["id"], {"role": "user", "content": "too late"})


def test_every_error_kind_has_its_exception_class():
    from agent_session.errors import _BY_KIND, from_native

    kinds = [
        "not_found", "already_exists", "expired", "session_ended", "quota_exceeded", "conflict",
        "invalid_input", "unsupported", "backend", "serialization", "unavailable", "encryption",
        "unauthorized",
    ]
    assert sorted(_BY_KIND) == sorted(kinds)
    for kind in kinds:
        e = from_native(Exception(f'{{"kind": "{kind}", "detail": "d"}}'))
        assert e.kind == kind and isinstance(e, agent_session.SessionError) and e.detail == "d"
    assert isinstance(from_native(Exception("not json")), agent_session.BackendError)


async def test_floats_come_back_exactly_as_stored(store):
    """A float in state, metadata or an event comes back bit for bit: the
    store's JSON parser rounds correctly (the last digit of a time in
    seconds with a fraction once came back one off)."""
    values = [1795752466.7137277, 0.1 + 0.2, 1e-300, 2.0**-1074, 123456789.98765433]
    s = await store.create("app", "ada", state={"t": values}, metadata={"m": values[0]})
    await store.append_events(
        "app", "ada", s["id"],
        [agent_session.event({"role": "user", "content": "x"}, metadata={"v": values})],
    )
    got = await store.get("app", "ada", s["id"])
    assert got["state"]["t"] == values
    assert got["metadata"]["m"] == values[0]
    page = await store.events("app", "ada", s["id"])
    assert page["items"][0]["metadata"]["v"] == values


def test_event_ids_are_uuid7_growing_with_time():
    """`event()` ids are RFC 9562 version-7 UUIDs: their time prefix grows,
    so a session's appends land at the end of the store's id index."""
    import time
    import uuid

    first = uuid.UUID(agent_session.event({"role": "user", "content": "a"})["id"])
    time.sleep(0.002)
    second = uuid.UUID(agent_session.event({"role": "user", "content": "b"})["id"])
    assert (first.version, first.variant) == (7, uuid.RFC_4122)
    assert first.int >> 80 < second.int >> 80
    assert abs((first.int >> 80) - time.time_ns() // 1_000_000) < 5_000
