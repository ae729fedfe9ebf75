"""Uses a store, forks, and uses the store kinds again in the child: the
child opens its own, and the parent's store refuses calls in the child."""

from __future__ import annotations

import asyncio
import os
import sys

import agent_session

URL = sys.argv[1]


async def use(store: agent_session.Store) -> int:
    s = await store.create("app", "ada")
    await store.append("app", "ada", s["id"], {"role": "user", "content": "hi"})
    return len((await store.events("app", "ada", s["id"], view="archive", page_size=500))["items"])


async def open_and_use() -> agent_session.Store:
    store = await agent_session.Store.open(URL)
    assert await use(store) == 1
    return store


async def in_child(parent_store: agent_session.Store) -> None:
    try:
        await parent_store.list("app", "ada")
        print("child: the parent's store answered", flush=True)
        os._exit(3)
    except agent_session.UnavailableError as e:
        assert "fork" in str(e), e
    child_store = await agent_session.Store.open(URL)
    assert await use(child_store) == 1


parent_store = asyncio.run(open_and_use())
pid = os.fork()  # outside a running event loop, which asyncio cannot fork
if pid == 0:
    asyncio.run(in_child(parent_store))
    agent_session.SyncStore(URL).list("app", "ada")
    print("child ok", flush=True)
    sys.exit(0)  # through the interpreter's normal shutdown
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert asyncio.run(use(parent_store)) == 1
print("parent ok", flush=True)
