"""The chat queues (core/chat_queue.py): one ordered path per chat, pauses after a 429, the one
retry layer. Each driver's real client against the fake Bot API, as the adapter wires it
(``make_driver`` hands out the queued client)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentgram.bot.telegram.core.chat_queue import BRIEF, QueuedBot
from agentgram.bot.telegram.core.port import BotCommand, RetryAfter, Text
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.drivers import make_driver
from tests.conftest import make_settings
from tests.fakes.telegram_server import FakeTelegram

ONE, TWO = 1001, 1002


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        fake.add_chat(ONE)
        fake.add_chat(TWO)
        yield fake


@pytest.fixture
async def api(tmp_path: Path, tg: FakeTelegram, telegram_library: str) -> AsyncIterator[QueuedBot]:
    settings = make_settings(
        tmp_path, "http://127.0.0.1:9/v1", tg.root, telegram={"library": telegram_library}
    )
    queued = make_driver(settings.telegram).api
    await queued.get_me()
    try:
        yield queued
    finally:
        await queued.close()


def says(needle: str):  # type: ignore[no-untyped-def]
    return lambda params: needle in str(params.get("text"))


async def test_a_429_without_a_chat_pauses_every_queue(api: QueuedBot, tg: FakeTelegram) -> None:
    tg.fail_next("setMyCommands", retry_after=1)
    with pytest.raises(RetryAfter):
        await api.set_my_commands([BotCommand("help", "help")])
    [refused] = tg.calls("setMyCommands")
    await asyncio.gather(
        api.send_message(ONE, Text("one")),
        api.send_chat_action(TWO, "typing"),
        api.send_message(TWO, Text("two")),
    )
    later = [c for c in tg.requests if c.method.lower() in ("sendmessage", "sendchataction")]
    assert len(later) == 3
    assert all(c.time - refused.time >= 1.0 for c in later)


async def test_a_429_in_a_chat_pauses_that_chat_only(api: QueuedBot, tg: FakeTelegram) -> None:
    tg.fail_next("sendMessage", retry_after=1, when=says("first"))
    with pytest.raises(RetryAfter):
        await api.send_message(ONE, Text("first"))  # no retry asked: raised, but the chat pauses
    [refused] = tg.calls("sendMessage")
    started = time.monotonic()
    await api.send_message(TWO, Text("elsewhere"))
    assert time.monotonic() - started < 0.5, "another chat does not wait"
    await api.send_chat_action(ONE, "typing")
    [action] = tg.calls("sendChatAction")
    assert action.time - refused.time >= 1.0


async def test_a_retried_send_keeps_its_place_before_a_later_one(api: QueuedBot, tg: FakeTelegram) -> None:
    tg.fail_next("sendMessage", retry_after=1, when=says("ack"))
    ack = asyncio.create_task(send_html(api, ONE, "ack", retry=BRIEF))
    await tg.wait_for(lambda: any(c.status == 429 for c in tg.calls("sendMessage")))
    answer = asyncio.create_task(send_html(api, ONE, "answer", retry=BRIEF))
    assert await ack is not None and await answer is not None
    assert [m.visible_text for m in tg.messages(ONE)] == ["ack", "answer"]
    assert [c.status for c in tg.calls("sendMessage")] == [429, 200, 200]
    assert len(api.queues) == 0, "a chat nobody holds, waits for or pauses has no queue left"
