"""A small MCP server over stdio, started by `pydantic_ai_mcp_app` for each agent run.

Its one tool, `note`, appends a line naming the run (argv[2]) to a notebook file
(argv[1]): the side effect the crash test counts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

NOTEBOOK, RUN_ID = Path(sys.argv[1]), sys.argv[2]
server = MCPServer("notes")


@server.tool()
def note(text: str) -> str:
    """Write `text` down in the notebook."""
    # one write of one short line with O_APPEND: a SIGKILL cannot tear it
    fd = os.open(NOTEBOOK, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{RUN_ID}\t{text}\n".encode())
    finally:
        os.close(fd)
    return f"noted: {text}"


if __name__ == "__main__":
    server.run()
