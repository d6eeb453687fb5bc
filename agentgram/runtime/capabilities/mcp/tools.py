"""The tools an MCP server lists, as agentgram tools named ``mcp__<server>__<tool>``.

The model sees each tool's JSON schema as the server gave it, so neither
:attr:`Tool.spec` nor :meth:`Tool.parse` goes through a pydantic model here:
the arguments only have to be a JSON object, and the server checks the rest.
They are in group ``other`` with no seeded rule, so a call no rule matches asks;
rules and wrappers may name them by glob (``mcp__time__*``).

Results: the text parts, joined, are what the model reads; structured content
(when no text came with it) as JSON text; an image part is saved under the
workdir and named by a note (:mod:`.images`), from which the context builder
sends it on to a vision model; audio and binary resources are a note naming
their type. A result the server flags as an error is a :class:`ToolError`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from pydantic import ConfigDict

from agentgram.runtime.capabilities.mcp.images import image_note
from agentgram.runtime.capabilities.mcp.servers import McpServer
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolGroup, json_object
from agentgram.runtime.infra.config import ApprovalRuleSettings, McpSettings
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.llm.types import ToolSpec
from agentgram.runtime.infra.log import get_logger

if TYPE_CHECKING:  # the SDK's types are read once a server answered (issue 31: no MCP, no import)
    import mcp_types as types

log = get_logger("mcp")

PREFIX = "mcp__"
NAME_LIMIT = 64
"""The longest function name OpenAI-compatible APIs accept."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
SERVER_RULE_PRIORITY = 500
"""Where a server's ``approval`` rule sorts: after rules of yours, before the seeded defaults (1000)."""


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters a function name may not hold replaced by ``_``."""
    return f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"[:NAME_LIMIT]


def server_glob(server: str) -> str:
    """The rule and wrapper pattern naming every tool of ``server``."""
    return f"{PREFIX}{server}__*"


class McpArgs(ToolArgs):
    """Whatever object the model sent: the server validates it against its own schema."""

    model_config = ConfigDict(extra="allow")

    def values(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class McpTool(Tool[McpArgs]):
    """One tool of one server; :func:`mcp_tools` makes a subclass per tool to carry its name."""

    Args = McpArgs
    group: ClassVar[ToolGroup] = ToolGroup.OTHER
    remote: ClassVar[str]
    """The tool's own name on its server."""

    def __init__(self, server: McpServer, listed: types.Tool) -> None:
        self.server = server
        self._schema = dict(listed.input_schema)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self._schema)

    def parse(self, raw: str | dict[str, Any]) -> McpArgs:
        return McpArgs.model_validate(json_object(raw))

    async def execute(self, args: McpArgs, ctx: ToolContext) -> str:
        result = await self.server.call(self.remote, args.values())
        return await asyncio.to_thread(result_text, result, ctx.workdir)  # images are written and synced


def mcp_tools(server: McpServer, listed: list[types.Tool]) -> list[McpTool]:
    """One tool per listed tool; a second tool whose name comes out the same is left out."""
    tools: dict[str, McpTool] = {}
    for entry in listed:
        name = tool_name(server.name, entry.name)
        if name in tools:
            log.warning(
                "MCP server %s: tool %r is named %s like another; left out", server.name, entry.name, name
            )
            continue
        description = (entry.description or entry.title or entry.name).strip()
        attrs = {"name": name, "description": description, "remote": entry.name}
        named = cast(type[McpTool], type(f"McpTool_{name}", (McpTool,), attrs))
        tools[name] = named(server, entry)
    return list(tools.values())


def result_text(result: types.CallToolResult, workdir: Path | None = None) -> str:
    """What the model reads of a result; one the server marks as an error raises it as a ToolError.

    With a ``workdir``, each image part is saved there and its note names the file
    (:func:`~runtime.mcp.images.image_note`); without one it is only its type."""
    import mcp_types as types

    images = itertools.count(1)
    keep = None if result.is_error else workdir  # a failed result's images are not shown
    parts = [_part_text(part, keep, images) for part in result.content]
    text = "\n".join(part for part in parts if part)
    if not any(isinstance(part, types.TextContent) for part in result.content) and result.structured_content:
        text = "\n".join(filter(None, [text, json.dumps(result.structured_content, ensure_ascii=False)]))
    if result.is_error:
        raise ToolError(text or "the MCP tool failed without saying why")
    return text


def _part_text(part: types.ContentBlock, workdir: Path | None, images: Iterator[int]) -> str:
    import mcp_types as types

    if isinstance(part, types.TextContent):
        return part.text
    if isinstance(part, types.ImageContent):
        if workdir is None:
            return f"[image: {part.mime_type}]"
        return image_note(workdir, next(images), part.mime_type, part.data)
    if isinstance(part, types.AudioContent):
        return f"[audio: {part.mime_type}]"
    if isinstance(part, types.ResourceLink):
        return f"[resource: {part.uri}]"
    if isinstance(part, types.EmbeddedResource):
        resource = part.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri} ({resource.mime_type or 'binary'})]"
    return f"[{getattr(part, 'type', 'unknown')} content]"


def server_rules(settings: McpSettings) -> list[ApprovalRuleSettings]:
    """A server's ``approval`` as a rule for all its tools, after your own rules (priority 100)
    and before the seeded ones."""
    return [
        ApprovalRuleSettings(
            tool=server_glob(name),
            action=server.approval,
            priority=SERVER_RULE_PRIORITY,
            note=f"mcp.servers.{name}",
        )
        for name, server in settings.servers.items()
        if server.approval is not None
    ]
