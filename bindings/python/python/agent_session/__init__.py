"""Durable conversation sessions for LLM agents, from the Rust store.

    store = await agent_session.Store.open("sqlite://sessions.db")
    s = await store.create("support", "ada")
    await store.append("support", "ada", s["id"], {"role": "user", "content": "hi"})
    history = await store.messages("support", "ada", s["id"])

Every call names its owner (``app``, ``user_id``); another owner's session
is :class:`NotFoundError`, as if it did not exist. Messages are plain dicts
in the OpenAI chat shape; sessions, events and pages are the JSON the
HTTP API returns (``docs/server.md``). :class:`SyncStore` is the same API
without ``await``.
"""

from __future__ import annotations

import asyncio
import atexit
import datetime as _dt
import json
import os
import time
from typing import Any, Callable, Iterable, Mapping

from . import _codec, _native
from .errors import (
    AlreadyExistsError,
    BackendError,
    ConflictError,
    EncryptionError,
    ExpiredError,
    InvalidInputError,
    NotFoundError,
    QuotaExceededError,
    SerializationError,
    SessionEndedError,
    SessionError,
    UnauthorizedError,
    UnavailableError,
    UnsupportedError,
    from_native,
)

from typing import List

__all__ = [
    "Store",
    "SyncStore",
    "event",
    "SessionError",
    "NotFoundError",
    "AlreadyExistsError",
    "ExpiredError",
    "SessionEndedError",
    "QuotaExceededError",
    "ConflictError",
    "InvalidInputError",
    "UnsupportedError",
    "BackendError",
    "SerializationError",
    "UnavailableError",
    "EncryptionError",
    "UnauthorizedError",
]

Json = Any

# The store's runtime threads stop before the interpreter finalizes (a
# thread touching Python then would kill the process), and a forked child
# starts its own runtime instead of the parent's, whose threads it lacks.
atexit.register(_native.shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_native.after_fork_in_child)


def _settle(future: asyncio.Future[Any], ok: bool, answer: Any) -> None:
    """Completes ``future`` with a native call's outcome, on its loop."""
    if future.done():  # cancelled while the store worked
        return
    if ok:
        future.set_result(answer)
    else:
        future.set_exception(from_native(_native.NativeError(answer)))


async def _on_runtime(start: Callable[[Callable[[bool, Any], None]], None]) -> Any:
    """Awaits a native call that ``start(done)`` puts on the store's
    runtime; ``done`` is called from a runtime thread with its outcome."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def done(ok: bool, answer: Any) -> None:
        try:
            loop.call_soon_threadsafe(_settle, future, ok, answer)
        except RuntimeError:  # the loop closed before the answer came
            pass

    start(done)
    return await future


def _uuid7() -> str:
    """A new UUID version 7 (RFC 9562): the time in milliseconds, then 74
    random bits. An event's id: ids that grow with time keep a session's
    appends at the end of the store's id index instead of all over it."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (millis & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76
        | (rand >> 62 & 0xFFF) << 64
        | 0b10 << 62
        | rand & 0x3FFF_FFFF_FFFF_FFFF
    )
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat()


def event(
    message: Mapping[str, Any],
    *,
    id: str | None = None,
    invocation_id: str | None = None,
    branch: str | None = None,
    author: str | None = None,
    state_delta: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An event carrying ``message`` (a chat dict), ready for :meth:`Store.append_events`.

    Appends are idempotent by ``id`` (a new UUID when not given): sending
    the same event again writes nothing and returns its seq.
    """
    out: dict[str, Any] = {
        "id": id or _uuid7(),
        "timestamp": _now(),
        "message": dict(message),
    }
    if invocation_id is not None:
        out["invocation_id"] = invocation_id
    if branch is not None:
        out["branch"] = branch
    if author is not None:
        out["author"] = author
    if state_delta:
        out["state_delta"] = dict(state_delta)
    if metadata:
        out["metadata"] = dict(metadata)
    return out


def _is_short_read(op: str, args: Mapping[str, Any]) -> bool:
    """An events read of a bounded page: the last N, or one page, of at most
    1,000 events (a few milliseconds on an embedded store, less than the
    hand-off to the event loop and back would add to it)."""
    if op not in ("events", "items"):
        return False
    f = args.get("filter") or {}
    size = f.get("last_n") or f.get("page_size") or 10
    return bool(size <= 1000)


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class Store:
    """A session store: SQLite, PostgreSQL, Redis, plain files, memory, or
    a server (``http://``). Open one with :meth:`Store.open`."""

    #: Stores whose calls run on the calling thread (the GIL released):
    #: embedded engines answer short calls faster than a hand-off to the
    #: event loop and back would take.
    EMBEDDED = frozenset({"sqlite", "memory", "fs"})
    #: The calls that stay short whatever the session's size.
    SHORT_CALLS = frozenset(
        {
            "create", "get", "delete", "end", "reopen", "update", "resolve", "reset", "append",
            "messages", "state", "patch_state", "shared_state", "pop",
        }
    )

    def __init__(self, native: Any, *, blocking: bool = False) -> None:
        self._native = native
        # The process that opened it: a forked child must open its own.
        self._pid = os.getpid()
        self._inline = native.backend in self.EMBEDDED
        # Every call on the calling thread, whatever the store (SyncStore).
        self._blocking = blocking

    @classmethod
    async def open(cls, url: str) -> "Store":
        """Opens the store a URL names: ``sqlite://sessions.db``,
        ``postgres://user@host/db``, ``redis://host:6379``, ``fs://./dir``,
        ``memory://``, ``http://host:8080`` (limits as query parameters,
        e.g. ``?max_session_events=10000``)."""
        native = await _on_runtime(lambda done: _native.NativeStore.open(url, done))
        return cls(native)

    @property
    def backend(self) -> str:
        """The store's backend (``sqlite``, ``postgres``, ...)."""
        backend: str = self._native.backend
        return backend

    async def _call(self, op: str, **args: Any) -> Json:
        if os.getpid() != self._pid:
            raise UnavailableError(
                f"this store was opened in process {self._pid}, before a fork; "
                "open it again in this process"
            )
        text = _codec.encode(args)
        if self._blocking or (self._inline and (op in self.SHORT_CALLS or _is_short_read(op, args))):
            try:
                answer = self._native.call_blocking(op, text)
            except _native.NativeError as e:
                raise from_native(e) from None
        else:
            answer = await _on_runtime(lambda done: self._native.call(op, text, done))
        return _codec.decode(answer)

    async def _object(self, op: str, **args: Any) -> dict[str, Any]:
        """:meth:`_call` of an operation that answers a JSON object."""
        answer: dict[str, Any] = await self._call(op, **args)
        return answer

    # Sessions.

    async def create(
        self,
        app: str,
        user_id: str,
        *,
        id: str | None = None,
        key: str | None = None,
        ttl_secs: int | None = None,
        never_expires: bool = False,
        metadata: Mapping[str, Any] | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Creates a session (expiring in 60 days unless told otherwise)."""
        session = _drop_none(
            {
                "id": id,
                "key": key,
                "ttl_secs": ttl_secs,
                "never_expires": never_expires or None,
                "metadata": dict(metadata) if metadata else None,
                "state": dict(state) if state else None,
            }
        )
        return await self._object("create", app=app, user_id=user_id, session=session)

    async def get(self, app: str, user_id: str, session_id: str) -> dict[str, Any]:
        """The session, its state with the ``user:`` and ``app:`` scopes merged."""
        return await self._object("get", app=app, user_id=user_id, session_id=session_id)

    async def list(
        self,
        app: str,
        user_id: str,
        *,
        key: str | None = None,
        status: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        page: int = 0,
        page_size: int = 10,
    ) -> dict[str, Any]:
        """The owner's sessions, newest activity first: ``{"items": [...], "has_more": ...}``."""
        query = _drop_none(
            {
                "key": key,
                "status": status,
                "metadata": json.dumps(dict(metadata)) if metadata else None,
                "page": page,
                "page_size": page_size,
            }
        )
        return await self._object("list", app=app, user_id=user_id, query=query)

    async def list_all(
        self,
        *,
        app: str | None = None,
        user_id: str | None = None,
        page: int = 0,
        page_size: int = 10,
    ) -> dict[str, Any]:
        """Sessions of any owner (an operator's view), newest activity first,
        filtered by ``app`` and ``user_id`` when given."""
        query = _drop_none({"app": app, "user_id": user_id, "page": page, "page_size": page_size})
        return await self._object("list_all", query=query)

    async def delete(self, app: str, user_id: str, session_id: str) -> None:
        """Deletes the session and its events."""
        await self._call("delete", app=app, user_id=user_id, session_id=session_id)

    async def end(self, app: str, user_id: str, session_id: str) -> dict[str, Any]:
        """Ends the session: readable, closed to writes until :meth:`reopen`."""
        return await self._object("end", app=app, user_id=user_id, session_id=session_id)

    async def reopen(self, app: str, user_id: str, session_id: str) -> dict[str, Any]:
        """Makes an ended session writable again."""
        return await self._object("reopen", app=app, user_id=user_id, session_id=session_id)

    async def update(
        self, /, app: str, user_id: str, session_id: str, **update: Any
    ) -> dict[str, Any]:
        """Changes ``metadata``, ``state`` (session scope), ``status`` or
        ``expires_at``; ``expected_version`` makes it a compare-and-swap."""
        return await self._object(
            "update", app=app, user_id=user_id, session_id=session_id, update=update
        )

    async def resolve(
        self,
        app: str,
        user_id: str,
        key: str,
        *,
        idle_timeout_secs: int | None = None,
        daily_reset_hour: int | None = None,
        daily_reset_zone: str | None = None,
        group: bool = False,
        ttl_secs: int | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """The active session of ``key``, or a new one after an idle timeout
        or a daily reset: ``(session, is_new)``."""
        body = _drop_none(
            {
                "key": key,
                "idle_timeout_secs": idle_timeout_secs,
                "daily_reset_hour": daily_reset_hour,
                "daily_reset_zone": daily_reset_zone,
                "group": group or None,
                "ttl_secs": ttl_secs,
            }
        )
        answer = await self._call("resolve", app=app, user_id=user_id, resolve=body)
        return answer["session"], answer["is_new"]

    async def reset(
        self,
        app: str,
        user_id: str,
        key: str,
        *,
        group: bool = False,
        ttl_secs: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Starts ``key`` over: its active session (if any) is ended and a new
        one created and returned; :meth:`resolve` finds the new one."""
        body = _drop_none(
            {
                "key": key,
                "group": group or None,
                "ttl_secs": ttl_secs,
                "metadata": dict(metadata) if metadata else None,
            }
        )
        return await self._object("reset", app=app, user_id=user_id, reset=body)

    # Events.

    async def append(
        self,
        app: str,
        user_id: str,
        session_id: str,
        messages: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        invocation_id: str | None = None,
        state_delta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Appends one message or a list of them (chat dicts), atomically;
        ``state_delta`` rides on the last one. Answers ``{"version", "seqs",
        "written"}``."""
        batch = [messages] if isinstance(messages, Mapping) else list(messages)
        events = [event(m, invocation_id=invocation_id) for m in batch]
        if state_delta and events:
            events[-1]["state_delta"] = dict(state_delta)
        return await self.append_events(app, user_id, session_id, events)

    async def append_events(
        self, app: str, user_id: str, session_id: str, events: Iterable[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Appends events (see :func:`event`) atomically; idempotent by event id."""
        return await self._object(
            "append",
            app=app,
            user_id=user_id,
            session_id=session_id,
            events=[dict(e) for e in events],
        )

    async def events(
        self,
        app: str,
        user_id: str,
        session_id: str,
        *,
        view: str = "context",
        last_n: int | None = None,
        after: int | None = None,
        roles: Iterable[str] | None = None,
        branch: str | None = None,
        invocation_id: str | None = None,
        keyword: str | None = None,
        page: int = 0,
        page_size: int | None = None,
    ) -> dict[str, Any]:
        """A page of events of the ``context`` or the ``archive`` view."""
        filter_ = _drop_none(
            {
                "view": view,
                "last_n": last_n,
                "after": after,
                "roles": ",".join(roles) if roles else None,
                "branch": branch,
                "invocation_id": invocation_id,
                "keyword": keyword,
                "page": page,
                "page_size": page_size,
            }
        )
        return await self._object(
            "events", app=app, user_id=user_id, session_id=session_id, filter=filter_
        )

    async def items(
        self,
        app: str,
        user_id: str,
        session_id: str,
        key: str,
        *,
        last_n: int | None = None,
        page: int = 0,
        page_size: int | None = None,
        with_session: bool = False,
    ) -> dict[str, Any]:
        """What an adapter stored with each event of the context: a page
        ``{"items": [value, ...], "events": [[index, event], ...],
        "has_more": ...}`` where ``items[i]`` is the object in event
        ``i``'s metadata under ``key``, or ``None`` when it holds none (a
        summary), that event then being in ``events`` with its index. Half
        the JSON of :meth:`events` when each event carries its framework's
        item, and one Python object per item, for reads of whole
        conversations. ``with_session`` adds the session under
        ``"session"``, read in the same call."""
        filter_ = _drop_none({"last_n": last_n, "page": page, "page_size": page_size})
        return await self._object(
            "items",
            app=app,
            user_id=user_id,
            session_id=session_id,
            key=key,
            filter=filter_,
            with_session=with_session,
        )

    async def pop(self, app: str, user_id: str, session_id: str) -> dict[str, Any] | None:
        """Removes the latest event that is not a summary and returns it
        (``None`` when there is none); a compaction since then is undone."""
        answer: dict[str, Any] | None = await self._call(
            "pop", app=app, user_id=user_id, session_id=session_id
        )
        return answer

    async def messages(
        self, app: str, user_id: str, session_id: str, *, branch: str | None = None
    ) -> List[dict[str, Any]]:
        """The context as chat messages, ready for the next model call: the
        pinned system messages first, the view of the agent on ``branch``
        (all of it by default), tool calls without their results left out."""
        answer: List[dict[str, Any]] = await self._call(
            "messages", app=app, user_id=user_id, session_id=session_id, branch=branch
        )
        return answer

    async def replace_context(
        self,
        app: str,
        user_id: str,
        session_id: str,
        events: Iterable[Mapping[str, Any]],
        expected_version: int,
    ) -> int:
        """Swaps the context if the session is still at ``expected_version``
        and returns the session's new version; if it is not, raises
        ``ConflictError`` (with the version it is at) and nothing changed.
        The archive keeps everything."""
        answer: int = await self._call(
            "replace_context",
            app=app,
            user_id=user_id,
            session_id=session_id,
            events=[dict(e) for e in events],
            expected_version=expected_version,
        )
        return answer

    # Search, compaction, rewind, fork.

    async def search(
        self,
        app: str,
        user_id: str,
        query: str,
        *,
        session_id: str | None = None,
        ranked: bool = False,
        any: bool = False,
        since: str | _dt.datetime | None = None,
        page: int = 0,
        page_size: int = 10,
    ) -> dict[str, Any]:
        """Searches one session's archive, or all of the user's sessions.

        ``any=True`` finds events holding any one of the query's words and
        phrases instead of every one (``-word`` still excludes); ``since``
        (RFC 3339 text or a timezone-aware ``datetime``) keeps the events
        at or after that time.
        """
        if isinstance(since, _dt.datetime):
            since = since.isoformat()
        return await self._object(
            "search",
            app=app,
            user_id=user_id,
            query=query,
            session_id=session_id,
            ranked=ranked,
            any=any,
            since=since,
            page=page,
            page_size=page_size,
        )

    async def compact(
        self, /, app: str, user_id: str, session_id: str, strategy: str, **params: Any
    ) -> dict[str, Any]:
        """Compacts the context: ``sliding_window`` (``max_events``),
        ``turn_window`` (``max_turns``), ``token_budget`` (``max_tokens``),
        ``summarize`` or ``structured_summary`` (``keep`` turns, or
        ``keep_messages`` messages: 10 when neither is given) or
        ``tool_result_clearing`` (``keep``); optionally ``trigger`` (e.g.
        ``{"tokens": 8000}``: compact only when it fires) and ``summarizer``
        (``"extractive"`` or ``"openai:MODEL"``). Answers what it did, or
        ``compacted: False`` and the reason."""
        spec = {"strategy": strategy, **params}
        return await self._object(
            "compact", app=app, user_id=user_id, session_id=session_id, strategy=spec
        )

    async def rewind(
        self,
        app: str,
        user_id: str,
        session_id: str,
        invocation_id: str | None = None,
        *,
        seq: int | None = None,
    ) -> dict[str, Any]:
        """Removes the invocation's events (or the event at ``seq``) and
        everything after; the context is restored as it was there and the
        state replays. Give exactly one of ``invocation_id`` and ``seq``."""
        target: dict[str, Any] = {}
        if invocation_id is not None:
            target["invocation_id"] = invocation_id
        if seq is not None:
            target["seq"] = seq
        return await self._object(
            "rewind",
            app=app,
            user_id=user_id,
            session_id=session_id,
            rewind=target,
        )

    async def fork(
        self, app: str, user_id: str, session_id: str, at: Any = "latest"
    ) -> dict[str, Any]:
        """A new session from this one's events up to ``at``: ``"latest"``,
        ``{"seq": n}`` or ``{"invocation": id}``."""
        return await self._object(
            "fork", app=app, user_id=user_id, session_id=session_id, fork={"at": at}
        )

    # State.

    async def state(self, app: str, user_id: str, session_id: str) -> dict[str, Any]:
        """The session's state by scope: ``{"session", "user", "app"}``."""
        return await self._object("state", app=app, user_id=user_id, session_id=session_id)

    async def patch_state(
        self, app: str, user_id: str, session_id: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Merges ``patch`` into the session scope (``None`` removes a key);
        ``user:`` and ``app:`` keys change through events' ``state_delta``."""
        return await self._object(
            "patch_state",
            app=app,
            user_id=user_id,
            session_id=session_id,
            patch=dict(patch),
        )

    async def shared_state(self, app: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` and the app's ``app:`` state."""
        return await self._object("shared_state", app=app, user_id=user_id)

    async def usage(self, app: str, user_id: str, session_id: str) -> dict[str, Any]:
        """Model usage recorded in the session: total, per invocation, per model."""
        return await self._object("usage", app=app, user_id=user_id, session_id=session_id)

    async def erase_user(self, app: str, user_id: str) -> dict[str, Any]:
        """Erases every session, event and ``user:`` value of the user in the app."""
        return await self._object("erase_user", app=app, user_id=user_id)


# SyncStore's methods are Store's, made synchronous by _sync: checkers see
# each with the Store method's parameters and its awaited result.
from functools import update_wrapper
from typing import TYPE_CHECKING, Coroutine, TypeVar

if TYPE_CHECKING:  # checkers only (typing has no ParamSpec before 3.10)
    from typing_extensions import Concatenate, ParamSpec

    _P = ParamSpec("_P")
_R = TypeVar("_R")


def _sync(
    method: Callable[Concatenate[Store, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[SyncStore, _P], _R]:
    """A :class:`SyncStore` method that runs ``method`` (of a blocking
    :class:`Store`) to its end: such a call never waits on an event loop,
    so one step finishes it."""

    def call(self: SyncStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        coro = method(self._store, *args, **kwargs)
        try:
            coro.send(None)
        except StopIteration as done:
            answer: _R = done.value
            return answer
        coro.close()
        raise RuntimeError("a SyncStore call waited on an event loop")

    # help() and inspect.signature show Store's parameters and docstring.
    update_wrapper(call, method)
    call.__qualname__ = f"SyncStore.{method.__name__}"
    return call


class SyncStore:
    """:class:`Store` without ``await``: each call runs on the calling
    thread, the GIL released while the store works, and returns when it is
    done. Usable from any thread; inside async code it blocks the event
    loop for the call, as any synchronous call does."""

    def __init__(self, url: str) -> None:
        try:
            native = _native.NativeStore.open_blocking(url)
        except _native.NativeError as e:
            raise from_native(e) from None
        self._store = Store(native, blocking=True)

    @classmethod
    def open(cls, url: str) -> "SyncStore":
        """Opens the store a URL names (see :meth:`Store.open`)."""
        return cls(url)

    def close(self) -> None:
        """Nothing to release: the store closes with its last reference
        (kept so ``with SyncStore(...)`` reads as it always did)."""

    def __enter__(self) -> "SyncStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def backend(self) -> str:
        """The store's backend."""
        return self._store.backend

    # Sessions.

    create = _sync(Store.create)
    get = _sync(Store.get)
    list = _sync(Store.list)
    list_all = _sync(Store.list_all)
    delete = _sync(Store.delete)
    end = _sync(Store.end)
    reopen = _sync(Store.reopen)
    update = _sync(Store.update)
    resolve = _sync(Store.resolve)
    reset = _sync(Store.reset)

    # Events.

    append = _sync(Store.append)
    append_events = _sync(Store.append_events)
    events = _sync(Store.events)
    items = _sync(Store.items)
    pop = _sync(Store.pop)
    messages = _sync(Store.messages)
    replace_context = _sync(Store.replace_context)

    # Search, compaction, rewind, fork.

    search = _sync(Store.search)
    compact = _sync(Store.compact)
    rewind = _sync(Store.rewind)
    fork = _sync(Store.fork)

    # State.

    state = _sync(Store.state)
    patch_state = _sync(Store.patch_state)
    shared_state = _sync(Store.shared_state)
    usage = _sync(Store.usage)
    erase_user = _sync(Store.erase_user)
