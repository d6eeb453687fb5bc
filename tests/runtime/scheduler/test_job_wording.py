"""What a cron run is told (:func:`cron_input`), when a job is done, and schedule errors' keys.

Regression: a reminder job's prompt reached the model as bare text, so it read as a user
asking for a reminder and the model scheduled the job again at every run. Finished one-shots
were listed as paused with a ▶️ Resume that could not work. Schedule errors were English
text only, so a Russian user read English details.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentgram.runtime.core.turn.outcome import Exhausted, Failed, Final
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.commands import split_schedule
from agentgram.runtime.scheduler.cron_runner import cron_input
from agentgram.runtime.scheduler.jobs import JobFinished, JobStore, job_finished
from agentgram.runtime.scheduler.models import JobApprovals, JobRunStatus, ScheduledJob
from agentgram.runtime.scheduler.plan import Notice, run_result
from agentgram.runtime.scheduler.schedule import ScheduleError, Span, parse_schedule
from agentgram.runtime.scheduler.values import JobSpec
from tests.runtime.scheduler.conftest import BERLIN

NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # Friday 13:00 in Berlin


@pytest.fixture
def store(db: Database, clock: FakeClock) -> JobStore:
    return JobStore(db, clock, default_timezone="Europe/Berlin")


def job(schedule: str, *, approvals: JobApprovals = JobApprovals.DENY) -> ScheduledJob:
    return ScheduledJob(
        id=3,
        title="Call Anna",
        schedule=schedule,
        kind="",
        timezone="Europe/Berlin",
        prompt="Remind the user to call Anna.",
        chat_id=1,
        approvals=approvals,
        anchor_at=NOW,
    )


# --- cron_input ----------------------------------------------------------------------------


def test_a_cron_prompt_is_framed_as_a_scheduled_run() -> None:
    text = cron_input(job("every 2h"), NOW + timedelta(hours=2))
    header, frame, _, instruction, prompt = text.split("\n")
    assert header == "[CRON] 2026-03-27T15:00:00+01:00 Europe/Berlin"
    assert frame.startswith("Scheduled task “Call Anna” (cron #3, every 2h): a scheduled run of a task")
    assert "not a new message from the user" in frame
    assert "it runs again by itself at its next time: do not schedule, reschedule or change" in frame
    assert "actions that need approval will be denied" in frame
    assert (instruction, prompt) == ("Instruction:", "Remind the user to call Anna.")


def test_a_one_shot_is_told_it_is_its_only_run() -> None:
    text = cron_input(job("at 2026-03-27 18:30"), NOW)
    assert "(cron #3, once at 2026-03-27 18:30 CET)" in text
    assert "this is its only run" in text and "runs again" not in text


def test_a_manual_run_and_approvals_ask_are_said() -> None:
    text = cron_input(job("every 1h", approvals=JobApprovals.ASK), NOW, manual=True)
    assert "started by hand from /cron" in text
    assert "actions that need approval are asked of the user in this chat" in text


# --- done jobs -------------------------------------------------------------------------------


async def test_a_one_shot_that_ran_is_finished_and_cannot_be_resumed(
    store: JobStore, clock: FakeClock
) -> None:
    once = await store.add(JobSpec(title="Anna", schedule="in 20m", prompt="call Anna", chat_id=1))
    hourly = await store.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    assert once.id is not None and hourly.id is not None
    assert not job_finished(once, clock.now())
    run = await store.start_run(once.id)  # "Run now": a one-shot is used up by any run
    assert run is not None and run.id is not None
    await store.finish_run(run.id, JobRunStatus.SUCCESS, final_response="Call Anna!")
    done = await store.get(once.id)
    assert done is not None and not done.enabled and job_finished(done, clock.now())
    with pytest.raises(JobFinished, match="has no runs left"):
        await store.set_enabled(once.id, True)
    assert not (await store.get(once.id) or done).enabled

    paused = await store.set_enabled(hourly.id, False)
    assert not job_finished(paused, clock.now()), "a paused recurring job is paused, not done"
    assert (await store.set_enabled(hourly.id, True)).enabled


async def test_a_one_shot_whose_time_passed_while_paused_is_finished(
    store: JobStore, clock: FakeClock
) -> None:
    once = await store.add(JobSpec(title="Anna", schedule="in 20m", prompt="call Anna", chat_id=1))
    assert once.id is not None
    paused = await store.set_enabled(once.id, False)
    assert not job_finished(paused, clock.now())
    clock.advance(timedelta(minutes=30))
    assert job_finished(paused, clock.now())


# --- what the chat is told ----------------------------------------------------------------------


def test_run_results_carry_a_locale_notice_not_english() -> None:
    assert run_result(Final("ok")).notice is None
    assert run_result(Exhausted(rounds=20)).notice == Notice("turn-exhausted", {"rounds": 20})
    failed = run_result(Failed("RuntimeError: boom"))
    assert failed.notice is not None and failed.notice.key == "turn-failed"
    assert failed.error == "RuntimeError: boom", "the English detail stays for the row and the log"


@pytest.mark.parametrize(
    ("text", "key", "params"),
    [
        ("", "schedule-error-empty", {}),
        ("every 5s", "schedule-error-too-frequent", {"spec": "every 5s", "shortest": Span(60)}),
        ("every blue moon", "schedule-error-duration", {"spec": "every blue moon", "value": "blue moon"}),
        ("every", "schedule-error-no-duration", {"spec": "every", "value": ""}),
        ("in 0m", "schedule-error-not-positive", {"spec": "in 0m"}),
        ("at noon", "schedule-error-at", {"spec": "at noon"}),
        ("at 2026-02-30 09:00", "schedule-error-no-such-date", {"spec": "at 2026-02-30 09:00"}),
        ("@sometimes", "schedule-error-macro", {"spec": "@sometimes"}),
        ("whenever", "schedule-error-fields", {"spec": "whenever", "count": 1}),
        ("0 0 9 * * 1-5", "schedule-error-seconds", {"spec": "0 0 9 * * 1-5", "count": 6}),
        ("0 25 * * *", "schedule-error-crontab", {"spec": "0 25 * * *"}),
        ("0 0 30 2 *", "schedule-error-never", {"spec": "0 0 30 2 *"}),
    ],
)
def test_schedule_errors_name_a_locale_key_and_their_facts(
    text: str, key: str, params: dict[str, object]
) -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(text, BERLIN, NOW)
    assert raised.value.key == key
    assert {name: raised.value.params[name] for name in params} == params


def test_past_and_skipped_times_carry_the_instant_and_zone() -> None:
    with pytest.raises(ScheduleError) as past:
        parse_schedule("at 2026-03-27 09:00", BERLIN, NOW)
    assert past.value.key == "schedule-error-past"
    now = past.value.params["now"]
    assert isinstance(now, datetime) and now == NOW and now.tzinfo == BERLIN
    with pytest.raises(ScheduleError) as gap:
        parse_schedule("at 2026-03-29 02:30", BERLIN, NOW)
    assert gap.value.params == {
        "spec": "at 2026-03-29 02:30",
        "time": "2026-03-29 02:30",
        "zone": "Europe/Berlin",
    }


def test_command_errors_have_keys_too() -> None:
    with pytest.raises(ScheduleError) as nothing:
        split_schedule("  ", BERLIN, NOW)
    assert nothing.value.key == "schedule-error-nothing"
    with pytest.raises(ScheduleError) as no_prompt:
        split_schedule("every 2h", BERLIN, NOW)
    assert (no_prompt.value.key, no_prompt.value.params) == ("schedule-error-no-prompt", {"spec": "every 2h"})


async def test_an_unknown_zone_has_its_key(store: JobStore) -> None:
    with pytest.raises(ScheduleError) as raised:
        await store.add(
            JobSpec(title="x", schedule="every 1h", prompt="p", chat_id=1, timezone="Mars/Olympus")
        )
    assert (raised.value.key, raised.value.params) == ("schedule-error-zone", {"zone": "Mars/Olympus"})
