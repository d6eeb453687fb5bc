"""``activate_tools``: the tool that makes a lazy MCP server's tools visible.

Its description names every lazy server with its one-line description, in
config order, so it is byte-identical from round to round and turn to turn.
A seeded rule allows it: activating only lists the server's tools, and each
call of one still goes through the approval gate.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from agentgram.runtime.capabilities.mcp.catalog import McpCatalog, description_of
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolGroup
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.llm.types import ToolSpec
from agentgram.runtime.infra.storage.grant_rows import ROOT_FRAME

ACTIVATE_TOOLS = "activate_tools"


class ActivateArgs(ToolArgs):
    servers: list[str] = Field(min_length=1, description="The names of the servers whose tools you need.")


class ActivateTools(Tool[ActivateArgs]):
    name: ClassVar[str] = ACTIVATE_TOOLS
    description: ClassVar[str] = "Make the tools of MCP servers available from your next step on."
    group: ClassVar[ToolGroup] = ToolGroup.OTHER
    idempotent: ClassVar[bool] = True
    Args = ActivateArgs

    def __init__(self, catalog: McpCatalog) -> None:
        self.catalog = catalog
        listing = "\n".join(f"- {s.name}: {description_of(s)}" for s in catalog.lazy())
        self._description = f"{self.description} Servers:\n{listing}"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self._description, parameters=super().spec.parameters)

    async def execute(self, args: ActivateArgs, ctx: ToolContext) -> str:
        names = {server.name for server in self.catalog.servers.all()}  # an eager one: already on
        unknown = [name for name in args.servers if name not in names]
        if unknown:
            raise ToolError(
                f"no MCP server named {', '.join(map(repr, unknown))}; the servers are: {', '.join(sorted(names))}"
            )
        frame = ctx.stack_id if ctx.stack_id is not None else ROOT_FRAME
        result = await self.catalog.activate(ctx.session_id, frame, args.servers)
        if not result.tools:
            raise ToolError("; ".join(result.failed.values()))
        lines = [f"{name}: {', '.join(tools) or 'no tools'}" for name, tools in result.tools.items()]
        lines += [f"{name} failed: {error}" for name, error in result.failed.items()]
        return "Activated; these tools are available from your next step:\n" + "\n".join(lines)
