"""Tics and cron jobs end to end: real python-telegram-bot and openai SDK between the two fakes.

Tics run on a one-second interval here (``tic.interval`` is a plain duration,
so tests may go below the one-minute floor users get for ``every …``); cron
jobs are added by command or by the agent's tool and run with the ▶️ button.
Every wait is on something observable: a chat message, a model request, a
scheduler listener.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agentgram.runtime.infra.storage.models import Role
from agentgram.runtime.scheduler.jobs import INTERRUPTED
from agentgram.runtime.scheduler.models import JobRun, JobRunStatus, TicRun, TicRunStatus
from tests.conftest import ALLOWED_USER, also_on_postgres
from tests.e2e.harness import Rig, fakes, running_bot
from tests.fakes.openai_server import Hang, Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

TIC = {"enabled": True, "interval": 1}


def write_tic_md(tmp_path: Path, text: str) -> None:
    workdir = tmp_path / "workspace"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "TIC.md").write_text(text)


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def tics(rig: Rig) -> list[TicRun]:
    """Every tic decision that ended, in order (recorded by a scheduler listener)."""
    found: list[TicRun] = getattr(rig, "_tics", None) or []
    if not hasattr(rig, "_tics"):
        rig._tics = found  # type: ignore[attr-defined]
        rig.bot.runtime.parts.scheduler.tic_listeners.append(found.append)
    return found


def runs(rig: Rig) -> list[JobRun]:
    found: list[JobRun] = getattr(rig, "_runs", None) or []
    if not hasattr(rig, "_runs"):
        rig._runs = found  # type: ignore[attr-defined]
        rig.bot.runtime.parts.scheduler.run_listeners.append(found.append)
    return found


async def until(rig: Rig, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    await rig.tg.wait_for(predicate, timeout)


def job_message(rig: Rig, title: str) -> SentMessage:
    """The newest /cron list entry for the job titled ``title``."""
    return [m for m in rig.chat() if title in m.visible_text and m.buttons][-1]


def tap(rig: Rig, message: SentMessage, label: str) -> None:
    rig.tg.press_button(ALLOWED_USER, message.message_id, message.button_data(label))


async def listed(rig: Rig, title: str) -> SentMessage:
    """Wait for the /cron card of the job titled ``title`` (a card is the message with buttons)."""
    await until(rig, lambda: any(title in m.visible_text and m.buttons for m in rig.chat()))
    return job_message(rig, title)


def card(rig: Rig, message: SentMessage) -> SentMessage:
    """A job's card as it is now (cards are edited in place)."""
    return rig.tg.message(ALLOWED_USER, message.message_id)


async def toast(rig: Rig, count: int = 1) -> str | None:
    """The text of the ``count``-th button answer."""
    await until(rig, lambda: len(rig.tg.callback_answers) >= count)
    return rig.tg.callback_answers[count - 1].text


# --- tics -------------------------------------------------------------------------------------


async def test_tic_report_is_delivered_to_the_home_chat_and_remembered(tmp_path: Path) -> None:
    write_tic_md(tmp_path, "- check whether the nightly backup ran\n")
    async with running_bot(tmp_path, tic=TIC) as rig:
        rig.tg.add_chat(ALLOWED_USER)  # the user has talked to the bot before
        done = tics(rig)
        rig.llm.script(Text("The nightly backup did not run."))
        rig.llm.handler = lambda body: Text("TIC_OK")
        report = await rig.wait_text("The nightly backup did not run.")
        assert "🕰 Check-in" in report.visible_text
        first = user_texts(rig.llm.requests[0])[0]
        assert first.startswith("[TIC] ") and "Europe/Berlin" in first.splitlines()[0]
        assert "check whether the nightly backup ran" in first and "TIC_OK" in first
        await until(rig, lambda: any(t.delivered for t in done))
        runtime = rig.bot.runtime
        home = await runtime.parts.scheduler.home_session()
        rows = await runtime.parts.history.all_rows(home.session_id)
        assert [(r.role, r.content, r.is_synthetic) for r in rows] == [
            (Role.ASSISTANT, "The nightly backup did not run.", True)
        ]


async def test_tic_ok_is_not_delivered(tmp_path: Path) -> None:
    write_tic_md(tmp_path, "- anything new in the inbox?\n")
    async with running_bot(tmp_path, tic=TIC) as rig:
        rig.tg.add_chat(ALLOWED_USER)  # the user has talked to the bot before
        done = tics(rig)
        rig.llm.handler = lambda body: Text("TIC_OK")
        await until(rig, lambda: any(t.status == TicRunStatus.RAN for t in done))
        await rig.bot.delivery.idle()
        assert rig.llm.calls >= 1
        assert rig.chat() == []
        assert not any(t.delivered for t in done)


async def test_tic_with_nothing_to_do_makes_no_model_call(tmp_path: Path) -> None:
    write_tic_md(tmp_path, "# Checklist\n\n- [ ]\n<!-- nothing yet -->\n")
    async with running_bot(tmp_path, tic=TIC) as rig:
        rig.tg.add_chat(ALLOWED_USER)  # the user has talked to the bot before
        done = tics(rig)
        await until(rig, lambda: len(done) >= 2)
        assert {(t.status, t.reason) for t in done} == {(TicRunStatus.SKIPPED, "nothing to do")}
        assert rig.llm.calls == 0
        assert rig.chat() == []


async def test_approval_inside_a_tic_is_auto_denied_without_a_prompt(tmp_path: Path) -> None:
    write_tic_md(tmp_path, "- clean up old logs\n")
    async with running_bot(tmp_path, tic=TIC) as rig:
        rig.tg.add_chat(ALLOWED_USER)  # the user has talked to the bot before
        done = tics(rig)
        rig.llm.script(ToolCalls([("execute_cmd", {"command": "rm -rf logs"})]), Text("TIC_OK"))
        rig.llm.handler = lambda body: Text("TIC_OK")
        await until(rig, lambda: any(t.status == TicRunStatus.RAN for t in done))
        assert tool_results(rig.llm.requests[1]) == [
            "Tool call auto-denied: this session does not support approval requests."
        ]
        await rig.bot.delivery.idle()
        assert rig.chat() == [], "no approval prompt, no tool status line, no report"


async def test_tic_waits_for_the_users_turn_then_runs(tmp_path: Path) -> None:
    write_tic_md(tmp_path, "- water the plants\n")
    never = {"enabled": True, "cron": "0 4 29 2 *"}  # on, but no slot of its own comes during the test
    async with running_bot(tmp_path, tic=never) as rig:
        done = tics(rig)
        gate = asyncio.Event()

        async def replies(body: dict[str, Any]) -> Text:
            if user_texts(body)[0].startswith("[TIC]"):
                return Text("Water the plants today.")
            await gate.wait()
            return Text("Here is your answer.")

        rig.llm.handler = replies
        rig.say("a long question")
        await rig.llm.wait_for_requests(1)
        scheduler = rig.bot.runtime.parts.scheduler
        decision = await scheduler.tic()
        assert decision.kind == "defer_busy"
        assert [t.status for t in done] == [TicRunStatus.DEFERRED]
        assert rig.llm.calls == 1, "no tic model call while the user's turn runs"
        gate.set()
        report = await rig.wait_text("Water the plants today.")
        answer = await rig.wait_text("Here is your answer.")
        assert answer.message_id < report.message_id
        await until(rig, lambda: [t.status for t in done] == [TicRunStatus.DEFERRED, TicRunStatus.RAN])
        assert done[-1].delivered


async def test_tic_command_shows_status_and_switches(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/tic")
        status = await rig.wait_text("Check-ins:")
        assert "off" in status.visible_text and "Schedule: every 30 min" in status.visible_text
        rig.say("/tic every 45m")
        await rig.wait_text("I'll check in every 45 min.")
        rig.say("/tic every 10s")
        refused = await rig.wait_text("I can't set that interval")
        assert "every 10s is too often — the shortest interval is 1 min." in refused.visible_text
        rig.say("/tic on")
        await rig.wait_text("Check-ins are on.")
        rig.say("/tic now")
        await rig.wait_text("Nothing to check")
        rig.say("/tic")
        await rig.tg.wait_for(lambda: len([t for t in rig.texts() if "Check-ins:" in t]) == 2)
        status = [m for m in rig.chat() if "Check-ins:" in m.visible_text][-1].visible_text
        assert "on" in status and "every 45 min" in status and "skipped (nothing to do)" in status
        assert "(Europe/Berlin)" in status, "times carry their zone"
        assert rig.llm.calls == 0


# --- cron ------------------------------------------------------------------------------------


@also_on_postgres
async def test_cron_added_by_command_listed_run_paused_and_deleted(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        done = runs(rig)
        rig.say("/cron add every 1m check the weather in Berlin")
        added = await rig.wait_text("Scheduled “check the weather in Berlin” (1): every 1 min.")
        assert "Next run: " in added.visible_text and "(Europe/Berlin)." in added.visible_text
        rig.say("/cron")
        await rig.wait_text("Scheduled tasks")
        item = await listed(rig, "check the weather in Berlin")
        assert "every 1 min" in item.visible_text and "(Europe/Berlin)" in item.visible_text
        rig.llm.script(Text("Sunny, 21 °C."))
        tap(rig, item, "▶️ Run now")
        report = await rig.wait_text("Sunny, 21 °C.")
        assert "⏰ check the weather in Berlin" in report.visible_text
        assert await toast(rig) == "▶️ Running “check the weather in Berlin” now."
        framed = user_texts(rig.llm.requests[0])
        assert len(framed) == 1 and framed[0].startswith("[CRON] ")
        assert "Scheduled task “check the weather in Berlin” (cron #1, every 1m)" in framed[0]
        assert framed[0].endswith("Instruction:\ncheck the weather in Berlin")
        await until(rig, lambda: [r.status for r in done] == [JobRunStatus.SUCCESS])
        assert done[0].final_response == "Sunny, 21 °C."

        tap(rig, item, "⏸ Pause")
        await rig.tg.wait_for(lambda: "⏸" in rig.tg.message(ALLOWED_USER, item.message_id).visible_text)
        paused = rig.tg.message(ALLOWED_USER, item.message_id)
        assert paused.button_data("▶️ Resume") and "Paused." in paused.visible_text
        scheduler = rig.bot.runtime.parts.scheduler
        job = (await scheduler.list_jobs(ALLOWED_USER))[0]
        assert not job.enabled and job.next_run is None

        tap(rig, paused, "🗑 Delete")
        await rig.tg.wait_for(lambda: "Delete the task" in card(rig, item).visible_text)
        confirm = card(rig, item)
        assert "🗑 Delete the task “check the weather in Berlin” (1)? This can't be undone." in (
            confirm.visible_text
        )
        tap(rig, confirm, "✖️ Cancel")
        await rig.tg.wait_for(lambda: "Paused." in card(rig, item).visible_text)
        tap(rig, card(rig, item), "🗑 Delete")
        await rig.tg.wait_for(lambda: "Delete the task" in card(rig, item).visible_text)
        tap(rig, card(rig, item), "✅ Yes")
        await rig.tg.wait_for(lambda: card(rig, item).visible_text.startswith("🗑 Deleted"))
        assert card(rig, item).visible_text == "🗑 Deleted: check the weather in Berlin"
        assert card(rig, item).buttons == [], "a deleted job's card keeps no buttons"
        assert await scheduler.list_jobs(ALLOWED_USER) == []
        rig.say("/cron")
        await rig.wait_text("No scheduled tasks yet")


async def test_cron_job_killed_while_running(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        done = runs(rig)
        rig.say("/cron add in 20m call Anna about the tickets")
        await rig.wait_text("Scheduled “")
        rig.say("/cron")
        item = await listed(rig, "call Anna")
        rig.llm.script(Hang("Calling…", seconds=30))
        tap(rig, item, "▶️ Run now")
        await rig.llm.wait_for_requests(1)
        rig.say("/cron kill 1")
        await rig.wait_text("⏹ Stopped “call Anna about the tickets” (1).")
        await rig.llm.wait_stream_closed()
        await until(rig, lambda: [r.status for r in done] == [JobRunStatus.CANCELLED])
        await rig.bot.delivery.idle()
        assert not any("Calling" in t for t in rig.texts()), "a headless turn never streams into the chat"
        rig.say("/cron kill 1")
        await rig.wait_text("isn't running")


async def test_agent_schedules_a_job_with_its_tool(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        call = {"title": "Call Anna", "schedule": "in 20m", "prompt": "Remind the user to call Anna."}
        rig.llm.script(ToolCalls([("schedule_job", call)]), Text("I'll remind you in 20 minutes."))
        rig.say("remind me in 20 minutes to call Anna")
        await rig.wait_turns()
        result = tool_results(rig.llm.requests[1])[0]
        assert result.startswith("Scheduled #1 “Call Anna” — once at ")
        assert "Approval needed" not in " ".join(rig.texts()), "scheduling is allowed without asking"
        bad = {"title": "x", "schedule": "every blue moon", "prompt": "x"}
        rig.llm.script(ToolCalls([("schedule_job", bad)]), Text("That schedule didn't work."))
        rig.say("and every blue moon")
        await rig.wait_turns(2)
        assert "not a duration" in tool_results(rig.llm.requests[3])[-1]
        rig.say("/cron")
        item = await listed(rig, "Call Anna")
        assert "once, 20" in item.visible_text and "(Europe/Berlin)" in item.visible_text


async def test_bad_schedule_by_command_is_explained(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/cron add every 5s spam me")
        reply = await rig.wait_text("I can't schedule that")
        assert "every 5s is too often — the shortest interval is 1 min." in reply.visible_text
        assert await rig.bot.runtime.parts.scheduler.list_jobs(ALLOWED_USER) == []


async def test_cron_job_with_approvals_ask_prompts_in_its_chat(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        job = {"title": "Disk check", "schedule": "every 1h", "prompt": "Check the disk.", "approvals": "ask"}
        rig.llm.script(ToolCalls([("schedule_job", job)]), Text("Scheduled."))
        rig.say("check my disk every hour, ask me before running anything")
        await rig.wait_turns()
        rig.say("/cron")
        item = await listed(rig, "Disk check")
        rig.llm.script(
            ToolCalls([("execute_cmd", {"command": "echo checked >> disk.txt"})]), Text("Disk fine.")
        )
        tap(rig, item, "▶️ Run now")
        prompt = await rig.wait_text("Approval needed")
        tap(rig, prompt, "✅ Approve")
        report = await rig.wait_text("Disk fine.")
        assert "⏰ Disk check" in report.visible_text
        assert (rig.workdir / "disk.txt").read_text() == "checked\n"


async def test_cron_result_is_silent_during_quiet_hours(tmp_path: Path) -> None:
    now = datetime.now(ZoneInfo("Europe/Berlin"))
    quiet = f"{now - timedelta(hours=1):%H:%M}-{now + timedelta(hours=1):%H:%M}"
    async with running_bot(tmp_path, quiet_hours={"range": quiet}) as rig:
        rig.say("/cron add every 2h summarise the news")
        await rig.wait_text("Scheduled “")
        rig.say("/cron")
        item = await listed(rig, "summarise the news")
        rig.llm.script(Text("Quiet news day."))
        tap(rig, item, "▶️ Run now")
        report = await rig.wait_text("Quiet news day.")
        assert report.disable_notification
        assert not item.disable_notification, "only scheduled results are silenced"


async def test_run_interrupted_by_a_restart_is_failed_and_run_once_more(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/cron add every 1h nightly report")
        await rig.wait_text("Scheduled “")
        rig.say("/cron")
        item = await listed(rig, "nightly report")
        rig.llm.script(Hang("Working…", seconds=30))
        tap(rig, item, "▶️ Run now")
        await rig.llm.wait_for_requests(1)
    async with fakes() as second:
        second[1].script(Text("Report after the restart."))  # before the start, which runs it again
        async with running_bot(tmp_path, on=second, known_chats=(ALLOWED_USER,)) as rig:
            report = await rig.wait_text("Report after the restart.")
            assert "⏰ nightly report" in report.visible_text
            scheduler = rig.bot.runtime.parts.scheduler
            await until(rig, lambda: not scheduler.is_running(1))
            history = await scheduler.jobs.runs(1)
            assert [(r.status, r.error) for r in history] == [
                (JobRunStatus.SUCCESS, None),
                (JobRunStatus.FAILED, INTERRUPTED),
            ]
            await rig.bot.delivery.idle()
            assert rig.llm.calls == 1, "the interrupted turn itself is not resumed"


async def test_cron_add_without_arguments_shows_the_usage_with_examples(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/cron add")
        usage = await rig.wait_text("To schedule a task")
        assert "/cron add every 2h check the build" in usage.visible_text
        assert "/cron add at 18:30 remind me to call Anna" in usage.visible_text
        assert "don't understand" not in usage.visible_text
        assert await rig.bot.runtime.parts.scheduler.list_jobs(ALLOWED_USER) == []


async def test_finished_one_shot_is_shown_as_done_and_cannot_be_resumed(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        done = runs(rig)
        rig.say("/cron add in 20m remind me to call Anna")
        await rig.wait_text("Scheduled “")
        rig.say("/cron")
        item = await listed(rig, "remind me to call Anna")
        resume = item.button_data("⏸ Pause").replace(":cp:", ":cu:")  # what a stale card would carry
        rig.llm.script(Text("Time to call Anna!"))
        tap(rig, item, "▶️ Run now")
        await rig.wait_text("Time to call Anna!")
        framed = user_texts(rig.llm.requests[0])[0]
        assert "(cron #1, once at " in framed and "this is its only run" in framed
        assert "do not schedule, reschedule or change scheduled jobs" in framed
        await until(rig, lambda: [r.status for r in done] == [JobRunStatus.SUCCESS])

        rig.say("/cron")
        await rig.wait_text("Finished: no runs left.")
        finished = job_message(rig, "remind me to call Anna")
        assert finished.visible_text.startswith("✅ ") and "Finished: no runs left." in finished.visible_text
        assert [label for row in finished.buttons for label, _ in row] == ["▶️ Run now", "🗑 Delete"]

        rig.tg.press_button(ALLOWED_USER, finished.message_id, resume, require_button=False)
        assert await toast(rig, 2) == "“remind me to call Anna” has finished — there is nothing to resume."
        job = (await rig.bot.runtime.parts.scheduler.list_jobs(ALLOWED_USER))[0]
        assert not job.enabled


async def test_a_button_on_a_deleted_jobs_card_strips_the_card(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/cron add every 2h water the plants")
        await rig.wait_text("Scheduled “")
        rig.say("/cron")
        old = await rig.wait_text("water the plants · ")
        rig.say("/cron")
        await rig.tg.wait_for(
            lambda: len([m for m in rig.chat() if "water the plants · " in m.visible_text]) == 2
        )
        new = job_message(rig, "water the plants · ")
        tap(rig, new, "🗑 Delete")
        await rig.tg.wait_for(lambda: "Delete the task" in card(rig, new).visible_text)
        tap(rig, card(rig, new), "✅ Yes")
        assert await toast(rig, 2) == "🗑 “water the plants” deleted."
        tap(rig, old, "▶️ Run now")
        assert await toast(rig, 3) == "No such task."
        await rig.tg.wait_for(lambda: card(rig, old).visible_text == "🗑 Deleted")
        assert card(rig, old).buttons == []
        assert rig.llm.calls == 0
