"""``send_file`` as a reply, through each driver: a reply to a message that is gone is sent
without the reply (as a message is), not refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentgram.bot.telegram.core.port import BotApi, FileUpload
from agentgram.bot.telegram.drivers.aiogram import AiogramApi
from agentgram.bot.telegram.drivers.ptb import PtbApi
from tests.fakes.telegram_server import FakeTelegram

USER = 42


@pytest.fixture(params=["ptb", "aiogram"])
async def driver(request: pytest.FixtureRequest) -> AsyncIterator[tuple[BotApi, FakeTelegram]]:
    async with FakeTelegram() as tg:
        tg.add_chat(USER)
        api: BotApi
        if request.param == "ptb":
            api = PtbApi(tg.token, tg.base_url, tg.base_file_url, per_second=30)
            await api.get_me()
        else:
            api = AiogramApi(tg.token, tg.root, messages_per_second=30)
        try:
            yield api, tg
        finally:
            await api.close()


@pytest.mark.parametrize("as_photo", [False, True])
async def test_a_file_replying_to_a_message_that_is_gone_is_sent_without_the_reply(
    as_photo: bool, driver: tuple[BotApi, FakeTelegram]
) -> None:
    api, tg = driver
    sent = await api.send_file(
        USER, FileUpload(b"\x89PNG", "a.png", as_photo=as_photo, reply_to_message_id=9999)
    )
    [message] = tg.files_sent(USER)
    assert (message.message_id, message.reply_to_message_id) == (sent.message_id, None)
