"""A cluster's scheduler: the leader follows what other instances stored, and carries out what
they asked of it.

In webhook mode every instance runs chats, but only the leader runs APScheduler. A job or the
tic's plan changed on another instance is only a row: the leader's :meth:`SchedulerService.sync`
(run at every ownership poll) gives it the APScheduler entry it now needs, and leaves unchanged
jobs' entries alone. "Run now", "kill" and "/tic now" on an instance that does not run the
scheduler (``shared`` and never started: ``elsewhere``) are stored as requests under
:data:`REQUEST`, which the leader's next ``sync`` carries out and deletes.

The "other instance" is a second :class:`Database` on the same database (a second
:class:`JobStore`, :class:`TicStore` or never-started :class:`SchedulerService`). The leader is
the rig of ``test_ports`` (real stores, a stand-in hub). The clock is a month ahead of real
time, so APScheduler never fires on its own and every entry's next run time stays put.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from agentgram.runtime.core.mailbox import MemoryMailbox
from agentgram.runtime.infra.config import QuietHoursSettings, SchedulerSettings, TicSettings
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.scheduler_rows import JobRun, JobRunStatus, TicRun, TicRunStatus
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.cron_runner import cron_job_id
from agentgram.runtime.scheduler.jobs import JobChanges, JobStore
from agentgram.runtime.scheduler.ports import SchedulerPorts
from agentgram.runtime.scheduler.service import REQUEST, SchedulerService
from agentgram.runtime.scheduler.tic import Run
from agentgram.runtime.scheduler.tic_runner import TIC_JOB
from agentgram.runtime.scheduler.tic_store import TicStore
from agentgram.runtime.scheduler.values import JobSpec
from tests.runtime.scheduler.conftest import BERLIN
from tests.runtime.scheduler.test_ports import (
    CHAT,
    FakeChatSession,
    FakeTurns,
    NoApprovals,
    Posted,
    Rig,
    scheduler_rig,
)


@pytest.fixture
def clock() -> FakeClock:
    """A month ahead of real time: APScheduler keeps real time, so nothing fires on its own."""
    return FakeClock(datetime.now(UTC) + timedelta(days=30))


@pytest.fixture
async def leader(db: Database, clock: FakeClock, tmp_path: Path) -> AsyncIterator[Rig]:
    """The instance that runs the scheduler (started)."""
    async with scheduler_rig(db, clock, tmp_path, home_chat_id=CHAT) as rig:
        rig.service.shared = True
        yield rig


@pytest.fixture
async def other(db: Database, database_url: str) -> AsyncIterator[Database]:
    """The same (migrated) database as another process opens it."""
    database = Database(database_url)
    yield database
    await database.close()


@asynccontextmanager
async def member_of(db: Database, clock: FakeClock, tmp_path: Path) -> AsyncIterator[SchedulerService]:
    """A cluster's instance that does not run the scheduler: built as the runtime builds it,
    ``shared``, never started."""
    sessions = SessionStore(db)

    async def publish(event: object) -> None:
        raise AssertionError(f"a member that does not run the scheduler published {event!r}")

    async def chat_session(
        chat_id: int, *, user_id: int | None, language: str | None, thread_id: int = 0
    ) -> FakeChatSession:
        row, _ = await sessions.find_or_open(chat_id, user_id=user_id, language=language)
        assert row.id is not None
        return FakeChatSession(row.id, chat_id, None)

    ports = SchedulerPorts(
        db=db,
        sessions=sessions,
        history=HistoryStore(db),
        mailbox=MemoryMailbox(),
        approvals=NoApprovals(),
        turns=FakeTurns(),
        publish=publish,
        chat_session=chat_session,
        timezone=BERLIN,
        timezone_name="Europe/Berlin",
        workdir=tmp_path,
        scheduler=SchedulerSettings(),
        tic=TicSettings(),
        quiet_hours=QuietHoursSettings(),
        home_chat_id=CHAT,
    )
    service = SchedulerService(ports, clock=clock)
    service.shared = True
    yield service
    await service.stop()


def entry(rig: Rig, name: str) -> Any:
    """The leader's APScheduler entry (``None``: none)."""
    aps = rig.service.engine.aps
    assert aps is not None
    return aps.get_job(name)


def spec(title: str, schedule: str = "every 2h") -> JobSpec:
    return JobSpec(title=title, schedule=schedule, prompt=f"{title}: check", chat_id=CHAT)


async def requests(rig: Rig) -> dict[str, str]:
    return await rig.service.ports.sessions.values_with_prefix(REQUEST)


T = TypeVar("T")


class Heard(Generic[T]):
    """What a scheduler listener was told, waited for as it comes."""

    def __init__(self, listeners: list[Callable[[T], None]]) -> None:
        self.items: list[T] = []
        self._came = asyncio.Event()
        listeners.append(self._note)

    def _note(self, item: T) -> None:
        self.items.append(item)
        self._came.set()

    async def first(self) -> T:
        await asyncio.wait_for(self._came.wait(), 10)
        return self.items[0]


# --- cron jobs stored elsewhere -------------------------------------------------------------


async def test_a_job_added_elsewhere_gets_its_entry_at_the_next_sync(
    leader: Rig, other: Database, clock: FakeClock
) -> None:
    added = await JobStore(other, clock, default_timezone="Europe/Berlin").add(spec("Inbox"))
    assert added.id is not None
    assert entry(leader, cron_job_id(added.id)) is None, "only a row until the leader syncs"
    assert await leader.service.cron.sync() == 1
    scheduled = entry(leader, cron_job_id(added.id))
    assert scheduled is not None and scheduled.next_run_time == added.next_run_at
    assert (await leader.service.job(added.id)).next_run == added.next_run_at
    assert await leader.service.cron.sync() == 0, "nothing changed since"


async def test_edits_pauses_and_deletes_elsewhere_are_followed_and_other_entries_kept(
    leader: Rig, other: Database, clock: FakeClock
) -> None:
    ids = {}
    for title in ("kept", "reworded", "edited", "paused", "deleted"):
        job = await leader.service.add_job(spec(title))
        ids[title] = job.id
    before = {title: entry(leader, cron_job_id(job_id)) for title, job_id in ids.items()}
    assert all(e is not None for e in before.values())

    clock.advance(timedelta(minutes=7))  # the edit re-anchors "every 3h" to its own moment
    jobs = JobStore(other, clock, default_timezone="Europe/Berlin")
    await jobs.update(ids["reworded"], JobChanges(prompt="another prompt", title="Reworded"))
    edited = await jobs.update(ids["edited"], JobChanges(schedule="every 3h"))
    await jobs.set_enabled(ids["paused"], False)
    await jobs.delete(ids["deleted"])

    await leader.service.sync()

    assert entry(leader, cron_job_id(ids["paused"])) is None
    assert entry(leader, cron_job_id(ids["deleted"])) is None
    moved = entry(leader, cron_job_id(ids["edited"]))
    assert moved is not None and moved is not before["edited"]
    assert moved.next_run_time == edited.next_run_at == clock.now() + timedelta(hours=3)
    assert moved.trigger.interval == timedelta(hours=3)
    for title in ("kept", "reworded"):  # a prompt or title is no schedule: the entry stays as it was
        now = entry(leader, cron_job_id(ids[title]))
        assert now is before[title], f"{title}: re-added"
        assert now.next_run_time == before[title].next_run_time
    assert await leader.service.cron.sync() == 0


async def test_a_job_resumed_elsewhere_gets_its_entry_back(
    leader: Rig, other: Database, clock: FakeClock
) -> None:
    job = await leader.service.add_job(spec("Inbox"))
    jobs = JobStore(other, clock, default_timezone="Europe/Berlin")
    await jobs.set_enabled(job.id, False)
    await leader.service.sync()
    assert entry(leader, cron_job_id(job.id)) is None
    clock.advance(timedelta(minutes=30))
    resumed = await jobs.set_enabled(job.id, True)
    await leader.service.sync()
    back = entry(leader, cron_job_id(job.id))
    assert back is not None and back.next_run_time == resumed.next_run_at


async def test_jobs_the_leader_started_with_are_followed_too(
    db: Database, other: Database, clock: FakeClock, tmp_path: Path
) -> None:
    """Entries made by the start's resume (rows read back from the database), not by add_job."""
    jobs = JobStore(other, clock, default_timezone="Europe/Berlin")
    kept = await jobs.add(spec("kept"))
    edited = await jobs.add(spec("edited"))
    idle = await jobs.add(spec("paused before the start"))
    await jobs.set_enabled(idle.id or 0, False)
    async with scheduler_rig(db, clock, tmp_path, home_chat_id=CHAT) as rig:
        first = entry(rig, cron_job_id(kept.id or 0))
        assert first is not None
        await rig.service.sync()  # the paused job is seen once; nothing else changed
        assert await rig.service.cron.sync() == 0
        assert entry(rig, cron_job_id(kept.id or 0)) is first
        clock.advance(timedelta(minutes=5))
        changed = await jobs.update(edited.id or 0, JobChanges(schedule="every 5h"))
        await jobs.delete(kept.id or 0)
        assert await rig.service.cron.sync() == 2
        assert entry(rig, cron_job_id(kept.id or 0)) is None
        assert entry(rig, cron_job_id(edited.id or 0)).next_run_time == changed.next_run_at


async def test_sync_on_an_instance_that_does_not_run_the_scheduler_leaves_the_requests(
    other: Database, clock: FakeClock, tmp_path: Path
) -> None:
    async with member_of(other, clock, tmp_path) as member:
        job = await member.add_job(spec("Inbox"))
        assert member.elsewhere and await member.run_now(job.id)
        await member.sync()
        assert member.engine.aps is None and not member.is_running(job.id)
        assert list((await member.ports.sessions.values_with_prefix(REQUEST)).values()) == ["run"]


# --- the tic's plan stored elsewhere --------------------------------------------------------


async def test_a_tic_plan_changed_elsewhere_is_rescheduled_and_an_unchanged_one_kept(
    leader: Rig, other: Database, clock: FakeClock
) -> None:
    first = entry(leader, TIC_JOB)
    assert first is not None and first.trigger.interval == timedelta(minutes=30)  # tic.interval
    await leader.service.sync()
    assert entry(leader, TIC_JOB) is first, "an unchanged plan keeps its entry"
    assert entry(leader, TIC_JOB).next_run_time == first.next_run_time

    tics = TicStore(other, clock)
    await tics.set_state(interval_seconds=45 * 60, cron=None)  # /tic every 45m on another instance
    await leader.service.sync()
    moved = entry(leader, TIC_JOB)
    assert moved is not None and moved is not first
    assert moved.trigger.interval == timedelta(minutes=45)
    await leader.service.sync()
    assert entry(leader, TIC_JOB) is moved

    await tics.set_state(enabled=False)  # /tic off
    await leader.service.sync()
    assert entry(leader, TIC_JOB) is None
    await tics.set_state(enabled=True, interval_seconds=None, cron="0 9 * * *")
    await leader.service.sync()
    daily = entry(leader, TIC_JOB)
    assert daily is not None and (daily.next_run_time.hour, daily.next_run_time.minute) == (9, 0)


# --- what a member asks of the leader -------------------------------------------------------


async def test_run_now_on_a_member_is_a_request_the_leaders_sync_runs(
    leader: Rig, other: Database, clock: FakeClock, tmp_path: Path
) -> None:
    job = await leader.service.add_job(spec("Inbox"))
    posted = Posted(leader.mailbox)
    runs = Heard[JobRun](leader.service.run_listeners)
    async with member_of(other, clock, tmp_path) as member:
        assert member.elsewhere and not leader.service.elsewhere
        assert await member.run_now(job.id, chat_id=CHAT)
        assert not member.is_running(job.id), "the member runs nothing itself"
    assert list((await requests(leader)).values()) == ["run"]
    assert not leader.service.is_running(job.id)
    assert await leader.service.jobs.runs(job.id) == []

    await leader.service.sync()

    assert leader.service.is_running(job.id)
    assert await requests(leader) == {}, "carried out once: deleted"
    envelope = await asyncio.wait_for(posted.first(), 10)
    [row] = await leader.service.jobs.runs(job.id)
    assert (row.status, row.scheduled_for, row.session_id) == (
        JobRunStatus.RUNNING,
        None,  # a manual run uses up no fire time
        envelope.session_id,
    )
    leader.turns.finish(envelope.session_id, "2 new mails.")
    run = await runs.first()
    assert (run.id, run.status) == (row.id, JobRunStatus.SUCCESS)
    await leader.service.sync()
    assert len(await leader.service.jobs.runs(job.id)) == 1, "the request ran once"


async def test_kill_on_a_member_is_false_unless_a_run_is_in_flight_and_then_the_leader_kills(
    leader: Rig, other: Database, clock: FakeClock, tmp_path: Path
) -> None:
    job = await leader.service.add_job(spec("Inbox"))
    posted = Posted(leader.mailbox)
    runs = Heard[JobRun](leader.service.run_listeners)
    async with member_of(other, clock, tmp_path) as member:
        assert not await member.kill(job.id, chat_id=CHAT), "no running session: nothing to kill"
        assert await requests(leader) == {}
        assert await leader.service.run_now(job.id)
        envelope = await asyncio.wait_for(posted.first(), 10)
        seen = await member.jobs.get(job.id)  # what the member reads of the leader's run
        assert seen is not None and seen.running_session_id == envelope.session_id
        assert await member.kill(job.id, chat_id=CHAT)
        assert leader.service.is_running(job.id), "the member stops nothing itself"
    assert list((await requests(leader)).values()) == ["kill"]

    await leader.service.sync()

    run = await runs.first()
    assert run.status == JobRunStatus.CANCELLED
    assert leader.turns.cancelled == [envelope.session_id]
    assert await requests(leader) == {}
    assert not leader.service.is_running(job.id)


async def test_tic_now_on_a_member_is_a_request_the_leaders_sync_decides(
    leader: Rig, other: Database, clock: FakeClock, tmp_path: Path
) -> None:
    tics = Heard[TicRun](leader.service.tic_listeners)
    async with member_of(other, clock, tmp_path) as member:
        assert isinstance(await member.tic(manual=True), Run)
    assert list((await requests(leader)).values()) == ["tic"]
    assert await TicStore(other, clock).last() is None, "the member decided nothing"

    await leader.service.sync()

    decided = await tics.first()  # no TIC.md, prompt or events: skipped without the model
    assert (decided.status, decided.reason, decided.slot) == (TicRunStatus.SKIPPED, "nothing to do", None)
    last = await TicStore(other, clock).last()
    assert last is not None and last.id == decided.id, "decided and recorded on the leader"
    assert await requests(leader) == {}
