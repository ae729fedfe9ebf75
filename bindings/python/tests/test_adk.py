"""The Google ADK session service under ADK's own Runner, with a scripted
model (no network): the conversation continues across runs, the function
call pairs with its response, state deltas land in their scopes (temp:
never stored), events read back as ADK wrote them, and sessions of other
users never see each other."""

from __future__ import annotations

import os

import pytest

try:
    import google.adk  # noqa: F401
except ImportError:  # pragma: no cover - CI installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("google-adk is not installed", allow_module_level=True)

from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

from agent_session.adk import SessionService, store_session_id

APP = "weather"


class ScriptedLlm(BaseLlm):
    """Answers each call with the next scripted response; records the requests."""

    turns: list = Field(default_factory=list)
    seen: list = Field(default_factory=list)

    async def generate_content_async(self, llm_request, stream=False):
        self.seen.append([c.model_dump(exclude_none=True) for c in llm_request.contents])
        yield self.turns.pop(0)


def remember_city(city: str, tool_context: ToolContext) -> dict:
    """Remembers the user's favourite city."""
    tool_context.state["user:favorite_city"] = city
    tool_context.state["temp:scratch"] = "never stored"
    tool_context.state["last_city"] = city
    return {"saved": city}


def text(t: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=t)]))


def user(t: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=t)])


async def run(runner: Runner, user_id: str, session_id: str, message: str) -> list:
    return [e async for e in runner.run_async(user_id=user_id, session_id=session_id, new_message=user(message))]


async def test_adk_runs_continue_and_state_lands_in_its_scopes(store):
    service = SessionService(store)
    call = LlmResponse(
        content=types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(id="fc-1", name="remember_city", args={"city": "Paris"}))],
        )
    )
    llm = ScriptedLlm(model="scripted", turns=[call, text("Saved Paris."), text("You saved Paris.")])
    agent = LlmAgent(name="assistant", model=llm, instruction="Help.", tools=[remember_city])
    runner = Runner(app_name=APP, agent=agent, session_service=service)

    session = await service.create_session(app_name=APP, user_id="ada", state={"plan": "free", "temp:x": 1})
    first = await run(runner, "ada", session.id, "Remember Paris.")
    assert first[-1].content.parts[0].text == "Saved Paris."
    second = await run(runner, "ada", session.id, "What did I save?")
    assert second[-1].content.parts[0].text == "You saved Paris."

    # The third model call saw the first run: the call and its response pair.
    contents = llm.seen[2]
    calls = [p["function_call"] for c in contents for p in c.get("parts", []) if "function_call" in p]
    answers = [p["function_response"] for c in contents for p in c.get("parts", []) if "function_response" in p]
    assert calls and answers and calls[0]["id"] == answers[0]["id"] == "fc-1"
    assert answers[0]["response"] == {"saved": "Paris"}

    stored = await service.get_session(app_name=APP, user_id="ada", session_id=session.id)
    assert stored.state["user:favorite_city"] == "Paris"
    assert stored.state["last_city"] == "Paris" and stored.state["plan"] == "free"
    assert not any(k.startswith("temp:") for k in stored.state), stored.state
    written = first + second
    # Every event ADK wrote reads back as it wrote it (the user messages
    # are written by the runner too, before the model's).
    by_id = {e.id: e for e in stored.events}
    for e in written:
        assert e.id in by_id, e.id
        assert by_id[e.id].content == e.content
        assert by_id[e.id].author == e.author
        assert by_id[e.id].invocation_id == e.invocation_id
    assert [e.timestamp for e in stored.events] == sorted(e.timestamp for e in stored.events)

    # user: state follows the user into a new session; another user sees none of it.
    other = await service.create_session(app_name=APP, user_id="ada")
    assert other.state["user:favorite_city"] == "Paris"
    bob = await service.create_session(app_name=APP, user_id="bob")
    assert "user:favorite_city" not in bob.state
    assert await service.get_session(app_name=APP, user_id="bob", session_id=session.id) is None
    assert await service.get_user_state(app_name=APP, user_id="ada") == {"favorite_city": "Paris"}

    recent = await service.get_session(
        app_name=APP, user_id="ada", session_id=session.id, config=GetSessionConfig(num_recent_events=2)
    )
    assert [e.id for e in recent.events] == [e.id for e in stored.events[-2:]]
    cut = stored.events[-2].timestamp
    after = await service.get_session(
        app_name=APP, user_id="ada", session_id=session.id, config=GetSessionConfig(after_timestamp=cut)
    )
    assert all(e.timestamp >= cut for e in after.events) and len(after.events) >= 2

    mine = await service.list_sessions(app_name=APP, user_id="ada")
    assert {s.id for s in mine.sessions} == {session.id, other.id}
    assert mine.sessions[-1].last_update_time >= mine.sessions[0].last_update_time
    everyone = await service.list_sessions(app_name=APP)
    assert {s.id for s in everyone.sessions} == {session.id, other.id, bob.id}

    await service.delete_session(app_name=APP, user_id="ada", session_id=session.id)
    assert await service.get_session(app_name=APP, user_id="ada", session_id=session.id) is None


async def test_a_compacted_adk_session_reads_its_summary_as_text_events(store):
    service = SessionService(store)
    session = await service.create_session(app_name=APP, user_id="ada")
    for n in range(8):
        event = Event(
            invocation_id=f"inv-{n}",
            author="user" if n % 2 == 0 else "assistant",
            content=types.Content(
                role="user" if n % 2 == 0 else "model",
                parts=[types.Part(text=f"turn {n}: parcel PX-{n} goes to Lyon")],
            ),
        )
        await service.append_event(session, event)
    await store.compact(APP, "ada", store_session_id(APP, "ada", session.id), "summarize", keep=1)
    read = await service.get_session(app_name=APP, user_id="ada", session_id=session.id)
    texts = [p.text for e in read.events for p in e.content.parts if p.text]
    assert any("PX-0" in t for t in texts[:2]), "the summary reads back as a text event"
    assert texts[-1] == "turn 7: parcel PX-7 goes to Lyon", "the kept turn reads back as written"
    assert all(e.id and e.timestamp for e in read.events)
