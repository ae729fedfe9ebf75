"""What one call costs from Python: 1,000 calls of each kind on SQLite.

    python bindings/python/benches/calls.py

`get`, `append` and a last-20 read run on the calling thread (embedded
store, short calls); an unknown operation goes through the event loop,
which shows what the hand-off to the Tokio runtime and back costs.
"""

from __future__ import annotations

import asyncio
import tempfile
import time

from agent_session import Store, event


async def main() -> None:
    store = await Store.open(f"sqlite://{tempfile.mkdtemp()}/calls.db")
    s = await store.create("a", "u")
    n = 1000

    async def per_call(label: str, call, count: int = n) -> None:
        start = time.perf_counter()
        for i in range(count):
            await call(i)
        print(f"{label}: {(time.perf_counter() - start) / count * 1e6:.0f} us per call")

    await per_call("get", lambda i: store.get("a", "u", s["id"]))
    await per_call(
        "append",
        lambda i: store.append_events(
            "a", "u", s["id"], [event({"role": "user", "content": f"m {i} " + "detail " * 20})]
        ),
    )
    await per_call("last-20 read", lambda i: store.events("a", "u", s["id"], last_n=20))

    async def handoff(_: int) -> None:
        try:
            await store._native.call("no-such-operation", "{}")
        except Exception:
            pass

    await per_call("hand-off to the runtime and back (an unknown operation)", handoff, 200)


if __name__ == "__main__":
    asyncio.run(main())
