"""A session of the OpenAI Agents SDK (``openai-agents``) on agent-session.

    from agents import Agent, Runner
    from agent_session import Store
    from agent_session.openai_agents import Session

    store = await Store.open("sqlite://sessions.db")
    session = Session("user-42-chat", store, app="support", user_id="ada")
    result = await Runner.run(agent, "where is my order?", session=session)

It implements the SDK's whole ``Session`` protocol (``session_id``,
``session_settings`` and its ``limit``, ``get_items``, ``add_items``,
``pop_item``, ``clear_session``), and takes the run context the runner
passes to each of them (``wrapper``): the items one run adds are one
invocation of the store. ``compaction`` is a compaction spec as
:meth:`agent_session.Store.compact` takes it (strategy, parameters,
``trigger``, ``summarizer``), applied after each ``add_items``. Each Responses-API input item is one
event: the item exactly as given (messages, function calls and their
outputs, reasoning and every other type) is kept with the event, and
``get_items`` returns it unchanged, item for item; the event's message is
the item's chat view, which compaction and recall search work on. A
compaction's summary comes back as a message item.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Mapping, cast

from . import Store, _codec, event

if TYPE_CHECKING:
    from agents import FunctionTool, RunContextWrapper, TResponseInputItem
    from agents.memory.session_settings import SessionSettings

#: The event metadata key that holds the SDK's item as it was added.
ITEM_KEY = "openai_item"

#: The attribute of the SDK's run context (``RunContextWrapper``) that
#: holds the store invocation id of the run's items.
_INVOCATION_ATTR = "_agent_session_invocation_id"

#: A compaction spec: ``{"strategy": ..., <its parameters>, "trigger": {...},
#: "summarizer": ...}``, what :meth:`agent_session.Store.compact` takes.
CompactionSpec = Mapping[str, Any]


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text") or part.get("refusal")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return ""


def chat_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """The chat message an SDK item reads as, for compaction and search."""
    kind = item.get("type")
    role = item.get("role")
    if role in ("user", "system", "developer", "assistant") and kind in (None, "message"):
        role = "system" if role == "developer" else role
        return {"role": role, "content": _text_of(item.get("content"))}
    if kind == "function_call":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": item.get("call_id", ""),
                    "type": "function",
                    "function": {
                        "name": item.get("name", ""),
                        "arguments": item.get("arguments", ""),
                    },
                }
            ],
        }
    if kind == "function_call_output":
        output = item.get("output", "")
        text = output if isinstance(output, str) else _text_of(output) or json.dumps(output)
        return {"role": "tool", "tool_call_id": item.get("call_id", ""), "content": text}
    if kind == "reasoning":
        summary = item.get("summary") or []
        return {"role": "assistant", "content": _text_of(summary)}
    # Every other item (web or file search calls, computer calls, ...): its
    # JSON is what search finds.
    return {"role": "assistant", "content": json.dumps(item, sort_keys=True, default=str)}


def item_of(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK item an event holds; a summary (or any event written
    without an item) as a message item of its text."""
    item = (stored.get("metadata") or {}).get(ITEM_KEY)
    if isinstance(item, Mapping):
        return dict(item)
    return _item_of_message(stored.get("message") or {})


def _filled(page: Mapping[str, Any]) -> list[Any]:
    """The items of an ``items`` page, each event without one (a summary)
    as a message item of its text."""
    items: list[Any] = page["items"]
    for index, stored in page["events"]:
        items[index] = _item_of_message(stored.get("message") or {})
    return items


def _item_of_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message (a summary's, say) as an SDK message item."""
    role = message.get("role", "assistant")
    if role == "tool":
        role = "user"
    return {"role": role, "content": _text_of(message.get("content"))}


class Session:
    """An OpenAI Agents SDK session stored in agent-session.

    ``session_id`` is the SDK's id; it is the session's resolution key in
    the store, so any string the SDK uses works. ``session_settings`` (a
    ``SessionSettings`` or a dict of its fields, as the SDK's own sessions
    take it) holds the default ``limit`` of ``get_items``.

    ``compaction`` is a compaction spec exactly as
    :meth:`agent_session.Store.compact` takes it: ``strategy`` and its
    parameters, optionally ``trigger`` (compact only when it fires) and
    ``summarizer`` (``"extractive"``, the default, or ``"openai:MODEL"``),
    e.g. ``{"strategy": "token_budget", "max_tokens": 8000, "trigger":
    {"tokens": 8000}}``. The store applies it after each ``add_items``.
    ``compact_above_tokens`` (with ``keep_turns``) is the older spelling of
    ``{"strategy": "summarize", "keep": keep_turns, "trigger": {"tokens":
    compact_above_tokens}}``; give one or the other.
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: Store,
        *,
        app: str = "openai-agents",
        user_id: str = "default",
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        compaction: CompactionSpec | None = None,
        compact_above_tokens: int | None = None,
        keep_turns: int = 2,
    ) -> None:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings

        self.session_id = session_id
        # The SDK's runner resolves the run's settings over these
        # (``session_settings.resolve(...)``): a dict would not do.
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(
                dict(session_settings)
                if isinstance(session_settings, Mapping)
                else session_settings
            )
        )
        if compaction is not None and compact_above_tokens is not None:
            raise ValueError("give compaction or compact_above_tokens, not both")
        if compact_above_tokens is not None:
            compaction = {
                "strategy": "summarize",
                "keep": keep_turns,
                "trigger": {"tokens": compact_above_tokens},
            }
        if compaction is not None and not isinstance(compaction.get("strategy"), str):
            raise ValueError(
                "a compaction spec names its strategy: {'strategy': 'summarize', ...}"
            )
        #: The compaction spec applied after each ``add_items`` (``None``: none).
        self.compaction: dict[str, Any] | None = (
            None if compaction is None else dict(compaction)
        )
        self._store = store
        self._app = app
        self._user = user_id
        self._id: str | None = None

    async def _session_id(self) -> str:
        if self._id is None:
            session, _ = await self._store.resolve(self._app, self._user, self.session_id)
            self._id = str(session["id"])
        return self._id

    async def get_items(
        self,
        limit: int | None = None,
        *,
        wrapper: RunContextWrapper[Any] | None = None,
    ) -> list[TResponseInputItem]:
        """The conversation's items, oldest first; the latest ``limit`` (or
        ``session_settings.limit``) when given (0: none; a negative limit:
        all, as the SDK's ``SQLiteSession``). ``wrapper`` is the run
        context the runner passes; reads do not need it."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        sid = await self._session_id()
        if limit is not None and limit >= 0:
            if limit == 0:
                return []
            page = await self._store.items(self._app, self._user, sid, ITEM_KEY, last_n=limit)
            items: list[Any] = _filled(page)
        else:
            items, page_no = [], 0
            while True:
                page = await self._store.items(
                    self._app, self._user, sid, ITEM_KEY, page=page_no, page_size=1000
                )
                items.extend(_filled(page))
                if not page["has_more"]:
                    break
                page_no += 1
        # One cast of the list: a cast per item costs a call per item.
        return cast("list[TResponseInputItem]", items)

    async def add_items(
        self,
        items: list[TResponseInputItem],
        *,
        wrapper: RunContextWrapper[Any] | None = None,
    ) -> None:
        """Stores the items, in order, in one atomic append, then applies
        the ``compaction`` spec. Under the SDK's runner (``wrapper``, the
        run context, given) the items of one run share one invocation id,
        so ``Store.rewind(..., invocation_id)`` undoes a run and an
        ``{"invocations": n}`` trigger counts runs."""
        if not items:
            return
        sid = await self._session_id()
        invocation_id = _invocation_of(wrapper)
        events = []
        for item in items:
            as_dict = _as_dict(item)
            events.append(
                event(
                    chat_view(as_dict),
                    invocation_id=invocation_id,
                    metadata={ITEM_KEY: as_dict},
                )
            )
        await self._store.append_events(self._app, self._user, sid, events)
        if self.compaction is not None:
            params = dict(self.compaction)
            strategy = params.pop("strategy")
            await self._store.compact(self._app, self._user, sid, strategy, **params)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Removes the latest item and returns it (``None`` if there is none)."""
        sid = await self._session_id()
        stored = await self._store.pop(self._app, self._user, sid)
        return None if stored is None else cast("TResponseInputItem", item_of(stored))

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Deletes the conversation; the next item starts a new one."""
        sid = await self._session_id()
        await self._store.delete(self._app, self._user, sid)
        self._id = None

    def search_tool(self, page_size: int = 10) -> FunctionTool:
        """``conversation_search`` as an SDK function tool: the agent finds
        what left its context (older turns a compaction summarized)."""
        from agents import function_tool

        session = self

        @function_tool(name_override="conversation_search")
        async def conversation_search(query: str, page: int = 0) -> str:
            """Search the full history of this conversation, including parts no
            longer in your context, by keyword. Returns matching messages oldest
            first as JSON, or 'No results found.'.

            Args:
                query: Keywords; every word must occur, in any order.
                page: Zero-based page of results.
            """
            sid = await session._session_id()
            hits = await session._store.search(
                session._app,
                session._user,
                query,
                session_id=sid,
                page=page,
                page_size=page_size,
            )
            if not hits["items"]:
                return "No results found."
            return json.dumps(
                [
                    {
                        "timestamp": h["event"]["timestamp"],
                        "type": h["event"]["message"]["role"],
                        "text": h["snippet"],
                    }
                    for h in hits["items"]
                ]
            )

        return conversation_search


def _invocation_of(wrapper: RunContextWrapper[Any] | None) -> str | None:
    """The invocation id of the run a run context belongs to: made on the
    run's first write and kept on its context, so a run resumed from its
    ``RunState`` (the same context) stays one invocation."""
    if wrapper is None:
        return None
    invocation = getattr(wrapper, _INVOCATION_ATTR, None)
    if not isinstance(invocation, str):
        invocation = f"openai-run-{uuid.uuid4().hex}"
        setattr(wrapper, _INVOCATION_ATTR, invocation)
    return invocation


def _as_dict(item: Any) -> dict[str, Any]:
    """An SDK item as a plain dict (items may be pydantic models or TypedDicts)."""
    if isinstance(item, Mapping):
        plain: dict[str, Any] = _codec.decode(_codec.encode(item, default=_default))
        return plain
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        dumped: dict[str, Any] = dump(mode="json", exclude_unset=True)
        return dumped
    raise TypeError(f"not an input item: {item!r}")


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    return str(value)


__all__ = ["Session", "CompactionSpec", "chat_view", "item_of", "ITEM_KEY"]

