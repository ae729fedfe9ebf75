"""A Google ADK (``google-adk``) session service and memory service on agent-session.

    from google.adk.runners import Runner
    from agent_session import Store
    from agent_session.adk import MemoryService, SessionService

    store = await Store.open("sqlite://sessions.db")
    runner = Runner(
        agent=agent,
        app_name="support",
        session_service=SessionService(store),
        memory_service=MemoryService(store),
    )

Each ADK event is one event of the store: the ADK event is kept whole
(its content, actions, flags) and comes back as ADK wrote it, while the
event's message is its chat view (text, function calls and responses),
which compaction and recall search read. State deltas go through the
store's scopes exactly as ADK defines them: ``app:`` keys are the app's,
``user:`` keys the user's across their sessions, ``temp:`` keys live on
the in-memory session of the invocation and are never stored, the rest
belong to the session.

A session id is scoped to its (app, user), as in ADK: two users may each
have a session ``s1``. The store's id behind it is :func:`store_session_id`,
an injective encoding of the three names into the store's id alphabet.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import gc
import json
import re
import types as _pytypes
import typing
from typing import Any, Callable, Mapping, Optional, Sequence

import pydantic

from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.platform import uuid as _adk_uuid
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.genai import types

from . import Store, event as _event
from .errors import AlreadyExistsError, NotFoundError

#: The event metadata key that holds the ADK event as it was appended.
EVENT_KEY = "adk_event"
#: The session-state key (hidden from ADK) that holds the timestamp of the
#: last event ADK appended: ADK's ``Session.last_update_time``.
LAST_UPDATE_KEY = "__adk_last_update_time__"
#: The marker of a state value the store could not hold as it is (``None``,
#: which the store reads as "remove the key", and objects that carry the marker).
VALUE_MARKER = "__adk_value__"
#: The longest store session id (the store's rule).
MAX_ID_LEN = 128

_PLAIN = re.compile(r"[A-Za-z0-9_-]")
_ALL_PLAIN = re.compile(r"[A-Za-z0-9_-]*")
_ESCAPED = re.compile(r"(?:[A-Za-z0-9_-]|\.[0-9a-f]{2})*")


def _escape(name: str) -> str:
    """``name`` in the letters ``[A-Za-z0-9_-]``, every other byte of its
    UTF-8 as ``.xx`` (lowercase hex): injective, and never holds ``:``."""
    if _ALL_PLAIN.fullmatch(name):
        return name  # the common case (uuids, plain names): nothing to escape
    out = []
    for c in name:
        if _PLAIN.fullmatch(c):
            out.append(c)
        else:
            out.extend(f".{b:02x}" for b in c.encode("utf-8"))
    return "".join(out)


def _unescape(text: str) -> Optional[str]:
    """The name :func:`_escape` made ``text`` from, or ``None`` if it made none."""
    if not _ESCAPED.fullmatch(text):
        return None
    raw = bytearray()
    i = 0
    while i < len(text):
        if text[i] == ".":
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(text[i].encode("ascii"))
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


@functools.lru_cache(maxsize=4096)
def store_session_id(app_name: str, user_id: str, session_id: str) -> str:
    """The store's session id behind ADK's ``session_id`` of (app, user).

    ``<app>:<user>:<id>``, each escaped to ``[A-Za-z0-9_-]`` and ``.xx``
    per other byte: a valid store id, different for every different
    triple. Raises ``ValueError`` when it would pass the store's 128 bytes.
    """
    encoded = ":".join(_escape(part) for part in (app_name, user_id, session_id))
    if len(encoded) > MAX_ID_LEN:
        raise ValueError(
            f"session id {session_id!r} of app {app_name!r} and user {user_id!r} "
            f"encodes to {len(encoded)} bytes; the store allows {MAX_ID_LEN}"
        )
    return encoded


def adk_session_id(stored_id: str, app_name: str, user_id: str) -> Optional[str]:
    """ADK's session id behind a store id of (app, user), or ``None`` when
    the store session is not one this service created for that owner."""
    parts = [_unescape(p) for p in stored_id.split(":")]
    if len(parts) != 3 or parts[0] != app_name or parts[1] != user_id:
        return None
    return parts[2]


def _encode_value(value: Any) -> Any:
    if value is None:
        return {VALUE_MARKER: "null"}
    if isinstance(value, dict) and VALUE_MARKER in value:
        return {VALUE_MARKER: "raw", "value": value}
    return value


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict) and VALUE_MARKER in value:
        return None if value[VALUE_MARKER] == "null" else value.get("value")
    return value


def _encode_state(state: dict[str, Any]) -> dict[str, Any]:
    """State as the store keeps it: ``None`` stays a value (ADK stores it;
    the store would remove the key), ``temp:`` keys are dropped."""
    return {k: _encode_value(v) for k, v in state.items() if not k.startswith("temp:")}


def _decode_state(state: dict[str, Any]) -> dict[str, Any]:
    return {k: _decode_value(v) for k, v in state.items() if k != LAST_UPDATE_KEY}


def _time(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc).isoformat()


_FRACTION = re.compile(r"(\.\d{6})\d+")


def _seconds(iso: str) -> float:
    """Seconds since the epoch of an RFC 3339 time (nanoseconds cut to
    microseconds: ``fromisoformat`` before 3.11 reads no more)."""
    text = _FRACTION.sub(r"\1", iso.replace("Z", "+00:00"))
    return _dt.datetime.fromisoformat(text).timestamp()


def chat_view(e: Event) -> dict[str, Any]:
    """The chat message an ADK event reads as, for compaction and search."""
    parts = (e.content.parts if e.content and e.content.parts else None) or []
    texts = [p.text for p in parts if p.text]
    calls = [p.function_call for p in parts if p.function_call]
    responses = [p.function_response for p in parts if p.function_response]
    if responses:
        r = responses[0]
        return {
            "role": "tool",
            "tool_call_id": r.id or r.name or "",
            "name": r.name,
            "content": json.dumps(r.response, default=str),
        }
    role = "user" if e.author == "user" else "assistant"
    message: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
    if calls and role == "assistant":
        message["content"] = message["content"] or None
        message["tool_calls"] = [
            {
                "id": c.id or c.name or "",
                "type": "function",
                "function": {"name": c.name or "", "arguments": json.dumps(c.args or {}, default=str)},
            }
            for c in calls
        ]
    return message


class _Slow(Exception):
    """The quick rebuild of a stored ADK event met something it cannot
    rebuild exactly as pydantic's validation would: validate it instead."""


_Convert = Callable[[Any], Any]

#: Model validators that leave what ``model_dump(mode="json")`` wrote as it
#: is: genai's type-mismatch check only warns about model instances (a dump
#: holds dicts); ADK's convenience kwargs are keys that are not fields (a
#: key that is not a field sends the event to validation anyway).
_INERT_MODEL_VALIDATORS = frozenset({"_check_field_type_mismatches", "_accept_convenience_kwargs"})
#: Field validators that answer an empty value (``{}``, ``[]``) unchanged.
_INERT_ON_EMPTY = frozenset({"_parse_auth_configs"})
#: Models whose own ``__init__`` does, for field keywords, what pydantic's does.
_PLAIN_INITS: frozenset[type] = frozenset({types.Part})
#: Configuration under which validation changes values the rebuild would keep.
_CHANGING_CONFIG = (
    "strict", "use_enum_values", "validate_default", "str_strip_whitespace",
    "str_to_lower", "str_to_upper", "coerce_numbers_to_str",
)


#: How a field's JSON value becomes what validation makes of it: kept as it
#: is when its type is one of the first, else handed to the second (``None``:
#: give up, validation decides).
_Entry = tuple[frozenset[type], Optional[_Convert]]
_NONE: frozenset[type] = frozenset({type(None)})
_NO: _Entry = (frozenset(), None)


def _apply(entry: _Entry, value: Any) -> Any:
    kinds, convert = entry
    if type(value) in kinds:
        return value
    if convert is None:
        raise _Slow
    return convert(value)


def _same(value: Any) -> Any:
    return value


def _to_float(value: Any) -> Any:
    if type(value) is int:
        return float(value)  # as pydantic's lax mode does
    raise _Slow


def _converter(tp: Any) -> _Entry:
    """What validation does to the JSON value of a field of type ``tp``, for
    the types where that is a plain copy or a nested model; ``_NO`` for the
    others (bytes, dates, unions of several types, constrained types)."""
    if tp is Any or tp is object:
        return frozenset(), _same
    if tp in (str, bool, int, dict, list):
        return frozenset({tp}), None  # a bare dict or list: validation copies it, equal
    if tp is float:
        return frozenset({float}), _to_float
    if tp is type(None):
        return _NONE, None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = {m.value: m for m in tp}
        value_kinds = {type(k) for k in members}

        def to_member(value: Any) -> Any:
            if type(value) not in value_kinds or value not in members:
                raise _Slow
            return members[value]

        return frozenset(), to_member
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        return frozenset(), functools.partial(_build, tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is _pytypes.UnionType:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            return _NO
        kinds, convert = _converter(rest[0])
        return (kinds | _NONE if len(rest) < len(args) else kinds), convert
    if origin is list:
        each = _converter(args[0]) if args else (frozenset(), _same)
        return frozenset(), lambda v: [_apply(each, x) for x in v] if type(v) is list else _slow(v)
    if origin is set and args and args[0] in (str, int):
        kind = args[0]
        return frozenset(), lambda v: (
            {x if type(x) is kind else _slow(x) for x in v} if type(v) is list else _slow(v)
        )
    if origin is dict and (not args or args[0] in (str, Any)):
        value_of = _converter(args[1]) if args else (frozenset(), _same)
        if value_of[1] is _same:
            return frozenset(), lambda v: dict(v) if type(v) is dict else _slow(v)
        return frozenset(), lambda v: (
            {k: _apply(value_of, x) for k, x in v.items()} if type(v) is dict else _slow(v)
        )
    if origin is typing.Literal:
        allowed = [(a, type(a)) for a in args]
        return frozenset(), lambda v: v if (v, type(v)) in allowed else _slow(v)
    return _NO


def _slow(value: Any) -> Any:
    raise _Slow


_IMMUTABLE = (type(None), bool, int, float, str, bytes, enum.Enum)


class _Recipe:
    """How to rebuild a model from its JSON dump: a converter per field, the
    defaults of the fields a dump leaves out, and what ``model_construct``
    does after (it is ``model_construct`` without its per-field cost)."""

    __slots__ = ("cls", "convert", "template", "factories", "required", "post_init")

    def __init__(self, cls: type[pydantic.BaseModel], convert: dict[str, _Entry]) -> None:
        self.cls = cls
        self.convert = convert
        # Every field in declaration order (so ``__dict__`` has validation's
        # order), holding its default where that is one immutable value.
        self.template: dict[str, Any] = {}
        self.factories: list[tuple[str, Callable[[], Any]]] = []
        self.required: set[str] = set()
        for name, info in cls.model_fields.items():
            self.template[name] = None
            if info.is_required():
                self.required.add(name)
            elif info.default_factory is not None:
                self.factories.append((name, info.default_factory))  # type: ignore[arg-type]
            elif isinstance(info.default, _IMMUTABLE):
                self.template[name] = info.default
            else:
                self.factories.append((name, functools.partial(info.get_default, call_default_factory=True)))
        self.post_init = bool(cls.__pydantic_post_init__)

    def build(self, data: dict[str, Any]) -> Any:
        convert = self.convert
        values = {}
        for key, value in data.items():
            entry = convert.get(key)
            if entry is None:
                raise _Slow  # an alias or an unknown key: validation decides
            kinds, to = entry
            if type(value) in kinds:
                values[key] = value
            elif to is None:
                raise _Slow
            else:
                values[key] = to(value)
        if self.required and not self.required <= values.keys():
            raise _Slow
        fields = self.template.copy()
        fields.update(values)  # keeps the template's order
        for name, factory in self.factories:
            if name not in values:
                fields[name] = factory()
        model = self.cls.__new__(self.cls)
        _setattr(model, "__dict__", fields)
        _setattr(model, "__pydantic_fields_set__", set(values))
        _setattr(model, "__pydantic_extra__", None)
        _setattr(model, "__pydantic_private__", None)
        if self.post_init:
            model.model_post_init(None)
        return model


_setattr = object.__setattr__


def _recipe(cls: type[pydantic.BaseModel]) -> Optional[_Recipe]:
    """How to rebuild ``cls`` from its JSON dump, or ``None`` when its
    validation may do more than its field types say."""
    config = cls.model_config
    if (
        any(config.get(k) for k in _CHANGING_CONFIG)
        or config.get("extra") == "allow"
        or getattr(cls, "__pydantic_root_model__", False)
        or (cls.__init__ is not pydantic.BaseModel.__init__ and cls not in _PLAIN_INITS)
    ):
        return None
    decorators = cls.__pydantic_decorators__
    if decorators.root_validators or decorators.validators:
        return None
    if any(d.cls_var_name not in _INERT_MODEL_VALIDATORS for d in decorators.model_validators.values()):
        return None
    guarded: dict[str, bool] = {}  # field -> its validators leave an empty value alone
    for d in decorators.field_validators.values():
        for name in d.info.fields:
            guarded[name] = guarded.get(name, True) and d.cls_var_name in _INERT_ON_EMPTY
    by_name = config.get("populate_by_name") or config.get("validate_by_name")
    convert: dict[str, _Entry] = {}
    for name, info in cls.model_fields.items():
        if info.alias not in (None, name) and not by_name:
            return None
        if info.default_factory is not None and getattr(info, "default_factory_takes_validated_data", True):
            return None
        entry = _NO if info.metadata else _converter(info.annotation)
        if name in guarded:
            entry = (frozenset(), _empty_only(entry)) if guarded[name] else _NO
        convert[name] = entry
    return _Recipe(cls, convert)


def _empty_only(entry: _Entry) -> _Convert:
    return lambda v: _apply(entry, v) if not v else _slow(v)


_RECIPES: dict[type, Optional[_Recipe]] = {}


def _build(cls: type[pydantic.BaseModel], data: Any) -> Any:
    """``cls.model_validate(data)`` for ``data`` a ``model_dump(mode="json",
    exclude_none=True)`` of a ``cls``, without validation's cost (genai's
    models run Python for every field of every part); raises ``_Slow`` where
    it cannot be sure to build the same model."""
    if type(data) is not dict:
        raise _Slow
    try:
        recipe = _RECIPES[cls]
    except KeyError:
        try:
            recipe = _recipe(cls)
        except Exception:  # a pydantic this was not written for: validate
            recipe = None
        _RECIPES[cls] = recipe
    if recipe is None:
        raise _Slow
    return recipe.build(data)


def _event_from_dump(dump: Any) -> Event:
    """The ADK event of its ``model_dump(mode="json", exclude_none=True)``:
    equal, field for field and in the fields it says were set, to
    ``Event.model_validate(dump)``, which it falls back on."""
    try:
        event: Event = _build(Event, dump)
        return event
    except (_Slow, TypeError):
        return Event.model_validate(dump)


def _adk_event(stored: dict[str, Any]) -> Event:
    """The ADK event a stored event holds; a summary as a text event."""
    kept = (stored.get("metadata") or {}).get(EVENT_KEY)
    if isinstance(kept, dict):
        return _event_from_dump(kept)
    message = stored.get("message") or {}
    text = message.get("content")
    role = message.get("role")
    return Event(
        id=stored["id"],
        invocation_id=stored.get("invocation_id") or "",
        author="user" if role == "user" else "model",
        timestamp=_seconds(stored["timestamp"]),
        content=types.Content(
            role="user" if role == "user" else "model",
            parts=[types.Part(text=text if isinstance(text, str) else "")],
        ),
    )


#: Rebuilding this many events or more pauses the cycle collector: the
#: events hold no reference cycles, and the collections their thousands of
#: objects would set off (now and then a full one, over the whole heap of a
#: process that imported ADK) about double the time of a session read.
_PAUSE_GC_AT = 64


def _rebuild(page: Mapping[str, Any], after: Optional[float] = None) -> list[Event]:
    """The ADK events of an ``items`` page (of those at or after ``after``)."""
    kept: list[Any] = page["items"]
    others = dict(page["events"])
    pause = len(kept) >= _PAUSE_GC_AT and gc.isenabled()
    if pause:
        gc.disable()
    try:
        events = []
        for index, value in enumerate(kept):
            if value is not None:
                if after is not None and type(value) is dict:
                    at = value.get("timestamp")
                    if isinstance(at, (int, float)) and not isinstance(at, bool) and at < after:
                        continue  # too early: not worth building
                e = _event_from_dump(value)
            else:
                e = _adk_event(others[index])
            if after is None or e.timestamp >= after:
                events.append(e)
        return events
    finally:
        if pause:
            gc.enable()


def _stored_event(e: Event, *, with_state: bool = True) -> dict[str, Any]:
    """The store event of an ADK event (``temp:`` keys already trimmed):
    its state delta encoded (or left out), with the event's time as the
    session's last update; ids escaped to the store's alphabet (the ADK
    event keeps them)."""
    delta = dict(e.actions.state_delta) if with_state and e.actions and e.actions.state_delta else {}
    delta = _encode_state(delta)
    delta[LAST_UPDATE_KEY] = e.timestamp
    stored = _event(
        chat_view(e),
        id=_escape(e.id),
        invocation_id=_escape(e.invocation_id) if e.invocation_id else None,
        branch=e.branch or None,
        author=e.author or None,
        state_delta=delta,
        metadata={EVENT_KEY: e.model_dump(mode="json", exclude_none=True)},
    )
    stored["timestamp"] = _time(e.timestamp)
    return stored


def _session(stored: dict[str, Any], adk_id: str, events: list[Event]) -> Session:
    """The ADK session of a store session (state decoded, scopes merged)."""
    state = stored.get("state") or {}
    updated = state.get(LAST_UPDATE_KEY)
    return Session(
        id=adk_id,
        app_name=stored["app"],
        user_id=stored["user_id"],
        state=_decode_state(state),
        events=events,
        last_update_time=float(updated) if updated is not None else _seconds(stored["created_at"]),
    )


class SessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` over a :class:`agent_session.Store`.

    Behaves as ADK's own services do: ids scoped per (app, user) and
    stripped of surrounding whitespace (none given: a uuid4), ADK's
    ``AlreadyExistsError`` for a taken id and ``SessionNotFoundError`` for
    an append to a session that is gone, ``last_update_time`` the time of
    the last appended event, ``None`` state values kept as ``None``.
    """

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._store = store

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Optional[dict[str, Any]] = None,
        session_id: Optional[str] = None,
    ) -> Session:
        """Creates a session; a taken id raises ADK's ``AlreadyExistsError``."""
        adk_id = (session_id.strip() if session_id else "") or _adk_uuid.new_uuid()
        sid = store_session_id(app_name, user_id, adk_id)
        try:
            # The answer is the session as a read gives it (scopes merged).
            stored = await self._store.create(
                app_name, user_id, id=sid, state=_encode_state(state or {})
            )
        except AlreadyExistsError:
            raise AdkAlreadyExistsError(f"Session with id {adk_id} already exists.") from None
        return _session(stored, adk_id, [])

    async def _read(self, app_name: str, user_id: str, session_id: str) -> Optional[dict[str, Any]]:
        """The store session behind an ADK id, or ``None``."""
        try:
            sid = store_session_id(app_name, user_id, session_id.strip())
            return await self._store.get(app_name, user_id, sid)
        except (NotFoundError, ValueError):
            return None

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: Optional[GetSessionConfig] = None,
    ) -> Optional[Session]:
        """The session with its events (``config`` keeps the most recent
        ``num_recent_events`` and those at or after ``after_timestamp``), or
        ``None``. The session comes with the first page of its events, in
        one call."""
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        if recent == 0:
            found = await self._read(app_name, user_id, session_id)
            return None if found is None else _session(found, session_id.strip(), [])
        try:
            owner = (app_name, user_id, store_session_id(app_name, user_id, session_id.strip()))
        except ValueError:
            return None
        # The last ``recent`` in one page; all of them in pages of 1,000.
        size = None if recent is not None else 1000
        try:
            page = await self._store.items(
                *owner, EVENT_KEY, last_n=recent, page_size=size, with_session=True
            )
        except NotFoundError:
            return None
        stored: dict[str, Any] = page["session"]
        events = _rebuild(page, after)
        page_no = 0
        while recent is None and page["has_more"]:
            page_no += 1
            page = await self._store.items(*owner, EVENT_KEY, page=page_no, page_size=1000)
            events.extend(_rebuild(page, after))
        return _session(stored, session_id.strip(), events)

    async def _list(self, app_name: str, user_id: Optional[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        page_no = 0
        while True:
            if user_id is None:
                page = await self._store.list_all(app=app_name, page=page_no, page_size=100)
            else:
                page = await self._store.list(app_name, user_id, page=page_no, page_size=100)
            found.extend(page["items"])
            if not page["has_more"]:
                return found
            page_no += 1

    async def list_sessions(
        self, *, app_name: str, user_id: Optional[str] = None
    ) -> ListSessionsResponse:
        """The app's sessions of ``user_id`` (of every user when ``None``),
        without events, the least recently updated first."""
        sessions = []
        shared: dict[str, dict[str, Any]] = {}
        for stored in await self._list(app_name, user_id):
            adk_id = adk_session_id(stored["id"], stored["app"], stored["user_id"])
            if adk_id is None:
                continue
            owner = stored["user_id"]
            if owner not in shared:
                shared[owner] = await self._shared(app_name, owner)
            merged = {**stored, "state": {**(stored.get("state") or {}), **shared[owner]}}
            sessions.append(_session(merged, adk_id, []))
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def _shared(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` and the app's ``app:`` keys, prefixed (a list
        answers session scopes only; ADK lists sessions with all three merged)."""
        shared = await self._store.shared_state(app_name, user_id)
        return {**shared["user"], **shared["app"]}

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Deletes the session and its events; an unknown one is no error."""
        try:
            sid = store_session_id(app_name, user_id, session_id.strip())
            await self._store.delete(app_name, user_id, sid)
        except (NotFoundError, ValueError):
            pass

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` state in the app, keys without the prefix."""
        shared = await self._store.shared_state(app_name, user_id)
        return {k[len("user:") :]: _decode_value(v) for k, v in shared["user"].items()}

    async def append_event(self, session: Session, event: Event) -> Event:
        """Stores the event (``temp:`` keys left out), then applies it to
        ``session`` as ADK does; a partial event is neither."""
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        try:
            sid = store_session_id(session.app_name, session.user_id, session.id)
            await self._store.append_events(
                session.app_name, session.user_id, sid, [_stored_event(event)]
            )
        except NotFoundError:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)


#: The ADK id a memory copy of events without a session goes under (ADK's
#: in-memory memory service files them under the same name).
UNKNOWN_SESSION_ID = "__unknown_session_id__"


class MemoryService(BaseMemoryService):
    """ADK's ``BaseMemoryService`` over the store's cross-session recall.

    Every event of every session the user has in the app is memory: the
    store's search reads them all (the archive too, so compaction forgets
    nothing), and a session written through :class:`SessionService` on the
    same store is searchable the moment an event is appended.
    :meth:`add_session_to_memory` therefore copies nothing for such a
    session; a session from another session service (ADK's in-memory one,
    say) is copied in under its own id, events only, so that it is found
    too. A search answers the best-ranked events holding any word of the
    query, at most ``limit``, each a ``MemoryEntry`` with the event's
    content, author, time (RFC 3339, UTC) and id.
    """

    def __init__(self, store: Store, *, limit: int = 10) -> None:
        self._store = store
        self._limit = limit

    async def _exists(self, app_name: str, user_id: str, sid: str) -> bool:
        try:
            await self._store.get(app_name, user_id, sid)
            return True
        except NotFoundError:
            return False

    async def _copy(self, app_name: str, user_id: str, sid: str, events: Sequence[Event]) -> None:
        """Stores ``events`` in the session ``sid`` (created if need be),
        their state deltas left out: a copy for recall, not a second owner
        of the state. Appends are idempotent by event id."""
        try:
            await self._store.create(app_name, user_id, id=sid)
        except AlreadyExistsError:
            pass
        stored = [_stored_event(e, with_state=False) for e in events if not e.partial]
        if stored:
            await self._store.append_events(app_name, user_id, sid, stored)

    async def add_session_to_memory(self, session: Session) -> None:
        """Makes the session searchable: nothing to do for one this store
        holds; one it does not hold is copied in (events only)."""
        sid = store_session_id(session.app_name, session.user_id, session.id)
        if not await self._exists(session.app_name, session.user_id, sid):
            await self._copy(session.app_name, session.user_id, sid, session.events)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: Optional[str] = None,
        custom_metadata: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Makes ``events`` searchable: the ones the session already holds
        are skipped (same id), the others are appended without their state
        deltas; ``custom_metadata`` is not used."""
        sid = store_session_id(app_name, user_id, session_id or UNKNOWN_SESSION_ID)
        await self._copy(app_name, user_id, sid, events)

    def _entry(self, app_name: str, user_id: str, hit: dict[str, Any]) -> Optional[MemoryEntry]:
        e = _adk_event(hit["event"])
        if not e.content or not any(p.text for p in e.content.parts or []):
            return None  # as ADK's in-memory memory: text is what is recalled
        adk_id = adk_session_id(hit["session_id"], app_name, user_id)
        return MemoryEntry(
            id=e.id,
            content=e.content,
            author=e.author,
            timestamp=_time(e.timestamp),
            custom_metadata={"session_id": adk_id if adk_id is not None else hit["session_id"]},
        )

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The user's events in the app that hold any word of ``query``, best first."""
        if not query.strip():
            return SearchMemoryResponse()
        page = await self._store.search(
            app_name, user_id, query, any=True, ranked=True, page_size=self._limit
        )
        entries = [self._entry(app_name, user_id, hit) for hit in page["items"]]
        return SearchMemoryResponse(memories=[m for m in entries if m is not None])


__all__ = [
    "SessionService",
    "MemoryService",
    "chat_view",
    "store_session_id",
    "adk_session_id",
    "EVENT_KEY",
    "LAST_UPDATE_KEY",
]
