"""A Google ADK agent whose sessions and memory live in agent-session.

    pip install "./bindings/python[adk]"
    GOOGLE_API_KEY=... python bindings/python/examples/adk_chat.py

CI type-checks this file (``mypy --strict``, ``[tool.mypy]`` in
``bindings/python/pyproject.toml``); it does not run it.
"""

from __future__ import annotations

import asyncio

from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.tools.load_memory_tool import load_memory_tool as load_memory
from google.genai import types

from agent_session import Store
from agent_session.adk import MemoryService, SessionService


async def main() -> None:
    """One turn of a conversation, then the session handed to memory."""
    store = await Store.open("sqlite://sessions.db")
    sessions = SessionService(store)
    memory = MemoryService(store)
    agent = LlmAgent(
        name="support",
        model="gemini-2.0-flash",
        instruction="You help customers with their orders; load your memory "
        "when they refer to an earlier conversation.",
        tools=[load_memory],
    )
    runner = Runner(
        app_name="support", agent=agent, session_service=sessions, memory_service=memory
    )
    session = await sessions.create_session(app_name="support", user_id="ada")
    message = types.Content(role="user", parts=[types.Part(text="Where is ORD-58213?")])
    async for event in runner.run_async(
        user_id="ada", session_id=session.id, new_message=message
    ):
        if event.is_final_response() and event.content and event.content.parts:
            print("".join(part.text or "" for part in event.content.parts))
    finished = await sessions.get_session(app_name="support", user_id="ada", session_id=session.id)
    if finished is not None:
        await memory.add_session_to_memory(finished)


if __name__ == "__main__":
    asyncio.run(main())
