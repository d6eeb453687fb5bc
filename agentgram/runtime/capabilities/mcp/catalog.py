"""Which MCP tools an agent is offered, round by round (docs/architecture/context.md,
"Which tools are offered").

- A server with ``lazy: false`` is listed at start; its tools are offered to
  every agent from the first round.
- A lazy server is only named, with its one-line description, in the
  ``activate_tools`` tool (:mod:`.activate`). Once an agent activated it, its
  tools are offered from that agent's next round of the same turn on, because
  every round asks :meth:`McpCatalog.extend` again.
- Grants belong to one agent of one session (:mod:`runtime.storage.grant_rows`):
  the root's outlive a restart, ``/new`` starts without them, and a sub-agent
  starts with none of its own.

A round offers the tools already listed and does not wait for a server's
start: the eager servers are listed at start, ``activate_tools`` lists a lazy
one. A server whose tools are not listed when a round needs them (an eager one
whose start failed, a lazy one granted before a restart) is listed in the
background (:meth:`McpServer.list_later`, which keeps the backoff); its tools
are offered from the round after it answered. One wait is allowed: the first
round that needs a server this process never tried (a lazy one granted before
a restart) waits for its listing up to the server's ``timeout``, so a working
server's tools are there from that first round; a hung one costs that once per
process, never every round. A server's tools are kept once listed; a server
that died is started again by the next *call*.
``/mcp`` reads :meth:`McpCatalog.status`.

Tool names are unique across servers: a tool whose name another server's tool
already has (e.g. once cut to 64 characters) is a warning and left out, so a
call can only ever reach one server.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from agentgram.runtime.capabilities.mcp.servers import McpServer, McpServers, ServerState
from agentgram.runtime.capabilities.mcp.tools import McpTool, mcp_tools
from agentgram.runtime.capabilities.tools.base import ToolRegistry
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.grant_rows import ROOT_FRAME, GrantStore

if TYPE_CHECKING:
    import mcp_types as types

log = get_logger("mcp")


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
        self._tried: set[str] = set()  # the servers a round or the start already waited for once
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
            tools = self._keep(server, await server.list_tools())
        return tools

    def listed_tools(self, server: McpServer) -> list[McpTool] | None:
        """The server's tools if it listed them; else ``None``, and it is listed in the background."""
        tools = self._tools.get(server.name)
        if tools is None:
            listed = server.listed
            if listed is None:
                server.list_later()
                return None
            tools = self._keep(server, listed)
        return tools

    def _keep(self, server: McpServer, listed: list[types.Tool]) -> list[McpTool]:
        taken = {tool.name for name, tools in self._tools.items() if name != server.name for tool in tools}
        tools: list[McpTool] = []
        for tool in mcp_tools(server, listed):
            if tool.name in taken:
                log.warning(
                    "MCP server %s: tool %s is another server's tool name; left out", server.name, tool.name
                )
            else:
                tools.append(tool)
        self._tools[server.name] = tools
        return tools

    async def list_eager(self) -> None:
        """Start and list the ``lazy: false`` servers, together; one that fails is a warning (its
        own log line), and it is listed again in the background when a round needs it."""
        await asyncio.gather(*(self._try_listing(server) for server in self.servers.eager()))

    async def _try_listing(self, server: McpServer) -> None:
        self._tried.add(server.name)
        try:
            await self.tools_of(server)
        except ToolError:
            return

    async def offered(self, session_id: int, frame: int = ROOT_FRAME) -> list[McpTool]:
        """The MCP tools this agent sees: every eager server's, then the servers it activated — as
        far as they are listed (the module's docstring names the one wait)."""
        servers = self.servers.all()
        if not servers:  # the common case costs no read
            return []
        granted = await self.grants.granted(session_id, frame) if self.lazy() else frozenset()
        tools: list[McpTool] = []
        for server in servers:
            if server.settings.lazy and server.name not in granted:
                continue
            tools.extend(await self._offered_of(server) or [])
        return tools

    async def _offered_of(self, server: McpServer) -> list[McpTool] | None:
        tools = self.listed_tools(server)
        if tools is None and server.name not in self._tried:
            self._tried.add(server.name)
            await server.listing(server.settings.timeout)
            tools = self.listed_tools(server)
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
