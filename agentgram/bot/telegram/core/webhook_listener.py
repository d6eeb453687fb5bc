"""The webhook's own HTTP listener (``telegram.webhook.listen``): the update route and ``/healthz``.

It is a FastAPI app served by uvicorn in the bot's process and event loop, through the same
:class:`~agentgram.bot.web.serve.WebServer` the web view uses, on its own socket — never the web
view's (that one is behind a token and may be off). FastAPI and uvicorn are already dependencies
and that server already leaves the bot's signal handling alone; aiohttp is only a test dependency
(and aiogram's). The app has no OpenAPI pages: it faces the internet.

Stopping drains first (:meth:`WebhookIngest.drain`: every new POST is a 503 with
``Retry-After``), then uvicorn's graceful shutdown lets the updates being handled finish. A
stopping instance never calls ``deleteWebhook``: Telegram keeps the updates for the next start.

``/healthz`` (no secret: it tells nothing but health) reports whether the database answers (and in
a cluster whether this instance's heartbeat is fresh, and its role), the last POST's time and ``getWebhookInfo``'s last error (asked at most every
:data:`WEBHOOK_INFO_EVERY` seconds); 503 while the database does not answer or the instance drains.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentgram.bot.settings import WebhookSettings
from agentgram.bot.telegram.core.port import BotApi, WebhookInfo
from agentgram.bot.telegram.core.webhook import SECRET_HEADER, WebhookHealth, WebhookIngest
from agentgram.bot.telegram.core.webhook_relay import RELAYED_HEADER, Relay
from agentgram.bot.web.serve import WebServer, bind
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.webhook")

WEBHOOK_INFO_EVERY = 10.0
WEBHOOK_INFO_TIMEOUT = 5.0


class WebhookListener:
    """The listener's socket and server; :meth:`start` binds (a bad ``listen`` is a
    :class:`~agentgram.runtime.infra.errors.ConfigError` naming it) and serves."""

    def __init__(self, ingest: WebhookIngest, api: BotApi, settings: WebhookSettings) -> None:
        self.ingest = ingest
        self.api = api
        self.settings = settings
        self._server: WebServer | None = None
        self._socket: socket.socket | None = None
        self._stopped = asyncio.Event()
        self._info: tuple[float, WebhookInfo | None] | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return self._server.address

    def bind(self) -> None:
        """The socket, bound before anything starts (connections wait in its backlog until
        :meth:`start`: the runtime must be up before an update is handled)."""
        self._socket = bind(self.settings.host, self.settings.port, key="telegram.webhook.listen")

    async def start(self) -> None:
        if self._socket is None:
            self.bind()
        assert self._socket is not None
        self._server = WebServer(self._app(), self._socket, name="webhook listener")
        await self._server.start()

    async def wait(self) -> None:
        """Until :meth:`stop`."""
        await self._stopped.wait()

    def relay_to_owners(self, relay: Relay) -> None:
        """In a cluster: an update of a chat another instance runs goes there (:mod:`.webhook_relay`)."""
        self.ingest.relay = relay

    async def stop(self) -> None:
        self.ingest.drain()
        if self._server is not None:
            await self._server.stop()
        elif self._socket is not None:
            self._socket.close()
        if self.ingest.relay is not None:
            await self.ingest.relay.close()
        self._stopped.set()

    def _app(self) -> FastAPI:
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        app.add_api_route(self.settings.path, self._update, methods=["POST"])
        app.add_api_route("/healthz", self._health, methods=["GET"])
        return app

    async def _update(self, request: Request) -> Response:
        answer = await self.ingest.receive(
            request.headers.get(SECRET_HEADER), request.stream, request.headers.get(RELAYED_HEADER)
        )
        headers = {"Retry-After": str(answer.retry_after)} if answer.retry_after is not None else None
        return Response(status_code=answer.status, headers=headers)

    async def _health(self) -> JSONResponse:
        database, info = await asyncio.gather(
            self.ingest.runtime.debug.database_answers(), self._webhook_info()
        )
        cluster = self.ingest.runtime.cluster
        heartbeat: Literal["ok", "stale"] | None = None
        if cluster is not None:
            heartbeat = "ok" if cluster.heartbeat_fresh() else "stale"
        ok = database and not self.ingest.draining and heartbeat != "stale"
        health = WebhookHealth(
            status="ok" if ok else "down",
            database="ok" if database else "down",
            draining=self.ingest.draining,
            role=self._role(),
            heartbeat=heartbeat,
            last_post=self.ingest.last_post,
            webhook_url=info.url if info else None,
            pending_update_count=info.pending_update_count if info else None,
            last_error=info.last_error_message if info else None,
            last_error_date=info.last_error_date if info else None,
        )
        return JSONResponse(health.model_dump(mode="json"), status_code=200 if ok else 503)

    def _role(self) -> Literal["single", "leader", "member"]:
        cluster = self.ingest.runtime.cluster
        if cluster is None:
            return "single"
        return "leader" if cluster.leading else "member"

    async def _webhook_info(self) -> WebhookInfo | None:
        now = time.monotonic()
        if self._info is not None and now - self._info[0] < WEBHOOK_INFO_EVERY:
            return self._info[1]
        try:
            info: WebhookInfo | None = await asyncio.wait_for(
                self.api.get_webhook_info(), WEBHOOK_INFO_TIMEOUT
            )
        except Exception as error:
            log.warning("health check: getWebhookInfo failed: %s", error)
            info = None
        self._info = (now, info)
        return info


__all__ = ["WebhookListener"]
