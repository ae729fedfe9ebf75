"""Touches every store kind and call path of the package, then exits
without closing anything: what ``test_exit.py`` runs many times in a row.

Arguments: a scratch directory, then the store URLs to use besides the
embedded ones (PostgreSQL, Redis)."""

from __future__ import annotations

import asyncio
import sys
import threading

import agent_session

SCRATCH, SERVER_URLS = sys.argv[1], sys.argv[2:]
URLS = [f"sqlite://{SCRATCH}/s.db", f"fs://{SCRATCH}/files", "memory://", *SERVER_URLS]


async def every_async_call(url: str) -> None:
    store = await agent_session.Store.open(url)
    s = await store.create("app", "ada")
    for i in range(3):
        await store.append("app", "ada", s["id"], {"role": "user", "content": f"question {i}"})
    await store.events("app", "ada", s["id"])
    await store.events("app", "ada", s["id"], view="archive", page_size=500)
    await store.messages("app", "ada", s["id"])
    await store.list("app", "ada")
    await store.search("app", "ada", "question")
    await store.compact("app", "ada", s["id"], "sliding_window", max_events=2)
    try:
        await store.get("app", "bob", s["id"])
    except agent_session.NotFoundError:
        pass
    # A call left running when the loop ends: its answer finds no loop.
    asyncio.get_running_loop().create_task(store.list("app", "ada"))


def every_blocking_call(url: str) -> None:
    store = agent_session.SyncStore(url)
    s = store.create("app", "ada")
    store.append("app", "ada", s["id"], {"role": "user", "content": "hi"})
    store.events("app", "ada", s["id"], view="archive", page_size=500)
    store.search("app", "ada", "hi")


def daemon_calls(url: str) -> None:
    """Calls in a loop until the interpreter exits under it."""
    store = agent_session.SyncStore(url)
    s = store.create("app", "ada")
    while True:
        store.append("app", "ada", s["id"], {"role": "user", "content": "again"})
        store.events("app", "ada", s["id"], last_n=5)


def daemon_loop(url: str) -> None:
    """An event loop of its own in a daemon thread, awaiting calls in a loop."""

    async def forever() -> None:
        store = await agent_session.Store.open(url)
        s = await store.create("app", "ada")
        while True:
            await store.list("app", "ada")
            await store.events("app", "ada", s["id"], view="archive", page_size=200)

    asyncio.run(forever())


for url in URLS:
    asyncio.run(every_async_call(url))
    worker = threading.Thread(target=every_blocking_call, args=(url,))
    worker.start()
    worker.join()
for url in URLS:
    threading.Thread(target=daemon_calls, args=(url,), daemon=True).start()
    threading.Thread(target=daemon_loop, args=(url,), daemon=True).start()
print("done")
