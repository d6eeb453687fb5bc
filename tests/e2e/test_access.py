"""Who gets in, end to end: strangers learn their id, pairing lets the owner approve or deny them.

The real python-telegram-bot and openai SDK between the two fakes; the owner is ``ALLOWED_USER``
(the first configured id), the stranger ``STRANGER``.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from agentgram.bot.telegram.app import compose
from tests.conftest import ALLOWED_USER, STRANGER, make_settings
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram, SentMessage

PAIRING = {"telegram": {"pairing": True}}
REQUEST = "asks to use the bot"


async def settle(rig: Rig) -> None:
    """Everything sent before now has been handled: the ingest loop confirms a batch only once
    every update of it was handled (other chats' updates may be handled after this /help)."""
    before = len(rig.tg.messages(ALLOWED_USER))
    help_id = rig.say("/help")
    await rig.tg.wait_for(lambda: len(rig.tg.messages(ALLOWED_USER)) > before)
    await rig.tg.wait_for(lambda: rig.tg.confirmed_offset > help_id)


def stranger_texts(rig: Rig, user: int = STRANGER) -> list[str]:
    return [m.visible_text for m in rig.tg.messages(user)]


async def owner_request(rig: Rig) -> SentMessage:
    await rig.tg.wait_for(lambda: any(REQUEST in m.visible_text for m in rig.chat()))
    return next(m for m in rig.chat() if REQUEST in m.visible_text)


def code_of(text: str) -> str:
    found = re.search(r"[Cc]ode[^A-Z0-9]*([A-Z0-9]{6})\b", text)
    assert found, text
    return found.group(1)


# --- no pairing: the refusal tells the id ----------------------------------------------


async def test_stranger_is_told_their_id_once_and_every_refusal_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram.telegram.access")
    async with running_bot(tmp_path) as rig:
        rig.tg.add_chat(STRANGER)
        message = {
            "message_id": 1, "date": int(time.time()), "text": "hello",
            "from": {"id": STRANGER, "is_bot": False, "first_name": "Eve", "username": "eve", "language_code": "en"},
            "chat": {"id": STRANGER, "type": "private", "first_name": "Eve"},
        }  # fmt: skip
        rig.tg.send_update({"message": message})
        rig.tg.send_text(STRANGER, "hello again")
        await settle(rig)
        assert stranger_texts(rig) == [f"This is a private bot. Your Telegram user id is {STRANGER}."]
        assert rig.llm.calls == 0
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused user")]
    assert refusals == [
        f"refused user {STRANGER} (@eve): add {STRANGER} to telegram.allowed_user_ids to allow",
        f"refused user {STRANGER}: add {STRANGER} to telegram.allowed_user_ids to allow",
    ]


async def test_refusal_is_in_the_strangers_language(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.send_text(STRANGER, "привет", language_code="ru")
        await settle(rig)
        assert stranger_texts(rig) == [f"Это частный бот. Ваш ID в Telegram: {STRANGER}."]


# --- pairing -----------------------------------------------------------------------------


async def test_owner_approves_a_stranger_who_then_reaches_the_model_even_after_a_restart(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, known_chats=(ALLOWED_USER,), **PAIRING) as rig:
        rig.tg.send_text(STRANGER, "hi, can I use this?", first_name="Eve")
        request = await owner_request(rig)
        await rig.tg.wait_for(lambda: len(stranger_texts(rig)) == 1)
        told = stranger_texts(rig)[0]
        assert told.startswith(f"This is a private bot. Your Telegram user id is {STRANGER}.")
        assert code_of(told) == code_of(request.visible_text)
        assert f"User {STRANGER} (Eve) asks to use the bot." in request.visible_text

        rig.tg.send_text(STRANGER, "hello?")  # waiting: no answer, the owner is not asked again
        await settle(rig)
        assert len(stranger_texts(rig)) == 1
        assert sum(REQUEST in m.visible_text for m in rig.chat()) == 1
        assert rig.llm.calls == 0

        approve = request.button_data("✅ Approve")
        rig.tg.press_button_labeled(ALLOWED_USER, request.message_id, "✅ Approve")
        await rig.tg.wait_for(lambda: len(stranger_texts(rig)) == 2)
        assert rig.tg.callback_answers[-1].text == "✅ Approved"
        assert stranger_texts(rig)[1].startswith("✅ The owner let you in.")
        decided = rig.tg.message(ALLOWED_USER, request.message_id)
        assert decided.visible_text == f"✅ User {STRANGER} (Eve) can use the bot now."
        assert decided.buttons == []

        rig.tg.press_button(ALLOWED_USER, request.message_id, approve, require_button=False)
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) == 2)
        assert rig.tg.callback_answers[-1].text == "This request is no longer pending."

        rig.llm.script(Text("Hello, Eve."))
        rig.tg.send_text(STRANGER, "hello")
        await rig.tg.wait_for(lambda: "Hello, Eve." in stranger_texts(rig))
        assert rig.llm.calls == 1

    # the restarted bot polls past the stored offset: this Telegram numbers its updates beyond it
    async with FakeTelegram(first_update_id=800_000_001) as tg, FakeOpenAI(models=("main-model",)) as llm:
        tg.add_chat(ALLOWED_USER)
        bot = compose(make_settings(tmp_path, llm.base_url, tg.root, **PAIRING))
        await bot.start()
        try:
            llm.script(Text("Welcome back."))
            tg.send_text(STRANGER, "still there?")
            await tg.wait_for(lambda: "Welcome back." in [m.visible_text for m in tg.messages(STRANGER)])
            assert tg.messages(ALLOWED_USER) == []  # nobody asked the owner again
        finally:
            await bot.stop()


async def test_owner_denies_a_stranger_who_is_refused_from_then_on(tmp_path: Path) -> None:
    async with running_bot(tmp_path, known_chats=(ALLOWED_USER,), **PAIRING) as rig:
        rig.tg.send_text(STRANGER, "let me in", language_code="ru")
        request = await owner_request(rig)
        rig.tg.press_button_labeled(ALLOWED_USER, request.message_id, "❌ Deny")
        await rig.tg.wait_for(lambda: len(stranger_texts(rig)) == 2)
        assert stranger_texts(rig)[1] == "Владелец отклонил ваш запрос."
        assert rig.tg.callback_answers[-1].text == "❌ Rejected"
        decided = rig.tg.message(ALLOWED_USER, request.message_id)
        assert decided.visible_text == f"❌ User {STRANGER} (Ann) was refused."

        rig.tg.send_text(STRANGER, "please?")
        await settle(rig)
        assert len(stranger_texts(rig)) == 2
        assert [m.message_id for m in rig.chat() if str(STRANGER) in m.visible_text] == [request.message_id]
        assert rig.llm.calls == 0


async def test_stranger_gets_the_plain_refusal_when_the_owner_cannot_be_asked(tmp_path: Path) -> None:
    async with running_bot(tmp_path, **PAIRING) as rig:  # the owner never wrote to the bot
        rig.tg.send_text(STRANGER, "hi")
        await rig.tg.wait_for(lambda: len(stranger_texts(rig)) == 1)
        assert stranger_texts(rig) == [f"This is a private bot. Your Telegram user id is {STRANGER}."]
        assert rig.llm.calls == 0
