"""A turn's rounds as named steps, each returning the next (pydantic-ai's agent graph).

The steps, in the order a round takes them (:data:`STEPS` is the whole list)::

    Resume ─┐                       (a turn that continues: restart, /resume)
            ▼
    Receive ──▶ BuildRequest ──▶ CallModel ──▶ PersistRound ──▶ End(Final)
       ▲  │          │                              │
       │  └▶ End(Paused)   └▶ End(Exhausted)        ▼
       └──────────────────────────────────── CallTools (gate → execute → record)

*Receive* is the round-boundary receive point (docs/architecture/mailbox.md): stop if the turn's token is cancelled, fold
unread mail into the conversation (the root frame only) or pause.
*BuildRequest* spends one round of the budget and builds the request with
the one builder the prefetch uses too (:mod:`runtime.turn.request`).
*CallModel* streams it (adopting the prefetched request when it asked exactly
that). *PersistRound* stores the assistant row and its calls ``pending``; a
text-only round is the final answer. *CallTools* runs the calls
(:mod:`runtime.turn.calls`). A /stop anywhere cancels the task; the runner
turns that into the *cancel* step (:meth:`~runtime.turn.loop.TurnRunner.run`).
Around them the session worker runs prefetch, open and finish
(:mod:`runtime.turn.steps`).

What differs for a sub-agent is its :class:`~runtime.turn.frame.Frame`, never
a branch here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentgram.runtime.core.turn.calls import resume_pending_calls, run_calls
from agentgram.runtime.core.turn.children import resume_children
from agentgram.runtime.core.turn.inject import Injected, inject_mail, is_users
from agentgram.runtime.core.turn.outcome import Exhausted, Final, Paused, TurnOutcome
from agentgram.runtime.core.turn.request import Request, build_request, offered_tools
from agentgram.runtime.infra.events import MessagesRead
from agentgram.runtime.infra.llm.types import LLMRound
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.models import ToolCallRow

if TYPE_CHECKING:
    from agentgram.runtime.core.turn.loop import TurnRunner


@dataclass(slots=True, frozen=True)
class Resume:
    """A turn that continues: its sub-agents a restart cut short first (the root's), its answer
    if it was stored already, its round budget, then the calls a previous process left open."""

    async def run(self, turn: TurnRunner) -> Step:
        if turn.frame.owns_turn:  # docs/architecture/subagents.md, "After a restart"
            await resume_children(turn)
        if (answer := await turn.stored_answer()) is not None:  # crashed before the turn was closed
            return End(Final(answer))
        stored = await turn.deps.sessions.turn(turn.turn_id)
        kept = stored is not None and turn.frame.owns_turn  # a restarted sub-agent gets its budget again
        turn.state.rounds = stored.rounds if kept and stored is not None else 0
        turn.state.offered = await offered_tools(turn.deps, turn.session, turn.frame.level)
        await resume_pending_calls(turn)
        return Receive()


@dataclass(slots=True, frozen=True)
class Receive:
    """The round-boundary receive point: a stop ends the turn, mail is folded in (or a pause met)."""

    async def run(self, turn: TurnRunner) -> Step:
        if turn.token.cancelled:
            raise asyncio.CancelledError
        if not turn.frame.injects_mail:  # a sub-agent's mail waits for the root's next round
            return BuildRequest()
        s, state = turn.deps, turn.state
        unread, state.first_mail = state.first_mail, None
        folded = await inject_mail(
            s.db, s.mailbox, s.history, turn.session_id, turn.turn_id, unread, prepare=turn.prepare
        )
        injected = folded.injected
        if read := tuple(e.seq for e in folded.mail if is_users(e)):
            s.bus.emit(MessagesRead(to=turn.address, turn_id=turn.turn_id, seqs=read, step=state.rounds + 1))
        if injected is Injected.PAUSE:
            return End(Paused())
        if injected is Injected.STOP:  # a /stop landed before the hub could cancel us
            turn.token.cancel()
            raise asyncio.CancelledError
        return BuildRequest()


@dataclass(slots=True, frozen=True)
class BuildRequest:
    """One more round, if the budget allows: the request as :func:`build_request` builds it."""

    async def run(self, turn: TurnRunner) -> Step:
        s, state = turn.deps, turn.state
        if state.rounds >= s.max_rounds:
            return End(Exhausted(s.max_rounds))
        state.rounds += 1
        now = state.prefetch.now if state.prefetch is not None else s.clock()  # the prefetch's reading
        compact = state.rounds == 1  # between turns only
        request = await build_request(s, turn.session, turn.frame, now=now, compact=compact)
        state.offered = request.tools
        return CallModel(request)


@dataclass(slots=True, frozen=True)
class CallModel:
    """Stream one completion (cancellable: /stop closes the stream)."""

    request: Request

    async def run(self, turn: TurnRunner) -> Step:
        prefetch, turn.state.prefetch = turn.state.prefetch, None  # from here its text is streamed or void
        return PersistRound(await turn.call_model(self.request.messages, prefetch))


@dataclass(slots=True, frozen=True)
class PersistRound:
    """The assistant row and its calls as ``pending``; a text-only round is the answer."""

    result: LLMRound

    async def run(self, turn: TurnRunner) -> Step:
        result, state, frame = self.result, turn.state, turn.frame
        state.add_usage(result.usage.input_tokens, result.usage.output_tokens)
        final = not result.tool_calls
        closes = final and frame.owns_turn
        frame.echo.stream_ended(has_tool_calls=not final)
        entry = await durable(
            turn.deps.history.record_round(
                session_id=turn.session_id,
                turn_id=turn.turn_id,
                result=result,
                closes_turn=closes,
                stack_id=frame.stack_id,
            )
        )
        state.partial_text = ""
        frame.echo.round_ended(result.text, has_tool_calls=bool(entry.calls), row_id=entry.id)
        return End(Final(result.text, closed=closes)) if final else CallTools(list(entry.calls))


@dataclass(slots=True, frozen=True)
class CallTools:
    """Each call gated, executed and recorded, in declared order (a sub-agent batch at once)."""

    calls: list[ToolCallRow]

    async def run(self, turn: TurnRunner) -> Step:
        await run_calls(turn, self.calls)
        return Receive()


@dataclass(slots=True, frozen=True)
class End:
    outcome: TurnOutcome


Step = Resume | Receive | BuildRequest | CallModel | PersistRound | CallTools | End

STEPS: tuple[type[Step], ...] = (Resume, Receive, BuildRequest, CallModel, PersistRound, CallTools, End)
"""Every step of a frame's rounds, in the order a round takes them."""


async def run_steps(turn: TurnRunner, step: Step) -> TurnOutcome:
    """Take ``step`` and each next one until the :class:`End`."""
    while not isinstance(step, End):
        step = await step.run(turn)
    return step.outcome


__all__ = [
    "STEPS",
    "BuildRequest",
    "CallModel",
    "CallTools",
    "End",
    "PersistRound",
    "Receive",
    "Resume",
    "Step",
    "run_steps",
]
