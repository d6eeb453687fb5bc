"""The Telegram drivers: the one part of the adapter that knows a Telegram library.

``telegram.library`` picks one: ``ptb`` (python-telegram-bot, the default) or
``aiogram`` (aiogram 3). A :class:`Driver` is its :class:`~..port.BotApi` and
its parser of one raw update; everything else in ``bot/telegram/`` is the same
for both. The driver's library is imported only when it is chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentgram.bot.settings import TelegramSettings
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.metrics import count_call
from agentgram.bot.telegram.core.port import BotApi


@dataclass(slots=True, frozen=True)
class Driver:
    api: BotApi
    parse: Callable[[dict[str, Any]], Update]
    """One raw update as a neutral :class:`~..incoming.Update`; raises for one it cannot read."""


def make_driver(tg: TelegramSettings) -> Driver:
    token = tg.token.get_secret_value()
    if tg.library == "aiogram":
        from agentgram.bot.telegram.drivers import aiogram

        api: BotApi = aiogram.AiogramApi(
            token,
            str(tg.api_base_url),
            messages_per_second=tg.messages_per_second,
            max_retries=tg.max_retries,
            count=count_call,
        )
        parse_aiogram = aiogram.parse_update
        return Driver(api, lambda raw: parse_aiogram(raw, api))
    from agentgram.bot.telegram.drivers import ptb

    ptb_api = ptb.PtbApi(
        token, tg.bot_base_url, tg.file_base_url, per_second=tg.messages_per_second, retries=tg.max_retries
    )
    return Driver(ptb_api, lambda raw: ptb.parse_update(raw, ptb_api))
