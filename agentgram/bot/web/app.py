"""The web view's FastAPI application, built from the runtime facade and the ``web`` section.

``/healthz`` (open, see :mod:`.auth`) is 200 while the chat adapter polls and
the database answers, 503 once the database does not or the adapter has not had
a poll return for :data:`~runtime.debug_view.POLLING_DOWN_AFTER` seconds; the
LLM endpoint's state is reported, never a reason to fail the probe (the bot
still answers, saying it cannot reach the model). It names this process's
instance and its role (``leader``, ``standby`` when polling, ``member`` in webhook mode, or
``single`` without a cluster). ``/metrics`` is
:func:`runtime.metrics.render`, behind the token like everything else.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from agentgram.bot.web import api, pages
from agentgram.bot.web.auth import token_guard
from agentgram.bot.web.settings import WebSettings
from agentgram.bot.web.state import WebState
from agentgram.runtime.debug_view import Health, State
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra import metrics


def create_app(runtime: Door, settings: WebSettings, last_poll: Callable[[], float | None]) -> FastAPI:
    assert settings.token is not None, "WebSettings refuses an enabled web view without a token"
    app = FastAPI(title="agentgram", summary="What the agent did: sessions, tool calls, runs, jobs.")
    app.state.web = WebState(runtime, settings, last_poll)
    app.middleware("http")(token_guard(settings.token.get_secret_value()))
    app.include_router(api.router)
    app.include_router(pages.router)

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}})
    async def healthz() -> JSONResponse:
        state: WebState = app.state.web
        health = await state.debug.health(state.last_poll, state.started)
        code = 503 if health.status == State.DOWN else 200
        return JSONResponse(health.model_dump(mode="json"), status_code=code)

    @app.get("/metrics", include_in_schema=False)
    async def metrics_text() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return app
