"""A Pydantic AI agent whose tool lives in an MCP server, in a workflow crash tests kill.

The agent's toolset is an `MCPToolset` over stdio (`mcp_notes_server.py`, a
real MCP server in a child process). Its tool listing and its tool call are steps
of the run, so a resumed run neither calls the tool again nor needs the same
server process. $SIM_URL is the simulated provider's address and $MCP_NOTEBOOK
the file the server's tool appends to (the test starts and reads both).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import openai
from fastmcp.client.transports import PythonStdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from resumable import current_run, workflow
from resumable.integrations.pydantic_ai import ResumableAgent

SERVER = Path(__file__).with_name("mcp_notes_server.py")


@functools.cache
def client() -> openai.AsyncOpenAI:
    """This process's client of the simulated provider (an in-process test closes it)."""
    return openai.AsyncOpenAI(base_url=os.environ["SIM_URL"], api_key="sk-test")


def scribe(run_id: str) -> ResumableAgent[None, str]:
    """The agent, with a notes server that writes this run's id beside each note."""
    model = OpenAIChatModel(
        "gpt-4o-mini", provider=OpenAIProvider(openai_client=client())
    )
    transport = PythonStdioTransport(
        SERVER, args=[os.environ["MCP_NOTEBOOK"], run_id], python_cmd=sys.executable
    )
    return ResumableAgent(
        Agent(
            model,
            name="scribe",
            instructions="Call note with what the user asks to remember, then answer.",
            toolsets=[MCPToolset(transport, id="notes")],
        )
    )


@workflow(name="pydantic_ai_mcp_app.remember")
async def remember(request: str) -> str:
    result = await scribe(current_run().run_id).run(request)
    return result.output
