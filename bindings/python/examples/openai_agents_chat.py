"""A support agent of the OpenAI Agents SDK whose conversation lives in
agent-session: it continues across runs (and processes), compacts itself
to a token budget, and can search what left its context.

    pip install "./bindings/python[openai-agents]"
    OPENAI_API_KEY=... python bindings/python/examples/openai_agents_chat.py

CI type-checks this file (``mypy --strict``, ``[tool.mypy]`` in
``bindings/python/pyproject.toml``); it does not run it.
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, Runner, SessionSettings

from agent_session import Store
from agent_session.openai_agents import Session


async def main() -> None:
    """Two turns of one conversation, stored in SQLite."""
    store = await Store.open("sqlite://sessions.db")
    session = Session(
        "telegram:chat-42",
        store,
        app="support",
        user_id="ada",
        # The newest 200 items go to the model...
        session_settings=SessionSettings(limit=200),
        # ...and once the context reaches 12,000 tokens the store summarizes
        # all but the last 3 turns (offline); recall search still finds them.
        compaction={
            "strategy": "summarize",
            "keep": 3,
            "summarizer": "extractive",
            "trigger": {"tokens": 12_000},
        },
    )
    agent = Agent(
        name="support",
        instructions="You help customers with their orders. Search the "
        "conversation when they refer to something you no longer see.",
        tools=[session.search_tool()],
    )
    first = await Runner.run(agent, "Where is my order ORD-58213?", session=session)
    print(first.final_output)
    # This run reads only the newest 20 items, whatever the session says.
    second = await Runner.run(
        agent,
        "And which order did I ask about?",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=20)),
    )
    print(second.final_output)


if __name__ == "__main__":
    asyncio.run(main())
