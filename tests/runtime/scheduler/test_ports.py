"""A scheduler built from its ports alone: real stores, a stand-in hub, no ``Runtime``.

Proves :class:`SchedulerPorts` is all the scheduler needs: it finds the home
chat through the ports (``tic.chat_id``, else the adapter's ``home_chat_id``),
hands out values rather than rows, posts a run's mail and reports the result
through ``publish`` as structured content the adapter words.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.core.mailbox import Envelope, MemoryMailbox
from agentgram.runtime.core.turn.outcome import Final
from agentgram.runtime.infra.config import QuietHoursSettings, SchedulerSettings, TicSettings
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.events import CronResult, DurableOutput, LocaleText, ModelText, Report, TicResult
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.ports import FinishListener, SchedulerPorts
from agentgram.runtime.scheduler.service import SchedulerService
from agentgram.runtime.scheduler.tic import Run
from agentgram.runtime.scheduler.tools import schedule_tools
from agentgram.runtime.scheduler.values import HomeChat, Job, JobSpec
from tests.runtime.scheduler.conftest import BERLIN

CHAT = 42


@dataclass
class FakeTurns:
    """The hub as the scheduler sees it: a turn finishes when the test says so."""

    finish_listeners: list[FinishListener] = field(default_factory=list)
    busy: set[int] = field(default_factory=set)
    cancelled: list[int] = field(default_factory=list)

    def is_busy(self, session_id: int) -> bool:
        return session_id in self.busy

    async def stop(self, envelope: Envelope) -> bool:
        self.cancelled.append(envelope.session_id)
        return False

    def finish(self, session_id: int, text: str) -> None:
        for listener in list(self.finish_listeners):
            listener(session_id, 0, Final(text))


class Posted:
    """Mail the scheduler posted, waited for as it comes (a subscriber of the mailbox)."""

    def __init__(self, mailbox: MemoryMailbox) -> None:
        self.envelopes: list[Envelope] = []
        self._came = asyncio.Event()
        mailbox.subscribe(self._note)

    def _note(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)
        self._came.set()

    async def first(self) -> Envelope:
        await self._came.wait()
        return self.envelopes[0]


@dataclass(frozen=True)
class FakeChatSession:
    id: int
    chat_id: int
    language_code: str | None


class NoApprovals:
    async def cancel_session(self, session_id: int) -> object:
        return []


@dataclass
class Rig:
    service: SchedulerService
    turns: FakeTurns
    mailbox: MemoryMailbox
    published: list[DurableOutput]
    opened: list[tuple[int, int | None]]


@pytest.fixture
def clock() -> FakeClock:
    """A month ahead of real time: APScheduler keeps real time, so nothing fires on its own."""
    return FakeClock(datetime.now(UTC) + timedelta(days=30))


@pytest.fixture
async def rig(db: Database, clock: FakeClock, tmp_path: Path) -> AsyncIterator[Rig]:
    async with scheduler_rig(db, clock, tmp_path, home_chat_id=CHAT) as built:
        yield built


class scheduler_rig:
    def __init__(self, db: Database, clock: FakeClock, tmp_path: Path, **ports: Any) -> None:
        self.db, self.clock, self.tmp_path, self.ports = db, clock, tmp_path, ports

    async def __aenter__(self) -> Rig:
        published: list[DurableOutput] = []
        opened: list[tuple[int, int | None]] = []
        sessions = SessionStore(self.db)

        async def publish(event: DurableOutput) -> None:
            published.append(event)

        async def chat_session(
            chat_id: int, *, user_id: int | None, language: str | None, thread_id: int = 0
        ) -> FakeChatSession:
            opened.append((chat_id, user_id))
            row, _ = await sessions.find_or_open(chat_id, user_id=user_id, language=language)
            assert row.id is not None
            return FakeChatSession(row.id, chat_id, "ru")

        turns, mailbox = FakeTurns(), MemoryMailbox()
        settings: dict[str, Any] = {
            "scheduler": SchedulerSettings(),
            "tic": TicSettings(),
            "quiet_hours": QuietHoursSettings(),
        } | self.ports
        ports = SchedulerPorts(
            db=self.db,
            sessions=sessions,
            history=HistoryStore(self.db),
            mailbox=mailbox,
            approvals=NoApprovals(),
            turns=turns,
            publish=publish,
            chat_session=chat_session,
            timezone=BERLIN,
            timezone_name="Europe/Berlin",
            workdir=self.tmp_path,
            **settings,
        )
        self.rig = Rig(SchedulerService(ports, clock=self.clock), turns, mailbox, published, opened)
        await self.rig.service.start()
        return self.rig

    async def __aexit__(self, *exc: object) -> None:
        await self.rig.service.stop()


async def test_the_service_hears_finished_turns_only_while_started(rig: Rig) -> None:
    assert len(rig.turns.finish_listeners) == 1
    await rig.service.stop()
    assert rig.turns.finish_listeners == []
    await rig.service.start()
    assert len(rig.turns.finish_listeners) == 1


async def test_jobs_come_back_as_values_not_rows(rig: Rig) -> None:
    job = await rig.service.add_job(
        JobSpec(title="", schedule="every 2h", prompt="check the inbox", chat_id=CHAT)
    )
    assert isinstance(job, Job)
    assert (job.title, job.timezone, job.enabled, job.running, job.finished) == (
        "check the inbox",
        "Europe/Berlin",
        True,
        False,
        False,
    )
    assert job.next_run is not None and job.next_run > rig.service.clock.now()
    assert await rig.service.list_jobs(CHAT) == [job]
    paused = await rig.service.set_enabled(job.id, False, chat_id=CHAT)
    assert not paused.enabled and paused.next_run is None


async def test_a_cron_run_goes_through_the_ports_and_reports_structured_content(rig: Rig) -> None:
    posted = Posted(rig.mailbox)
    job = await rig.service.add_job(JobSpec(title="Inbox", schedule="every 2h", prompt="inbox", chat_id=CHAT))
    finished = asyncio.Event()
    rig.service.run_listeners.append(lambda run: finished.set())
    assert await rig.service.run_now(job.id, chat_id=CHAT)
    rig.turns.finish((await posted.first()).session_id, "  2 new mails.  ")
    await finished.wait()
    [report] = rig.published
    assert isinstance(report, Report) and report.to.chat_id == CHAT and report.to.language == "ru"
    assert report.content == CronResult(title="Inbox", body=ModelText(text="2 new mails."))


async def test_a_run_with_no_output_is_a_locale_text(rig: Rig) -> None:
    posted = Posted(rig.mailbox)
    job = await rig.service.add_job(JobSpec(title="Inbox", schedule="every 2h", prompt="inbox", chat_id=CHAT))
    finished = asyncio.Event()
    rig.service.run_listeners.append(lambda run: finished.set())
    await rig.service.run_now(job.id)
    rig.turns.finish((await posted.first()).session_id, "")
    await finished.wait()
    [report] = rig.published
    assert isinstance(report, Report)
    assert report.content == CronResult(title="Inbox", body=LocaleText(key="cron-no-output"))


async def test_the_home_chat_is_the_adapters_unless_tic_chat_id_is_set(
    db: Database, clock: FakeClock, tmp_path: Path
) -> None:
    async with scheduler_rig(db, clock, tmp_path, home_chat_id=CHAT) as rig:
        home = await rig.service.home_session()
        assert isinstance(home, HomeChat) and (home.chat_id, home.language) == (CHAT, "ru")
        assert rig.opened == [(CHAT, CHAT)], "the adapter's home chat is its user's own chat"
    async with scheduler_rig(db, clock, tmp_path, home_chat_id=CHAT, tic=TicSettings(chat_id=-7)) as rig:
        assert (await rig.service.home_session()).chat_id == -7
        assert rig.opened == [(-7, None)]


async def test_without_any_home_chat_a_tic_is_a_config_error(
    db: Database, clock: FakeClock, tmp_path: Path
) -> None:
    async with scheduler_rig(db, clock, tmp_path) as rig:
        with pytest.raises(ConfigError, match=r"tic\.chat_id"):
            await rig.service.tic(manual=True)


async def test_a_tic_report_is_published_and_kept_in_the_home_conversation(
    db: Database, clock: FakeClock, tmp_path: Path
) -> None:
    (tmp_path / "TIC.md").write_text("- anything urgent?\n")
    async with scheduler_rig(db, clock, tmp_path, home_chat_id=CHAT) as rig:
        posted = Posted(rig.mailbox)
        done = asyncio.Event()
        rig.service.tic_listeners.append(lambda tic: done.set())
        assert isinstance(await rig.service.tic(manual=True), Run)
        rig.turns.finish((await posted.first()).session_id, "The backup did not run.")
        await done.wait()
        [report] = rig.published
        assert isinstance(report, Report) and report.to.source == "tic"
        assert report.content == TicResult(body=ModelText(text="The backup did not run."))
        home = await rig.service.home_session()
        rows = await HistoryStore(db).all_rows(home.session_id)
        assert [(r.content, r.is_synthetic) for r in rows] == [("The backup did not run.", True)]


async def test_the_tools_take_a_job_spec_and_read_job_values(rig: Rig) -> None:
    tools = {tool.name: tool for tool in schedule_tools(rig.service)}
    ctx = ToolContext(workdir=rig.service.ports.workdir, session_id=1, chat_id=CHAT)

    async def call(name: str, args: dict[str, Any]) -> str:
        tool = tools[name]
        return await tool.execute(tool.parse(args), ctx)

    said = await call("schedule_job", {"title": "Inbox", "schedule": "every 2h", "prompt": "x"})
    assert said.startswith("Scheduled #1 “Inbox” — every 2h (Europe/Berlin); next ")
    listed = await call("list_jobs", {})
    assert listed.startswith("#1 “Inbox”") and listed.endswith("; enabled; approvals: deny")
    updated = await call("update_job", {"id": 1, "enabled": False})
    assert updated.startswith("Updated #1") and "no next run; paused" in updated
