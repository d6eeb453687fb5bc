import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.jobs import (
    INTERRUPTED,
    JobChanges,
    JobNotFound,
    JobStore,
    job_misfire,
    job_next_run,
    schedule_of,
)
from agentgram.runtime.scheduler.misfire import Nothing, RecordMissed, RunNow
from agentgram.runtime.scheduler.models import JobApprovals, JobRunStatus
from agentgram.runtime.scheduler.schedule import IntervalSchedule, OnceSchedule, ScheduleError, ScheduleKind
from agentgram.runtime.scheduler.values import JobSpec


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.fixture
def store(db: Database, clock: FakeClock) -> JobStore:
    return JobStore(db, clock, default_timezone="Europe/Berlin")


async def test_add_get_list(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(
        JobSpec(title="Inbox", schedule="0 9 * * 1-5", prompt="summarise my inbox", chat_id=42)
    )
    assert job.id is not None
    assert job.kind == ScheduleKind.CRON
    assert job.timezone == "Europe/Berlin"
    assert job.approvals == JobApprovals.DENY
    assert job.enabled
    assert job.next_run_at == utc(2026, 3, 30, 7, 0)  # Monday 09:00 CEST

    loaded = await store.get(job.id)
    assert loaded is not None
    assert loaded.schedule == "0 9 * * 1-5"
    assert loaded.next_run_at == utc(2026, 3, 30, 7, 0)
    assert loaded.next_run_at.tzinfo is UTC  # aware after the SQLite round trip
    assert loaded.created_at == clock.now()

    await store.add(
        JobSpec(title="Anna", schedule="in 20m", prompt="remind me to call Anna", chat_id=7, timezone="UTC")
    )
    assert [j.title for j in await store.list_jobs()] == ["Inbox", "Anna"]
    assert [j.title for j in await store.list_jobs(chat_id=7)] == ["Anna"]
    assert await store.get(999) is None


async def test_bad_schedule_or_zone_is_a_tool_error_and_stores_nothing(store: JobStore) -> None:
    with pytest.raises(ScheduleError, match="a crontab has 5 fields"):
        await store.add(JobSpec(title="x", schedule="whenever", prompt="p", chat_id=1))
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
        await store.add(
            JobSpec(title="x", schedule="every 1h", prompt="p", chat_id=1, timezone="Mars/Olympus")
        )
    with pytest.raises(ScheduleError, match="too frequent"):
        await store.add(JobSpec(title="x", schedule="every 5s", prompt="p", chat_id=1))
    assert await store.list_jobs() == []


async def test_relative_schedules_keep_their_meaning_after_reload(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="Anna", schedule="in 20m", prompt="call Anna", chat_id=1))
    hourly = await store.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    clock.advance(timedelta(minutes=50))
    assert job.id is not None and hourly.id is not None
    reloaded = await store.get(job.id)
    assert reloaded is not None
    assert schedule_of(reloaded) == OnceSchedule(utc(2026, 3, 27, 12, 20))
    reloaded_hourly = await store.get(hourly.id)
    assert reloaded_hourly is not None
    assert schedule_of(reloaded_hourly) == IntervalSchedule(3600)
    assert job_next_run(reloaded_hourly, clock.now()) == utc(2026, 3, 27, 13, 0)


async def test_update_changes_fields_and_reschedules(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="Inbox", schedule="0 9 * * *", prompt="p", chat_id=1))
    assert job.id is not None
    clock.advance(60)
    updated = await store.update(
        job.id, JobChanges(title="Mail", schedule="every 2h", prompt="q", approvals=JobApprovals.ASK)
    )
    assert (updated.title, updated.prompt, updated.approvals, updated.kind) == (
        "Mail",
        "q",
        "ask",
        "interval",
    )
    assert updated.next_run_at == clock.now() + timedelta(hours=2)
    assert updated.anchor_at == clock.now()
    with pytest.raises(ScheduleError):
        await store.update(job.id, JobChanges(schedule="every blue moon"))
    again = await store.get(job.id)
    assert again is not None and again.schedule == "every 2h"  # the bad update left no trace
    with pytest.raises(JobNotFound, match="there is no scheduled job #99"):
        await store.update(99, JobChanges(title="x"))
    assert issubclass(JobNotFound, ToolError)


async def test_pause_and_resume(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    assert job.id is not None
    paused = await store.set_enabled(job.id, False)
    assert not paused.enabled and paused.next_run_at is None
    assert await store.list_jobs(enabled=True) == []
    clock.advance(timedelta(hours=2, minutes=30))
    resumed = await store.set_enabled(job.id, True)
    assert resumed.enabled
    assert resumed.next_run_at == utc(2026, 3, 27, 15, 0)  # on the grid set when it was added


async def test_delete_removes_job_and_its_runs(store: JobStore) -> None:
    job = await store.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    assert job.id is not None
    await store.start_run(job.id)
    await store.delete(job.id)
    assert await store.get(job.id) is None
    assert await store.runs(job.id) == []
    with pytest.raises(JobNotFound):
        await store.delete(job.id)


async def test_due(store: JobStore, clock: FakeClock) -> None:
    soon = await store.add(JobSpec(title="soon", schedule="in 10m", prompt="p", chat_id=1))
    await store.add(JobSpec(title="later", schedule="in 2h", prompt="p", chat_id=1))
    assert await store.due() == []
    clock.advance(timedelta(minutes=10))
    assert [j.id for j in await store.due()] == [soon.id]


async def test_run_lifecycle(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    assert job.id is not None
    clock.advance(timedelta(hours=1))
    run = await store.start_run(job.id, scheduled_for=clock.now())
    assert run is not None and run.id is not None and run.status == JobRunStatus.RUNNING
    await store.attach_session(run.id, 17)
    running = await store.get(job.id)
    assert running is not None
    assert running.running_session_id == 17
    assert running.last_run_at == clock.now()
    assert running.next_run_at == clock.now() + timedelta(hours=1)

    clock.advance(2.5)
    done = await store.finish_run(run.id, JobRunStatus.SUCCESS, final_response="all good")
    assert (done.status, done.duration_ms, done.final_response) == ("success", 2500, "all good")
    assert done.ended_at == clock.now()
    finished = await store.get(job.id)
    assert finished is not None and finished.running_session_id is None and finished.enabled

    failed_run = await store.start_run(job.id)
    assert failed_run is not None and failed_run.id is not None
    await store.finish_run(failed_run.id, JobRunStatus.FAILED, error="LLM unavailable")
    history = await store.runs(job.id)
    assert [(r.status, r.error, r.session_id) for r in history] == [
        ("failed", "LLM unavailable", None),
        ("success", None, 17),
    ]
    with pytest.raises(ValueError):
        await store.finish_run(failed_run.id, JobRunStatus.RUNNING)


async def test_one_shot_is_disabled_after_it_ran(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="Anna", schedule="in 20m", prompt="call Anna", chat_id=1))
    assert job.id is not None
    clock.advance(timedelta(minutes=20))
    run = await store.start_run(job.id)
    assert run is not None and run.id is not None
    await store.finish_run(run.id, JobRunStatus.SUCCESS, final_response="Call Anna!")
    done = await store.get(job.id)
    assert done is not None and not done.enabled and done.next_run_at is None


async def test_record_missed(store: JobStore, clock: FakeClock) -> None:
    daily = await store.add(JobSpec(title="d", schedule="0 9 * * *", prompt="p", chat_id=1))
    assert daily.id is not None
    clock.set(utc(2026, 3, 28, 12))
    missed = await store.record_missed(daily.id, utc(2026, 3, 28, 8))
    assert missed is not None
    assert (missed.status, missed.scheduled_for, missed.duration_ms) == ("missed", utc(2026, 3, 28, 8), 0)
    after = await store.get(daily.id)
    assert after is not None and after.next_run_at == utc(2026, 3, 29, 7)  # 09:00 CEST

    once = await store.add(JobSpec(title="o", schedule="in 5m", prompt="p", chat_id=1))
    assert once.id is not None
    clock.advance(timedelta(hours=3))
    await store.record_missed(once.id, utc(2026, 3, 28, 12, 5))
    gone = await store.get(once.id)
    assert gone is not None and not gone.enabled and gone.next_run_at is None


async def test_interrupted_runs_are_failed_and_their_jobs_returned_once(
    db: Database, store: JobStore, clock: FakeClock
) -> None:
    a = await store.add(JobSpec(title="a", schedule="every 1h", prompt="p", chat_id=1))
    b = await store.add(JobSpec(title="b", schedule="every 1h", prompt="p", chat_id=1))
    c = await store.add(JobSpec(title="c", schedule="every 1h", prompt="p", chat_id=1))
    assert a.id is not None and b.id is not None and c.id is not None
    await store.start_run(a.id, session_id=5)
    await store.start_run(a.id, session_id=6)  # two stale rows of one job → one re-run
    await store.start_run(b.id, session_id=7)
    finished = await store.start_run(c.id)
    assert finished is not None and finished.id is not None
    await store.finish_run(finished.id, JobRunStatus.SUCCESS)

    clock.advance(30)
    restarted = JobStore(db, clock, default_timezone="Europe/Berlin")  # as after a crash
    jobs = await restarted.interrupted_runs()
    assert sorted(j.title for j in jobs) == ["a", "b"]
    assert all(j.running_session_id is None for j in jobs)
    for job_id in (a.id, b.id):
        for run in await restarted.runs(job_id):
            assert (run.status, run.error) == ("failed", INTERRUPTED)
            assert run.duration_ms == 30_000
    assert [r.status for r in await restarted.runs(c.id)] == ["success"]
    assert await restarted.interrupted_runs() == []  # recovery happens once


async def test_misfire_on_start_is_decided_once(store: JobStore, clock: FakeClock) -> None:
    daily = await store.add(JobSpec(title="d", schedule="0 9 * * *", prompt="p", chat_id=1))  # 09:00 Berlin
    hourly = await store.add(JobSpec(title="h", schedule="0 * * * *", prompt="p", chat_id=1))
    assert daily.id is not None and hourly.id is not None
    clock.set(utc(2026, 3, 28, 11, 30))  # down since Friday 12:00Z

    daily_now = await store.get(daily.id)
    hourly_now = await store.get(hourly.id)
    assert daily_now is not None and hourly_now is not None
    assert job_misfire(daily_now, clock.now(), 3600) == RecordMissed(fire_time=utc(2026, 3, 28, 8))
    decision = job_misfire(hourly_now, clock.now(), 3600)
    assert decision == RunNow(fire_time=utc(2026, 3, 28, 11), first_missed=utc(2026, 3, 27, 13))

    await store.record_missed(daily.id, utc(2026, 3, 28, 8))
    await store.start_run(hourly.id, scheduled_for=decision.fire_time)
    # a second start (say, after another crash) finds nothing left to do
    for job_id in (daily.id, hourly.id):
        job = await store.get(job_id)
        assert job is not None
        assert job_misfire(job, clock.now(), 3600) == Nothing()


async def test_manual_run_uses_up_no_fire_time(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="d", schedule="0 13 * * *", prompt="p", chat_id=1))  # 12:00Z in March
    assert job.id is not None
    clock.set(utc(2026, 3, 28, 11, 55))
    await store.start_run(job.id)  # ▶️ run now, five minutes before the scheduled run
    clock.set(utc(2026, 3, 28, 12, 30))
    reloaded = await store.get(job.id)
    assert reloaded is not None
    assert job_misfire(reloaded, clock.now(), 3600) == RunNow(
        fire_time=utc(2026, 3, 28, 12), first_missed=utc(2026, 3, 28, 12)
    )


async def test_paused_job_has_no_misfire(store: JobStore, clock: FakeClock) -> None:
    job = await store.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    assert job.id is not None
    paused = await store.set_enabled(job.id, False)
    clock.advance(timedelta(hours=5))
    assert job_misfire(paused, clock.now(), 3600) == Nothing()


# --- JobSpec: one value for a new job's fields --------------------------------------


def test_a_job_spec_is_frozen_and_denies_approvals_by_default() -> None:
    spec = JobSpec(title="Inbox", schedule="every 2h", prompt="p", chat_id=1)
    assert (spec.timezone, spec.approvals) == (None, JobApprovals.DENY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.title = "other"  # type: ignore[misc]


async def test_a_job_spec_is_stored_as_given_with_the_store_filling_the_gaps(store: JobStore) -> None:
    spec = JobSpec(
        title="  ", schedule="every   2h", prompt="check the inbox", chat_id=5, approvals=JobApprovals.ASK
    )
    job = await store.add(spec)
    assert (job.title, job.schedule, job.timezone, job.chat_id, job.approvals) == (
        "check the inbox",  # an empty title: the prompt's start
        "every 2h",
        "Europe/Berlin",  # no zone: the agent's
        5,
        JobApprovals.ASK,
    )
    zoned = await store.add(dataclasses.replace(spec, title="UTC one", timezone="UTC"))
    assert (zoned.title, zoned.timezone) == ("UTC one", "UTC")
