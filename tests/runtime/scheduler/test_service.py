"""The scheduler service wired into a real runtime, with the scheduler's clock faked.

APScheduler keeps real time; every fake instant here lies days in the real
future, so nothing fires on its own and each step is driven by a call.
Reports are read off the runtime's event bus and worded as the Telegram
adapter words them (:mod:`bot.telegram.reports`); the model is the fake server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agentgram.bot.telegram.views.reports import report_markdown, report_title
from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.events import CronResult, Digest, LocaleText, ModelText, Report
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.models import JobRun, JobRunStatus, TicRun, TicRunStatus
from agentgram.runtime.scheduler.tic import Run, SkipNothingToDo, SkipQuiet
from agentgram.runtime.scheduler.values import JobSpec
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.runtime.core.turn.harness import Recorder

BERLIN = ZoneInfo("Europe/Berlin")
NIGHT = {"range": "23:00-07:00"}


def berlin(days_ahead: int, at: time) -> datetime:
    """A wall time in Berlin ``days_ahead`` days from today, as UTC (always in the real future)."""
    day = datetime.now(BERLIN).date() + timedelta(days=days_ahead)
    return datetime.combine(day, at, tzinfo=BERLIN).astimezone(UTC)


@asynccontextmanager
async def runtime_at(
    tmp_path: Path, llm: FakeOpenAI, clock: FakeClock, **sections: Any
) -> AsyncIterator[tuple[Runtime, Recorder, list[JobRun], list[TicRun]]]:
    runtime = Runtime(
        make_settings(tmp_path, llm.base_url, **sections),
        format_rules="",
        home_chat_id=ALLOWED_USER,
        clock=clock,
    )
    recorder = Recorder()
    runs: list[JobRun] = []
    tics: list[TicRun] = []
    runtime.parts.bus.subscribe(recorder)
    runtime.parts.scheduler.run_listeners.append(lambda run: _note(recorder, runs, run))
    runtime.parts.scheduler.tic_listeners.append(lambda tic: _note(recorder, tics, tic))
    await runtime.start()
    try:
        yield runtime, recorder, runs, tics
    finally:
        await runtime.close()


def _note(recorder: Recorder, into: list[Any], item: Any) -> None:
    """Keep a scheduler listener's item and wake the recorder's waiters."""
    into.append(item)
    recorder.changed.set()


def reports(recorder: Recorder) -> list[Report]:
    return [e for e in recorder.events if isinstance(e, Report)]


def shown(report: Report) -> tuple[str, str]:
    """The report's title and Markdown body as the chat is told them (English by default)."""
    t, language = Translator(default="en"), report.to.language
    return report_title(t, language, report.content), report_markdown(t, language, report.content)


async def test_missed_runs_are_recorded_or_coalesced_into_one_on_start(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    start = berlin(30, time(12, 0))
    clock = FakeClock(start)
    async with runtime_at(tmp_path, fake_llm, clock) as (runtime, _, _, _):
        job = await runtime.parts.scheduler.add_job(
            JobSpec(title="Backup", schedule="every 3h", prompt="Check the backup.", chat_id=ALLOWED_USER)
        )
    job_id = job.id or 0
    clock.set(start + timedelta(hours=5))  # the 15:00 run is 2 h late: past the 1 h grace
    async with runtime_at(tmp_path, fake_llm, clock) as (runtime, _, _, _):
        history = await runtime.parts.scheduler.jobs.runs(job_id)
        assert [(r.status, r.scheduled_for) for r in history] == [
            (JobRunStatus.MISSED, start + timedelta(hours=3))
        ]
        assert fake_llm.calls == 0
    clock.set(start + timedelta(hours=9, minutes=30))  # 18:00 and 21:00 missed; 21:00 is recent
    fake_llm.script(Text("Backup is fine."))
    async with runtime_at(tmp_path, fake_llm, clock) as (runtime, recorder, runs, _):
        await recorder.wait_for(lambda: bool(runs))
        assert [(r.status, r.scheduled_for) for r in runs] == [
            (JobRunStatus.SUCCESS, start + timedelta(hours=9))
        ]
        assert fake_llm.calls == 1, "two missed fire times, one run"
        assert [r.content for r in reports(recorder)] == [
            CronResult(title="Backup", body=ModelText(text="Backup is fine."))
        ]
        assert [shown(r)[1] for r in reports(recorder)] == ["Backup is fine."]
        job = await runtime.parts.scheduler.job(job_id)
        assert job.next_run == start + timedelta(hours=12)


async def test_results_are_held_in_quiet_hours_and_sent_as_one_digest(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    clock = FakeClock(berlin(30, time(1, 0)))
    quiet = {**NIGHT, "hold": True}
    async with runtime_at(tmp_path, fake_llm, clock, quiet_hours=quiet) as (runtime, recorder, runs, _):
        scheduler = runtime.parts.scheduler
        inbox = await scheduler.add_job(
            JobSpec(title="Inbox", schedule="every 2h", prompt="inbox", chat_id=ALLOWED_USER)
        )
        news = await scheduler.add_job(
            JobSpec(title="News", schedule="every 2h", prompt="news", chat_id=ALLOWED_USER)
        )
        fake_llm.script(Text("2 new mails."), Text("Nothing new."))
        assert await scheduler.run_now(inbox.id or 0)
        await recorder.wait_for(lambda: len(runs) == 1)
        assert await scheduler.run_now(news.id or 0)
        await recorder.wait_for(lambda: len(runs) == 2)
        assert reports(recorder) == []
        assert len(await scheduler.held.all()) == 2
        assert await scheduler.flush_held() == 0, "still quiet: keep holding"

        clock.set(berlin(30, time(7, 0)))
        assert await scheduler.flush_held() == 2
        [digest] = reports(recorder)
        assert isinstance(digest.content, Digest) and len(digest.content.items) == 2
        title, text = shown(digest)
        assert title == "🌙 While you were away (2)" and not digest.silent
        assert text == "**⏰ Inbox**\n2 new mails.\n\n**⏰ News**\nNothing new."
        assert await scheduler.held.all() == []


async def test_results_in_quiet_hours_without_hold_are_silent(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    clock = FakeClock(berlin(30, time(23, 30)))
    async with runtime_at(tmp_path, fake_llm, clock, quiet_hours=NIGHT) as (runtime, recorder, _, _):
        job = await runtime.parts.scheduler.add_job(
            JobSpec(title="Inbox", schedule="every 2h", prompt="inbox", chat_id=ALLOWED_USER)
        )
        fake_llm.script(Text(""))
        await runtime.parts.scheduler.run_now(job.id or 0)
        await recorder.wait_for(lambda: bool(reports(recorder)))
        [report] = reports(recorder)
        assert report.content == CronResult(title="Inbox", body=LocaleText(key="cron-no-output"))
        assert report.silent and shown(report) == ("⏰ Inbox", "(no output)")


async def test_failed_run_is_reported_briefly(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with runtime_at(tmp_path, fake_llm, FakeClock(berlin(30, time(12, 0)))) as (
        runtime,
        recorder,
        runs,
        _,
    ):
        job = await runtime.parts.scheduler.add_job(
            JobSpec(title="Inbox", schedule="every 2h", prompt="inbox", chat_id=ALLOWED_USER)
        )
        await runtime.parts.scheduler.run_now(job.id or 0)  # nothing scripted: the model endpoint fails
        await recorder.wait_for(lambda: bool(runs))
        assert runs[0].status == JobRunStatus.FAILED and runs[0].error
        [report] = reports(recorder)
        title, text = shown(report)
        assert title == "⏰ Inbox"  # the kind's text; the endpoint's words stay in the log
        assert text == "⚠️ The model is not answering (HTTP 500) — send your message again in a moment."


async def test_tic_never_runs_in_quiet_hours_but_tic_now_does(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "TIC.md").write_text("- anything urgent?\n")
    clock = FakeClock(berlin(30, time(2, 0)))
    async with runtime_at(tmp_path, fake_llm, clock, quiet_hours=NIGHT) as (runtime, recorder, _, tics):
        decision = await runtime.parts.scheduler.tic()
        assert isinstance(decision, SkipQuiet) and decision.until == berlin(30, time(7, 0))
        assert [(t.status, t.reason) for t in tics] == [(TicRunStatus.SKIPPED, "quiet hours")]
        assert fake_llm.calls == 0
        fake_llm.script(Text("TIC_OK"))
        assert isinstance(await runtime.parts.scheduler.tic(manual=True), Run)
        await recorder.wait_for(lambda: len(tics) == 2)
        assert tics[-1].status == TicRunStatus.RAN and not tics[-1].delivered
        assert reports(recorder) == []


async def test_tic_reads_finished_cron_runs_once(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    clock = FakeClock(berlin(30, time(12, 0)))
    async with runtime_at(tmp_path, fake_llm, clock) as (runtime, recorder, runs, tics):
        scheduler = runtime.parts.scheduler
        job = await scheduler.add_job(
            JobSpec(title="Invoices", schedule="every 2h", prompt="x", chat_id=ALLOWED_USER)
        )
        assert isinstance(await scheduler.tic(), SkipNothingToDo)
        fake_llm.script(Text("3 new invoices."), Text("TIC_OK"))
        await scheduler.run_now(job.id or 0)
        await recorder.wait_for(lambda: bool(runs))
        clock.advance(timedelta(minutes=30))
        assert isinstance(await scheduler.tic(), Run)
        await recorder.wait_for(lambda: len(tics) == 2)
        [tic_input] = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]
        assert tic_input.startswith("[TIC] ") and "Since the last tic:" in tic_input
        assert "cron #1 “Invoices”: success — 3 new invoices." in tic_input
        clock.advance(timedelta(minutes=30))
        assert isinstance(await scheduler.tic(), SkipNothingToDo), "already told"
        assert fake_llm.calls == 2


async def test_a_cron_runs_slow_command_stays_attached_nobody_would_read_its_mail(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """Issue 14: only an interactive session's root agent detaches; a cron run's command is
    waited for until it ends, and its result is an ordinary one."""
    from agentgram.runtime.infra.events import CallDetached
    from tests.fakes.openai_server import Call, ToolCalls

    async with runtime_at(
        tmp_path,
        fake_llm,
        FakeClock(berlin(30, time(12, 0))),
        tools={"attach_seconds": 0.2},
        approval={"rules": [{"tool": "execute_cmd", "action": "allow"}]},
    ) as (runtime, recorder, runs, _):
        job = await runtime.parts.scheduler.add_job(
            JobSpec(title="Nightly", schedule="every 2h", prompt="run it", chat_id=ALLOWED_USER)
        )
        fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "sleep 1; echo nightly"})]), Text("ok"))
        await runtime.parts.scheduler.run_now(job.id or 0)
        await recorder.wait_for(lambda: bool(runs), timeout=10)
        assert runs[0].status == JobRunStatus.SUCCESS
        tool = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
        assert tool == ["nightly\nexit code: 0"]
        assert not [e for e in recorder.events if isinstance(e, CallDetached)]
