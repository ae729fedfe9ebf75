"""The Google ADK session service under ADK's own Runner, with a scripted
model (no network): the conversation continues across runs, the function
call pairs with its response, state deltas land in their scopes (temp:
never stored), events read back as ADK wrote them, and sessions of other
users never see each other."""

from __future__ import annotations

import datetime as _dt
import os
import re
import uuid

import pytest

try:
    import google.adk  # noqa: F401
except ImportError:  # pragma: no cover - CI installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("google-adk is not installed", allow_module_level=True)

from google.adk.agents import LlmAgent
from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools import load_memory
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

import agent_session
from agent_session.adk import MemoryService, SessionService, adk_session_id, store_session_id

APP = "weather"


class ScriptedLlm(BaseLlm):
    """Answers each call with the next scripted response; records the requests."""

    turns: list = Field(default_factory=list)
    seen: list = Field(default_factory=list)

    async def generate_content_async(self, llm_request, stream=False):
        self.seen.append([c.model_dump(exclude_none=True) for c in llm_request.contents])
        yield self.turns.pop(0)


def remember_city(city: str, tool_context: ToolContext) -> dict:
    """Remembers the user's favourite city."""
    tool_context.state["user:favorite_city"] = city
    tool_context.state["temp:scratch"] = "never stored"
    tool_context.state["last_city"] = city
    return {"saved": city}


def text(t: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=t)]))


def user(t: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=t)])


async def run(runner: Runner, user_id: str, session_id: str, message: str) -> list:
    return [e async for e in runner.run_async(user_id=user_id, session_id=session_id, new_message=user(message))]


async def test_adk_runs_continue_and_state_lands_in_its_scopes(store):
    service = SessionService(store)
    call = LlmResponse(
        content=types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(id="fc-1", name="remember_city", args={"city": "Paris"}))],
        )
    )
    llm = ScriptedLlm(model="scripted", turns=[call, text("Saved Paris."), text("You saved Paris.")])
    agent = LlmAgent(name="assistant", model=llm, instruction="Help.", tools=[remember_city])
    runner = Runner(app_name=APP, agent=agent, session_service=service)

    session = await service.create_session(app_name=APP, user_id="ada", state={"plan": "free", "temp:x": 1})
    first = await run(runner, "ada", session.id, "Remember Paris.")
    assert first[-1].content.parts[0].text == "Saved Paris."
    second = await run(runner, "ada", session.id, "What did I save?")
    assert second[-1].content.parts[0].text == "You saved Paris."

    # The third model call saw the first run: the call and its response pair.
    contents = llm.seen[2]
    calls = [p["function_call"] for c in contents for p in c.get("parts", []) if "function_call" in p]
    answers = [p["function_response"] for c in contents for p in c.get("parts", []) if "function_response" in p]
    assert calls and answers and calls[0]["id"] == answers[0]["id"] == "fc-1"
    assert answers[0]["response"] == {"saved": "Paris"}

    stored = await service.get_session(app_name=APP, user_id="ada", session_id=session.id)
    assert stored.state["user:favorite_city"] == "Paris"
    assert stored.state["last_city"] == "Paris" and stored.state["plan"] == "free"
    assert not any(k.startswith("temp:") for k in stored.state), stored.state
    written = first + second
    # Every event ADK wrote reads back as it wrote it (the user messages
    # are written by the runner too, before the model's).
    by_id = {e.id: e for e in stored.events}
    for e in written:
        assert e.id in by_id, e.id
        assert by_id[e.id].content == e.content
        assert by_id[e.id].author == e.author
        assert by_id[e.id].invocation_id == e.invocation_id
    assert [e.timestamp for e in stored.events] == sorted(e.timestamp for e in stored.events)

    # user: state follows the user into a new session; another user sees none of it.
    other = await service.create_session(app_name=APP, user_id="ada")
    assert other.state["user:favorite_city"] == "Paris"
    bob = await service.create_session(app_name=APP, user_id="bob")
    assert "user:favorite_city" not in bob.state
    assert await service.get_session(app_name=APP, user_id="bob", session_id=session.id) is None
    assert await service.get_user_state(app_name=APP, user_id="ada") == {"favorite_city": "Paris"}

    recent = await service.get_session(
        app_name=APP, user_id="ada", session_id=session.id, config=GetSessionConfig(num_recent_events=2)
    )
    assert [e.id for e in recent.events] == [e.id for e in stored.events[-2:]]
    cut = stored.events[-2].timestamp
    after = await service.get_session(
        app_name=APP, user_id="ada", session_id=session.id, config=GetSessionConfig(after_timestamp=cut)
    )
    assert all(e.timestamp >= cut for e in after.events) and len(after.events) >= 2

    mine = await service.list_sessions(app_name=APP, user_id="ada")
    assert {s.id for s in mine.sessions} == {session.id, other.id}
    assert mine.sessions[-1].last_update_time >= mine.sessions[0].last_update_time
    everyone = await service.list_sessions(app_name=APP)
    assert {s.id for s in everyone.sessions} == {session.id, other.id, bob.id}

    await service.delete_session(app_name=APP, user_id="ada", session_id=session.id)
    assert await service.get_session(app_name=APP, user_id="ada", session_id=session.id) is None


async def test_a_compacted_adk_session_reads_its_summary_as_text_events(store):
    service = SessionService(store)
    session = await service.create_session(app_name=APP, user_id="ada")
    for n in range(8):
        event = Event(
            invocation_id=f"inv-{n}",
            author="user" if n % 2 == 0 else "assistant",
            content=types.Content(
                role="user" if n % 2 == 0 else "model",
                parts=[types.Part(text=f"turn {n}: parcel PX-{n} goes to Lyon")],
            ),
        )
        await service.append_event(session, event)
    await store.compact(APP, "ada", store_session_id(APP, "ada", session.id), "summarize", keep=1)
    read = await service.get_session(app_name=APP, user_id="ada", session_id=session.id)
    texts = [p.text for e in read.events for p in e.content.parts if p.text]
    assert any("PX-0" in t for t in texts[:2]), "the summary reads back as a text event"
    assert texts[-1] == "turn 7: parcel PX-7 goes to Lyon", "the kept turn reads back as written"
    assert all(e.id and e.timestamp for e in read.events)


async def test_session_ids_are_scoped_per_app_and_user(store):
    service = SessionService(store)
    a = await service.create_session(app_name=APP, user_id="ada", session_id="s1", state={"who": "ada"})
    b = await service.create_session(app_name=APP, user_id="bob", session_id="s1", state={"who": "bob"})
    c = await service.create_session(app_name="other", user_id="ada", session_id="s1", state={"who": "other"})
    assert a.id == b.id == c.id == "s1"
    await service.append_event(a, Event(author="user", content=user("ada's secret")))

    got_b = await service.get_session(app_name=APP, user_id="bob", session_id="s1")
    got_c = await service.get_session(app_name="other", user_id="ada", session_id="s1")
    assert (got_b.state["who"], got_b.events) == ("bob", [])
    assert (got_c.state["who"], got_c.events) == ("other", [])
    assert [s.user_id for s in (await service.list_sessions(app_name=APP)).sessions] == ["bob", "ada"]

    # A duplicate within one owner is ADK's own error, not the store's.
    with pytest.raises(AdkAlreadyExistsError) as taken:
        await service.create_session(app_name=APP, user_id="bob", session_id="s1")
    assert not isinstance(taken.value, agent_session.SessionError)

    # Deleting bob's s1 leaves ada's.
    await service.delete_session(app_name=APP, user_id="bob", session_id="s1")
    assert await service.get_session(app_name=APP, user_id="bob", session_id="s1") is None
    assert len((await service.get_session(app_name=APP, user_id="ada", session_id="s1")).events) == 1


def test_store_session_ids_are_valid_and_injective():
    triples = [
        ("a:b", "c", "d"), ("a", "b:c", "d"), ("a", "b", "c:d"), ("a.2e", "b", "c"), ("a.", "2e", "b"),
        ("support", "ada@example.com", "chat/1 of 2"), ("app", "u", "café ☕"), ("app", "u", ".."),
    ]
    ids = [store_session_id(*t) for t in triples]
    assert len(set(ids)) == len(ids)
    for t, sid in zip(triples, ids):
        assert re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", sid) and sid not in (".", "..")
        assert adk_session_id(sid, t[0], t[1]) == t[2]
        assert adk_session_id(sid, t[0], t[1] + "x") is None
    assert store_session_id(APP, "ada", "8c0f6a1e-2b0a-4c1e-9d6e-5b7c1f0e4a2d") == (
        "weather:ada:8c0f6a1e-2b0a-4c1e-9d6e-5b7c1f0e4a2d"
    )
    with pytest.raises(ValueError):
        store_session_id(APP, "ada", "x" * 200)


async def test_odd_session_ids_round_trip_and_generated_ids_are_uuid4(store):
    service = SessionService(store)
    for sid in ["chat/1 of 2", "café ☕", "a:b", ".."]:
        created = await service.create_session(app_name=APP, user_id="ada@example.com", session_id=sid)
        assert created.id == sid
        await service.append_event(created, Event(author="user", content=user(f"in {sid}")))
        got = await service.get_session(app_name=APP, user_id="ada@example.com", session_id=sid)
        assert got.id == sid and got.events[0].content.parts[0].text == f"in {sid}"
    generated = await service.create_session(app_name=APP, user_id="ada")
    assert uuid.UUID(generated.id).version == 4
    # Over the store's length the id cannot exist: get answers None, create refuses.
    assert await service.get_session(app_name=APP, user_id="ada", session_id="x" * 200) is None
    with pytest.raises(ValueError):
        await service.create_session(app_name=APP, user_id="ada", session_id="x" * 200)
    # A store session not made by this service is not an ADK session.
    await store.create(APP, "ada", id="plain-store-session")
    listed = {s.id for s in (await service.list_sessions(app_name=APP, user_id="ada")).sessions}
    assert listed == {generated.id}


async def test_last_update_time_is_the_last_event_time_under_the_runner(store):
    service = SessionService(store)
    llm = ScriptedLlm(model="scripted", turns=[text("Hello.")])
    runner = Runner(app_name=APP, agent=LlmAgent(name="assistant", model=llm), session_service=service)
    session = await service.create_session(app_name=APP, user_id="ada")
    events = await run(runner, "ada", session.id, "Hi")
    got = await service.get_session(app_name=APP, user_id="ada", session_id=session.id)
    assert got.last_update_time == events[-1].timestamp == got.events[-1].timestamp
    bare = await service.get_session(
        app_name=APP, user_id="ada", session_id=session.id, config=GetSessionConfig(num_recent_events=0)
    )
    assert bare.last_update_time == events[-1].timestamp
    [listed] = (await service.list_sessions(app_name=APP, user_id="ada")).sessions
    assert listed.last_update_time == events[-1].timestamp


def count(key: str, tool_context: ToolContext) -> dict:
    """Counts one more of ``key``."""
    tool_context.state[key] = tool_context.state.get(key, 0) + 1
    return {"counted": key}


def call(name: str, call_id: str, **args) -> LlmResponse:
    part = types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
    return LlmResponse(content=types.Content(role="model", parts=[part]))


async def rewound_conversation(service) -> tuple:
    """Two invocations, a rewind to before the second, a third: what the
    third model call saw and the state at the end."""
    llm = ScriptedLlm(
        model="scripted",
        turns=[call("count", "c1", key="apples"), text("One apple."), call("count", "c2", key="pears"),
               text("One pear."), text("You counted apples.")],
    )
    runner = Runner(app_name=APP, agent=LlmAgent(name="assistant", model=llm, tools=[count]), session_service=service)
    session = await service.create_session(app_name=APP, user_id="ada", session_id="r1")
    await run(runner, "ada", session.id, "Count an apple.")
    second = await run(runner, "ada", session.id, "Count a pear.")
    await runner.rewind_async(user_id="ada", session_id=session.id, rewind_before_invocation_id=second[0].invocation_id)
    await run(runner, "ada", session.id, "What did I count?")
    texts = [p.get("text") for c in llm.seen[-1] for p in c.get("parts", []) if p.get("text")]
    final = await service.get_session(app_name=APP, user_id="ada", session_id=session.id)
    return texts, final.state


async def test_rewind_through_the_runner_matches_adks_in_memory_service(store):
    ours = await rewound_conversation(SessionService(store))
    reference = await rewound_conversation(InMemorySessionService())
    texts, state = ours
    assert "Count a pear." not in texts and "Count an apple." in texts
    assert state["apples"] == 1 and state.get("pears") is None
    assert ours == reference


def memories_in(contents: list) -> list:
    """The memories of the load_memory responses in a model request."""
    responses = [p["function_response"] for c in contents for p in c.get("parts", []) if "function_response" in p]
    # A pydantic answer of a tool comes back under "result".
    answers = [r["response"].get("result", r["response"]) for r in responses if r["name"] == "load_memory"]
    return [m for a in answers for m in a["memories"]]


def memory_text(memory: dict) -> str:
    return " ".join(p.get("text", "") for p in memory["content"]["parts"])


async def test_memory_service_recalls_earlier_sessions_through_adks_load_memory_tool(store):
    sessions, memory = SessionService(store), MemoryService(store)
    llm = ScriptedLlm(
        model="scripted",
        turns=[text("Noted."), call("load_memory", "m1", query="parcel Lyon"), text("It goes to Lyon.")],
    )
    agent = LlmAgent(name="assistant", model=llm, tools=[load_memory])
    runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=memory)

    first = await sessions.create_session(app_name=APP, user_id="ada")
    await run(runner, "ada", first.id, "My parcel PX-9 goes to Lyon.")
    ended = await sessions.get_session(app_name=APP, user_id="ada", session_id=first.id)
    await memory.add_session_to_memory(ended)  # nothing to copy: the store holds it
    bob = await sessions.create_session(app_name=APP, user_id="bob")
    await sessions.append_event(bob, Event(author="user", content=user("My parcel PX-7 goes to Lyon too.")))

    second = await sessions.create_session(app_name=APP, user_id="ada")
    answer = await run(runner, "ada", second.id, "Where does my parcel go?")
    assert answer[-1].content.parts[0].text == "It goes to Lyon."

    recalled = memories_in(llm.seen[-1])
    told = next(e for e in ended.events if e.content and e.content.parts[0].text == "My parcel PX-9 goes to Lyon.")
    entry = next(m for m in recalled if memory_text(m) == "My parcel PX-9 goes to Lyon.")
    assert entry["author"] == "user" and entry["id"] == told.id
    assert _dt.datetime.fromisoformat(entry["timestamp"]).timestamp() == pytest.approx(told.timestamp, abs=1e-6)
    assert entry["custom_metadata"] == {"session_id": first.id}
    assert not any("PX-7" in memory_text(m) for m in recalled), "bob's sessions are not ada's memory"
    assert [e.id for e in ended.events] == [
        e.id for e in (await sessions.get_session(app_name=APP, user_id="ada", session_id=first.id)).events
    ], "adding a session of the store to memory wrote nothing"


async def test_memory_copies_in_a_session_of_another_session_service(store):
    other = InMemorySessionService()
    memory = MemoryService(store)
    session = await other.create_session(app_name=APP, user_id="ada", session_id="elsewhere")
    said = Event(
        author="user", content=user("The locker code is 4471."),
        actions=EventActions(state_delta={"user:locker": "4471"}),
    )
    await other.append_event(session, said)
    await other.append_event(session, Event(author="assistant", content=types.Content(role="model")))
    assert (await memory.search_memory(app_name=APP, user_id="ada", query="locker code")).memories == []

    await memory.add_session_to_memory(session)
    await memory.add_session_to_memory(session)  # again: nothing new
    found = (await memory.search_memory(app_name=APP, user_id="ada", query="locker code")).memories
    assert [(m.id, m.author, m.content) for m in found] == [(said.id, "user", said.content)]
    assert found[0].custom_metadata == {"session_id": "elsewhere"}
    # Events only: the copy does not write the other service's state into the store.
    assert await SessionService(store).get_user_state(app_name=APP, user_id="ada") == {}
    assert (await memory.search_memory(app_name=APP, user_id="ada", query="  ")).memories == []
    assert (await memory.search_memory(app_name=APP, user_id="bob", query="locker code")).memories == []


async def test_memory_service_adds_event_deltas(store):
    memory = MemoryService(store)
    fact = Event(author="user", content=user("Invoice INV-31 is paid."))
    await memory.add_events_to_memory(app_name=APP, user_id="ada", events=[fact], session_id="billing")
    await memory.add_events_to_memory(app_name=APP, user_id="ada", events=[fact])
    found = (await memory.search_memory(app_name=APP, user_id="ada", query="invoice paid")).memories
    assert {m.custom_metadata["session_id"] for m in found} == {"billing", "__unknown_session_id__"}
    assert all(m.content == fact.content for m in found)


async def test_memory_finds_events_compaction_took_out_of_the_context(store):
    sessions, memory = SessionService(store), MemoryService(store)
    session = await sessions.create_session(app_name=APP, user_id="ada")
    for n in range(6):
        await sessions.append_event(session, Event(author="user", content=user(f"turn {n}: code ZX-{n}")))
    await store.compact(APP, "ada", store_session_id(APP, "ada", session.id), "sliding_window", max_events=2)
    assert len((await sessions.get_session(app_name=APP, user_id="ada", session_id=session.id)).events) == 2
    found = (await memory.search_memory(app_name=APP, user_id="ada", query="ZX-1")).memories
    assert [m.content.parts[0].text for m in found] == ["turn 1: code ZX-1"]
