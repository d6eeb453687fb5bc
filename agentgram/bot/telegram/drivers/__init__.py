"""The Telegram drivers: the one part of the adapter that knows a Telegram library.

``telegram.library`` picks one: ``ptb`` (python-telegram-bot, the default) or
``aiogram`` (aiogram 3). A :class:`Driver` is its :class:`~..port.BotApi` and
its parser of one raw update; everything else in ``bot/telegram/`` is the same
for both. The driver's library is imported only when it is chosen.

The driver's client only paces; the :class:`Driver` hands it out wrapped in the chat
queues (:class:`~..core.chat_queue.QueuedBot`), and every update it parses carries that
same wrapped client, so whatever the adapter shows in a chat — a handler's reply or the
runtime's output — takes that chat's one queue and its one retry layer.

In a cluster (``shared``, :mod:`..core.shared_budget`) the driver's pacer takes from the budget
every instance shares instead of its own, and the chat queues honour the 429 pauses any instance
recorded; alone (``None``) both are as they always were.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agentgram.bot.settings import TelegramSettings
from agentgram.bot.telegram.core.chat_queue import ALONE, ChatQueues, QueuedBot
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.metrics import count_call
from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.shared_budget import SharedBudget


@dataclass(slots=True, frozen=True)
class Driver:
    api: QueuedBot
    parse: Callable[[dict[str, Any]], Update]
    """One raw update as a neutral :class:`~..incoming.Update`; raises for one it cannot read."""


def make_driver(tg: TelegramSettings, shared: SharedBudget | None = None) -> Driver:
    """The driver ``telegram.library`` names; ``shared``: a cluster's budget (module docstring)."""
    token = tg.token.get_secret_value()
    queues = ChatQueues(ALONE if shared is None else shared)
    if tg.library == "aiogram":
        from agentgram.bot.telegram.drivers import aiogram

        client: BotApi = aiogram.AiogramApi(
            token,
            str(tg.api_base_url),
            messages_per_second=tg.messages_per_second,
            count=count_call,
            shared=shared,
        )
        api = QueuedBot(client, queues)
        parse_aiogram = aiogram.parse_update
        return Driver(api, lambda raw: parse_aiogram(raw, api))
    ptb = _ptb_without_passport()
    queued = QueuedBot(
        ptb.PtbApi(
            token, tg.bot_base_url, tg.file_base_url, per_second=tg.messages_per_second, shared=shared
        ),
        queues,
    )
    return Driver(queued, lambda raw: ptb.parse_update(raw, queued))


def _ptb_without_passport() -> ModuleType:
    """The python-telegram-bot driver, its library imported with ``cryptography`` out of sight.

    python-telegram-bot imports ``cryptography`` whenever it is installed (the ``mcp`` package
    installs it), only to decrypt Telegram Passport data, which agentgram never asks for: 7.7 MiB
    of RSS in every bot (issue 31, ``bench/README.md``, "where the memory goes"). A ``None`` in
    ``sys.modules`` makes that import fail as if it were not installed; it is taken out again at
    once, so anything else still imports ``cryptography`` as usual.
    """
    if "telegram" in sys.modules or "cryptography" in sys.modules:  # too late, or needed anyway
        from agentgram.bot.telegram.drivers import ptb

        return ptb
    sys.modules["cryptography"] = None  # type: ignore[assignment]
    try:
        from agentgram.bot.telegram.drivers import ptb
    finally:
        del sys.modules["cryptography"]
    return ptb
