"""What every part of the scheduler works with, handed around as one value."""

from __future__ import annotations

from dataclasses import dataclass

from agentgram.runtime.scheduler.clock import Clock
from agentgram.runtime.scheduler.engine import Engine
from agentgram.runtime.scheduler.ports import SchedulerPorts


@dataclass(slots=True, frozen=True)
class Shared:
    ports: SchedulerPorts
    engine: Engine
    clock: Clock


class Part:
    """A part of the scheduler (delivery, the cron side, the tic side)."""

    def __init__(self, shared: Shared) -> None:
        self.ports = shared.ports
        self.engine = shared.engine
        self.clock = shared.clock
