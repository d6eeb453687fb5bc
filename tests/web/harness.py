"""The web view served over real HTTP on loopback beside a running bot (tests/e2e/harness.py).

It is started as ``agentgram run`` starts it (:func:`bot.web.app.create_app` on
:class:`bot.web.serve.WebServer`), on a port the system picks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from agentgram.bot.web.app import create_app
from agentgram.bot.web.serve import WebServer, bind
from agentgram.bot.web.settings import WebSettings
from tests.e2e.harness import Rig

TOKEN = "web-test-token-0123456789"


@dataclass
class Web:
    server: WebServer
    base_url: str
    client: httpx.AsyncClient
    """Sends the token as a bearer header."""

    def anonymous(self) -> httpx.AsyncClient:
        """A client without the token (the caller closes it)."""
        return httpx.AsyncClient(base_url=self.base_url)


@asynccontextmanager
async def web_view(rig: Rig, last_poll: Callable[[], float | None] | None = None) -> AsyncIterator[Web]:
    settings = WebSettings(enabled=True, token=TOKEN, public_url="http://127.0.0.1:1")
    runtime = rig.bot.runtime
    app = create_app(runtime, settings, last_poll or (lambda: rig.bot.ingest.last_poll_ok))
    server = WebServer(app, bind("127.0.0.1", 0))
    await server.start()
    host, port = server.address
    base = f"http://{host}:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            yield Web(server, base, client)
    finally:
        await server.stop()
