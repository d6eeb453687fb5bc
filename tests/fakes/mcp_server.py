"""A small MCP server on the SDK's ``MCPServer`` (FastMCP before mcp 2), over stdio.

Run as ``python tests/fakes/mcp_server.py``. Its tools stand for what a real server may do to
agentgram: take long (``slow``), fail (``fail``), answer with an image (``image``) or with
structured content and no text (``structured``). ``pid`` names its process, so a test can kill it.

With ``--helper`` it first starts a helper process in its own process group, as servers that drive
a browser or a database do: the helper does not end when the server's stdin closes, so only killing
the group ends it (the orphan reap after agentgram was SIGKILLed).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult

PIXEL_COLOUR = (200, 30, 30)
STRUCTURED = {"temperature": 21.5, "unit": "C", "sensors": ["hall", "kitchen"]}


def build() -> MCPServer:
    """The server with its tools (made on demand: ``MCPServer`` configures logging when built, which
    a test importing the constants above must not get)."""
    server = MCPServer("agentgram-test", log_level="WARNING")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep ``seconds``, then say so."""
        await anyio.sleep(seconds)
        return f"slept {seconds:g}s"

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with ``message`` (a deliberate failure: the client is told why)."""
        raise ToolError(message)

    @server.tool()
    def image() -> Image:
        """A 4x4 red PNG."""
        from PIL import Image as Pillow

        out = io.BytesIO()
        Pillow.new("RGB", (4, 4), PIXEL_COLOUR).save(out, format="PNG")
        return Image(data=out.getvalue(), format="png")

    @server.tool()
    def structured() -> CallToolResult:
        """Structured content only, no text part."""
        return CallToolResult(content=[], structured_content=STRUCTURED)

    @server.tool()
    def pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    return server


if __name__ == "__main__":
    if "--helper" in sys.argv:
        subprocess.Popen(
            ["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    build().run("stdio")
