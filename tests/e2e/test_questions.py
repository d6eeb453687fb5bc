"""Clarifying questions and the todo list end to end: real python-telegram-bot and openai SDK
between the two fakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import tap, tool_results, user_texts
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

QUESTION: dict[str, Any] = {"question": "Which database?", "options": ["prod", "staging"]}
ASK = ToolCalls([("ask_user_clarification", QUESTION)])


async def wait_question(rig: Rig) -> SentMessage:
    question = await rig.wait_text("Which database?")
    await rig.tg.wait_for(lambda: rig.bot.runtime.parts.questions.pending_in(1) is not None)
    return question


async def test_a_tapped_option_answers_and_the_buttons_go(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(ASK, Text("Using staging."))
        rig.say("check the db")
        question = await wait_question(rig)
        assert [label for row in question.buttons for label, _ in row] == ["prod", "staging"]
        tap(rig, question, "staging")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["staging"]
        shown = rig.tg.message(ALLOWED_USER, question.message_id)
        assert shown.visible_text.endswith("✅ staging") and shown.buttons == []
        assert rig.tg.callback_answers[0].text == "✅ Answered"


async def test_text_sent_while_a_question_is_pending_is_its_answer(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(ASK, Text("OK, the replica."))
        rig.say("check the db")
        question = await wait_question(rig)
        rig.say("the read replica")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["the read replica"]
        assert user_texts(rig.llm.requests[1]) == ["check the db"]
        shown = rig.tg.message(ALLOWED_USER, question.message_id)
        assert shown.visible_text.endswith("✅ the read replica") and shown.buttons == []


async def test_stop_marks_the_question_cancelled(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(ASK)
        rig.say("check the db")
        question = await wait_question(rig)
        rig.say("/stop")
        await rig.wait_turns()
        await rig.tg.wait_for(
            lambda: rig.tg.message(ALLOWED_USER, question.message_id).visible_text.endswith("⏹ Cancelled")
        )


async def test_the_todo_list_is_one_message_edited_in_place(tmp_path: Path) -> None:
    first: dict[str, Any] = {
        "items": [{"text": "read the logs", "status": "in_progress"}, {"text": "fix it", "status": "pending"}]
    }
    second: dict[str, Any] = {
        "items": [{"text": "read the logs", "status": "done"}, {"text": "fix it", "status": "in_progress"}]
    }
    async with running_bot(tmp_path) as rig:
        rig.llm.script(
            ToolCalls([("write_todos", first)]),
            ToolCalls([("write_todos", second)]),
            Text("Fixing."),
        )
        rig.say("fix the bug")
        await rig.wait_turns()
        lists = [m for m in rig.chat() if "📋" in m.visible_text]
        assert len(lists) == 1
        assert "✅ read the logs" in lists[0].visible_text and "🔄 fix it" in lists[0].visible_text
        rig.say("/todos")
        await rig.wait_text("✅ read the logs\n🔄 fix it")
        await rig.tg.wait_for(lambda: len([m for m in rig.chat() if "📋" in m.visible_text]) == 2)
