"""Cron jobs made in a forum topic (issue 28): a job keeps its chat's topic (``thread_id``) and
everything its runs show goes there — the headless cron session is of that topic, so its approval
prompts are addressed to it, and so is its report. Results held in quiet hours keep their topic:
the digest is one per chat and topic. A result held before topics were kept reads as the chat's.

The runtime is real (``test_service.runtime_at``: PostgreSQL or SQLite, the fake model server,
the scheduler's clock faked); events are read off its bus.
"""

from __future__ import annotations

import json
from datetime import time
from pathlib import Path

from agentgram.runtime.infra.events import (
    REPORT_CONTENT,
    Address,
    ApprovalRequested,
    CronResult,
    Digest,
    ModelText,
)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import SessionSource
from agentgram.runtime.infra.storage.scheduler_rows import JobApprovals
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.held import KEY, HeldReports
from agentgram.runtime.scheduler.models import JobRunStatus
from agentgram.runtime.scheduler.plan import HeldReport
from agentgram.runtime.scheduler.values import JobSpec
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.scheduler.test_service import NIGHT, berlin, reports, runtime_at

GROUP = -1001234567890
IDEAS, BUGS = 7, 9


async def test_a_topic_job_runs_in_its_topics_session_asks_and_reports_there(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    clock = FakeClock(berlin(30, time(12, 0)))
    async with runtime_at(tmp_path, fake_llm, clock) as (runtime, recorder, runs, _):
        scheduler = runtime.parts.scheduler
        spec = JobSpec(
            title="Standup",
            schedule="every 2h",
            prompt="Check the build.",
            chat_id=GROUP,
            thread_id=IDEAS,
            approvals=JobApprovals.ASK,
        )
        added = await scheduler.add_job(spec)
        assert added.thread_id == IDEAS
        assert (await scheduler.job(added.id)).thread_id == IDEAS, "the topic is stored with the job"
        assert [job.id for job in await scheduler.list_jobs(GROUP)] == [added.id], "listed per chat"

        fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "echo built"})]), Text("Build is green."))
        assert await scheduler.run_now(added.id)
        await recorder.wait_for(lambda: bool(recorder.of("approval_requested")))
        [asked] = recorder.of("approval_requested")
        assert isinstance(asked, ApprovalRequested)
        assert (asked.to.chat_id, asked.to.thread_id) == (GROUP, IDEAS), "the prompt shows in the topic"
        await runtime.approvals.decide(asked.request_id, approved=True, reason=None, envelope_id="ok-1")
        await recorder.wait_for(lambda: bool(runs), timeout=10)

        assert runs[0].status == JobRunStatus.SUCCESS and runs[0].session_id is not None
        session = await runtime.parts.session_store.get(runs[0].session_id)
        assert session is not None and session.source == SessionSource.CRON
        assert Address.of(session).thread_id == IDEAS
        [report] = reports(recorder)
        assert report.content == CronResult(title="Standup", body=ModelText(text="Build is green."))
        assert (report.to.session_id, report.to.chat_id, report.to.thread_id) == (
            runs[0].session_id,
            GROUP,
            IDEAS,
        )
        assert all(e.to.thread_id == IDEAS for e in recorder.events if e.to.session_id == session.id)


async def test_held_results_keep_their_topic_and_the_digest_is_one_per_topic(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    clock = FakeClock(berlin(30, time(1, 0)))
    quiet = {**NIGHT, "hold": True}
    async with runtime_at(tmp_path, fake_llm, clock, quiet_hours=quiet) as (runtime, recorder, runs, _):
        scheduler = runtime.parts.scheduler
        places = [("Idea one", IDEAS), ("Bug", BUGS), ("Idea two", IDEAS), ("General", 0)]
        for count, (title, thread) in enumerate(places, start=1):
            job = await scheduler.add_job(
                JobSpec(title=title, schedule="every 2h", prompt=title, chat_id=GROUP, thread_id=thread)
            )
            fake_llm.script(Text(f"{title} done."))
            assert await scheduler.run_now(job.id)
            await recorder.wait_for(lambda: len(runs) == count)  # noqa: B023  (awaited at once)
        assert reports(recorder) == []
        held = await scheduler.held.all()
        assert [(h.result.title, h.thread_id) for h in held] == places, "held with their topics"

        clock.set(berlin(30, time(7, 0)))
        assert await scheduler.flush_held() == 4
        digests = {(r.to.chat_id, r.to.thread_id): r.content for r in reports(recorder)}
        assert len(digests) == len(reports(recorder)) == 3, "one digest per chat and topic"
        titles = {
            place: [item.title for item in digest.items]
            for place, digest in digests.items()
            if isinstance(digest, Digest)
        }
        assert titles == {
            (GROUP, IDEAS): ["Idea one", "Idea two"],
            (GROUP, BUGS): ["Bug"],
            (GROUP, 0): ["General"],
        }


async def test_a_result_held_before_topics_were_kept_reads_as_the_chats_own(db: Database) -> None:
    store = SessionStore(db)
    result = CronResult(title="Inbox", body=ModelText(text="2 new mails."))
    old = [{"chat_id": 42, "language": "ru", "result": REPORT_CONTENT.dump_python(result, mode="json")}]
    await store.set_value(KEY, json.dumps(old))
    assert await HeldReports(store).all() == [HeldReport(chat_id=42, result=result, language="ru")]
    assert (await HeldReports(store).all())[0].thread_id == 0

    topical = HeldReport(chat_id=GROUP, result=result, thread_id=IDEAS)
    await HeldReports(store).add(topical)
    assert await HeldReports(SessionStore(db)).take() == [
        HeldReport(chat_id=42, result=result, language="ru"),
        topical,
    ], "a new process reads the topic back"
