"""A Google ADK (``google-adk``) session service on agent-session.

    from google.adk.runners import Runner
    from agent_session import Store
    from agent_session.adk import SessionService

    store = await Store.open("sqlite://sessions.db")
    runner = Runner(agent=agent, app_name="support", session_service=SessionService(store))

Each ADK event is one event of the store: the ADK event is kept whole
(its content, actions, flags) and comes back as ADK wrote it, while the
event's message is its chat view (text, function calls and responses),
which compaction and recall search read. State deltas go through the
store's scopes exactly as ADK defines them: ``app:`` keys are the app's,
``user:`` keys the user's across their sessions, ``temp:`` keys are never
stored, the rest belong to the session.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Optional

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from . import Store, event as _event
from .errors import NotFoundError

#: The event metadata key that holds the ADK event as it was appended.
EVENT_KEY = "adk_event"


def _time(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc).isoformat()


def _seconds(iso: str) -> float:
    return _dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def chat_view(e: Event) -> dict[str, Any]:
    """The chat message an ADK event reads as, for compaction and search."""
    parts = (e.content.parts if e.content and e.content.parts else None) or []
    texts = [p.text for p in parts if getattr(p, "text", None)]
    calls = [p.function_call for p in parts if getattr(p, "function_call", None)]
    responses = [p.function_response for p in parts if getattr(p, "function_response", None)]
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


def _adk_event(stored: dict[str, Any]) -> Event:
    """The ADK event a stored event holds; a summary as a text event."""
    kept = (stored.get("metadata") or {}).get(EVENT_KEY)
    if isinstance(kept, dict):
        return Event.model_validate(kept)
    message = stored.get("message") or {}
    text = message.get("content")
    role = message.get("role")
    from google.genai import types

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


class SessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` over a :class:`agent_session.Store`."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._store = store

    def _session(self, stored: dict[str, Any], events: list[Event]) -> Session:
        return Session(
            id=stored["id"],
            app_name=stored["app"],
            user_id=stored["user_id"],
            state=dict(stored.get("state") or {}),
            events=events,
            last_update_time=_seconds(stored["updated_at"]),
        )

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Optional[dict[str, Any]] = None,
        session_id: Optional[str] = None,
    ) -> Session:
        created = await self._store.create(
            app_name,
            user_id,
            id=session_id.strip() if session_id else None,
            state={k: v for k, v in (state or {}).items() if not k.startswith("temp:")},
        )
        stored = await self._store.get(app_name, user_id, created["id"])
        return self._session(stored, [])

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: Optional[GetSessionConfig] = None,
    ) -> Optional[Session]:
        try:
            stored = await self._store.get(app_name, user_id, session_id.strip())
        except NotFoundError:
            return None
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        if recent == 0:
            return self._session(stored, [])
        kept: list[list[Any]] = []
        if recent is not None:
            page = await self._store.items(
                app_name, user_id, stored["id"], EVENT_KEY, last_n=recent
            )
            kept = page["items"]
        else:
            page_no = 0
            while True:
                page = await self._store.items(
                    app_name, user_id, stored["id"], EVENT_KEY, page=page_no, page_size=1000
                )
                kept.extend(page["items"])
                if not page["has_more"]:
                    break
                page_no += 1
        adk_events = [
            Event.model_validate(value) if event is None else _adk_event(event)
            for value, event in kept
        ]
        if after is not None:
            adk_events = [e for e in adk_events if e.timestamp >= after]
        return self._session(stored, adk_events)

    async def list_sessions(
        self, *, app_name: str, user_id: Optional[str] = None
    ) -> ListSessionsResponse:
        sessions: list[Session] = []
        page_no = 0
        while True:
            if user_id is None:
                page = await self._store.list_all(app=app_name, page=page_no, page_size=500)
            else:
                page = await self._store.list(app_name, user_id, page=page_no, page_size=500)
            sessions.extend(self._session(s, []) for s in page["items"])
            if not page["has_more"]:
                break
            page_no += 1
        # ADK lists the most recently active session last.
        sessions.sort(key=lambda s: s.last_update_time)
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        try:
            await self._store.delete(app_name, user_id, session_id.strip())
        except NotFoundError:
            pass

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        shared = await self._store.shared_state(app_name, user_id)
        return {k.removeprefix("user:"): v for k, v in shared["user"].items()}

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        # ADK applies temp: keys to the in-memory session, drops them from
        # the delta and appends the event to `session.events`.
        event = await super().append_event(session=session, event=event)
        delta = dict(event.actions.state_delta) if event.actions and event.actions.state_delta else {}
        stored = _event(
            chat_view(event),
            id=event.id,
            invocation_id=event.invocation_id or None,
            branch=event.branch or None,
            author=event.author or None,
            state_delta=delta or None,
            metadata={EVENT_KEY: event.model_dump(mode="json", exclude_none=True)},
        )
        stored["timestamp"] = _time(event.timestamp)
        await self._store.append_events(session.app_name, session.user_id, session.id, [stored])
        return event


__all__ = ["SessionService", "chat_view", "EVENT_KEY"]
