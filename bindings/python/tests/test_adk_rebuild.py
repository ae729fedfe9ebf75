"""The ADK adapter rebuilds stored events without pydantic's validation
(``agent_session.adk._event_from_dump``); what it builds must be what
``Event.model_validate`` builds from the same JSON: equal, with the same
fields set, the same ``repr`` and the same dumps, for every kind of event
a runner writes, and validation itself where the rebuild is unsure."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

try:
    import google.adk  # noqa: F401
except ImportError:  # pragma: no cover - CI installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("google-adk is not installed", allow_module_level=True)

import pydantic
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from agent_session import adk


def _events() -> list[Event]:
    text = types.Content(role="user", parts=[types.Part(text="hello")])
    call = types.Content(
        role="model",
        parts=[
            types.Part(text="let me look"),
            types.Part(function_call=types.FunctionCall(id="c1", name="weather", args={"city": "Paris", "n": [1, 2.5]})),
        ],
    )
    response = types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(id="c1", name="weather", response={"temp": 21}))],
    )
    usage = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=10,
        candidates_token_count=5,
        total_token_count=15,
        prompt_tokens_details=[types.ModalityTokenCount(modality=types.MediaModality.TEXT, token_count=10)],
    )
    return [
        Event(author="user", invocation_id="i1", content=text),
        Event(author="user", invocation_id="i1", content=text, timestamp=1700000000),
        Event(author="agent", invocation_id="i1", content=call, long_running_tool_ids={"c1", "c2"}),
        Event(author="agent", invocation_id="i1", content=response, branch="a.b"),
        Event(
            author="agent",
            invocation_id="i2",
            content=types.Content(role="model", parts=[types.Part(text="done", thought=True)]),
            finish_reason=types.FinishReason.STOP,
            usage_metadata=usage,
            model_version="gemini-x",
            custom_metadata={"k": {"nested": [1, None, "x"]}},
            avg_logprobs=-0.5,
            turn_complete=True,
        ),
        Event(
            author="agent",
            invocation_id="i3",
            actions=EventActions(
                state_delta={"a": 1, "user:b": {"c": None}, "app:d": [1, 2]},
                artifact_delta={"f.txt": 2},
                transfer_to_agent="other",
                escalate=True,
                skip_summarization=True,
                end_of_agent=True,
                agent_state={"step": 3},
                rewind_before_invocation_id="i0",
            ),
        ),
        Event(
            author="agent",
            invocation_id="i4",
            actions=EventActions(
                compaction=EventCompaction(start_timestamp=1.0, end_timestamp=2, compacted_content=text),
                requested_tool_confirmations={"c1": ToolConfirmation(hint="sure?", payload={"x": 1})},
                route=["a", 1],
            ),
        ),
        # bytes (base64 in a JSON dump): the rebuild leaves it to validation.
        Event(
            author="agent",
            invocation_id="i5",
            content=types.Content(
                role="model",
                parts=[types.Part(function_call=types.FunctionCall(name="f", args={}), thought_signature=b"\x00sig")],
            ),
        ),
        Event(
            author="user",
            invocation_id="i6",
            content=types.Content(
                role="user", parts=[types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))]
            ),
        ),
        Event(author="agent", invocation_id="i7", error_code="E", error_message="boom", interrupted=True, partial=False),
        Event(author="agent", invocation_id="i8", output={"answer": 42}, isolation_scope="s"),
    ]


def _fields_set(model: Any) -> Any:
    """Every model's ``model_fields_set``, nested."""
    if isinstance(model, pydantic.BaseModel):
        return (
            type(model).__name__,
            sorted(model.model_fields_set),
            {k: _fields_set(v) for k, v in model.__dict__.items()},
        )
    if isinstance(model, (list, tuple)):
        return [_fields_set(v) for v in model]
    if isinstance(model, dict):
        return {k: _fields_set(v) for k, v in model.items()}
    return type(model).__name__


@pytest.mark.parametrize("index", range(len(_events())))
def test_rebuild_is_validation(index: int) -> None:
    event = _events()[index]
    # What the store hands back: the dump through JSON.
    dump = json.loads(json.dumps(event.model_dump(mode="json", exclude_none=True)))
    validated = Event.model_validate(json.loads(json.dumps(dump)))
    rebuilt = adk._event_from_dump(json.loads(json.dumps(dump)))
    assert rebuilt == validated
    assert _fields_set(rebuilt) == _fields_set(validated)
    assert repr(rebuilt) == repr(validated)
    assert rebuilt.model_dump() == validated.model_dump()
    assert rebuilt.model_dump(mode="json", exclude_none=True) == dump
    assert rebuilt.model_dump_json(exclude_unset=True) == validated.model_dump_json(exclude_unset=True)
    assert rebuilt.__pydantic_private__ == validated.__pydantic_private__
    if event.usage_metadata is not None:
        assert rebuilt.usage_metadata is not None and validated.usage_metadata is not None
        assert rebuilt.usage_metadata.__pydantic_private__ == validated.usage_metadata.__pydantic_private__


def test_rebuild_skips_validation_for_plain_events() -> None:
    """The common events (text, calls, responses, state) are rebuilt, not
    validated: the point of the rebuild (a route, a union, is validated)."""
    for event in _events()[:6]:
        dump = json.loads(json.dumps(event.model_dump(mode="json", exclude_none=True)))
        assert isinstance(adk._build(Event, dump), Event)


def test_rebuild_leaves_the_unsure_to_validation() -> None:
    dump = json.loads(json.dumps(_events()[7].model_dump(mode="json", exclude_none=True)))
    with pytest.raises(adk._Slow):
        adk._build(Event, dump)  # bytes
    with pytest.raises(adk._Slow):
        adk._build(Event, {**dump, "invocationId": "x"})  # an alias
    with pytest.raises(adk._Slow):
        adk._build(Event, {**dump, "message": "hi"})  # a convenience kwarg
    with pytest.raises(adk._Slow):
        adk._build(Event, {**dump, "timestamp": "1"})  # a type validation would coerce
    with pytest.raises(adk._Slow):
        adk._build(Event, {**dump, "actions": {"requested_auth_configs": {"c": {}}}})  # a field validator
    with pytest.raises(pydantic.ValidationError):
        adk._event_from_dump({**dump, "timestamp": "soon"})  # validation's error, as before
