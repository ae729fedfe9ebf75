"""What one call costs from Python: 1,000 calls of each kind on SQLite.

    python bindings/python/benches/calls.py

`get`, `append` and a last-20 read run on the calling thread (embedded
store, short calls); an unknown operation goes through the event loop,
which shows what the hand-off to the Tokio runtime and back costs.
Then `SyncStore`'s `get` and `search`, beside the same calls handed to an
event loop in a background thread and waited for (what a synchronous
wrapper over the asynchronous store would do).
"""

from __future__ import annotations

import asyncio
import tempfile
import time

import threading

from agent_session import Store, SyncStore, event


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

    sync = SyncStore.open(f"sqlite://{tempfile.mkdtemp()}/sync.db")
    t = sync.create("a", "u")
    sync.append("a", "u", t["id"], [{"role": "user", "content": f"parcel PX-{i}"} for i in range(100)])
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    behind_a_loop = await Store.open(f"sqlite://{tempfile.mkdtemp()}/loop.db")
    u = await behind_a_loop.create("a", "u")
    await behind_a_loop.append("a", "u", u["id"], [{"role": "user", "content": f"parcel PX-{i}"} for i in range(100)])

    def per_sync_call(label: str, call) -> None:
        start = time.perf_counter()
        for i in range(n):
            call(i)
        print(f"{label}: {(time.perf_counter() - start) / n * 1e6:.0f} us per call")

    def through_loop(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    per_sync_call("SyncStore get", lambda i: sync.get("a", "u", t["id"]))
    per_sync_call("get through a loop thread", lambda i: through_loop(behind_a_loop.get("a", "u", u["id"])))
    per_sync_call("SyncStore search", lambda i: sync.search("a", "u", "PX-7", session_id=t["id"]))
    per_sync_call(
        "search through a loop thread",
        lambda i: through_loop(behind_a_loop.search("a", "u", "PX-7", session_id=u["id"])),
    )


if __name__ == "__main__":
    asyncio.run(main())
