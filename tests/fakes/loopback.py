"""An aiohttp application served on 127.0.0.1 at a free port: what every fake server shares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from aiohttp import web


class LoopbackServer:
    """Subclasses build their routes in :meth:`application`; ``async with`` starts and stops it."""

    runner_options: ClassVar[Mapping[str, Any]] = {}  # extra ``web.AppRunner`` arguments
    _runner: web.AppRunner | None = None
    port = 0

    def application(self) -> web.Application:
        raise NotImplementedError

    async def start(self) -> None:
        self._runner = web.AppRunner(self.application(), access_log=None, **self.runner_options)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
