"""uvicorn in the bot's own process and event loop, started and stopped with the bot.

The socket is bound by :func:`bind` before uvicorn sees it (the cli binds it
right after the instance lock, before the bot starts), so a port in use or an
address this host does not have is one :class:`~runtime.errors.ConfigError`
naming ``web.listen`` (exit code 2), not uvicorn's ``sys.exit`` inside a task.
A start that fails in any other way (uvicorn ending, the start-up timeout)
cancels the server task and closes the socket before the error goes on.
uvicorn's own signal capture is switched off: the bot owns SIGINT and SIGTERM
and stops the server itself (:meth:`WebServer.stop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.tasks import cancel_and_wait

log = get_logger("web")

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
"""Past uvicorn's own graceful shutdown (5 s), the server task is cancelled."""


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """The bot's signal handlers stay in place."""
        yield


def bind(host: str, port: int, key: str = "web.listen") -> socket.socket:
    """A listening socket on ``host:port``; :class:`ConfigError` (naming ``key``) when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as error:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise ConfigError(key, f"cannot listen on {where}: {reason}") from None


class WebServer:
    """One uvicorn server on one socket; :meth:`start` returns once it accepts connections."""

    def __init__(self, app: FastAPI, listening: socket.socket, name: str = "web view") -> None:
        config = uvicorn.Config(
            app, log_config=None, lifespan="off", access_log=False, ws="none", timeout_graceful_shutdown=5
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None
        self._socket = listening
        self._name = name

    @property
    def address(self) -> tuple[str, int]:
        """Where it listens (the port the system chose, for ``web.listen`` port 0 in tests)."""
        host, port = self._socket.getsockname()[:2]
        return str(host), int(port)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]), name=self._name)
        try:
            await self._until_started(self._task)
        except BaseException:
            await cancel_and_wait(self._task)
            self._task = None
            self._socket.close()
            raise
        host, port = self.address
        log.info("%s on http://%s:%d", self._name, host, port)

    async def _until_started(self, task: asyncio.Task[None]) -> None:
        async with asyncio.timeout(START_TIMEOUT):
            while not self._server.started:
                if task.done():
                    task.result()  # its error
                    raise RuntimeError("the web server ended during start-up")
                await asyncio.sleep(0.01)  # uvicorn has no started event to wait on

    async def stop(self) -> None:
        """Stop accepting, let open requests finish (uvicorn's graceful shutdown, bounded by
        :data:`STOP_TIMEOUT`), then close."""
        if self._task is None:
            self._socket.close()
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_TIMEOUT):
                await asyncio.shield(self._task)
        await cancel_and_wait(self._task)
        self._task = None
        self._socket.close()
        log.info("%s stopped", self._name)
