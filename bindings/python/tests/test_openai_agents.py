"""The OpenAI Agents SDK adapter under the SDK's own Runner, with a
scripted model (no network): the conversation continues across runs, tool
calls pair with their outputs, reasoning items come back unchanged, and
two sessions never see each other's items."""

from __future__ import annotations

import os

import pytest

try:
    import agents
except ImportError:  # pragma: no cover - CI installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("openai-agents is not installed", allow_module_level=True)

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory.session_settings import SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from agent_session.openai_agents import Session

set_tracing_disabled(True)


def say(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


REASONING = ResponseReasoningItem(
    id="rs_1",
    type="reasoning",
    summary=[Summary(type="summary_text", text="The user wants the weather: call the tool.")],
    encrypted_content="opaque-blob-123",
)


class ScriptedModel(Model):
    """Answers each call with the next scripted turn and records its input."""

    def __init__(self, turns):
        self.turns = list(turns)
        self.inputs = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        self.inputs.append(input if isinstance(input, str) else [dict(i) if isinstance(i, dict) else i for i in input])
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    async def stream_response(self, *args, **kwargs):  # pragma: no cover - not used
        raise NotImplementedError
        yield


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def agent_with(model: Model) -> Agent:
    return Agent(name="assistant", instructions="Help.", model=model, tools=[get_weather])


async def test_a_conversation_continues_across_runs_with_tools_and_reasoning(store):
    call = ResponseFunctionToolCall(
        id="fc_1", type="function_call", call_id="call_1", name="get_weather", arguments='{"city": "Paris"}'
    )
    model = ScriptedModel(
        [
            [REASONING, call],
            [say("It is sunny in Paris.", 1)],
            [say("Tomorrow too.", 2)],
        ]
    )
    session = Session("chat-1", store, app="weather", user_id="ada")
    first = await Runner.run(agent_with(model), "Weather in Paris?", session=session)
    assert first.final_output == "It is sunny in Paris."
    second = await Runner.run(agent_with(model), "And tomorrow?", session=session)
    assert second.final_output == "Tomorrow too."

    # The third model call saw the whole first run, then the new question.
    seen = model.inputs[2]
    kinds = [i.get("type", "message") for i in seen]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output", "message", "message"], seen
    reasoning = seen[1]
    assert reasoning == REASONING.model_dump(exclude_unset=True), "reasoning comes back unchanged"
    assert seen[2]["call_id"] == seen[3]["call_id"] == "call_1", "the call pairs with its output"
    assert seen[3]["output"] == "sunny in Paris"

    items = await session.get_items()
    assert len(items) == 7, "5 items of the first run, 2 of the second"
    assert items[:6] == seen, "get_items returns what was added, item for item"
    assert await session.get_items(limit=2) == items[-2:]
    limited = Session("chat-1", store, app="weather", user_id="ada", session_settings=SessionSettings(limit=3))
    assert await limited.get_items() == items[-3:]

    # Another session id, or another user, sees nothing of it.
    assert await Session("chat-2", store, app="weather", user_id="ada").get_items() == []
    assert await Session("chat-1", store, app="weather", user_id="bob").get_items() == []

    # The chat view of the same events is searchable.
    hits = await store.search("weather", "ada", "Paris")
    assert hits["items"], "recall finds the conversation"


async def test_pop_and_clear(store):
    session = Session("chat-pop", store, user_id="ada")
    await session.add_items(
        [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    )
    assert await session.pop_item() == {"role": "assistant", "content": "two"}
    assert await session.get_items() == [{"role": "user", "content": "one"}]
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.add_items([{"role": "user", "content": "again"}])
    assert len(await session.get_items()) == 1


async def test_automatic_compaction_keeps_items_searchable(store):
    session = Session("chat-long", store, user_id="ada", compact_above_tokens=200, keep_turns=1)
    for n in range(12):
        await session.add_items(
            [
                {"role": "user", "content": f"question {n} about parcel PX-{n} " + "detail " * 10},
                {"role": "assistant", "content": f"answer {n} " + "words " * 10},
            ]
        )
    items = await session.get_items()
    assert len(items) < 24, "the context was compacted"
    assert items[-1]["content"].startswith("answer 11"), "the latest turn is kept verbatim"
    # The summary (a request and its answer) reads back as message items of its text.
    request, summary = items[0], items[1]
    assert request["content"].startswith("Summarize the conversation")
    assert set(summary) == {"role", "content"} and "PX-0" in summary["content"], summary
    hits = await store.search("openai-agents", "ada", "PX-0")
    assert hits["items"], "what left the context is still found"
    tool = session.search_tool()
    assert tool.name == "conversation_search"


async def test_the_runner_passes_its_run_context_and_a_run_is_one_invocation(store):
    # The SDK passes ``wrapper`` (the run's RunContextWrapper) only to a
    # session whose four history methods all take it.
    from agents.memory.session import _session_accepts_wrapper

    session = Session("chat-runs", store, app="weather", user_id="ada")
    assert _session_accepts_wrapper(session)
    call = ResponseFunctionToolCall(
        id="fc_1", type="function_call", call_id="call_1", name="get_weather", arguments='{"city": "Oslo"}'
    )
    model = ScriptedModel([[call], [say("Sunny in Oslo.", 1)], [say("Rain tomorrow.", 2)]])
    await Runner.run(agent_with(model), "Weather in Oslo?", session=session)
    first_run = await session.get_items()
    await Runner.run(agent_with(model), "And tomorrow?", session=session)

    stored, _ = await store.resolve("weather", "ada", "chat-runs")
    events = (await store.events("weather", "ada", stored["id"]))["items"]
    invocations = [e.get("invocation_id") for e in events]
    assert len(invocations) == 6 and None not in invocations, invocations
    assert len(set(invocations[:4])) == 1 and len(set(invocations[4:])) == 1, invocations
    assert invocations[0] != invocations[4], "each run is its own invocation"

    # Rewinding the second run's invocation leaves the first run exactly.
    await store.rewind("weather", "ada", stored["id"], invocations[4])
    assert await session.get_items() == first_run

    # Called directly (no run context), items carry no invocation.
    await session.add_items([{"role": "user", "content": "by hand"}])
    events = (await store.events("weather", "ada", stored["id"], last_n=1))["items"]
    assert events[-1].get("invocation_id") is None


async def test_session_settings_as_the_sdk_takes_them(store):
    # A dict of SessionSettings' fields works under the runner, as it does
    # for the SDK's own sessions (the runner resolves the run's settings over it).
    session = Session("chat-limit", store, user_id="ada", session_settings={"limit": 2})
    assert isinstance(session.session_settings, SessionSettings)
    await session.add_items(
        [{"role": "user", "content": f"m{n}"} if n % 2 == 0 else {"role": "assistant", "content": f"m{n}"} for n in range(6)]
    )
    model = ScriptedModel([[say("ok", 1)], [say("ok", 2)]])
    await Runner.run(agent_with(model), "next", session=session)
    assert [i["content"] for i in model.inputs[0]] == ["m4", "m5", "next"]

    # The run's own settings override the session's: the runner passes the limit.
    from agents import RunConfig

    await Runner.run(
        agent_with(model), "last", session=session, run_config=RunConfig(session_settings=SessionSettings(limit=1))
    )
    assert model.inputs[1][0]["content"] == [{"type": "output_text", "text": "ok", "annotations": []}]
    assert model.inputs[1][-1]["content"] == "last" and len(model.inputs[1]) == 2

    # limit 0 reads nothing, a negative limit everything (SQLiteSession's semantics).
    assert await session.get_items(limit=0) == []
    assert len(await session.get_items(limit=-1)) == 10


async def test_a_compaction_spec_runs_after_each_add_under_the_runner(store):
    spec = {"strategy": "token_budget", "max_tokens": 300, "trigger": {"tokens": 400}}
    session = Session("chat-budget", store, user_id="ada", compaction=spec)
    model = ScriptedModel([[say(f"answer {n} " + "words " * 40, n)] for n in range(8)])
    for n in range(8):
        await Runner.run(agent_with(model), f"question {n} about parcel PX-{n} " + "detail " * 40, session=session)
    items = await session.get_items()
    assert len(items) < 16, "the context was cut to the budget"
    assert items[-1]["content"][0]["text"].startswith("answer 7"), "the newest turn is kept"
    assert len(model.inputs[-1]) < 15, "the model saw the compacted context"
    stored, _ = await store.resolve("openai-agents", "ada", "chat-budget")
    assert (await store.get("openai-agents", "ada", stored["id"]))["context_tokens"] <= 400
    hits = await store.search("openai-agents", "ada", "PX-0")
    assert hits["items"], "what left the context is still found"

    # A trigger that has not fired compacts nothing.
    idle = Session(
        "chat-idle", store, user_id="ada", compaction={**spec, "trigger": {"tokens": 1_000_000}}
    )
    for n in range(4):
        await idle.add_items([{"role": "user", "content": "detail " * 40}])
    assert len(await idle.get_items()) == 4


async def test_the_summarizer_is_the_specs_choice(store):
    session = Session(
        "chat-summary",
        store,
        user_id="ada",
        compaction={"strategy": "summarize", "keep": 1, "summarizer": "extractive", "trigger": {"turns": 3}},
    )
    model = ScriptedModel([[say(f"answer {n}", n)] for n in range(4)])
    for n in range(4):
        await Runner.run(agent_with(model), f"question {n} about order ORD-{n}", session=session)
    items = await session.get_items()
    request, summary = items[0], items[1]
    assert request["content"].startswith("Summarize the conversation"), items
    assert "ORD-0" in summary["content"], summary
    assert items[-1]["content"][0]["text"] == "answer 3"


async def test_a_bad_compaction_spec_is_refused(store):
    with pytest.raises(ValueError):
        Session("x", store, compaction={"max_events": 3})
    with pytest.raises(ValueError):
        Session("x", store, compaction={"strategy": "summarize"}, compact_above_tokens=100)
    from agent_session import InvalidInputError

    session = Session("chat-bad", store, user_id="ada", compaction={"strategy": "sliding_window"})
    with pytest.raises(InvalidInputError):
        await session.add_items([{"role": "user", "content": "hi"}])


async def test_an_invocations_trigger_counts_the_runners_runs(store):
    session = Session(
        "chat-runs-trigger",
        store,
        user_id="ada",
        compaction={"strategy": "turn_window", "max_turns": 1, "trigger": {"invocations": 3}},
    )
    model = ScriptedModel([[say(f"a{n}", n)] for n in range(4)])
    sizes = []
    for n in range(4):
        await Runner.run(agent_with(model), f"q{n}", session=session)
        sizes.append(len(await session.get_items()))
    assert sizes == [2, 4, 2, 4], "the third run fires the trigger and one turn is kept"
