"""The same-answer suite through the Python package: every step of
``tests/same-answer/scenario.json`` (the scenario the library, the HTTP
routes, MCP and the CLI run too) answers here exactly what the file says,
reduced to the same plain JSON as the Rust faces reduce theirs to."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from agent_session import SessionError, Store

SCENARIO = pathlib.Path(__file__).resolve().parents[3] / "tests" / "same-answer" / "scenario.json"
APP, USER = "same-answer", "ada"
HITS = 10


def _line(m: dict[str, Any]) -> str:
    """A message as one line, as ``session_testkit::same_answer::message_line``."""
    calls = [c["function"]["name"] for c in m.get("tool_calls") or []]
    if calls:
        return f"{m['role']}: call {','.join(calls)}"
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
    return f"{m['role']}: {content or ''}"


def _events(session: dict[str, Any]) -> dict[str, Any]:
    return {"events": session["event_count"]}


def _compacted(done: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"compacted": False}
    if done["compacted"]:
        out = {
            "compacted": True,
            "events_after": done["events_after"],
            "tokens_after": done["tokens_after"],
        }
    if done.get("shortfall"):
        out["over_by"] = done["shortfall"]["over_by"]
    return out


class Face:
    """The package's :class:`Store`, one step at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.ids: dict[str, str] = {}

    def id(self, alias: str) -> str:
        return self.ids.get(alias, alias)

    async def run(self, step: dict[str, Any]) -> Any:
        try:
            return await self._run(step)
        except SessionError as e:
            return {"error": e.kind}

    async def _run(self, step: dict[str, Any]) -> Any:
        s, op = self.store, step["op"]
        sid = self.id(step.get("session", ""))
        if op == "create":
            created = await s.create(APP, USER)
            self.ids[step["session"]] = created["id"]
            return _events(created)
        if op == "resolve":
            _, is_new = await s.resolve(APP, USER, step["key"])
            return {"is_new": is_new}
        if op == "append":
            done = await s.append_events(APP, USER, sid, step["events"])
            return {"written": done["written"]}
        if op == "context":
            return {"messages": [_line(m) for m in await s.messages(APP, USER, sid)]}
        if op == "compact":
            spec = dict(step["spec"])
            strategy = spec.pop("strategy")
            return _compacted(await s.compact(APP, USER, sid, strategy, **spec))
        if op == "search":
            hits = await s.search(APP, USER, step["query"], session_id=sid, page_size=HITS)
            return {"hits": len(hits["items"])}
        if op == "rewind":
            return _events(await s.rewind(APP, USER, sid, step["invocation"]))
        if op == "fork":
            fork = await s.fork(APP, USER, sid)
            self.ids[step["into"]] = fork["id"]
            return _events(fork)
        if op == "patch_state":
            return {"session": (await s.patch_state(APP, USER, sid, step["patch"]))["session"]}
        if op == "get":
            return _events(await s.get(APP, step.get("user") or USER, sid))
        raise AssertionError(f"a step the scenario does not have: {op}")


async def test_the_package_answers_what_the_scenario_file_says(store_url):
    expected = json.loads(SCENARIO.read_text())
    face = Face(await Store.open(store_url))
    for i, want in enumerate(expected):
        got = await face.run(want["step"])
        assert got == want["outcome"], f"step {i} ({want['step']['op']}) answered differently"
    assert len(expected) > 20

