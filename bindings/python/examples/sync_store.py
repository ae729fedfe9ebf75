"""A conversation kept with :class:`SyncStore`, from code without asyncio
(a script, a WSGI view, a worker thread): the calls of :class:`Store`,
without ``await``.

    pip install ./bindings/python
    python bindings/python/examples/sync_store.py [URL]

CI type-checks this file (``mypy --strict``, ``[tool.mypy]`` in
``bindings/python/pyproject.toml``): each ``SyncStore`` call has the
parameters of its ``Store`` method and returns what that one awaits, so the
functions below, which return the calls' answers as they are, would fail
the check (returning ``Any``) if ``SyncStore``'s calls lost their types.
The tests run it on an in-memory store.
"""

from __future__ import annotations

import sys
from typing import Any

from agent_session import SyncStore


def open_chat(store: SyncStore, user_id: str) -> tuple[dict[str, Any], bool]:
    """The user's ongoing support chat, or a new one after two idle hours."""
    return store.resolve("support", user_id, "chat", idle_timeout_secs=7200)


def say(store: SyncStore, user_id: str, session_id: str, role: str, text: str) -> dict[str, Any]:
    """Appends one message; answers ``{"version", "seqs", "written"}``."""
    return store.append("support", user_id, session_id, {"role": role, "content": text})


def context(store: SyncStore, user_id: str, session_id: str) -> list[dict[str, Any]]:
    """What the next model call would be given."""
    return store.messages("support", user_id, session_id)


def recall(store: SyncStore, user_id: str, words: str) -> dict[str, Any]:
    """A page of the user's events, in any of their sessions, holding ``words``."""
    return store.search("support", user_id, words, ranked=True)


def main(url: str) -> None:
    with SyncStore.open(url) as store:
        backend: str = store.backend
        session, is_new = open_chat(store, "ada")
        print(f"{backend}: {'new' if is_new else 'continued'} session {session['id']}")
        say(store, "ada", session["id"], "user", "Where is my order ORD-58213?")
        say(store, "ada", session["id"], "assistant", "ORD-58213 left the warehouse today.")
        compacted: dict[str, Any] = store.compact(
            "support", "ada", session["id"], "sliding_window", max_events=20
        )
        print("compacted:", compacted["compacted"])
        for message in context(store, "ada", session["id"]):
            print(f"{message['role']}: {message['content']}")
        print("ORD-58213 found in", len(recall(store, "ada", "ORD-58213")["items"]), "events")
        last: dict[str, Any] | None = store.pop("support", "ada", session["id"])
        print("took back:", last["message"]["content"] if last else None)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite://sessions.db")
