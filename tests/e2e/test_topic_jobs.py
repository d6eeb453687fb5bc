"""Cron jobs made in a forum topic (issue 28): ``/cron add`` typed in a topic, or ``schedule_job``
called by the agent there, makes a job of that topic; its runs' report, and the approval prompts
of a job that asks, show in that topic and nothing of it lands in General. Both drivers run these
(the suite's driver parameter); the fake Bot API keeps every message's thread. A run is started
with the ▶️ button of the job's ``/cron`` card, as ``test_schedule`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Call, Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

FORUM = -1001234567890
TELEGRAM: dict[str, Any] = {"groups": {"allowed_chat_ids": [FORUM]}}


def _in(rig: Rig, thread: int | None) -> list[str]:
    """The visible texts of the bot's messages in one topic (None: General)."""
    return [m.visible_text for m in rig.tg.messages_in(FORUM, thread)]


def _forum(rig: Rig) -> tuple[int, int]:
    rig.tg.add_group(FORUM, title="Team", forum=True)
    return rig.tg.add_topic(FORUM, "Ideas"), rig.tg.add_topic(FORUM, "Bugs")


async def _card(rig: Rig, thread: int, title: str) -> SentMessage:
    """``/cron`` typed in the topic; the job's card (the message with buttons) once it shows."""
    rig.tg.send_text(ALLOWED_USER, "/cron", chat_id=FORUM, thread_id=thread)

    def cards() -> list[SentMessage]:
        return [m for m in rig.tg.messages_in(FORUM, thread) if title in m.visible_text and m.buttons]

    await rig.tg.wait_for(lambda: bool(cards()))
    return cards()[-1]


def _tap(rig: Rig, message: SentMessage, label: str) -> None:
    rig.tg.press_button(ALLOWED_USER, message.message_id, message.button_data(label), chat_id=FORUM)


async def test_a_job_added_in_a_topic_reports_in_that_topic(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        rig.tg.send_text(ALLOWED_USER, "/cron add every 2h sum up the ideas", chat_id=FORUM, thread_id=ideas)
        await rig.tg.wait_for(lambda: any("Scheduled “" in text for text in _in(rig, ideas)))
        [job] = await rig.bot.runtime.parts.scheduler.list_jobs(FORUM)
        assert job.thread_id == ideas

        rig.llm.script(Text("Three new ideas today."))
        _tap(rig, await _card(rig, ideas, "sum up the ideas"), "▶️ Run now")
        await rig.tg.wait_for(lambda: any("Three new ideas today." in text for text in _in(rig, ideas)))
        await rig.bot.delivery.idle()
        [report] = [text for text in _in(rig, ideas) if "Three new ideas today." in text]
        assert "⏰ sum up the ideas" in report
        assert _in(rig, None) == [], "nothing of the topic's job lands in General"
        assert _in(rig, bugs) == []


async def test_a_job_the_agent_schedules_in_a_topic_asks_and_reports_there(tmp_path: Path) -> None:
    async with running_bot(tmp_path, telegram=TELEGRAM) as rig:
        ideas, bugs = _forum(rig)
        job = {"title": "Disk check", "schedule": "every 1h", "prompt": "Check the disk.", "approvals": "ask"}
        rig.llm.script(ToolCalls([Call("schedule_job", job)]), Text("Scheduled."))
        rig.tg.send_text(ALLOWED_USER, "check the disk hourly", chat_id=FORUM, thread_id=ideas, mention=True)
        await rig.wait_turns()
        [stored] = await rig.bot.runtime.parts.scheduler.list_jobs(FORUM)
        assert stored.thread_id == ideas, "the tool gives the job the session's topic"

        rig.llm.script(
            ToolCalls([Call("execute_cmd", {"command": "echo checked >> disk.txt"})]), Text("Disk fine.")
        )
        _tap(rig, await _card(rig, ideas, "Disk check"), "▶️ Run now")
        await rig.tg.wait_for(lambda: any("Approval needed" in text for text in _in(rig, ideas)))
        prompt = next(m for m in rig.tg.messages_in(FORUM, ideas) if "Approval needed" in m.visible_text)
        _tap(rig, prompt, "✅ Approve")
        await rig.tg.wait_for(lambda: any("Disk fine." in text for text in _in(rig, ideas)))
        await rig.bot.delivery.idle()
        assert (rig.workdir / "disk.txt").read_text() == "checked\n"
        assert _in(rig, None) == [], "neither the prompt nor the report lands in General"
        assert _in(rig, bugs) == []
