"""Which chats get drafts, and what one draft shows (:mod:`bot.telegram.drafts`); the streaming
itself is driven end to end in ``tests/e2e/test_drafts.py``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.sender import Draft
from agentgram.bot.telegram.drivers import make_driver
from agentgram.bot.telegram.views import drafts as drafts_module
from agentgram.bot.telegram.views.drafts import DraftChats
from agentgram.runtime.infra.config import ConfigInvalid
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.telegram_html import visible_length
from tests.fakes.telegram_server import FakeTelegram


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as tg:
        tg.add_chat(ALLOWED_USER)
        yield tg


@pytest.fixture
async def bot(tg: FakeTelegram, tmp_path: Path, telegram_library: str) -> AsyncIterator[BotApi]:
    """The driver's client for the fake Bot API, started as the bot starts it (``getMe``)."""
    settings = make_settings(
        tmp_path, "http://127.0.0.1:9/v1", tg.root, telegram={"library": telegram_library}
    )
    api = make_driver(settings.telegram).api
    try:
        await api.get_me()
        yield api
    finally:
        await api.close()


def test_only_private_chats_get_drafts_and_only_while_they_are_on() -> None:
    chats = DraftChats(enabled=True, interval=0.3)
    assert chats.offered(ALLOWED_USER)
    assert not chats.offered(-100_500) and not chats.offered(-42), "groups and channels have negative ids"
    assert not DraftChats(enabled=False, interval=0.3).offered(ALLOWED_USER)


@pytest.mark.parametrize(
    ("telegram", "problem"),
    [
        ({"draft_interval": 0}, "telegram.draft_interval: Input should be greater than or equal to 0.05"),
        ({"drafts": "maybe"}, "telegram.drafts: Input should be a valid boolean"),
    ],
)
def test_the_draft_keys_are_checked_like_any_other(
    tmp_path: Path, telegram: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigInvalid, match=re.escape(problem)):
        make_settings(tmp_path, "http://127.0.0.1:9/v1", telegram=telegram)


def test_refusals_are_remembered_per_chat_and_the_memory_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(drafts_module, "REFUSALS_KEPT", 3)
    chats = DraftChats(enabled=True, interval=0.3)
    for chat_id in (1, 2, 3, 4):
        chats.refused(chat_id)
    assert [chats.offered(chat_id) for chat_id in (1, 2, 3, 4, 5)] == [True, False, False, False, True]


def test_each_round_gets_a_new_draft_id() -> None:
    chats = DraftChats(enabled=True, interval=0.3)
    ids = [chats.open(ALLOWED_USER).draft_id for _ in range(3)]
    assert len(set(ids)) == 3 and 0 not in ids


async def test_past_4096_characters_the_draft_shows_the_piece_being_written(
    tg: FakeTelegram, bot: BotApi
) -> None:
    words = " ".join(f"word{i}" for i in range(1500))  # ~12 000 characters
    draft = DraftChats(enabled=True, interval=0.0).open(ALLOWED_USER)
    assert await draft.show(bot, words, interval=0.0) is Draft.SHOWN
    assert await draft.show(bot, words, interval=0.0) is Draft.SHOWN  # the same: not sent again
    [shown] = tg.drafts
    assert visible_length(shown.text) <= 4096
    assert shown.visible_text.split()[-1] == "word1499" and "word0 " not in shown.visible_text


async def test_a_chat_without_drafts_is_a_refusal_and_a_failure_a_skip(tg: FakeTelegram, bot: BotApi) -> None:
    draft = DraftChats(enabled=True, interval=0.0).open(ALLOWED_USER)
    tg.fail_next("sendMessageDraft", status=502)
    assert await draft.show(bot, "one", interval=0.0) is Draft.SKIPPED
    tg.refuse_drafts(ALLOWED_USER)
    assert await draft.show(bot, "one", interval=0.0) is Draft.REFUSED
    assert tg.drafts == []
