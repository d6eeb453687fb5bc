"""Which MCP tools an agent is offered, round by round (the session-handler spec's
``all_tool_defs()``, dynamic group resolution).

- A server with ``lazy: false`` is listed at start; its tools are offered to
  every agent from the first round.
- A lazy server is only named, with its one-line description, in the
  ``activate_tools`` tool (:mod:`.activate`). Once an agent activated it, its
  tools are offered from that agent's next round of the same turn on, because
  every round asks :meth:`McpCatalog.extend` again.
- Grants belong to one agent of one session (:mod:`runtime.storage.grant_rows`):
  the root's outlive a restart, ``/new`` starts without them, and a sub-agent
  starts with none of its own.

A server's tools are listed once per process and kept, so a round asks no
server anything; a server that died is started again by the next *call*, not
by the next round. ``/mcp`` reads :meth:`McpCatalog.status`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from fnmatch import fnmatchcase

from agentgram.runtime.errors import ToolError
from agentgram.runtime.mcp.servers import McpServer, McpServers, ServerState
from agentgram.runtime.mcp.tools import McpTool, mcp_tools
from agentgram.runtime.storage.grant_rows import ROOT_FRAME, GrantStore
from agentgram.runtime.tools.base import ToolRegistry


@dataclass(slots=True, frozen=True)
class McpServerStatus:
    """One configured server as ``/mcp`` shows it for one session."""

    name: str
    description: str  # as configured; "" when none is
    state: ServerState
    reason: str | None  # why it failed, when state is FAILED
    tools: int | None  # how many tools it listed; None while it never started
    lazy: bool
    activated: bool  # its tools are offered in this session (always, for a server with lazy: false)


@dataclass(slots=True, frozen=True)
class Activation:
    """What one ``activate_tools`` call achieved, server by server."""

    tools: dict[str, list[str]]  # the servers activated (now or before), with their tools' names
    failed: dict[str, str]  # the servers that could not list their tools, with the error


def description_of(server: McpServer) -> str:
    return server.settings.description or f"MCP server {server.name}"


class McpCatalog:
    def __init__(self, servers: McpServers, grants: GrantStore) -> None:
        self.servers = servers
        self.grants = grants
        self._tools: dict[str, list[McpTool]] = {}
        self._extended: weakref.WeakKeyDictionary[ToolRegistry, dict[tuple[str, ...], ToolRegistry]] = (
            weakref.WeakKeyDictionary()
        )

    def lazy(self) -> list[McpServer]:
        """The servers an agent activates before it sees their tools."""
        return [server for server in self.servers.all() if server.settings.lazy]

    async def tools_of(self, server: McpServer) -> list[McpTool]:
        """The server's tools, listed on first use (which starts it); raises the readable
        :class:`ToolError` of a start that failed."""
        tools = self._tools.get(server.name)
        if tools is None:
            tools = self._tools[server.name] = mcp_tools(server, await server.list_tools())
        return tools

    async def list_eager(self) -> None:
        """Start and list the ``lazy: false`` servers; one that fails is a warning (its own log
        line), and its tools are tried again on a later round."""
        for server in self.servers.eager():
            try:
                await self.tools_of(server)
            except ToolError:
                continue

    async def offered(self, session_id: int, frame: int = ROOT_FRAME) -> list[McpTool]:
        """The MCP tools this agent sees: every eager server's, then the servers it activated."""
        servers = self.servers.all()
        if not servers:  # the common case costs no read
            return []
        granted = await self.grants.granted(session_id, frame) if self.lazy() else frozenset()
        tools: list[McpTool] = []
        for server in servers:
            if server.settings.lazy and server.name not in granted:
                continue
            try:
                tools.extend(await self.tools_of(server))
            except ToolError:  # logged by the server; the agent sees the rest
                continue
        return tools

    async def extend(
        self,
        base: ToolRegistry,
        session_id: int,
        frame: int = ROOT_FRAME,
        allow: frozenset[str] | None = None,
    ) -> ToolRegistry:
        """``base`` plus this agent's MCP tools (only those ``allow`` names or globs, when the
        agent has an allowlist); the same registry object while they stay the same, so its
        specs are built once."""
        tools = [t for t in await self.offered(session_id, frame) if allowed(t.name, allow)]
        if not tools:
            return base
        known = self._extended.setdefault(base, {})
        key = tuple(tool.name for tool in tools)
        if key not in known:
            known[key] = base.extended(list(tools))
        return known[key]

    async def activate(self, session_id: int, frame: int, names: list[str]) -> Activation:
        """List each named lazy server (starting it) and grant the ones that answered, durably,
        before the agent's next round asks for its tools."""
        listed: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        for name in dict.fromkeys(names):
            server = self.servers.get(name)
            assert server is not None  # the tool checked the names
            try:
                listed[name] = [tool.name for tool in await self.tools_of(server)]
            except ToolError as exc:
                failed[name] = str(exc)
        await self.grants.grant(session_id, frame, (name for name in listed if self._is_lazy(name)))
        return Activation(listed, failed)

    def _is_lazy(self, name: str) -> bool:
        server = self.servers.get(name)
        return server is not None and server.settings.lazy

    async def status(self, session_id: int) -> list[McpServerStatus]:
        """Every enabled server, sorted by name, as the session's root agent has it."""
        granted = await self.grants.granted(session_id)
        return [
            McpServerStatus(
                name=server.name,
                description=server.settings.description or "",
                state=server.state,
                reason=server.reason,
                tools=len(self._tools[server.name]) if server.name in self._tools else None,
                lazy=server.settings.lazy,
                activated=not server.settings.lazy or server.name in granted,
            )
            for server in sorted(self.servers.all(), key=lambda s: s.name)
        ]


def allowed(name: str, allow: frozenset[str] | None) -> bool:
    return allow is None or any(fnmatchcase(name, pattern) for pattern in allow)
