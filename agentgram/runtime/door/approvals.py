"""The approvals part of the door (``rt.approvals``): decisions on tool calls, trust (for a
while, always, revoked), what a session waits for, and the agent's clarifying questions.

A decision or an answer is stored as control mail first and applied once by its handler
(:mod:`runtime.core.sessions.control`). What comes back is a :class:`~.values.Decision`, never
the request's row: the storage's ``DecisionResult`` is turned into one here. Questions sit here
too because, for the user, a question is the other thing a turn waits on.
"""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.capabilities.questions import QuestionManager
from agentgram.runtime.capabilities.questions.manager import Settled
from agentgram.runtime.capabilities.tools.base import ToolRegistry
from agentgram.runtime.core.approvals.manager import ApprovalManager, DecidedBy, DecisionResult
from agentgram.runtime.core.approvals.rules import Rule
from agentgram.runtime.core.approvals.trust import bypass_scope, proposed_rule
from agentgram.runtime.core.mailbox import ApprovalDecisionBody
from agentgram.runtime.core.mailbox.envelope import QuestionAnswerBody
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.core.sessions.hub import SessionHub
from agentgram.runtime.core.turn.loop import call_summary
from agentgram.runtime.door.control import control_mail
from agentgram.runtime.door.values import (
    AnswerResult,
    AwaitedApproval,
    Decision,
    PendingApproval,
    PromptedApproval,
    SessionRef,
    TrustOverview,
)
from agentgram.runtime.infra.events import QuestionStatus
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.models import ApprovalRequestRow, ApprovalStatus, ToolCallRow, utcnow


class Approvals:
    def __init__(
        self,
        *,
        approval_manager: ApprovalManager,
        questions: QuestionManager,
        history: HistoryStore,
        hub: SessionHub,
        desk: ControlDesk,
        tools: ToolRegistry,
        workdir: Path,
        bypass_duration: float,
    ) -> None:
        self.approval_manager = approval_manager
        self.questions = questions
        self.history = history
        self.hub = hub
        self.desk = desk
        self.tools = tools
        self.workdir = workdir
        self.bypass_duration = bypass_duration

    async def decide(
        self,
        request_id: str,
        *,
        approved: bool,
        reason: str | None,
        envelope_id: str,
        how: DecidedBy = DecidedBy.BUTTON,
        trust_scope: str | None = None,
    ) -> Decision:
        """A button press or a reply (``how``, for the log): stored as mail, applied once by its
        handler; ``trust_scope`` is trusted for a while first."""
        request = await self.approval_manager.get(request_id)
        if request is None:  # no session to send it to: what became of it is all there is to say
            return Decision(applied=False, status=ApprovalStatus.EXPIRED, request_id=None)
        body = ApprovalDecisionBody(
            request_id=request_id, approved=approved, reason=reason, how=how, trust_scope=trust_scope
        )
        mail = control_mail(request.session_id, body, envelope_id)
        return Decision.of(await self.desk.send(mail, DecisionResult))

    async def _request_call(self, request_id: str) -> tuple[ApprovalRequestRow, ToolCallRow] | None:
        request = await self.approval_manager.get(request_id)
        if request is None:
            return None
        call = await self.history.call(request.tool_call_id)
        return None if call is None else (request, call)

    async def trust_for_a_while(self, request_id: str, *, envelope_id: str) -> tuple[Decision, int, str]:
        """ "⏱ 15 min": bypass this call's tool group for the session, and approve this call.

        Returns the decision, the minutes and the scope trusted (``""`` for a stale request),
        so the chat can say what it will not ask about."""
        found = await self._request_call(request_id)
        minutes = self.trust_minutes
        if found is None or found[0].status != ApprovalStatus.PENDING:
            stale = await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id)
            return stale, minutes, ""
        call = found[1]
        scope = bypass_scope(call, self.tools.get(call.name), self.workdir)
        result = await self.decide(
            request_id, approved=True, reason=None, envelope_id=envelope_id, trust_scope=scope
        )
        return result, minutes, scope

    @property
    def trust_minutes(self) -> int:
        """How long "trust for a while" (:meth:`trust_for_a_while`) trusts, in whole minutes."""
        return max(1, round(self.bypass_duration / 60))

    async def propose_always(self, request_id: str) -> Rule | None:
        found = await self._request_call(request_id)
        if found is None or found[0].status != ApprovalStatus.PENDING:
            return None
        return proposed_rule(found[1], self.tools.get(found[1].name), self.workdir)

    async def trust_always(self, request_id: str, *, envelope_id: str) -> tuple[Decision, Rule | None]:
        """ "🔁 Always", confirmed: save the proposed allow rule, then approve this call."""
        rule = await self.propose_always(request_id)
        if rule is None:
            return await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id), None
        saved = await self.approval_manager.add_rule(rule)  # before the decision wakes the turn
        result = await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id)
        if not result.applied:  # a concurrent tap decided first: keep no rule nobody confirmed
            await self.approval_manager.delete_rule(saved.id)
            return result, None
        return result, saved

    async def awaited_approval(self, session: SessionRef) -> AwaitedApproval | None:
        """What the session's turn is blocked on (``PostResult.WAITING_APPROVAL``), if still so."""
        request_id = self.hub.awaited(session.id)
        found = await self._request_call(request_id) if request_id is not None else None
        if found is None or found[0].status != ApprovalStatus.PENDING:
            return None
        request, call = found
        return AwaitedApproval(request_id=request.id, tool=call.name, message_id=request.message_id)

    def waits_for_decision(self, session_id: int) -> bool:
        """The session's turn is blocked on a decision (also on a prompt a previous process sent,
        which a resumed turn waits on without a new ``ApprovalRequested``)."""
        return self.hub.awaited(session_id) is not None or self.questions.awaited(session_id)

    async def approval_for_message(self, chat_id: int, message_id: int) -> PromptedApproval | None:
        """The request whose prompt is this chat message, once its send returned."""
        request = await self.approval_manager.by_message(chat_id, message_id)
        return None if request is None else PromptedApproval(request.id, ApprovalStatus(request.status))

    async def pending_approvals(self, session: SessionRef, limit: int | None = None) -> list[PendingApproval]:
        """The session's requests still waiting for a decision, oldest first (the first ``limit``),
        with their calls."""
        pending = []
        for request in (await self.approval_manager.pending(session.id))[:limit]:
            call = await self.history.call(request.tool_call_id)
            tool, summary = (call.name, call_summary(call)) if call is not None else ("?", "")
            pending.append(PendingApproval(request.id, request.message_id, tool, summary))
        return pending

    async def prompt_shown(self, request_id: str, chat_id: int, message_id: int) -> None:
        """The request's prompt is this chat message: a reply to it can name the request."""
        await self.approval_manager.attach_message(request_id, chat_id, message_id)

    async def prompt_not_shown(self, request_id: str) -> Decision:
        """Nobody can see the request's prompt: it expires, so the turn goes on instead of hanging."""
        return Decision.of(await self.approval_manager.expire_unshown(request_id))

    def trust_overview(self, session: SessionRef) -> TrustOverview:
        """What the session is not asked about now: ``/trust``."""
        bypasses = self.approval_manager.bypasses.active(session.id, utcnow())
        rules = [rule for rule in self.approval_manager.rules() if rule.origin == "user"]
        return TrustOverview(tuple(bypasses), tuple(rules))

    def revoke_bypass(self, session: SessionRef, scope: str) -> bool:
        """``False`` when no such bypass is live (revoked already, or expired)."""
        return self.approval_manager.bypasses.revoke(session.id, scope)

    async def revoke_rule(self, rule_id: int) -> bool:
        """``False`` when no such rule is saved (revoked already)."""
        return await self.approval_manager.delete_rule(rule_id)

    async def answer_question(
        self, question_id: str, *, envelope_id: str, option: int | None = None, text: str | None = None
    ) -> AnswerResult:
        """A tapped option (its index) or the user's own words: stored as mail first, then
        applied once; a question settled already (answered, superseded, stopped) stays so."""
        row = await self.questions.get(question_id)
        if row is None or row.status != QuestionStatus.PENDING:
            return AnswerResult(False, QuestionStatus(row.status) if row else QuestionStatus.CANCELLED, None)
        if option is not None:
            text = row.options[option] if 0 <= option < len(row.options) else None
        if text is None:
            return AnswerResult(False, QuestionStatus.PENDING, None)
        body = QuestionAnswerBody(question_id=question_id, answer=text)
        settled = await self.desk.send(control_mail(row.session_id, body, envelope_id), Settled)
        status = QuestionStatus(settled.row.status) if settled.row else QuestionStatus.CANCELLED
        return AnswerResult(settled.applied, status, text if settled.applied else None)

    async def answer_pending_question(self, session: SessionRef, text: str, *, envelope_id: str) -> bool:
        """The session's pending question, if it has one, takes ``text`` as its answer (then it is
        no new message); ``False`` (no read) when none is pending."""
        question_id = self.questions.pending_in(session.id)
        if question_id is None:
            return False
        return (await self.answer_question(question_id, envelope_id=envelope_id, text=text)).applied

    async def question_shown(self, question_id: str, chat_id: int, message_id: int) -> None:
        """The question is this chat message: a later process edits it when it is settled."""
        await self.questions.attach_message(question_id, chat_id, message_id)
