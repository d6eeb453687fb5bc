"""The session worker's states, driven through the hub with the scripted LLM on a real SQLite file.

Each test names the moves the worker makes (``HubRig.moves``); waits are on events
and moves, never on time, except where an absence is the point.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.core.sessions.state import WorkerState
from agentgram.runtime.core.turn import steps
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    ApprovalResolved,
    OutcomeKind,
    TextDelta,
    ToolActivity,
    ToolPhase,
    TurnFinished,
)
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import ChatMessage, ToolSpec
from agentgram.runtime.infra.storage.models import ApprovalStatus, Role, RowStatus, ToolCallStatus, TurnStatus
from tests.runtime.core.turn.scripted import IDLE, Hold, events_of, hub_rig, users

S = WorkerState


async def pause_a_long_job(rig: Any, session: Any) -> list[TurnFinished]:
    """A turn held in its tool call, paused meanwhile: it ends paused once the call returns."""
    await rig.say(session, "long job")
    await rig.hold.running.wait()
    await rig.pause(session)
    rig.hold.release.set()
    finished: list[TurnFinished] = await rig.turns_finished()
    return finished


async def test_a_message_starts_a_turn_that_opens_runs_and_ends_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round("Hello!", chunks=("Hel", "lo!")))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "hi")
        [finished] = await rig.turns_finished()
        assert (finished.outcome, finished.text) == (OutcomeKind.FINAL, "Hello!")
        assert rig.moves(session) == [
            (S.NEW, S.IDLE),
            (S.IDLE, S.OPENING),
            (S.OPENING, S.RUNNING),
            (S.RUNNING, S.IDLE),
        ]
        assert [e.text for e in events_of(rig.rec, TextDelta)] == ["Hel", "lo!"]
        assert len(llm.requests) == 1 and llm.closed == 0, "the prefetched request was the turn's"
        assert users(llm.requests[0].messages) == ["hi"]
        assert await rig.hub.paused_turn(session.id or 0) is None


async def test_mail_that_arrives_during_a_turn_is_folded_in_at_its_next_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("hold")]), Round("Both done."))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "first")
        await rig.hold.running.wait()
        assert rig.hub.is_busy(session.id or 0) and rig.state(session) is S.RUNNING
        await rig.say(session, "and this too")
        rig.hold.release.set()
        [finished] = await rig.turns_finished()
        assert finished.text == "Both done."
        assert users(llm.requests[1].messages) == ["first", "and this too"], "after the call's result"
        assert await rig.services.mailbox.unread(session.id or 0) == []


async def test_a_stop_while_the_turn_is_opened_closes_the_request_and_starts_it_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round("never shown", hold=asyncio.Event()))
    opening, go_on = asyncio.Event(), asyncio.Event()
    open_turn = steps.open_turn

    async def slow_open(services: Any, session_id: int, mail: Any, prepared: Any = None) -> int:
        opening.set()
        await go_on.wait()
        return await open_turn(services, session_id, mail, prepared)

    monkeypatch.setattr(steps, "open_turn", slow_open)
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "start")
        await opening.wait()
        assert rig.state(session) is S.OPENING and rig.hub.is_busy(session.id or 0)
        assert await rig.stop(session)
        assert rig.state(session) is S.STOPPING and rig.hub.is_busy(session.id or 0)
        go_on.set()
        [finished] = await rig.turns_finished()
        assert finished.outcome == OutcomeKind.CANCELLED
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())
        assert llm.closed == 1
        assert rig.moves(session)[-3:] == [
            (S.IDLE, S.OPENING),
            (S.OPENING, S.STOPPING),
            (S.STOPPING, S.IDLE),
        ], "it started cancelled, never running"


async def test_a_stop_while_running_closes_the_stream_and_keeps_what_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(chunks=("Working on it",), hold=asyncio.Event()))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "start")
        await rig.rec.wait_kind("text_delta")
        assert await rig.stop(session)
        assert await rig.stop(session), "a second /stop still reports the turn as stopped"
        [finished] = await rig.turns_finished()
        assert finished.outcome == OutcomeKind.CANCELLED
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())
        assert llm.closed == 1 and rig.state(session) is S.IDLE
        rows = await rig.services.history.all_rows(session.id or 0)
        assert [(r.role, r.content, r.status) for r in rows][-1] == (
            Role.ASSISTANT,
            "Working on it",
            RowStatus.CANCELLED,
        )
        assert rig.notices().count("stopped") == 1, "the two stops settle as one"


async def test_a_gate_waiting_for_the_user_is_its_own_state_until_the_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("ask")]), Round("Asked."))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "ask it")
        await rig.rec.wait_kind("approval_requested")
        assert rig.state(session) is S.WAITING_APPROVAL and rig.hub.is_busy(session.id or 0)
        [asked] = events_of(rig.rec, ApprovalRequested)
        assert (await rig.services.approvals.decide(asked.request_id, True)).applied
        [finished] = await rig.turns_finished()
        assert finished.text == "Asked."
        moves = rig.moves(session)
        assert moves.index((S.RUNNING, S.WAITING_APPROVAL)) < moves.index((S.WAITING_APPROVAL, S.RUNNING))
        [resolved] = events_of(rig.rec, ApprovalResolved)
        assert (resolved.request_id, resolved.status) == (asked.request_id, ApprovalStatus.APPROVED)


async def test_a_stop_while_waiting_for_approval_cancels_the_prompt_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("ask")]))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "ask it")
        await rig.rec.wait_kind("approval_requested")
        assert await rig.stop(session)
        [finished] = await rig.turns_finished()
        assert finished.outcome == OutcomeKind.CANCELLED
        assert (S.WAITING_APPROVAL, S.STOPPING) in rig.moves(session)
        assert (S.STOPPING, S.RUNNING) in rig.refused(session), "the gate's end does not revive it"
        [resolved] = events_of(rig.rec, ApprovalResolved)
        assert resolved.status == ApprovalStatus.CANCELLED
        [call] = [c for e in await rig.services.history.entries(session.id or 0) for c in e.calls]
        assert call.status == ToolCallStatus.CANCELLED


async def test_a_paused_turn_waits_for_resume_and_continues_with_what_came_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("hold")]), Round("Carried on."))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        sid = session.id or 0
        [paused] = await pause_a_long_job(rig, session)
        assert paused.outcome == OutcomeKind.PAUSED and rig.state(session) is S.PAUSED
        assert not rig.hub.is_busy(sid) and await rig.hub.paused_turn(sid) is not None

        await rig.say(session, "one more thing")
        await asyncio.sleep(IDLE / 2)  # an absence: a message alone does not resume it
        assert len(llm.requests) == 1 and rig.state(session) is S.PAUSED
        await rig.resume(session)
        [_, resumed] = await rig.turns_finished(2)
        assert (resumed.turn_id, resumed.outcome, resumed.text) == (
            paused.turn_id,
            OutcomeKind.FINAL,
            "Carried on.",
        )
        assert users(llm.requests[1].messages) == ["long job", "one more thing"]
        assert (S.PAUSED, S.RUNNING) in rig.moves(session)


async def test_a_stop_settles_a_paused_turn_and_the_worker_goes_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("hold")]))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await pause_a_long_job(rig, session)
        assert not await rig.stop(session), "a paused turn is not running"
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())
        latest = await rig.services.sessions.latest_turn(session.id or 0)
        assert latest is not None and latest.status == TurnStatus.CANCELLED
        assert (S.PAUSED, S.IDLE) in rig.moves(session)


async def test_an_evicted_paused_session_is_read_again_by_its_next_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("hold")]), Round("Done."))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        sid = session.id or 0
        await pause_a_long_job(rig, session)
        await rig.rec.wait_for(lambda: sid in rig.evicted)
        assert rig.state(session) is None, "nothing of it is left in memory"

        await rig.say(session, "still there?")
        await rig.rec.wait_for(lambda: rig.evicted.count(sid) == 2)  # it read the pause, waited, idled out
        assert [m for m in rig.moves(session) if m[0] is S.NEW] == [(S.NEW, S.IDLE), (S.NEW, S.PAUSED)]
        await rig.resume(session)
        [_, resumed] = await rig.turns_finished(2)
        assert resumed.text == "Done."


async def test_a_turn_a_crash_left_running_continues_in_the_next_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = Hold()
    first = ScriptedLLM.script(Round(calls=[Call("hold")]))
    async with hub_rig(tmp_path, first, monkeypatch, hold=hold) as rig:
        session = await rig.chat()
        await rig.say(session, "long job")
        await hold.running.wait()
    # the hub shut down mid-call, as a killed process leaves it: the turn is still running
    hold.release.set()
    second = ScriptedLLM.script(Round("Finished after the restart."))
    async with hub_rig(tmp_path, second, monkeypatch, hold=hold) as rig:
        [turn] = await rig.services.sessions.open_turns()
        assert turn.status == TurnStatus.RUNNING
        rig.hub.resume(turn.session_id, turn.id or 0)
        [finished] = await rig.turns_finished()
        assert (finished.turn_id, finished.text) == (turn.id, "Finished after the restart.")
        assert hold.runs == 2, "the interrupted call ran again"
        assert "restarted-continuing" in rig.notices()
        assert [m for m in rig.moves(session) if m[0] is S.NEW] == [(S.NEW, S.RUNNING)]


async def test_a_worker_whose_consumer_failed_starts_over_and_answers_the_next_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def model(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        first = len(llm.requests) == 1
        return Round(hold=asyncio.Event()) if first else Round("Back.")

    llm = ScriptedLLM(model)
    open_turn = steps.open_turn
    failures = [RuntimeError("the disk is gone")]

    async def flaky_open(services: Any, session_id: int, mail: Any, prepared: Any = None) -> int:
        if failures:
            raise failures.pop()
        return await open_turn(services, session_id, mail, prepared)

    monkeypatch.setattr(steps, "open_turn", flaky_open)
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "hello")
        await rig.rec.wait_for(lambda: (S.IDLE, S.NEW) in rig.moves(session))
        assert llm.closed == 1, "the prefetched request of the failed opening was closed"
        await rig.say(session, "hello again")
        [finished] = await rig.turns_finished()
        assert finished.text == "Back."
        assert users(llm.requests[-1].messages) == ["hello\n\nhello again"], "nothing was lost"


async def test_the_turn_loop_pairs_tool_results_and_reports_activity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[ToolSpec]] = []

    def model(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        seen.append(tools)
        if len(seen) == 1:
            return Round(calls=[Call("nope", id="c1")])
        return Round(f"{len(messages)} messages")

    async with hub_rig(tmp_path, ScriptedLLM(model), monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "go")
        [finished] = await rig.turns_finished()
        assert finished.text == "5 messages"  # system, user, assistant's call, its result, tail
        assert [t.name for t in seen[0]] == ["hold", "ask"]
        phases = [(e.name, e.phase, e.runs_command) for e in events_of(rig.rec, ToolActivity)]
        assert phases == [("nope", ToolPhase.STARTED, False), ("nope", ToolPhase.FAILED, False)]
