"""The MCP servers' client sessions: one per server, started on first use, kept open, closed once.

Each running server's transport and :class:`~mcp.ClientSession` live in an
:class:`~contextlib.AsyncExitStack` entered and left by one owner task, so the
SDK's anyio cancel scopes open and close in the same task; calls from turns only
send requests over the open session. A start that fails, and a session that
dies under a call, become a WARNING line and a :class:`~runtime.errors.ToolError`
the model reads, never a crash. A dead server is started again by the next
call (or by :meth:`McpServer.list_later`, in the background); repeated failures
wait a backoff (:data:`BACKOFF_FIRST` doubling to :data:`BACKOFF_CAP`) before
the next attempt.

Each start owns its process id: the owner task that started a server is the
one that forgets it, so the teardown of a server that died cannot reach the
one started after it, and only the call that saw *this* session die closes it.

No server outlives agentgram, even a SIGKILLed one: the SDK starts each stdio
server in its own session (``start_new_session``), so its pid is its process
group, recorded in the process ledger (``runtime.tools.processes``) once it runs.
Once the transport has stopped the server (stdin closed, then SIGTERM and
SIGKILL), what is left of its group — helpers it started, which do not notice
stdin closing — is killed and the record removed; the next start's
``reap_orphans`` kills a group a killed agentgram left. The SDK does not expose
the process, so the server is found as our child whose environment holds a
token made for this start (:data:`SPAWN_MARKER`): that needs no private SDK
attribute and no guess from command lines (a shebang or a wrapper such as
``npx`` rewrites them), and two servers started at once cannot be mistaken for
each other. A server killed between its spawn and the record is the one window
left; it is milliseconds wide.
"""

from __future__ import annotations

import asyncio
import enum
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from agentgram.runtime.capabilities.tools.base import NO_PROCESSES, ProcessLedger
from agentgram.runtime.capabilities.tools.processes import child_with_env, kill_group
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.config import McpServerSettings, McpSettings
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable

if TYPE_CHECKING:  # the SDK is imported by the first start: with no servers, never (issue 31)
    import mcp_types as types
    from mcp import ClientSession

log = get_logger("mcp")

BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0
"""Seconds before another start after the second failure in a row, doubling up to the cap (the
first restart after a crash is immediate)."""

START_TIMEOUT = 60.0
"""The least a start may take: ``timeout`` bounds a call, and a server's first start (a package
fetched by ``npx`` or ``uvx``, an interpreter importing its SDK) may well take longer than one."""

CLOSE_TIMEOUT = 10.0
"""How long a session's shutdown may take before its owner task is cancelled."""

SPAWN_MARKER = "AGENTGRAM_MCP_SPAWN"
"""The environment variable that tells a stdio server's process apart from any other child."""
FIND_PROCESS_WITHIN = 2.0
"""Seconds a started server's process is looked for: until the child has exec'd, its environment
is still ours, without the marker (on a busy machine that takes a while)."""

ResultT = TypeVar("ResultT")


class ServerState(enum.StrEnum):
    STOPPED = "stopped"  # never started, or closed
    RUNNING = "running"
    FAILED = "failed"  # its start failed or its session died: the next use starts it again


class McpServer:
    """One configured server: its session while it runs, why it failed when it did."""

    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        clock: Callable[[], float] = time.monotonic,
        ledger: ProcessLedger = NO_PROCESSES,
    ) -> None:
        self.name = name
        self.settings = settings
        self._clock = clock
        self._ledger = ledger
        self._pid: int | None = None
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._listing: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._failures = 0
        self._retry_at = 0.0
        self._listed: list[types.Tool] | None = None
        self.reason: str | None = None
        """Why the server last failed (shown by ``/mcp``), ``None`` while it has not."""

    @property
    def state(self) -> ServerState:
        if self._session is not None:
            return ServerState.RUNNING
        return ServerState.FAILED if self.reason is not None else ServerState.STOPPED

    @property
    def listed(self) -> list[types.Tool] | None:
        """The tools the server last listed; ``None`` while it never did."""
        return None if self._listed is None else list(self._listed)

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists (all pages), read once per session."""
        if self._listed is None or self._session is None:
            session = await self._running()
            self._listed = await self._request(session, lambda: _all_tools(session))
        return list(self._listed)

    def list_later(self) -> None:
        """List the tools in the background (starting the server), unless a listing is under way
        or the backoff is not over: a round that needs them never waits for a start."""
        if self._listing is not None and not self._listing.done():
            return
        if self._retry_at > self._clock():
            return
        self._listing = asyncio.create_task(self._list_quietly(), name=f"mcp-list-{self.name}")

    async def listing(self, patience: float) -> None:
        """Wait for the background listing under way, if any, at most ``patience`` seconds (it
        goes on after that)."""
        if self._listing is not None and not self._listing.done():
            await asyncio.wait({self._listing}, timeout=patience)

    async def _list_quietly(self) -> None:
        try:
            await self.list_tools()
        except ToolError:  # logged by _failed; the next need tries again after the backoff
            return

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call ``tool``, waiting at most the server's ``timeout``; a readable ToolError otherwise."""
        session = await self._running()
        result = await self._request(
            session, lambda: session.call_tool(tool, arguments, read_timeout_seconds=self.settings.timeout)
        )
        self._failures = 0
        return result

    async def close(self) -> None:
        """Stop a background listing, then end the session and the server's process."""
        listing, self._listing = self._listing, None
        if listing is not None:
            listing.cancel()
            await asyncio.gather(listing, return_exceptions=True)
        await self._end_session()

    async def _end_session(self) -> None:
        """End the session and the server's process (the owner task leaves its exit stack)."""
        owner, self._owner, self._session = self._owner, None, None
        if owner is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT)
        except TimeoutError:
            log.warning("MCP server %s did not close within %.0fs", self.name, CLOSE_TIMEOUT)
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)

    async def _abandon(self) -> None:
        """Cancel a start still under way (its owner task is not waiting to be told to close)."""
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)

    # --- starting ------------------------------------------------------------

    async def _running(self) -> ClientSession:
        async with self._lock:
            if self._session is not None:
                return self._session
            wait = self._retry_at - self._clock()
            if wait > 0:
                raise ToolError(
                    f"the MCP server {self.name!r} failed ({self.reason}); it is tried again in {wait:.0f}s"
                )
            await self._end_session()  # what is left of a session that died
            return await self._start()

    async def _start(self) -> ClientSession:
        self._stop = asyncio.Event()
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp-{self.name}")
        try:
            session = await asyncio.wait_for(asyncio.shield(ready), max(self.settings.timeout, START_TIMEOUT))
        except (asyncio.CancelledError, TimeoutError) as exc:  # /stop or a hung start: nothing lingers
            await self._abandon()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise self._failed("could not start", exc) from None
        except Exception as exc:
            await self._end_session()
            raise self._failed("could not start", exc) from None
        self._session, self.reason = session, None
        log.info("MCP server %s started", self.name)
        return session

    async def _own(self, ready: asyncio.Future[ClientSession]) -> None:
        """The owner task: open the transport and session, hold them until closed, leave them —
        and forget the server's process group (this start's, kept here) once leaving them has
        stopped it."""
        pid: list[int] = []
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack, pid)
                if ready.cancelled():
                    return
                ready.set_result(session)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.debug("MCP server %s: closing its session failed: %s", self.name, _reason(exc))
        finally:
            for started in pid:
                await self._forget_process(started)

    async def _open(self, stack: AsyncExitStack, pid: list[int]) -> ClientSession:
        """Open the transport and session; a stdio server's process id goes into ``pid`` as soon
        as it is known (before the session answers), so the owner forgets it however it ends."""
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        s = self.settings
        if s.command is not None:
            marker = uuid.uuid4().hex
            params = StdioServerParameters(
                command=s.command,
                args=s.args,
                env={**{k: v.get_secret_value() for k, v in s.env.items()}, SPAWN_MARKER: marker},
                cwd=s.cwd,
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            await self._record_process(marker, pid)
        else:
            assert s.url is not None
            headers = {k: v.get_secret_value() for k, v in s.headers.items()}
            client = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            read, write = await stack.enter_async_context(streamable_http_client(s.url, http_client=client))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return session

    # --- the process group ---------------------------------------------------

    async def _record_process(self, marker: str, pids: list[int]) -> None:
        """Put the running server's group, when found, in ``pids`` (the owner forgets it however
        it ends, even if a /stop lands during the write) and in the ledger (a write that lands even
        under /stop)."""
        pid = child_with_env(SPAWN_MARKER, marker)
        until = time.monotonic() + FIND_PROCESS_WITHIN
        while pid is None and time.monotonic() < until:  # forked, but not yet exec'd with the marker
            await asyncio.sleep(0.02)
            pid = child_with_env(SPAWN_MARKER, marker)
        if pid is None:
            log.debug("MCP server %s: its process is not found; it is not recorded", self.name)
            return
        self._pid = pid
        pids.append(pid)
        await durable(self._ledger.started(pid))

    async def _forget_process(self, pid: int) -> None:
        """Once the transport has stopped this start's server: kill what is left of its group (a
        helper it started outlives its stdin closing), then drop the record."""
        if self._pid == pid:
            self._pid = None
        if kill_group(pid):
            log.info("MCP server %s: killed the processes its server left behind", self.name)
        await durable(self._ledger.finished(pid))

    @property
    def pid(self) -> int | None:
        """The running stdio server's process (and group) id; ``None`` for HTTP or when stopped."""
        return self._pid

    # --- failures ------------------------------------------------------------

    async def _request(self, session: ClientSession, send: Callable[[], Awaitable[ResultT]]) -> ResultT:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        try:
            return await send()
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise ToolError(
                    f"the MCP server {self.name!r} did not answer within {self.settings.timeout:g}s"
                ) from None
            if exc.code != types.CONNECTION_CLOSED:
                raise ToolError(f"the MCP server {self.name!r} refused the call: {exc.message}") from None
            raise await self._died(session, exc) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
            raise await self._died(session, exc) from None

    async def _died(self, session: ClientSession, exc: BaseException) -> ToolError:
        """End the session that died — under the lock, and only if no start replaced it since."""
        async with self._lock:
            if self._session is not session:  # another call saw it die first, and counted it
                return ToolError(
                    f"the MCP server {self.name!r} stopped; it is started again on the next call"
                )
            await self._end_session()
        return self._failed("stopped", exc, again="it is started again on the next call")

    def _failed(self, what: str, exc: BaseException, again: str | None = None) -> ToolError:
        self.reason = _reason(exc)
        self._failures += 1
        restart = Backoff(BACKOFF_FIRST, BACKOFF_CAP)
        delay = 0.0 if self._failures < 2 else restart.next_delay(self._failures - 1)
        self._retry_at = self._clock() + delay
        log.warning("MCP server %s %s: %s", self.name, what, self.reason)
        again = again or (
            f"it is tried again in {delay:.0f}s" if delay else "it is tried again on the next call"
        )
        return ToolError(f"the MCP server {self.name!r} {what}: {self.reason}; {again}")


async def _all_tools(session: ClientSession) -> list[types.Tool]:
    import mcp_types as types

    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _reason(exc: BaseException) -> str:
    """One readable line: the first real error inside the SDK's exception groups."""
    from mcp.shared.exceptions import MCPError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, MCPError):
        return exc.message
    return str(exc) or type(exc).__name__


class McpServers:
    """Every enabled server of ``mcp.servers``, by name; closed together on shutdown."""

    def __init__(self, settings: McpSettings, ledger: ProcessLedger = NO_PROCESSES) -> None:
        self._servers = {
            name: McpServer(name, server, ledger=ledger)
            for name, server in settings.servers.items()
            if server.enabled
        }

    def get(self, name: str) -> McpServer | None:
        return self._servers.get(name)

    def all(self) -> list[McpServer]:
        return list(self._servers.values())

    def eager(self) -> list[McpServer]:
        """The servers listed at start (``lazy: false``)."""
        return [server for server in self._servers.values() if not server.settings.lazy]

    async def close(self) -> None:
        await asyncio.gather(*(server.close() for server in self._servers.values()))
