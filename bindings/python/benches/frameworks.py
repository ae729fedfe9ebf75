"""agent-session against the frameworks' own stores, from Python, in the
same run, interleaved in pairs (the machine is shared: read the ratios).

    pip install "./bindings/python[bench]"
    python bindings/python/benches/frameworks.py [--pairs 5] [--events 1000]

W1 appends to one session (one item per call), W2 appends round robin to
20 sessions, W3 reads a session whole and its last 20 items, W4 searches
(the frameworks' stores cannot). Stores: the OpenAI Agents SDK's
``SQLiteSession`` and ours (``agent_session.openai_agents.Session`` on
SQLite); ADK's ``DatabaseSessionService`` on SQLite and ours
(``agent_session.adk.SessionService``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid

from agents import SQLiteSession
from google.adk.events.event import Event
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from agent_session import Store
from agent_session.adk import SessionService
from agent_session.openai_agents import Session


def item(n: int) -> dict:
    if n % 10 == 9:
        return {"type": "function_call_output", "call_id": f"call_{n}", "output": f"result {n} " * 20}
    role = "user" if n % 2 == 0 else "assistant"
    return {"role": role, "content": f"turn {n}: the user asks about order ORD-{n} " + "detail " * 20}


async def w1(session, events: int) -> float:
    start = time.perf_counter()
    for n in range(events):
        await session.add_items([item(n)])
    return events / (time.perf_counter() - start)


async def w2(make, events: int) -> float:
    sessions = [make(f"w2-{uuid.uuid4().hex}-{i}") for i in range(20)]
    start = time.perf_counter()
    for n in range(events):
        await sessions[n % 20].add_items([item(n)])
    return events / (time.perf_counter() - start)


async def w3(session, calls: int) -> tuple[float, float]:
    start = time.perf_counter()
    for _ in range(calls):
        await session.get_items()
    full = (time.perf_counter() - start) / calls * 1000
    start = time.perf_counter()
    for _ in range(calls * 10):
        await session.get_items(limit=20)
    last20 = (time.perf_counter() - start) / (calls * 10) * 1000
    return full, last20


def adk_event(n: int) -> Event:
    return Event(
        invocation_id=f"inv-{n // 4}",
        author="user" if n % 2 == 0 else "model",
        content=types.Content(role="user" if n % 2 == 0 else "model", parts=[types.Part(text=item(n).get("content", "x"))]),
    )


async def adk_appends(service, events: int) -> float:
    session = await service.create_session(app_name="bench", user_id="ada")
    start = time.perf_counter()
    for n in range(events):
        await service.append_event(session, adk_event(n))
    return events / (time.perf_counter() - start)


def spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--events", type=int, default=1000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    store = await Store.open(f"sqlite://{tmp}/ours.db")
    ours_make = lambda sid: Session(sid, store, user_id="ada")  # noqa: E731
    theirs_make = lambda sid: SQLiteSession(sid, f"{tmp}/sdk.db")  # noqa: E731
    adk_ours = SessionService(store)
    adk_theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp}/adk.db")

    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in ("W1", "W2", "W3 full", "W3 last 20", "ADK appends")}
    for pair in range(args.pairs):
        sid = f"s-{pair}"
        ours, theirs = ours_make(sid), theirs_make(sid)
        order = [(ours, theirs), (theirs, ours)][pair % 2]
        results = {}
        for s in order:
            results[id(s)] = await w1(s, args.events)
        rows["W1"].append((results[id(ours)], results[id(theirs)]))
        a = await w2(ours_make, args.events)
        b = await w2(theirs_make, args.events)
        rows["W2"].append((a, b))
        of, ol = await w3(ours, 20)
        tf, tl = await w3(theirs, 20)
        rows["W3 full"].append((tf / of, 1.0))  # speed: their time / our time
        rows["W3 last 20"].append((tl / ol, 1.0))
        a = await adk_appends(adk_ours, args.events // 2)
        b = await adk_appends(adk_theirs, args.events // 2)
        rows["ADK appends"].append((a, b))
    print(f"{args.pairs} pairs, {args.events} items per append run, SQLite files in {tmp}")
    for name in ("W1", "W2", "ADK appends"):
        ours_rates = [o for o, _ in rows[name]]
        theirs_rates = [t for _, t in rows[name]]
        ratios = [o / t for o, t in rows[name]]
        label = "DatabaseSessionService" if name == "ADK appends" else "SQLiteSession"
        print(
            f"{name}: ours {statistics.median(ours_rates):.0f} items/s, {label} "
            f"{statistics.median(theirs_rates):.0f} items/s; ours/theirs {spread(ratios)}"
        )
    for name in ("W3 full", "W3 last 20"):
        ratios = [r for r, _ in rows[name]]
        print(f"{name} ({args.events} items): ours is {spread(ratios)} as fast as SQLiteSession")
    hits_start = time.perf_counter()
    for _ in range(50):
        await store.search("openai-agents", "ada", "ORD-7")
    print(f"W4 search across the user's sessions: {(time.perf_counter() - hits_start) / 50 * 1000:.2f} ms "
          "(SQLiteSession and DatabaseSessionService cannot search)")


if __name__ == "__main__":
    asyncio.run(main())
