"""What each kind of control mail does: the handlers :class:`SessionControl` gives the desk.

The outcomes, which the door turns into its answers:

==============  =====================================================  ===========================
control         acts                                                   outcome
==============  =====================================================  ===========================
stop            cancels the turn; its running calls and file fetches   whether anything was running
pause, resume   nothing at once (the worker and the turn read them)   ``True``
decision        trusts the scope it carries, then decides once         the store's ``DecisionResult``
answer          settles the question once                              the store's ``Settled``
cancel calls    cancels those running calls of the session             whether one was running
compact         summarises the older history, unless a turn runs       a ``CompactionReport``
model           the session's requests go to the chosen model          ``True``
steer           stores the user's choice on a queued message; ``now``  the mailbox's ``Steered``
                also cancels the turn and its calls, as stop does
                (the worker then starts on the message: nothing is
                dropped)
==============  =====================================================  ===========================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from agentgram.runtime.capabilities.questions.manager import Settled
from agentgram.runtime.core.approvals.manager import DecidedBy, DecisionResult
from agentgram.runtime.core.mailbox import (
    ApprovalDecisionBody,
    ControlAction,
    ControlBody,
    Envelope,
    Steer,
    Steered,
)
from agentgram.runtime.core.mailbox.envelope import QuestionAnswerBody
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.core.turn.compaction import CompactionOutcome, CompactionReport
from agentgram.runtime.infra.storage.models import MailKind

STOPPED_BY_USER = "stopped by the user (/stop)"
CANCELLED_BY_USER = "cancelled by the user"
STEERED_BY_USER = "stopped by the user, who asked to start on a newer message"


class Steering(Protocol):
    async def steer(self, session_id: int, seq: int, choice: Steer) -> Steered: ...

    async def cursor(self, session_id: int) -> int: ...


class Turns(Protocol):
    def cancel_turn(self, session_id: int) -> bool: ...

    def is_busy(self, session_id: int) -> bool: ...


class Calls(Protocol):
    def cancel_session(self, session_id: int, reason: str, *, quiet: bool = True) -> int: ...

    def cancel_run(
        self, run_id: int, reason: str | None = None, *, quiet: bool = False, session_id: int | None = None
    ) -> bool: ...


class Fetches(Protocol):
    def cancel_session(self, session_id: int) -> int: ...


class Decisions(Protocol):
    def grant_bypass(self, session_id: int, scope: str) -> object: ...

    async def decide(
        self, request_id: str, approved: bool, reason: str | None = None, *, how: DecidedBy = DecidedBy.BUTTON
    ) -> DecisionResult: ...


class Answers(Protocol):
    async def answer(self, question_id: str, answer: str) -> Settled: ...


@dataclass(frozen=True, slots=True)
class SessionControl:
    """The parts control acts on; :meth:`register` gives the desk one handler per kind beyond the
    hub's own (pause and resume, acknowledged: the turn and the worker read them)."""

    turns: Turns
    calls: Calls
    fetches: Fetches
    decisions: Decisions
    answers: Answers
    compact: Callable[[int], Awaitable[CompactionReport]]
    """Summarise the session's older history now (``/compact``)."""
    compaction_on: bool
    choose_model: Callable[[int, str | None], Awaitable[None]]
    """The session's model from its next request on (``None``: the default)."""
    steering: Steering
    """Where a queued message's choice is stored (the mailbox)."""

    def register(self, desk: ControlDesk) -> None:
        desk.handle(ControlAction.STOP, self.stop)
        desk.handle(ControlAction.CANCEL_CALLS, self.cancel_calls)
        desk.handle(ControlAction.COMPACT, self.compact_now)
        desk.handle(ControlAction.MODEL, self.model)
        desk.handle(ControlAction.STEER, self.steer)
        desk.handle(MailKind.APPROVAL_DECISION, self.decide)
        desk.handle(MailKind.QUESTION_ANSWER, self.answer)

    def stop(self, envelope: Envelope, replayed: bool) -> bool:
        """At once, in the listener: the turn first; the calls' results (cancelled) then come
        after the stop mail, so the worker keeps them instead of dropping them."""
        session_id = envelope.session_id
        running = self.turns.cancel_turn(session_id)
        calls = self.calls.cancel_session(session_id, STOPPED_BY_USER)
        fetches = self.fetches.cancel_session(session_id)  # the stop drops the message they came with
        return running or calls > 0 or fetches > 0

    def cancel_calls(self, envelope: Envelope, replayed: bool) -> bool:
        body = _control(envelope)
        cancelled = [
            self.calls.cancel_run(int(run_id), CANCELLED_BY_USER, session_id=envelope.session_id)
            for run_id in body.call_ids
        ]
        return any(cancelled)

    async def compact_now(self, envelope: Envelope, replayed: bool) -> CompactionReport:
        if not self.compaction_on:
            return CompactionReport(CompactionOutcome.OFF)
        if self.turns.is_busy(envelope.session_id):  # a running turn compacts by itself when it must
            return CompactionReport(CompactionOutcome.BUSY)
        return await self.compact(envelope.session_id)

    async def model(self, envelope: Envelope, replayed: bool) -> bool:
        await self.choose_model(envelope.session_id, _control(envelope).model)
        return True

    async def steer(self, envelope: Envelope, replayed: bool) -> Steered:
        body = _control(envelope)
        if body.steer is None or body.target_seq is None:
            return Steered.UNKNOWN
        session_id = envelope.session_id
        outcome = await self.steering.steer(session_id, body.target_seq, body.steer)
        if outcome is not Steered.APPLIED or body.steer is not Steer.NOW:
            return outcome
        # a turn that opened meanwhile read the message already: it is the one to keep
        if await self.steering.cursor(session_id) < body.target_seq:
            self.turns.cancel_turn(session_id)  # the worker then opens a turn with the message
            self.calls.cancel_session(session_id, STEERED_BY_USER)
        return outcome

    async def decide(self, envelope: Envelope, replayed: bool) -> DecisionResult:
        body = envelope.body
        assert isinstance(body, ApprovalDecisionBody)
        if body.trust_scope is not None and not replayed:  # trust lives in memory: a restart forgets it
            self.decisions.grant_bypass(envelope.session_id, body.trust_scope)
        how = DecidedBy.REPLAYED if replayed else DecidedBy(body.how)
        return await self.decisions.decide(body.request_id, body.approved, body.reason, how=how)

    async def answer(self, envelope: Envelope, replayed: bool) -> Settled:
        body = envelope.body
        assert isinstance(body, QuestionAnswerBody)
        return await self.answers.answer(body.question_id, body.answer)


def _control(envelope: Envelope) -> ControlBody:
    assert isinstance(envelope.body, ControlBody)
    return envelope.body


__all__ = ["CANCELLED_BY_USER", "STEERED_BY_USER", "STOPPED_BY_USER", "SessionControl"]
