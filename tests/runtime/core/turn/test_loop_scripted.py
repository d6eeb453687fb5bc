"""The turn loop with the scripted in-process LLM: outcomes, the gate and the one settling of a stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.runtime.core.turn.gate import approval_resolved
from agentgram.runtime.core.turn.loop import settle_cancelled
from agentgram.runtime.infra.errors import FailureKind, LLMError
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    ApprovalResolved,
    OutcomeKind,
    ToolActivity,
    ToolPhase,
)
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import ToolMessage
from agentgram.runtime.infra.storage.models import ApprovalStatus, TurnStatus
from tests.runtime.core.turn.scripted import events_of, hub_rig, users


async def test_an_llm_failure_ends_the_turn_failed_with_what_the_user_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(LLMError("503 from the endpoint", kind=FailureKind.UNAVAILABLE))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "hi")
        [finished] = await rig.turns_finished()
        assert finished.outcome == OutcomeKind.FAILED
        assert finished.failure is not None and finished.failure.kind == FailureKind.UNAVAILABLE
        latest = await rig.services.sessions.latest_turn(session.id or 0)
        assert latest is not None and latest.status == TurnStatus.FAILED


async def test_a_turn_that_only_calls_tools_ends_exhausted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM(lambda messages, tools: Round(calls=[Call("nope")]))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "loop")
        [finished] = await rig.turns_finished()
        assert finished.outcome == OutcomeKind.EXHAUSTED
        assert len(llm.requests) == rig.services.max_rounds
        latest = await rig.services.sessions.latest_turn(session.id or 0)
        assert latest is not None and latest.error is not None and "5" in latest.error


async def test_a_rejected_call_is_a_result_the_model_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("ask")]), Round("Understood, I won't."))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "ask")
        await rig.rec.wait_kind("approval_requested")
        [asked] = events_of(rig.rec, ApprovalRequested)
        await rig.services.approvals.decide(asked.request_id, False, "not now")
        [finished] = await rig.turns_finished()
        assert finished.text == "Understood, I won't."
        [result] = [m for m in llm.requests[1].messages if isinstance(m, ToolMessage)]
        assert "not now" in result.content
        assert [e.phase for e in events_of(rig.rec, ToolActivity)] == [ToolPhase.STARTED, ToolPhase.REJECTED]
        [resolved] = events_of(rig.rec, ApprovalResolved)
        assert (resolved.status, resolved.reason) == (ApprovalStatus.REJECTED, "not now")
        assert users(llm.requests[1].messages) == ["ask"]


async def test_settling_a_stopped_turn_closes_calls_cancels_prompts_and_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one settling the loop and the worker both use: events built by ``approval_resolved``."""
    llm = ScriptedLLM.script(Round(calls=[Call("ask")]))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "ask")
        await rig.rec.wait_kind("approval_requested")
        await rig.hub.shutdown()  # the turn is left running, its prompt pending
        [turn] = await rig.services.sessions.open_turns()
        [pending] = await rig.services.approvals.pending(session.id)
        address = events_of(rig.rec, ApprovalRequested)[0].to
        closed: list[int] = []
        await settle_cancelled(
            rig.services, address, turn.id or 0, on_closed=lambda call: closed.append(call.id or 0)
        )
        assert len(closed) == 1
        [resolved] = events_of(rig.rec, ApprovalResolved)
        cancelled = await rig.services.approvals.get(pending.id)
        assert cancelled is not None and resolved == approval_resolved(address, cancelled)
        assert resolved.status == ApprovalStatus.CANCELLED
        ended = await rig.services.sessions.turn(turn.id or 0)
        assert ended is not None and ended.status == TurnStatus.CANCELLED
