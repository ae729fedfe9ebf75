"""agent-session against the frameworks' own stores, from Python, in the
same run, interleaved in pairs (the machine is shared: read the ratios).

    pip install "./bindings/python[bench]"
    python bindings/python/benches/frameworks.py [--pairs 5] [--events 1000] [--adk-events 200]

Every figure of issue 45, item 5 is a ratio of ours to theirs measured in
pairs: in each pair both stores run the same workload, one after the
other, and which one goes first alternates from pair to pair; the table
gives the median of the per-pair ratios and their spread (min-max).

OpenAI Agents: the SDK's ``SQLiteSession`` against ours
(``agent_session.openai_agents.Session`` on SQLite). W1 appends
``--events`` items to one session, one item per ``add_items`` call; W2
appends as many round robin over 20 sessions; W3 reads W1's session
whole (``get_items()``) and its last 20 items (``get_items(limit=20)``).

ADK: ``DatabaseSessionService`` (``sqlite+aiosqlite``) against ours
(``agent_session.adk.SessionService`` on SQLite): ``append_event`` of
``--adk-events`` events to one session, then ``get_session`` of that
session whole and with ``GetSessionConfig(num_recent_events=20)``.

W4 searches the user's sessions, which neither framework store can: an
absolute figure.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import platform
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from agents import SQLiteSession
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from agent_session import Store
from agent_session.adk import SessionService
from agent_session.openai_agents import Session


def item(n: int) -> dict[str, Any]:
    if n % 10 == 9:
        return {"type": "function_call_output", "call_id": f"call_{n}", "output": f"result {n} " * 20}
    role = "user" if n % 2 == 0 else "assistant"
    return {"role": role, "content": f"turn {n}: the user asks about order ORD-{n} " + "detail " * 20}


def adk_event(n: int) -> Event:
    return Event(
        invocation_id=f"inv-{n // 4}",
        author="user" if n % 2 == 0 else "model",
        content=types.Content(
            role="user" if n % 2 == 0 else "model",
            parts=[types.Part(text=item(n).get("content", "x"))],
        ),
    )


# Workloads: each returns a figure of one store, and whether more is
# better ("items/s") or worse ("ms").


async def w1(session: Any, events: int) -> float:
    """Appends to one session, one item per call: items/s."""
    start = time.perf_counter()
    for n in range(events):
        await session.add_items([item(n)])
    return events / (time.perf_counter() - start)


async def w2(make: Callable[[str], Any], events: int) -> float:
    """Appends round robin over 20 sessions: items/s."""
    sessions = [make(f"w2-{uuid.uuid4().hex[:12]}-{i}") for i in range(20)]
    start = time.perf_counter()
    for n in range(events):
        await sessions[n % 20].add_items([item(n)])
    return events / (time.perf_counter() - start)


async def timed(calls: int, call: Callable[[], Awaitable[Any]]) -> float:
    """Milliseconds per call."""
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls * 1000


async def adk_appends(service: Any, session: Any, events: int) -> float:
    """``append_event`` to one session: events/s."""
    batch = [adk_event(n) for n in range(events)]
    start = time.perf_counter()
    for e in batch:
        await service.append_event(session, e)
    return events / (time.perf_counter() - start)


@dataclass
class Row:
    name: str
    unit: str  # "items/s", "events/s" (more is better) or "ms" (less is better)
    target: float
    stretch: float | None = None
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)

    def add(self, ours: float, theirs: float) -> None:
        self.ours.append(ours)
        self.theirs.append(theirs)

    @property
    def ratios(self) -> list[float]:
        """Ours as many times as fast as theirs, per pair."""
        if self.unit == "ms":
            return [t / o for o, t in zip(self.ours, self.theirs)]
        return [o / t for o, t in zip(self.ours, self.theirs)]

    def figure(self, values: list[float]) -> str:
        m = statistics.median(values)
        return f"{m:,.0f} {self.unit}" if self.unit != "ms" else f"{m:.3f} ms"

    def line(self) -> str:
        r = self.ratios
        median = statistics.median(r)
        target = f"≥ {self.target:g}×" + (f" (stretch {self.stretch:g}×)" if self.stretch else "")
        met = "yes" if median >= self.target else "no"
        if self.stretch and median >= self.target:
            met += " (stretch: " + ("yes" if median >= self.stretch else "no") + ")"
        return (
            f"| {self.name} | {self.figure(self.ours)} | {self.figure(self.theirs)} "
            f"| {median:.2f}× | {min(r):.2f}–{max(r):.2f}× | {target} | {met} |"
        )


async def pair(ours_first: bool, ours: Callable[[], Awaitable[float]], theirs: Callable[[], Awaitable[float]]) -> tuple[float, float]:
    """Runs both, ``ours`` first or second: ``(ours, theirs)``."""
    if ours_first:
        a = await ours()
        b = await theirs()
    else:
        b = await theirs()
        a = await ours()
    return a, b


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs per workload (default 5)")
    parser.add_argument("--events", type=int, default=1000,
                        help="items per OpenAI Agents append run, and so the size of the session W3 reads (default 1000)")
    parser.add_argument("--adk-events", type=int, default=200,
                        help="events per ADK append run, and so the size of the session get_session reads (default 200)")
    parser.add_argument("--reads", type=int, default=20, help="whole-session reads per figure (last-N reads: 10x as many)")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    store = await Store.open(f"sqlite://{tmp}/ours.db")
    ours_make = lambda sid: Session(sid, store, user_id="ada")  # noqa: E731
    theirs_make = lambda sid: SQLiteSession(sid, f"{tmp}/sdk.db")  # noqa: E731
    adk_ours = SessionService(store)
    adk_theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp}/adk.db")
    recent = GetSessionConfig(num_recent_events=20)

    rows = {
        "W1": Row(f"W1 appends, one session ({args.events} items, 1 per call)", "items/s", 3, 5),
        "W2": Row(f"W2 appends, round robin over 20 sessions ({args.events} items)", "items/s", 3, 5),
        "W3": Row(f"W3 whole-session read ({args.events} items)", "ms", 2),
        "W3l": Row(f"W3 last-20 read (of {args.events} items)", "ms", 2),
        "A1": Row(f"ADK `append_event` ({args.adk_events} events)", "events/s", 20),
        "A2": Row(f"ADK `get_session` ({args.adk_events} events)", "ms", 5),
        "A3": Row(f"ADK `get_session`, `num_recent_events=20` (of {args.adk_events})", "ms", 5),
    }

    # Warm-up (imports, lazily built validators, SQLite caches): not counted.
    for make in (ours_make, theirs_make):
        s = make(f"warm-{uuid.uuid4().hex[:12]}")
        await w1(s, 50)
        await s.get_items()
        await s.get_items(limit=20)
    for svc in (adk_ours, adk_theirs):
        s = await svc.create_session(app_name="bench", user_id="ada")
        await adk_appends(svc, s, 20)
        await svc.get_session(app_name="bench", user_id="ada", session_id=s.id)
        await svc.get_session(app_name="bench", user_id="ada", session_id=s.id, config=recent)

    for p in range(args.pairs):
        first = p % 2 == 0  # ours first in even pairs, theirs first in odd ones
        ours_s, theirs_s = ours_make(f"s-{p}"), theirs_make(f"s-{p}")
        rows["W1"].add(*await pair(first, lambda: w1(ours_s, args.events), lambda: w1(theirs_s, args.events)))
        rows["W2"].add(*await pair(first, lambda: w2(ours_make, args.events), lambda: w2(theirs_make, args.events)))
        rows["W3"].add(*await pair(
            first,
            lambda: timed(args.reads, ours_s.get_items),
            lambda: timed(args.reads, theirs_s.get_items),
        ))
        rows["W3l"].add(*await pair(
            first,
            lambda: timed(args.reads * 10, lambda: ours_s.get_items(limit=20)),
            lambda: timed(args.reads * 10, lambda: theirs_s.get_items(limit=20)),
        ))

        a_ours = await adk_ours.create_session(app_name="bench", user_id="ada")
        a_theirs = await adk_theirs.create_session(app_name="bench", user_id="ada")
        rows["A1"].add(*await pair(
            first,
            lambda: adk_appends(adk_ours, a_ours, args.adk_events),
            lambda: adk_appends(adk_theirs, a_theirs, args.adk_events),
        ))

        def get(svc: Any, sid: str, config: Any = None) -> Callable[[], Awaitable[Any]]:
            return lambda: svc.get_session(app_name="bench", user_id="ada", session_id=sid, config=config)

        rows["A2"].add(*await pair(
            first,
            lambda: timed(args.reads, get(adk_ours, a_ours.id)),
            lambda: timed(args.reads, get(adk_theirs, a_theirs.id)),
        ))
        rows["A3"].add(*await pair(
            first,
            lambda: timed(args.reads * 10, get(adk_ours, a_ours.id, recent)),
            lambda: timed(args.reads * 10, get(adk_theirs, a_theirs.id, recent)),
        ))

    search_ms = await timed(50, lambda: store.search("openai-agents", "ada", "ORD-7"))

    command = "python bindings/python/benches/frameworks.py " + shlex.join(sys.argv[1:])
    print(f"`{command.strip()}` — {dt.date.today().isoformat()}, {args.pairs} interleaved pairs, "
          f"Python {platform.python_version()}, openai-agents {version('openai-agents')}, "
          f"google-adk {version('google-adk')}, SQLite files in {tmp}")
    print()
    print("Theirs: `SQLiteSession` for W1–W3, `DatabaseSessionService` (sqlite+aiosqlite) for ADK. "
          "Ratio: ours as many times as fast as theirs, per pair (median, min–max).")
    print()
    print("| workload | ours | theirs | ratio (median) | min–max | target | met |")
    print("|---|---|---|---|---|---|---|")
    for row in rows.values():
        print(row.line())
    print()
    print(f"W4 search across the user's sessions (any word, ranked): {search_ms:.2f} ms per query "
          "(`SQLiteSession` and `DatabaseSessionService` cannot search).")


if __name__ == "__main__":
    asyncio.run(main())
