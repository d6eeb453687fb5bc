"""End-to-end harness: the real bot (python-telegram-bot + openai SDK) between two fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentgram.bot.settings import load_bot_config
from agentgram.bot.telegram.app import TelegramBot, compose
from tests.conftest import config_mapping, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, SentMessage
from tests.fakes.user_chat import UserChat


@dataclass
class Rig(UserChat):
    tg: FakeTelegram
    llm: FakeOpenAI
    bot: TelegramBot
    workdir: Path

    async def wait_text(self, needle: str, timeout: float = 5.0) -> SentMessage:
        await self.tg.wait_for(lambda: any(needle in m.visible_text for m in self.chat()), timeout)
        return next(m for m in self.chat() if needle in m.visible_text)

    async def wait_turns(self, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until ``count`` turns finished and their output was delivered."""
        from tests.runtime.core.turn.harness import Recorder

        recorder = self._recorder
        assert isinstance(recorder, Recorder)
        await recorder.wait_kind("turn_finished", count, timeout)
        await self.bot.delivery.idle()

    _recorder: object = None


Fakes = tuple[FakeTelegram, FakeOpenAI]


@asynccontextmanager
async def fakes() -> AsyncIterator[Fakes]:
    """Fakes for several bots in turn (``running_bot(..., on=...)``): one chat across restarts."""
    async with FakeTelegram() as tg, FakeOpenAI(models=("main-model", "backup-model")) as llm:
        yield tg, llm


@asynccontextmanager
async def _given_or_fresh(given: Fakes | None) -> AsyncIterator[Fakes]:
    if given is not None:
        yield given
        return
    async with fakes() as fresh:
        yield fresh


@asynccontextmanager
async def running_bot(
    tmp_path: Path,
    *,
    known_chats: tuple[int, ...] = (),
    config_file: bool = False,
    on: Fakes | None = None,
    **sections: Any,
) -> AsyncIterator[Rig]:
    """The bot started between fresh fakes; ``known_chats`` exist before it starts (a restart's
    chats: what it sends on start must find them). With ``config_file`` the settings are written
    to ``tmp_path/config.yml`` and loaded from there, as ``agentgram run`` does. ``on`` given
    fakes (:func:`fakes`), a restart finds its earlier messages in the chat, to edit them.
    The database is a SQLite file in ``tmp_path``, or the one :func:`tests.conftest.use_database`
    chose (an ``also_on_postgres`` test's ``[ptb-postgres]`` run: one PostgreSQL database for the
    whole test, so a restart finds what the first bot stored); ``storage={"url": ...}`` sets one."""
    from tests.runtime.core.turn.harness import Recorder

    async with _given_or_fresh(on) as (tg, llm):
        for chat_id in known_chats:
            tg.add_chat(chat_id)
        if config_file:
            config = tmp_path / "config.yml"
            config.write_text(yaml.safe_dump(config_mapping(tmp_path, llm.base_url, tg.root, **sections)))
            settings = load_bot_config(config, environ={})
        else:
            settings = make_settings(tmp_path, llm.base_url, tg.root, **sections)
        bot = compose(settings)
        recorder = Recorder()
        bot.runtime.parts.bus.subscribe(recorder)
        await bot.start()
        rig = Rig(tg, llm, bot, settings.agent.workdir.resolve())
        rig._recorder = recorder
        try:
            yield rig
        finally:
            await bot.stop()
