"""Telegram adapter rules: plain-text fallback, groups, edits, locales, command menu, /new."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Text


async def test_rejected_entities_are_resent_as_plain_text(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rejected = "Bad Request: can't parse entities: Unsupported start tag"
        rig.tg.fail_next("sendMessage", status=400, description=rejected, times=1)
        rig.tg.fail_next("editMessageText", status=400, description=rejected, times=1)
        rig.llm.script(Text("**bold** and `code`", chunk_size=100))
        rig.say("hi")
        await rig.wait_turns()
        message = rig.chat()[-1]
        assert message.visible_text == "bold and code"
        assert message.parse_mode is None


async def test_group_chat_is_told_once_and_ignored(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.send_text(ALLOWED_USER, "hello group", chat_id=-100500, chat_type="supergroup")
        rig.tg.send_text(ALLOWED_USER, "again", chat_id=-100500, chat_type="supergroup")
        rig.say("/help")
        await rig.wait_text("/stop")
        await rig.tg.wait_for(lambda: len(rig.tg.messages(-100500)) >= 1)
        assert len(rig.tg.messages(-100500)) == 1
        assert rig.llm.calls == 0


async def test_edited_messages_are_ignored(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("first answer"))
        rig.say("hello")
        await rig.wait_turns()
        user_message_id = rig.chat()[-1].message_id - 1
        rig.tg.send_edited_text(ALLOWED_USER, user_message_id, "hello, edited")
        rig.say("/help")
        await rig.wait_text("/stop")
        assert rig.llm.calls == 1


async def test_russian_user_gets_russian_strings(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/frobnicate", language_code="ru")
        await rig.tg.wait_for(lambda: bool(rig.chat()))
        assert any("\u0430" <= ch <= "\u044f" for ch in rig.chat()[-1].visible_text)


async def test_command_menu_is_registered_once_per_language(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        default, russian = dict(rig.tg.my_commands()), dict(rig.tg.my_commands(language_code="ru"))
        assert {"new", "stop", "help", "approvals"} <= set(default) and set(russian) == set(default)
        assert default["new"] == "Start a fresh conversation"
        assert russian["new"] == "Начать разговор заново"
        assert len(rig.tg.calls("setMyCommands")) == 2


async def test_new_starts_a_fresh_conversation(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("noted your name"), Text("who are you?"))
        rig.say("my name is Ann")
        await rig.wait_turns()
        rig.say("/new")
        await rig.wait_text("Fresh conversation")
        rig.say("what is my name?")
        await rig.wait_turns(2)
        last = rig.llm.requests[-1]["messages"]
        assert [m["role"] for m in last] == ["system", "user", "system"]
        assert "Ann" not in last[1]["content"]
