"""Bounded memory: the session hub evicts idle workers and makes them again when mail arrives.

A real runtime (file SQLite, the real openai SDK against the fake server, the real
scheduler). Eviction is observed through ``SessionHub.evict_listeners``; a chat
worker's idle timeout is shortened to :data:`IDLE` so a test waits for it, not sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgram.runtime.app import PostResult, Runtime
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    Notice,
    OutcomeKind,
    RuntimeEvent,
    ToolActivity,
    ToolPhase,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.storage.models import ChatSession, TurnStatus
from agentgram.runtime.scheduler.models import JobRun, JobRunStatus, TicRun, TicRunStatus
from agentgram.runtime.scheduler.tic import Run
from agentgram.runtime.scheduler.values import JobSpec
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Hang, Text, ToolCalls
from tests.runtime.core.turn.harness import Recorder

IDLE = 0.05
"""A chat worker's idle timeout in these tests (the product's is minutes)."""
LONGER_THAN_IDLE = IDLE * 8
ALLOW_SHELL = {"rules": [{"tool": "execute_cmd", "action": "allow"}]}
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo released"


@dataclass
class Rig:
    runtime: Runtime
    rec: Recorder
    evicted: list[int] = field(default_factory=list)
    runs: list[JobRun] = field(default_factory=list)
    tics: list[TicRun] = field(default_factory=list)

    @property
    def workers(self) -> set[int]:
        return set(self.runtime.parts.hub.workers)

    async def chat(self) -> ChatSession:
        """A new chat session, its first worker gone: the one made with the session idles out
        before a test posts, so that a test's evictions count the workers its own mail made (a
        slow store would otherwise let it idle out after the post, and count as the turn's)."""
        session = await self.runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")
        sid = session.id or 0
        await self.rec.wait_for(lambda: sid not in self.workers)
        assert self.evicted == [sid]
        self.evicted.clear()
        return session

    async def evictions(self, session_id: int, count: int = 1) -> None:
        await self.rec.wait_for(lambda: self.evicted.count(session_id) >= count)
        assert session_id not in self.workers

    def finished(self) -> list[TurnFinished]:
        return [e for e in self.rec.events if isinstance(e, TurnFinished)]

    def notices(self) -> list[str]:
        return [e.key for e in self.rec.events if isinstance(e, Notice)]

    def held_in_memory(self, session_id: int) -> bool:
        """The session's worker or an entry of the in-memory views (unread mail, history tail, notes)."""
        views = (self.runtime.parts.mailbox._view, self.runtime.parts.history.tails)
        return (
            session_id in self.workers
            or any(v.get(session_id) is not None for v in views)
            or session_id in self.runtime.parts.notes._texts
        )


@asynccontextmanager
async def hub_rig(
    tmp_path: Path, fake: FakeOpenAI, *, idle: float = IDLE, **sections: Any
) -> AsyncIterator[Rig]:
    runtime = Runtime(
        make_settings(tmp_path, fake.base_url, **sections), format_rules="", home_chat_id=ALLOWED_USER
    )
    runtime.parts.hub.options.idle_timeout = idle
    rig = Rig(runtime, Recorder())
    runtime.parts.bus.subscribe(rig.rec)

    def note(into: list[Any], item: Any) -> None:
        into.append(item)
        rig.rec.changed.set()

    runtime.parts.hub.evict_listeners.append(lambda session_id: note(rig.evicted, session_id))
    runtime.parts.scheduler.run_listeners.append(lambda run: note(rig.runs, run))
    runtime.parts.scheduler.tic_listeners.append(lambda tic: note(rig.tics, tic))
    await runtime.start()
    try:
        yield rig
    finally:
        await runtime.close()


async def test_headless_runs_leave_no_worker_behind(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """Each tic and cron run opens a fresh session; its worker goes when its turn is over."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "TIC.md").write_text("- anything urgent?\n")
    async with hub_rig(tmp_path, fake_llm, idle=3600) as rig:  # headless: at once, not after idling
        scheduler = rig.runtime.parts.scheduler
        job = await scheduler.add_job(
            JobSpec(title="Ping", schedule="every 24h", prompt="ping", chat_id=ALLOWED_USER)
        )
        for n in range(5):
            fake_llm.script(Text(f"pong {n}"), Text("TIC_OK"))
            runs, tics = len(rig.runs), len(rig.tics)
            assert await scheduler.run_now(job.id or 0)
            await rig.rec.wait_for(lambda: len(rig.runs) > runs)  # noqa: B023 (awaited in this pass)
            assert isinstance(await scheduler.tic(manual=True), Run)
            await rig.rec.wait_for(lambda: len(rig.tics) > tics)  # noqa: B023
        assert [t.status for t in rig.tics] == [TicRunStatus.RAN] * 5
        assert [r.status for r in rig.runs] == [JobRunStatus.SUCCESS] * 5
        headless = {r.session_id for r in rig.runs} | {t.session_id for t in rig.tics}
        assert len(headless) == 10 and None not in headless
        await rig.rec.wait_for(lambda: headless <= set(rig.evicted))
        home = await scheduler.home_session()
        assert rig.workers <= {home.session_id}, (
            "only the home chat's worker may remain (it idles for an hour)"
        )
        assert not any(rig.held_in_memory(s) for s in headless if s is not None)


async def test_an_idle_chat_worker_is_evicted_and_the_next_message_has_the_whole_history(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(Text("Nice to meet you, Ada."), Text("You are Ada."))
    async with hub_rig(tmp_path, fake_llm) as rig:
        session = await rig.chat()
        sid = session.id or 0
        assert await rig.runtime.chat.post_user_message(session, "My name is Ada.", envelope_id="u1") == (
            PostResult.STARTED
        )
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        await rig.evictions(sid)
        assert not rig.held_in_memory(sid), "the session's views went with its worker"

        assert await rig.runtime.chat.post_user_message(session, "What's my name?", envelope_id="u2") == (
            PostResult.STARTED
        )
        await rig.rec.wait_for(lambda: len(rig.finished()) == 2)
        assert [(f.outcome, f.text) for f in rig.finished()] == [
            (OutcomeKind.FINAL, "Nice to meet you, Ada."),
            (OutcomeKind.FINAL, "You are Ada."),
        ]
        conversation = [(m["role"], m["content"]) for m in fake_llm.requests[1]["messages"][1:-1]]
        assert conversation == [
            ("user", "My name is Ada."),
            ("assistant", "Nice to meet you, Ada."),
            ("user", "What's my name?"),
        ]
        await rig.evictions(sid, 2)


async def test_a_turn_waiting_for_approval_keeps_its_worker_and_the_decision_goes_on(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "echo hi"})]), Text("It said hi."))
    async with hub_rig(tmp_path, fake_llm) as rig:
        session = await rig.chat()
        sid = session.id or 0
        await rig.runtime.chat.post_user_message(session, "say hi", envelope_id="u1")
        await rig.rec.wait_kind("approval_requested")
        [asked] = [e for e in rig.rec.events if isinstance(e, ApprovalRequested)]
        worker = rig.runtime.parts.hub.workers[sid]
        await asyncio.sleep(LONGER_THAN_IDLE)  # an absence: nothing to wait for but time
        assert rig.evicted == [] and rig.runtime.parts.hub.workers[sid] is worker and worker.busy

        result = await rig.runtime.approvals.decide(
            asked.request_id, approved=True, reason=None, envelope_id="d1"
        )
        assert result.applied
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        assert rig.finished()[0].text == "It said hi."
        await rig.evictions(sid)


async def test_a_paused_turn_survives_eviction_and_resume_continues_it(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": WAIT_FOR_GO})]), Text("Done, with the note."))
    async with hub_rig(tmp_path, fake_llm, approval=ALLOW_SHELL) as rig:
        session = await rig.chat()
        sid = session.id or 0
        await rig.runtime.chat.post_user_message(session, "long job", envelope_id="u1")
        await rig.rec.wait_for(
            lambda: any(isinstance(e, ToolActivity) and e.phase == ToolPhase.RUNNING for e in rig.rec.events)
        )
        assert await rig.runtime.chat.pause(session, "p1")
        await asyncio.sleep(LONGER_THAN_IDLE)  # a turn with a pause pending is still running
        assert rig.evicted == [] and await rig.runtime.parts.hub.pause_pending(sid)
        (rig.runtime.parts.workdir / "go").touch()
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        [paused] = rig.finished()
        assert paused.outcome == OutcomeKind.PAUSED
        await rig.evictions(sid)

        assert await rig.runtime.chat.post_user_message(session, "one more thing", envelope_id="u2") == (
            PostResult.PAUSED
        )
        await rig.evictions(sid, 2)  # a new worker saw the message wait for /resume, then idled out
        assert fake_llm.calls == 1 and await rig.runtime.parts.mailbox.unread(sid) != []

        assert await rig.runtime.chat.resume(session, "r1")
        await rig.rec.wait_for(lambda: len(rig.finished()) == 2)
        resumed = rig.finished()[1]
        assert (resumed.turn_id, resumed.outcome) == (paused.turn_id, OutcomeKind.FINAL)
        assert resumed.text == "Done, with the note."
        assert fake_llm.requests[1]["messages"][-2] == {"role": "user", "content": "one more thing"}
        await rig.evictions(sid, 3)


async def test_a_stop_for_an_evicted_paused_session_cancels_its_turn(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": WAIT_FOR_GO})]))
    async with hub_rig(tmp_path, fake_llm, approval=ALLOW_SHELL) as rig:
        session = await rig.chat()
        sid = session.id or 0
        await rig.runtime.chat.post_user_message(session, "long job", envelope_id="u1")
        await rig.rec.wait_for(
            lambda: any(isinstance(e, ToolActivity) and e.phase == ToolPhase.RUNNING for e in rig.rec.events)
        )
        assert await rig.runtime.chat.pause(session, "p1")
        (rig.runtime.parts.workdir / "go").touch()
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        await rig.evictions(sid)

        assert not (await rig.runtime.chat.stop(session, "s1")).was_running
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())
        latest = await rig.runtime.parts.session_store.latest_turn(sid)
        assert latest is not None and latest.status == TurnStatus.CANCELLED
        await rig.evictions(sid, 2)
        assert not await rig.runtime.chat.resume(session, "r1"), "nothing left to resume"


async def test_a_stop_before_the_turns_first_step_still_closes_the_request_sent_while_opening(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """The stop handler can act between the turn's task being made and its first step:
    ``TurnStarted`` is emitted in between, and the handler is whatever runs next. A task
    cancelled then never runs a line, its clean-up neither, and the request sent while the
    turn was opened streamed on until the model was done. The turn now meets its stop at its
    first step: the request is closed at once and the turn ends cancelled."""
    fake_llm.script(Hang(first_text="Working", seconds=30))
    async with hub_rig(tmp_path, fake_llm) as rig:
        session = await rig.chat()
        sid = session.id or 0
        acted: list[bool] = []

        def stop_at_start(event: RuntimeEvent) -> None:
            if isinstance(event, TurnStarted):  # before the turn task's first step
                acted.append(rig.runtime.parts.hub.cancel_turn(sid))  # the stop handler's act

        rig.runtime.parts.bus.subscribe(stop_at_start)
        await rig.runtime.chat.post_user_message(session, "start", envelope_id="u1")
        await fake_llm.wait_stream_closed()
        assert acted == [True]
        await rig.runtime.chat.stop(session, "s1")  # the mail that always follows the act
        await rig.rec.wait_for(lambda: len(rig.finished()) == 1)
        assert rig.finished()[0].outcome == OutcomeKind.CANCELLED
        latest = await rig.runtime.parts.session_store.latest_turn(sid)
        assert latest is not None and latest.status == TurnStatus.CANCELLED


async def test_a_late_approval_tap_for_an_evicted_session_is_stale_and_settled(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("execute_cmd", {"command": "echo hi"})]))
    async with hub_rig(tmp_path, fake_llm) as rig:
        session = await rig.chat()
        sid = session.id or 0
        await rig.runtime.chat.post_user_message(session, "say hi", envelope_id="u1")
        await rig.rec.wait_kind("approval_requested")
        [asked] = [e for e in rig.rec.events if isinstance(e, ApprovalRequested)]
        await rig.runtime.chat.stop(session, "s1")
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())
        await rig.evictions(sid)

        result = await rig.runtime.approvals.decide(
            asked.request_id, approved=True, reason=None, envelope_id="d1"
        )
        assert not result.applied and result.request_id is not None
        await rig.evictions(sid, 2)  # a new worker consumed the decision, which had nothing to act on
        assert await rig.runtime.parts.mailbox.unread(sid) == []
        assert fake_llm.calls == 1 and [f.outcome for f in rig.finished()] == [OutcomeKind.CANCELLED]
