"""What every request handler of the web view reads: one :class:`WebState` per application."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Protocol

from starlette.requests import Request

from agentgram.bot.web.settings import WebSettings
from agentgram.runtime.debug_view import DebugView


class WebRuntime(Protocol):
    """The part of the runtime facade the web view uses."""

    @property
    def debug(self) -> DebugView: ...

    @property
    def timezone(self) -> tzinfo: ...

    async def kill_job(self, job_id: int) -> bool: ...


@dataclass(slots=True, eq=False)
class WebState:
    runtime: WebRuntime
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
