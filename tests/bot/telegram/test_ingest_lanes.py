"""A batch's updates are handled side by side across chats and in order within a chat (issue 12),
and its offset is stored once, after every lane is done."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentgram.bot.telegram.core import ingest as ingest_module
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.ingest import OFFSET_KEY, Ingest, offered_checkpoint
from agentgram.bot.telegram.drivers import Driver
from agentgram.runtime.app import Checkpoint

CHAT_A, CHAT_B, CHAT_C = 11, 22, 33


class _Values:
    def __init__(self) -> None:
        self.stored: list[str] = []

    async def get_value(self, key: str) -> str | None:
        return None

    async def set_value(self, key: str, value: str) -> None:
        assert key == OFFSET_KEY
        self.stored.append(value)

    async def delete_value(self, key: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]:
        return {}


class _Runtime:
    def __init__(self) -> None:
        self.values = _Values()

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint
    ) -> None: ...


class _Handlers:
    """Handlers that record when each message's handling starts and ends. Chat A's first
    message is slow: it finishes only once chat B's message was answered."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.offers: list[Checkpoint | None] = []
        self.b_answered = asyncio.Event()
        self.running = 0
        self.most_running = 0

    async def process(self, update: Update) -> None:
        assert update.message is not None
        text = str(update.message.text)
        self.offers.append(offered_checkpoint())
        self.events.append(f"start {text}")
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await self._handle(text)
        finally:
            self.running -= 1
        self.events.append(f"end {text}")

    async def _handle(self, text: str) -> None:
        if text == "a1":
            await asyncio.wait_for(self.b_answered.wait(), 5)
        elif text == "b1":
            self.b_answered.set()
        elif text == "boom":
            raise RuntimeError("a handler's bug")
        else:
            await asyncio.sleep(0.01)


def _message(update_id: int, chat_id: int, text: str) -> dict[str, Any]:
    chat = {"id": chat_id, "type": "private", "first_name": "Ann"}
    return {
        "update_id": update_id,
        "message": {"message_id": update_id, "date": 0, "chat": chat, "text": text},
    }


def _ingest(driver: Driver, handlers: _Handlers) -> tuple[Ingest, _Values]:
    """The loop with the driver's own parser: the batches below are raw ``getUpdates`` JSON."""
    runtime = _Runtime()
    return Ingest(driver.api, driver.parse, handlers.process, runtime, poll_timeout=1), runtime.values


async def test_a_slow_chat_does_not_hold_back_another_and_each_chat_keeps_its_order(driver: Driver) -> None:
    handlers = _Handlers()
    ingest, values = _ingest(driver, handlers)
    batch = [_message(1, CHAT_A, "a1"), _message(2, CHAT_A, "a2"), _message(3, CHAT_B, "b1")]
    batch.append(_message(4, CHAT_A, "a3"))
    assert await asyncio.wait_for(ingest._take(batch, 1), 5) == 5
    events = handlers.events
    assert events.index("end b1") < events.index("end a1"), "chat B answered while A's handler ran"
    assert [e for e in events if e.endswith(("a1", "a2", "a3"))] == [
        "start a1", "end a1", "start a2", "end a2", "start a3", "end a3"
    ], "one chat's updates are handled one after another, in order"  # fmt: skip
    assert handlers.offers == [None] * 4, "no lane may store the offset past the batch with its mail"
    assert values.stored == ["5"], "the offset past the batch is stored once, after every lane"


async def test_a_failing_handler_does_not_take_other_lanes_down(
    driver: Driver, caplog: pytest.LogCaptureFixture
) -> None:
    handlers = _Handlers()
    ingest, values = _ingest(driver, handlers)
    batch = [_message(1, CHAT_C, "boom"), _message(2, CHAT_C, "c2"), _message(3, CHAT_B, "b2")]
    assert await ingest._take(batch, 1) == 4
    assert {"end c2", "end b2"} <= set(handlers.events), "the failing chat's next update and B ran"
    assert values.stored == ["4"]
    assert any("handling update 1 failed" in r.getMessage() for r in caplog.records)


async def test_a_lone_update_is_offered_its_offset(driver: Driver) -> None:
    handlers = _Handlers()
    ingest, values = _ingest(driver, handlers)
    assert await ingest._take([_message(7, CHAT_A, "a2")], 7) == 8
    assert handlers.offers == [Checkpoint(OFFSET_KEY, "8")]
    assert values.stored == ["8"], "no mail stored it, so the loop did"


async def test_the_lanes_are_bounded(driver: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "LANES", 2)
    handlers = _Handlers()
    ingest, values = _ingest(driver, handlers)
    batch = [_message(n, 100 + n, f"x{n}") for n in range(1, 7)]
    assert await ingest._take(batch, 1) == 7
    assert handlers.most_running == 2 and len(handlers.events) == 12
    assert values.stored == ["7"]
