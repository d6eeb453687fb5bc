"""What every part of the scheduler works with, handed around as one value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentgram.runtime.i18n import Translator
from agentgram.runtime.scheduler.clock import Clock
from agentgram.runtime.scheduler.engine import Engine

if TYPE_CHECKING:
    from agentgram.runtime.app import Runtime


@dataclass(slots=True, frozen=True)
class Shared:
    runtime: Runtime
    engine: Engine
    clock: Clock
    translator: Translator


class Part:
    """A part of the scheduler (delivery, the cron side, the tic side)."""

    def __init__(self, shared: Shared) -> None:
        self.runtime = shared.runtime
        self.settings = shared.runtime.settings
        self.engine = shared.engine
        self.clock = shared.clock
        self.translator = shared.translator
