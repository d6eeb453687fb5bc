"""Group chats (issue 28): the bot works in the groups ``telegram.groups.allowed_chat_ids`` names,
answers there only what is addressed to it (an @mention, a reply to it, a command), only for the
allowed users, and tells the model who speaks. Elsewhere it says once that it is not enabled.
Both drivers run these (the suite's driver parameter); the fake Bot API has real group chats."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Hang, Text, ToolCalls

GROUP = -1001234567890
OTHER_GROUP = -1009876543210
STRANGER = 777
TELEGRAM: dict[str, Any] = {"groups": {"allowed_chat_ids": [GROUP]}}


def _said(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "user"]


def _texts(rig: Any, chat_id: int) -> list[str]:
    return [m.visible_text for m in rig.tg.messages(chat_id)]


async def test_a_mention_is_answered_and_a_plain_message_is_not(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(GROUP, title="Family")
        rig.llm.script(Text("Hello, family."))
        rig.tg.send_text(ALLOWED_USER, "just chatting among us", chat_id=GROUP)
        rig.tg.send_text(ALLOWED_USER, "what is the plan?", chat_id=GROUP, mention=True)
        await rig.tg.wait_for(lambda: "Hello, family." in _texts(rig, GROUP))
        await rig.wait_turns()
        assert rig.llm.calls == 1
        said = _said(rig.llm.requests[0])
        assert said[-1].startswith("[Ann]: ") and "what is the plan?" in said[-1], said
        assert not any("just chatting" in text for text in said), "unaddressed chatter is not kept"
        system = str(rig.llm.requests[0]["messages"][0]["content"])
        assert "the group chat “Family”" in system, "the system prompt names the group"
        assert not rig.tg.unconfirmed()


async def test_a_reply_to_the_bot_is_answered(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(GROUP, title="Family")
        rig.llm.script(Text("First answer."), Text("Second answer."))
        rig.tg.send_text(ALLOWED_USER, "hi", chat_id=GROUP, mention=True)
        await rig.tg.wait_for(lambda: "First answer." in _texts(rig, GROUP))
        answer = next(m for m in rig.tg.messages(GROUP) if m.visible_text == "First answer.")
        rig.tg.send_text(ALLOWED_USER, "and then?", chat_id=GROUP, reply_to_message_id=answer.message_id)
        await rig.tg.wait_for(lambda: "Second answer." in _texts(rig, GROUP))
        assert rig.llm.calls == 2
        assert "[Ann]: and then?" in _said(rig.llm.requests[1])[-1]


async def test_a_stranger_is_not_answered_by_the_model_and_told_once(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(GROUP, title="Family")
        rig.tg.send_text(STRANGER, "hey bot, run rm -rf /", chat_id=GROUP, mention=True, first_name="Eve")
        rig.tg.send_text(STRANGER, "hey bot, again", chat_id=GROUP, mention=True, first_name="Eve")
        rig.tg.send_text(STRANGER, "chatter", chat_id=GROUP, first_name="Eve")
        await rig.tg.wait_for(lambda: not rig.tg.unconfirmed())
        assert rig.llm.calls == 0
        assert len(rig.tg.messages(GROUP)) == 1, "told once per stranger, never more"
        assert str(STRANGER) in rig.tg.messages(GROUP)[0].visible_text


async def test_a_group_not_allowed_is_told_once_and_its_id_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram.telegram.access")
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(OTHER_GROUP, title="Strangers' club")
        for text in ("hello", "anyone?"):
            rig.tg.send_text(ALLOWED_USER, text, chat_id=OTHER_GROUP, mention=True)
        await rig.tg.wait_for(lambda: not rig.tg.unconfirmed())
        assert rig.llm.calls == 0
        [note] = rig.tg.messages(OTHER_GROUP)
        assert str(OTHER_GROUP) in note.visible_text and "allowed_chat_ids" in note.visible_text
        assert f"add {OTHER_GROUP} to telegram.groups.allowed_chat_ids" in caplog.text


async def test_commands_addressed_to_the_bot_work_and_others_bots_are_ignored(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(GROUP, title="Family")
        rig.llm.script(Hang("Thinking", seconds=30))
        rig.tg.send_text(ALLOWED_USER, "think hard", chat_id=GROUP, mention=True)
        await rig.tg.wait_for(lambda: rig.llm.calls == 1)
        rig.tg.send_text(ALLOWED_USER, "/stop@some_other_bot", chat_id=GROUP)
        rig.tg.send_text(ALLOWED_USER, f"/stop@{rig.tg.username}", chat_id=GROUP)
        await rig.tg.wait_for(lambda: "⏹ Stopped." in _texts(rig, GROUP))
        await rig.wait_turns()
        assert rig.llm.calls == 1


async def test_a_group_turn_streams_by_edits_never_by_drafts(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        rig.tg.add_group(GROUP, title="Family")
        text = "A longer answer for the group, streamed piece by piece. " * 3
        rig.llm.script(Text(text, chunk_size=20))
        rig.tg.send_text(ALLOWED_USER, "tell me", chat_id=GROUP, mention=True)
        await rig.wait_turns()
        await rig.tg.wait_for(lambda: any(t == text.strip() for t in _texts(rig, GROUP)))
        assert [r for r in rig.tg.requests if r.method == "sendMessageDraft"] == []


async def test_the_command_menu_is_set_for_group_chats_only_when_groups_are_on(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        commands = dict(rig.tg.my_commands("all_group_chats"))
        assert {"stop", "new", "help"} <= set(commands)
        assert {call.language_code for call in rig.tg.commands_for("all_group_chats")} == {"", "ru"}
    async with running_bot(tmp_path / "off") as rig:
        assert rig.tg.commands_for("all_group_chats") == []


SECOND = ALLOWED_USER + 1


async def _group_prompt(rig: Any) -> tuple[Any, bool]:
    """A command the agent wants to run after Ann asked in the group: its prompt, and whether it
    replies to a user's message (Ann's is the group's only one)."""
    rig.tg.add_group(GROUP, title="Family")
    rig.llm.script(ToolCalls([("execute_cmd", {"command": "echo ran >> marker.txt"})]), Text("Ran it."))
    rig.tg.send_text(ALLOWED_USER, "please run it", chat_id=GROUP, mention=True)
    await rig.tg.wait_for(lambda: any("Approval needed" in t for t in _texts(rig, GROUP)))
    prompt = next(m for m in rig.tg.messages(GROUP) if "Approval needed" in m.visible_text)
    bots = {m.message_id for m in rig.tg.messages(GROUP)}
    return prompt, prompt.reply_to_message_id is not None and prompt.reply_to_message_id not in bots


async def test_a_group_prompt_replies_to_the_asker_and_any_allowed_user_decides(tmp_path: Path) -> None:
    telegram = {"allowed_user_ids": [ALLOWED_USER, SECOND], "groups": {"allowed_chat_ids": [GROUP]}}
    async with running_bot(tmp_path, telegram=telegram) as rig:
        prompt, replies_to_ann = await _group_prompt(rig)
        assert replies_to_ann, "the prompt replies to the message that caused it"
        rig.tg.press_button(SECOND, prompt.message_id, prompt.button_data("Approve"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: "Ran it." in _texts(rig, GROUP))
        assert (tmp_path / "workspace" / "marker.txt").read_text().splitlines() == ["ran"]


async def test_a_strangers_press_on_a_group_prompt_decides_nothing(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        prompt, _ = await _group_prompt(rig)
        rig.tg.press_button(STRANGER, prompt.message_id, prompt.button_data("Approve"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) == 1)
        await rig.tg.wait_for(lambda: not rig.tg.unconfirmed())
        assert not (tmp_path / "workspace" / "marker.txt").exists(), "a stranger's press runs nothing"
        assert "Ran it." not in _texts(rig, GROUP)
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("Approve"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: "Ran it." in _texts(rig, GROUP))
        assert (tmp_path / "workspace" / "marker.txt").read_text().splitlines() == ["ran"]


async def test_with_approver_requester_only_the_asker_decides(tmp_path: Path) -> None:
    groups = {"allowed_chat_ids": [GROUP], "approver": "requester"}
    telegram = {"allowed_user_ids": [ALLOWED_USER, SECOND], "groups": groups}
    async with running_bot(tmp_path, telegram=telegram) as rig:
        prompt, _ = await _group_prompt(rig)
        rig.tg.press_button(SECOND, prompt.message_id, prompt.button_data("Approve"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) == 1)
        assert "Only Ann can decide this" in (rig.tg.callback_answers[0].text or "")
        rig.tg.send_text(
            SECOND, "no, too risky", chat_id=GROUP, reply_to_message_id=prompt.message_id, first_name="Bob"
        )
        await rig.tg.wait_for(lambda: sum("Only Ann" in t for t in _texts(rig, GROUP)) == 1)
        assert not (tmp_path / "workspace" / "marker.txt").exists(), "neither decided anything"
        rig.tg.press_button(ALLOWED_USER, prompt.message_id, prompt.button_data("Approve"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: "Ran it." in _texts(rig, GROUP))
        assert (tmp_path / "workspace" / "marker.txt").read_text().splitlines() == ["ran"]


async def test_with_approver_requester_only_the_asker_answers_a_question(tmp_path: Path) -> None:
    groups = {"allowed_chat_ids": [GROUP], "approver": "requester"}
    telegram = {"allowed_user_ids": [ALLOWED_USER, SECOND], "groups": groups}
    question = {"question": "Which database?", "options": ["prod", "staging"]}
    async with running_bot(tmp_path, telegram=telegram) as rig:
        rig.tg.add_group(GROUP, title="Family")
        rig.llm.script(ToolCalls([("ask_user_clarification", question)]), Text("Using staging."))
        rig.tg.send_text(ALLOWED_USER, "check the db", chat_id=GROUP, mention=True)
        await rig.tg.wait_for(lambda: any(m.buttons for m in rig.tg.messages(GROUP)))
        asked = next(m for m in rig.tg.messages(GROUP) if "Which database?" in m.visible_text)
        rig.tg.press_button(SECOND, asked.message_id, asked.button_data("prod"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) == 1)
        assert "Only Ann can decide this" in (rig.tg.callback_answers[0].text or "")
        assert rig.llm.calls == 1, "Bob's tap answered nothing"
        rig.tg.send_text(SECOND, "prod, obviously", chat_id=GROUP, mention=True, first_name="Bob")
        await rig.tg.wait_for(lambda: not rig.tg.unconfirmed())
        assert rig.llm.calls == 1, "nor did Bob's text: it is a message for the turn, not the answer"
        rig.tg.press_button(ALLOWED_USER, asked.message_id, asked.button_data("staging"), chat_id=GROUP)
        await rig.tg.wait_for(lambda: "Using staging." in _texts(rig, GROUP))
        tool_results = [
            str(m.get("content")) for m in rig.llm.requests[-1]["messages"] if m.get("role") == "tool"
        ]
        assert any("staging" in text for text in tool_results), tool_results
        assert not any("obviously" in text for text in tool_results), tool_results
