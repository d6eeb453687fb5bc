"""What every request handler of the web view reads: one :class:`WebState` per application."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.requests import Request

from agentgram.bot.web.settings import WebSettings
from agentgram.runtime.debug_view import DebugView
from agentgram.runtime.door.protocols import Door


@dataclass(slots=True, eq=False)
class WebState:
    runtime: Door
    """The runtime's door: the web view reads ``debug`` and ``timezone`` and kills a job (``jobs``)."""
    settings: WebSettings
    last_poll: Callable[[], float | None]
    """The chat adapter's monotonic time of its last returned poll (``None`` before the first)."""
    started: float = field(default_factory=time.monotonic)

    @property
    def debug(self) -> DebugView:
        return self.runtime.debug

    @classmethod
    def of(cls, request: Request) -> WebState:
        state = request.app.state.web
        assert isinstance(state, WebState)
        return state
