"""A runtime wired to the fake LLM, with every event it emits recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.events import RuntimeEvent


@dataclass
class Recorder:
    events: list[RuntimeEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self, event: RuntimeEvent) -> None:
        self.events.append(event)
        self.changed.set()

    def of(self, kind: str) -> list[RuntimeEvent]:
        return [e for e in self.events if e.kind == kind]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out; events: {[e.kind for e in self.events]}") from None

    async def wait_kind(self, kind: str, count: int = 1, timeout: float = 5.0) -> None:
        await self.wait_for(lambda: len(self.of(kind)) >= count, timeout)


async def started_runtime(settings) -> tuple[Runtime, Recorder]:  # type: ignore[no-untyped-def]
    runtime = Runtime(settings, format_rules="Reply in Telegram HTML.")
    recorder = Recorder()
    runtime.parts.bus.subscribe(recorder)
    await runtime.start()
    return runtime, recorder
