"""Updates are handled side by side across chats and in order within a chat (issue 12), the loop
polls again while a handler is still busy (issue 31: the ingest never waits on a batch), and the
offset it stores never passes an update whose handlers have not finished.

The loop runs with either driver against the fake Bot API over HTTP; the handlers are test ones
that record when each update's handling starts and ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentgram.bot.telegram.core import ingest as ingest_module
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.ingest import OFFSET_KEY, Ingest, offered_checkpoint
from agentgram.bot.telegram.drivers import make_driver
from agentgram.runtime.app import Checkpoint
from tests.conftest import make_settings
from tests.fakes.telegram_server import FakeTelegram

CHAT_A, CHAT_B, CHAT_C = 11, 22, 33


class _Values:
    def __init__(self, offset: str | None = None) -> None:
        self.stored: list[str] = []
        self.offset = offset

    async def get_value(self, key: str) -> str | None:
        return self.offset

    async def set_value(self, key: str, value: str) -> None:
        assert key == OFFSET_KEY
        self.stored.append(value)

    async def delete_value(self, key: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]:
        return {}


class _Runtime:
    def __init__(self) -> None:
        self.values = _Values()
        self.letters: list[tuple[str, Checkpoint | None]] = []

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint | None
    ) -> None:
        self.letters.append((ref, checkpoint))


class _Handlers:
    """Handlers that record when each message's handling starts and ends. A message ``hold`` is
    handled only once ``release`` is set; ``boom`` fails."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.offers: dict[str, Checkpoint | None] = {}
        self.release = asyncio.Event()
        self.running = 0
        self.most_running = 0

    async def process(self, update: Update) -> None:
        assert update.message is not None
        text = str(update.message.text)
        self.offers[text] = offered_checkpoint()
        self.events.append(f"start {text}")
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if text.startswith("hold"):
                await asyncio.wait_for(self.release.wait(), 10)
            elif text == "boom":
                raise RuntimeError("a handler's bug")
            else:
                await asyncio.sleep(0.01)
        finally:
            self.running -= 1
        self.events.append(f"end {text}")

    def ended(self, *texts: str) -> Callable[[], bool]:
        return lambda: all(f"end {text}" in self.events for text in texts)


@dataclass
class _Rig:
    tg: FakeTelegram
    ingest: Ingest
    handlers: _Handlers
    runtime: _Runtime

    @property
    def stored(self) -> list[str]:
        return self.runtime.values.stored


@asynccontextmanager
async def _polling(tmp_path: Path, telegram_library: str) -> AsyncIterator[_Rig]:
    """The loop polling the fake Bot API with the driver's own client and parser."""
    async with FakeTelegram() as tg:
        for chat in (CHAT_A, CHAT_B, CHAT_C, *range(101, 107)):
            tg.add_chat(chat)
        settings = make_settings(
            tmp_path, "http://127.0.0.1:9/v1", tg.root, telegram={"library": telegram_library}
        )
        driver = make_driver(settings.telegram)
        await driver.api.get_me()  # as the bot starts: the client is then the driver's to close
        handlers, runtime = _Handlers(), _Runtime()
        ingest = Ingest(driver.api, driver.parse, handlers.process, runtime, poll_timeout=1)
        task = asyncio.create_task(ingest.run())
        try:
            yield _Rig(tg, ingest, handlers, runtime)
        finally:
            handlers.release.set()
            ingest.stop()
            await asyncio.wait_for(task, 10)
            await driver.api.close()


async def test_a_slow_chat_holds_back_neither_another_chat_nor_the_next_poll(
    tmp_path: Path, telegram_library: str
) -> None:
    async with _polling(tmp_path, telegram_library) as rig:
        tg, handlers = rig.tg, rig.handlers
        first = tg.send_text(CHAT_A, "hold a1")
        tg.send_text(CHAT_A, "a2")
        await tg.wait_for(lambda: "start hold a1" in handlers.events, timeout=5)
        # sent after the slow handler started: a later poll must bring it while that one still runs
        tg.send_text(CHAT_B, "b1")
        await tg.wait_for(handlers.ended("b1"), timeout=5)
        assert "end hold a1" not in handlers.events, "chat B was taken in and handled beside chat A"
        assert "start a2" not in handlers.events, "chat A's next message waits for its first"
        assert all(int(value) <= first for value in rig.stored), "no offset passes an update in hand"
        handlers.release.set()
        await tg.wait_for(handlers.ended("hold a1", "a2"), timeout=5)
        a = [e for e in handlers.events if e.endswith(("a1", "a2"))]
        assert a == ["start hold a1", "end hold a1", "start a2", "end a2"], "one chat in order"
        await tg.wait_for(lambda: tg.unconfirmed() == [], timeout=5)
        await tg.wait_for(lambda: rig.stored[-1:] == [str(first + 3)], timeout=5)
        assert sorted(handlers.events) == sorted(set(handlers.events)), "each update handled once"


async def test_resent_updates_in_hand_are_not_handled_twice(tmp_path: Path, telegram_library: str) -> None:
    async with _polling(tmp_path, telegram_library) as rig:
        tg, handlers = rig.tg, rig.handlers
        tg.send_text(CHAT_A, "hold a1")
        await tg.wait_for(lambda: "start hold a1" in handlers.events, timeout=5)
        polls = len(tg.calls("getUpdates"))
        await asyncio.sleep(0.5)
        again = len(tg.calls("getUpdates")) - polls
        # the held update comes back with every poll; the polls back off while nothing new comes
        assert 2 <= again <= 15, f"{again} polls in 0.5 s"
        assert handlers.events == ["start hold a1"]


async def test_a_lone_message_is_offered_its_offset_and_others_are_stored_by_the_loop(
    tmp_path: Path, telegram_library: str
) -> None:
    async with _polling(tmp_path, telegram_library) as rig:
        tg, handlers = rig.tg, rig.handlers
        lone = tg.send_text(CHAT_A, "a1")
        await tg.wait_for(handlers.ended("a1"), timeout=5)
        assert handlers.offers["a1"] == Checkpoint(OFFSET_KEY, str(lone + 1))
        await tg.wait_for(lambda: rig.stored == [str(lone + 1)], timeout=5)  # no mail stored it here

        tg.send_text(CHAT_A, "hold a2")
        await tg.wait_for(lambda: "start hold a2" in handlers.events, timeout=5)
        last = tg.send_text(CHAT_B, "b2")
        await tg.wait_for(handlers.ended("b2"), timeout=5)
        assert handlers.offers["hold a2"] is not None and handlers.offers["b2"] is None, (
            "an update taken in while another is in hand may not store the offset past both"
        )
        handlers.release.set()
        await tg.wait_for(lambda: rig.stored[-1:] == [str(last + 1)], timeout=5)


async def test_a_failing_handler_does_not_take_other_lanes_down(
    tmp_path: Path, telegram_library: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with _polling(tmp_path, telegram_library) as rig:
        tg, handlers = rig.tg, rig.handlers
        boom = tg.send_text(CHAT_C, "boom")
        tg.send_text(CHAT_C, "c2")
        last = tg.send_text(CHAT_B, "b2")
        await tg.wait_for(handlers.ended("c2", "b2"), timeout=5)
        await tg.wait_for(lambda: rig.stored[-1:] == [str(last + 1)], timeout=5)
        assert any(f"handling update {boom} failed" in r.getMessage() for r in caplog.records)


async def test_a_poison_update_is_a_dead_letter_and_the_rest_is_handled(
    tmp_path: Path, telegram_library: str
) -> None:
    async with _polling(tmp_path, telegram_library) as rig:
        tg, handlers = rig.tg, rig.handlers
        poison = tg.send_raw_update(
            {"message": {"message_id": 1, "date": 0, "chat": "not a chat"}}, force=True
        )
        last = tg.send_text(CHAT_B, "b1")
        await tg.wait_for(lambda: handlers.ended("b1")() and rig.runtime.letters != [], timeout=5)
        assert [ref for ref, _ in rig.runtime.letters] == [str(poison)]
        await tg.wait_for(lambda: rig.stored[-1:] == [str(last + 1)], timeout=5)


async def test_the_lanes_are_bounded(
    tmp_path: Path, telegram_library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_module, "LANES", 2)
    async with _polling(tmp_path, telegram_library) as rig:
        tg, handlers = rig.tg, rig.handlers
        for n in range(1, 7):
            tg.send_text(100 + n, f"x{n}")
        await tg.wait_for(handlers.ended(*(f"x{n}" for n in range(1, 7))), timeout=5)
        assert handlers.most_running <= 2 and len(handlers.events) == 12
