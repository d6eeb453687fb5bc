"""A slot is one row (issue 27 item 9): a cron job's fire time and a tic's slot are inserted once,
and only the scheduler whose row went in runs it, on SQLite and on PostgreSQL.

"Instances" here are whole runtimes on one database, each with its own faked clock (hosts' clocks
differ), sharing one fake model: two of them firing one slot make one run row and one model call;
a slot one leader recorded missed is not run by the next, even from a view of the job read before
that record; a new leader's catch-up runs the newest missed tic slot once or records it missed.

APScheduler keeps real time: every cron instant lies days in the real future, and the tic's
crontab (:data:`LEAP_DAY`) fires in real time only on a leap day, so nothing fires on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

from alembic import command
from sqlalchemy import Connection, inspect, text
from sqlmodel import col, select

from agentgram.runtime.app import Runtime
from agentgram.runtime.infra.events import CronResult, Report
from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.jobs import JobStore
from agentgram.runtime.scheduler.models import JobRun, JobRunStatus, TicRun, TicRunStatus
from agentgram.runtime.scheduler.service import SchedulerService
from agentgram.runtime.scheduler.tic_runner import MISSED
from agentgram.runtime.scheduler.tic_store import TicStore
from agentgram.runtime.scheduler.values import JobSpec
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.runtime.core.turn.harness import Recorder
from tests.runtime.scheduler.conftest import BERLIN

LEAP_DAY = {"enabled": True, "cron": "0 3 29 2 *", "prompt": "Anything due?"}
"""Tics at 03:00 Berlin on 29 February: the slots are far apart and never fire in real time."""


def berlin(days_ahead: int, at: time) -> datetime:
    """A wall time in Berlin ``days_ahead`` days from today, as UTC (always in the real future)."""
    day = datetime.now(BERLIN).date() + timedelta(days=days_ahead)
    return datetime.combine(day, at, tzinfo=BERLIN).astimezone(UTC)


def leap_slot(year: int) -> datetime:
    return datetime(year, 2, 29, 2, 0, tzinfo=UTC)  # 03:00 CET


# --- the stores: one row per slot ------------------------------------------------------------


async def test_a_fire_time_is_one_row_whoever_inserts_it(db: Database, clock: FakeClock) -> None:
    here, there = JobStore(db, clock), JobStore(db, clock)  # two schedulers' stores
    job = await here.add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
    assert job.id is not None
    slot = clock.now() + timedelta(hours=1)
    clock.set(slot)
    run = await here.start_run(job.id, scheduled_for=slot)
    assert run is not None and run.id is not None
    assert await there.start_run(job.id, scheduled_for=slot) is None, "the slot is taken: not run"
    assert await there.record_missed(job.id, slot) is None, "nor recorded missed"
    assert await there.start_run(job.id) is not None and await there.start_run(job.id) is not None
    history = await here.runs(job.id)
    assert sorted((r.scheduled_for is None, r.status) for r in history) == [
        (False, JobRunStatus.RUNNING),
        (True, JobRunStatus.RUNNING),
        (True, JobRunStatus.RUNNING),
    ], "manual runs have no slot and stay free"


async def test_concurrent_inserts_of_one_slot_let_exactly_one_in(
    db: Database, clock: FakeClock, database_url: str
) -> None:
    other = Database(database_url)  # another process's connections
    try:
        stores = [JobStore(db, clock), JobStore(other, clock)] * 4
        job = await stores[0].add(JobSpec(title="h", schedule="every 1h", prompt="p", chat_id=1))
        assert job.id is not None
        slot = clock.now() + timedelta(hours=1)
        clock.set(slot)
        starts = [store.start_run(job.id, scheduled_for=slot) for store in stores[:4]]
        misses = [store.record_missed(job.id, slot) for store in stores[4:]]
        results = await asyncio.gather(*starts, *misses)
        assert len([r for r in results if r is not None]) == 1
        assert [r.scheduled_for for r in await stores[0].runs(job.id)] == [slot]
    finally:
        await other.close()


async def test_a_tic_slot_is_one_row_and_a_manual_tic_has_none(db: Database, clock: FakeClock) -> None:
    here, there = TicStore(db, clock), TicStore(db, clock)
    assert await here.newest_slot() is None
    slot = clock.now().replace(minute=0)
    ran = await here.record(TicRunStatus.RAN, slot=slot)
    assert ran is not None and ran.slot == slot
    assert await there.record(TicRunStatus.SKIPPED, reason="nothing to do", slot=slot) is None
    assert (
        await there.record(TicRunStatus.RAN) is not None and await there.record(TicRunStatus.RAN) is not None
    )
    assert await there.newest_slot() == slot
    async with db.read() as tx:
        rows = (await tx.exec(select(TicRun).order_by(col(TicRun.id)))).all()
    assert [row.slot for row in rows] == [slot, None, None]


# --- whole schedulers on one database ------------------------------------------------------------


@dataclass
class Node:
    """One instance: a runtime with its own clock, and what its scheduler told."""

    runtime: Runtime
    clock: FakeClock
    recorder: Recorder = field(default_factory=Recorder)
    runs: list[JobRun] = field(default_factory=list)
    tics: list[TicRun] = field(default_factory=list)

    @property
    def scheduler(self) -> SchedulerService:
        return self.runtime.parts.scheduler

    def note(self, into: list[Any], item: Any) -> None:
        into.append(item)
        self.recorder.changed.set()

    def reports(self) -> list[Report]:
        return [e for e in self.recorder.events if isinstance(e, Report)]


@asynccontextmanager
async def node(
    tmp_path: Path, llm: FakeOpenAI, url: str, clock: FakeClock, **sections: Any
) -> AsyncIterator[Node]:
    settings = make_settings(tmp_path, llm.base_url, storage={"url": url}, **sections)
    built = Node(Runtime(settings, format_rules="", home_chat_id=ALLOWED_USER, clock=clock), clock)
    built.runtime.parts.bus.subscribe(built.recorder)
    built.scheduler.run_listeners.append(lambda run: built.note(built.runs, run))
    built.scheduler.tic_listeners.append(lambda tic: built.note(built.tics, tic))
    await built.runtime.start()
    try:
        yield built
    finally:
        await built.runtime.close()


@asynccontextmanager
async def nodes(
    tmp_path: Path, llm: FakeOpenAI, url: str, *clocks: FakeClock, **sections: Any
) -> AsyncIterator[list[Node]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(node(tmp_path, llm, url, c, **sections)) for c in clocks]


async def wait_until(predicate: Any, *among: Node, timeout: float = 10.0) -> None:
    """Wait until ``predicate()`` holds, re-checked whenever one of the nodes heard something."""
    async with asyncio.timeout(timeout):
        while not predicate():
            waits = [asyncio.ensure_future(n.recorder.changed.wait()) for n in among]
            await asyncio.wait(waits, timeout=0.2, return_when=asyncio.FIRST_COMPLETED)
            for n, waited in zip(among, waits, strict=True):
                waited.cancel()
                n.recorder.changed.clear()


async def runs_of(at: Node, job_id: int) -> list[tuple[JobRunStatus, datetime | None]]:
    return [(r.status, r.scheduled_for) for r in reversed(await at.scheduler.jobs.runs(job_id))]


async def test_two_schedulers_firing_one_cron_slot_run_it_once(
    tmp_path: Path, fake_llm: FakeOpenAI, database_url: str
) -> None:
    start = berlin(30, time(12, 0))
    slot = start + timedelta(hours=3)
    async with nodes(tmp_path, fake_llm, database_url, FakeClock(start), FakeClock(start)) as (a, b):
        job = await a.scheduler.add_job(
            JobSpec(title="Backup", schedule="every 3h", prompt="Check the backup.", chat_id=ALLOWED_USER)
        )
        fake_llm.script(Text("Backup is fine."))
        a.clock.set(slot)
        b.clock.set(slot + timedelta(seconds=2))  # the other host's clock runs ahead a little
        await asyncio.gather(a.scheduler.cron.fire(job.id), b.scheduler.cron.fire(job.id))
        await wait_until(lambda: len(a.reports() + b.reports()) == 1, a, b)
        assert await runs_of(a, job.id) == [(JobRunStatus.SUCCESS, slot)]
        assert fake_llm.calls == 1
        [report] = a.reports() + b.reports()
        assert isinstance(report.content, CronResult) and report.content.title == "Backup"

        stale = b.scheduler.cron.launch(job.id, scheduled_for=slot)  # decided from a row read before the run
        assert stale is not None
        await stale
        assert await runs_of(b, job.id) == [(JobRunStatus.SUCCESS, slot)], "the taken slot is not run"
        assert fake_llm.calls == 1


async def test_a_slot_one_leader_recorded_missed_is_not_run_by_the_next(
    tmp_path: Path, fake_llm: FakeOpenAI, database_url: str
) -> None:
    start = berlin(30, time(12, 0))
    slot = start + timedelta(hours=3)
    async with nodes(tmp_path, fake_llm, database_url, FakeClock(start)) as (first,):
        job = await first.scheduler.add_job(
            JobSpec(title="Backup", schedule="every 3h", prompt="Check the backup.", chat_id=ALLOWED_USER)
        )
    # the first leader comes back 2 h after the slot (past the 1 h grace): it records it missed
    async with nodes(tmp_path, fake_llm, database_url, FakeClock(slot + timedelta(hours=2))) as (a,):
        assert await runs_of(a, job.id) == [(JobRunStatus.MISSED, slot)]
    # the next leader's clock says 30 min after the slot (within the grace): it must not run it
    async with nodes(tmp_path, fake_llm, database_url, FakeClock(slot + timedelta(minutes=30))) as (b,):
        assert await runs_of(b, job.id) == [(JobRunStatus.MISSED, slot)], "its catch-up leaves the slot"
        stale = b.scheduler.cron.launch(job.id, scheduled_for=slot)  # as if decided before the record
        assert stale is not None
        await stale
        await b.scheduler.cron.fire(job.id)
        assert await runs_of(b, job.id) == [(JobRunStatus.MISSED, slot)]
        assert b.runs == [] and fake_llm.calls == 0


async def test_a_missed_record_and_a_run_racing_for_one_slot_leave_one_row(
    tmp_path: Path, fake_llm: FakeOpenAI, database_url: str
) -> None:
    start = berlin(30, time(12, 0))
    slot = start + timedelta(hours=3)
    late, on_time = FakeClock(start), FakeClock(start)
    async with nodes(tmp_path, fake_llm, database_url, late, on_time) as (a, b):
        job = await a.scheduler.add_job(
            JobSpec(title="Backup", schedule="every 3h", prompt="Check the backup.", chat_id=ALLOWED_USER)
        )
        fake_llm.script(Text("Backup is fine."))
        late.set(slot + timedelta(hours=2))  # a decides "missed"
        on_time.set(slot + timedelta(minutes=1))  # b decides "run"
        await asyncio.gather(a.scheduler.cron.fire(job.id), b.scheduler.cron.fire(job.id))
        [(status, scheduled_for)] = await runs_of(a, job.id)
        assert scheduled_for == slot
        assert fake_llm.calls == (1 if status == JobRunStatus.SUCCESS else 0)
        assert status in (JobRunStatus.SUCCESS, JobRunStatus.MISSED)


async def test_two_schedulers_firing_one_tic_slot_make_one_tic(
    tmp_path: Path, fake_llm: FakeOpenAI, database_url: str
) -> None:
    slot = leap_slot(2028)
    a_clock, b_clock = FakeClock(slot + timedelta(seconds=1)), FakeClock(slot + timedelta(seconds=3))
    fake_llm.script(Text("TIC_OK"))
    async with nodes(tmp_path, fake_llm, database_url, a_clock, b_clock, tic=LEAP_DAY) as (a, b):
        await asyncio.gather(a.scheduler.ticker.fire(), b.scheduler.ticker.fire())
        await wait_until(lambda: len(a.tics + b.tics) == 1, a, b)
        [tic] = a.tics + b.tics
        assert (tic.slot, tic.status, tic.ended_at is not None) == (slot, TicRunStatus.RAN, True)
        await b.scheduler.ticker.fire()  # again, later in the same slot
        await a.scheduler.ticker.fire()
        async with a.runtime.parts.db.read() as tx:
            rows = (await tx.exec(select(TicRun))).all()
        assert [(r.slot, r.status) for r in rows] == [(slot, TicRunStatus.RAN)]
        assert fake_llm.calls == 1


async def test_a_new_leader_runs_the_newest_missed_tic_slot_once_or_records_it_missed(
    tmp_path: Path, fake_llm: FakeOpenAI, database_url: str
) -> None:
    url, first, second, third = database_url, leap_slot(2028), leap_slot(2032), leap_slot(2036)
    fake_llm.script(Text("TIC_OK"), Text("TIC_OK"))
    async with nodes(tmp_path, fake_llm, url, FakeClock(first + timedelta(seconds=1)), tic=LEAP_DAY) as (a,):
        await a.scheduler.ticker.fire()
        await wait_until(lambda: len(a.tics) == 1, a)
    late = FakeClock(second + timedelta(minutes=30))  # within the grace: the newest slot runs late
    async with nodes(tmp_path, fake_llm, url, late, tic=LEAP_DAY) as (b,):
        await wait_until(lambda: len(b.tics) == 1, b)
        assert [(t.slot, t.status) for t in b.tics] == [(second, TicRunStatus.RAN)]
    async with nodes(tmp_path, fake_llm, url, late, tic=LEAP_DAY) as (c,):  # a restart: nothing left
        await c.scheduler.ticker.fire()
        assert c.tics == []
    assert fake_llm.calls == 2
    too_late = FakeClock(third + timedelta(hours=3))  # past the grace: recorded missed, not run
    async with nodes(tmp_path, fake_llm, url, too_late, tic=LEAP_DAY) as (d,):
        assert [(t.slot, t.status, t.reason) for t in d.tics] == [(third, TicRunStatus.SKIPPED, MISSED)]
    async with nodes(tmp_path, fake_llm, url, too_late, tic=LEAP_DAY) as (e,):
        assert e.tics == []
        async with e.runtime.parts.db.read() as tx:
            rows = (await tx.exec(select(TicRun).order_by(col(TicRun.slot)))).all()
    assert [(r.slot, r.status) for r in rows] == [
        (first, TicRunStatus.RAN),
        (second, TicRunStatus.RAN),
        (third, TicRunStatus.SKIPPED),
    ]
    assert fake_llm.calls == 2


# --- revision 0010 on a database that has duplicates -------------------------------------------


def _at_0009_with_a_slot_run_twice(conn: Connection) -> None:
    command.upgrade(migrations.alembic_config(conn), "0009")
    conn.execute(
        text(
            "INSERT INTO scheduled_jobs (id, title, schedule, kind, timezone, prompt, chat_id, enabled,"
            " approvals, anchor_at, created_at, updated_at) VALUES (1, 'h', 'every 1h', 'interval',"
            " 'UTC', 'p', 1, true, 'deny', '2026-03-27 12:00:00', '2026-03-27 12:00:00',"
            " '2026-03-27 12:00:00')"
        )
    )
    for run_id, scheduled_for in ((1, "'2026-03-27 13:00:00'"), (2, "'2026-03-27 13:00:00'"), (3, "NULL")):
        conn.execute(
            text(
                "INSERT INTO job_runs (id, job_id, scheduled_for, started_at, status)"
                f" VALUES ({run_id}, 1, {scheduled_for}, '2026-03-27 13:00:00', 'success')"
            )
        )


async def test_revision_0010_keeps_a_slot_on_its_first_run_and_adds_the_keys(database_url: str) -> None:
    db = Database(database_url)
    try:
        async with db.write() as tx:
            await (await tx.connection()).run_sync(_at_0009_with_a_slot_run_twice)
        await migrate(db)
        async with db.read() as tx:
            rows = (await tx.exec(select(JobRun).order_by(col(JobRun.id)))).all()
        assert [(r.id, r.scheduled_for) for r in rows] == [
            (1, datetime(2026, 3, 27, 13, tzinfo=UTC)),
            (2, None),  # the later duplicate kept as a run without a slot
            (3, None),
        ]
        async with db.engine.connect() as conn:
            indexes = await conn.run_sync(
                lambda c: {i["name"] for t in ("job_runs", "tic_runs") for i in inspect(c).get_indexes(t)}
            )
            columns = await conn.run_sync(lambda c: {x["name"] for x in inspect(c).get_columns("tic_runs")})
        assert {"ux_job_runs_slot", "ux_tic_runs_slot"} <= indexes and "slot" in columns
    finally:
        await db.close()
