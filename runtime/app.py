"""The runtime facade: what a chat adapter is allowed to call.

:class:`Runtime` wires storage, mailbox, LLM client, tools, approvals, the
session hub and the scheduler from :class:`~runtime.config.Settings`.
Adapters post mail through it (``post_user_message``, ``stop``, ``decide``…)
and subscribe to :attr:`Runtime.bus` for output. Every input is accepted as
mail *before* anything acts on it.
"""

from __future__ import annotations

import asyncio
import enum
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from agentgram.runtime.approvals.manager import ApprovalManager, DecidedBy, DecisionResult
from agentgram.runtime.approvals.rules import Rule
from agentgram.runtime.approvals.trust import bypass_scope, proposed_rule
from agentgram.runtime.config import Settings
from agentgram.runtime.errors import MailboxFull
from agentgram.runtime.events import Address, DurableOutput, EventBus, Notice, RoundEnded
from agentgram.runtime.llm.types import LLMClient
from agentgram.runtime.log import get_logger, register_secret
from agentgram.runtime.mailbox import (
    ApprovalDecisionBody,
    Checkpoint,
    ControlAction,
    ControlBody,
    Envelope,
    MailKind,
    Priority,
    Sender,
    SenderKind,
    SqlMailbox,
    UserMessageBody,
)
from agentgram.runtime.prompt import build_static_prompt
from agentgram.runtime.scheduler.service import SchedulerService
from agentgram.runtime.sessions.hub import HubOptions, SessionHub, address_of
from agentgram.runtime.storage.db import Database
from agentgram.runtime.storage.history import HistoryStore
from agentgram.runtime.storage.migrations import migrate
from agentgram.runtime.storage.models import (
    ApprovalRequestRow,
    ApprovalStatus,
    ChatSession,
    ToolCallRow,
    ToolCallStatus,
    TurnStatus,
    utcnow,
)
from agentgram.runtime.storage.outbox import OutboxStore
from agentgram.runtime.storage.sessions import SessionStore
from agentgram.runtime.tools.base import ToolRegistry
from agentgram.runtime.tools.builtin import default_registry
from agentgram.runtime.tools.files import secret_paths
from agentgram.runtime.tools.processes import SqlProcessLedger
from agentgram.runtime.tools.schedule import schedule_tools
from agentgram.runtime.turn.context import ContextSettings
from agentgram.runtime.turn.loop import TurnServices, call_summary

log = get_logger("runtime")

UNDELIVERED_WINDOW = timedelta(days=1)
"""How old a stored answer the chat never showed may be and still be sent on start."""

LLM_CHECK_FIRST = 1.0
LLM_CHECK_CAP = 60.0
"""Backoff of the start-up check of an unreachable LLM endpoint (seconds)."""

CHAT_SESSIONS_KEPT = 1024
"""Chats whose active session is kept in memory, least recently used out (the rest are read again)."""


class PostResult(enum.StrEnum):
    STARTED = "started"  # the session was idle: a turn starts with this message
    QUEUED = "queued"  # a turn is running: it reads this at its next step
    WAITING_APPROVAL = "waiting_approval"  # as QUEUED, but the next step waits for a decision
    PAUSED = "paused"  # the session's turn is paused: kept until /resume
    DUPLICATE = "duplicate"  # already accepted (redelivered update)
    FULL = "full"  # too many unread messages


@dataclass(slots=True, frozen=True)
class StopResult:
    was_running: bool


@dataclass(slots=True, frozen=True)
class AwaitedApproval:
    """The decision a session's turn waits for, as the chat can point at it."""

    request_id: str
    tool: str
    message_id: int | None  # the prompt in the chat; None until its send returned


@dataclass(slots=True, frozen=True)
class CallState:
    """A tool call as a status line shows it, as it stands in the database."""

    id: int
    name: str
    summary: str
    status: ToolCallStatus


RestartHook = Callable[[], Awaitable[None]]


def local_zone(settings: Settings) -> tuple[ZoneInfo, str]:
    name = settings.agent.timezone
    if name is None:
        try:
            from tzlocal import get_localzone_name

            name = get_localzone_name() or "UTC"
        except Exception:
            name = "UTC"
    try:
        return ZoneInfo(name), name
    except Exception:
        return ZoneInfo("UTC"), "UTC"


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        format_rules: str = "",
        llm: LLMClient | None = None,
        tools: ToolRegistry | None = None,
        clock: type[datetime] | None = None,
    ) -> None:
        self.settings = settings
        register_secret(settings.telegram.token.get_secret_value())
        register_secret(settings.llm.api_key.get_secret_value())
        self.db = Database(settings.storage.url)
        self.bus = EventBus()
        self.sessions = SessionStore(self.db)
        self.outbox = OutboxStore(self.db)
        self.history = HistoryStore(self.db)
        self.mailbox = SqlMailbox(self.db, settings.mailbox.max_unread)
        self.approvals = ApprovalManager(self.db, settings.approval)
        self.workdir = settings.agent.workdir.expanduser().resolve()
        self.timezone, self.timezone_name = local_zone(settings)
        if llm is None:
            from agentgram.runtime.llm.openai_client import OpenAIClient

            llm = OpenAIClient(settings.llm)
        self.llm = llm
        self.tools = tools or default_registry()
        self.processes = SqlProcessLedger(self.sessions)
        self._chat_sessions: OrderedDict[int, ChatSession] = OrderedDict()
        self._llm_check: asyncio.Task[None] | None = None
        self.restart_hooks: list[RestartHook] = []
        """Run on start before anything resumes: an adapter tidies what the previous process left
        in the chats (e.g. status lines it never finished), knowing nothing of this one runs yet."""
        self.services = TurnServices(
            db=self.db,
            sessions=self.sessions,
            history=self.history,
            mailbox=self.mailbox,
            llm=self.llm,
            tools=self.tools,
            approvals=self.approvals,
            bus=self.bus,
            context=ContextSettings(
                static_system=build_static_prompt(settings.agent.system_prompt_file, format_rules),
                workdir=self.workdir,
                timezone=self.timezone,
                timezone_name=self.timezone_name,
                max_history_messages=settings.llm.max_history_messages,
                max_tool_result_chars=settings.llm.max_tool_result_chars,
            ),
            max_rounds=settings.llm.max_tool_rounds,
            clock=utcnow,
            notice=self.notice,
            processes=self.processes,
            protected=secret_paths(settings.config_file, self.db.file),
        )
        self.hub = SessionHub(self.services, HubOptions(resume_on_message=settings.mailbox.resume_on_message))
        self.scheduler = SchedulerService(self)
        for tool in schedule_tools(self.scheduler):
            if self.tools.get(tool.name) is None:
                self.tools.register(tool)

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log.info("SQLite %s; database %s", Database.sqlite_version(), self.db.engine.url.render_as_string())
        await migrate(self.db)
        await self.approvals.load_rules()
        self._llm_check = asyncio.create_task(self._check_llm(), name="llm-check")
        await self.processes.reap_orphans()  # before any interrupted command is re-run
        await self.scheduler.start()  # before recover: it settles tic/cron turns a crash cut short
        await self.recover()

    async def recover(self) -> None:
        """Resume what a previous process left: answers the chat never showed, interrupted turns,
        unread mail."""
        for hook in self.restart_hooks:
            await hook()
        await self._resend_undelivered()
        for turn in await self.sessions.open_turns():
            if turn.status == TurnStatus.RUNNING:
                log.info("resuming turn %s of session %s", turn.id, turn.session_id)
                self.hub.resume(turn.session_id, turn.id or 0)
        for session_id in await self.sessions.sessions_with_mail():
            for envelope in await self.mailbox.unread(session_id):
                if isinstance(envelope.body, ApprovalDecisionBody):
                    await self._apply_decision(envelope.body, DecidedBy.REPLAYED)
            self.hub.wake(session_id)

    async def _resend_undelivered(self) -> None:
        """Final answers, notices and reports stored but never shown (killed in between, or
        Telegram down until the end) go out now, once."""
        for event in await self.outbox.unshown(since=utcnow() - UNDELIVERED_WINDOW):
            log.info("sending the stored %s %s, which the chat never showed", event.kind, event.outbox_id)
            self.bus.emit(event)
        for row in await self.history.undelivered_answers(since=utcnow() - UNDELIVERED_WINDOW):
            session = await self.sessions.get(row.session_id)
            if session is None or row.id is None or row.turn_id is None:
                continue
            log.info(
                "sending the stored answer %s of session %s, which the chat never showed", row.id, session.id
            )
            self.bus.emit(
                RoundEnded(
                    to=address_of(session),
                    turn_id=row.turn_id,
                    text=row.content,
                    has_tool_calls=False,
                    row_id=row.id,
                )
            )

    async def answer_shown(self, row_id: int) -> None:
        """The chat shows this final answer (``RoundEnded.row_id``): a restart need not send it."""
        await self.history.mark_delivered(row_id)

    async def _check_llm(self) -> None:
        """The LLM endpoint, checked in the background from start (the bot answers meanwhile: a
        turn that needs the model says it cannot reach it). One that is down or answers 5xx is
        checked again with backoff, :data:`LLM_CHECK_FIRST` doubling to :data:`LLM_CHECK_CAP`,
        until it answers; a refused key or an unlisted model is a configuration mistake, logged
        once."""
        delay = LLM_CHECK_FIRST
        while (warning := await self.llm.probe()) is not None:
            if not warning.retry:
                log.warning("LLM endpoint: %s", warning.text)
                return
            log.warning("LLM endpoint: %s; checking again in %.0fs", warning.text, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, LLM_CHECK_CAP)
        if delay > LLM_CHECK_FIRST:
            log.info("LLM endpoint answers now")

    async def close(self) -> None:
        if self._llm_check is not None:
            self._llm_check.cancel()
            await asyncio.gather(self._llm_check, return_exceptions=True)
        await self.scheduler.stop()
        await self.hub.shutdown()
        closer = getattr(self.llm, "aclose", None)
        if closer is not None:
            await closer()
        await self.db.close()

    # --- output ----------------------------------------------------------------

    async def notice(
        self,
        address: Address,
        key: str,
        params: dict[str, str | int],
        *,
        refers_to_message: int | None = None,
    ) -> None:
        await self.publish(Notice(to=address, key=key, params=params, refers_to_message=refers_to_message))

    async def publish(self, event: DurableOutput) -> None:
        """Emit output that must reach the user, recorded first (see :mod:`runtime.storage.outbox`)."""
        self.bus.emit(await self.outbox.record(event))

    async def output_shown(self, outbox_id: int) -> None:
        """The chat shows this notice or report (``outbox_id``): a restart need not send it."""
        await self.outbox.shown(outbox_id)

    # --- sessions --------------------------------------------------------------

    async def chat_session(self, chat_id: int, *, user_id: int | None, language: str | None) -> ChatSession:
        """The chat's active session; kept in memory (only this process opens chat sessions)."""
        cached = self._chat_sessions.get(chat_id)
        if cached is not None and (language is None or cached.language_code == language):
            self._chat_sessions.move_to_end(chat_id)
            return cached
        session, created = await self.sessions.find_or_open(chat_id, user_id=user_id, language=language)
        self._keep_chat_session(chat_id, session)
        self.hub.session_changed(session, created=created)
        return session

    def _keep_chat_session(self, chat_id: int, session: ChatSession) -> None:
        self._chat_sessions[chat_id] = session
        self._chat_sessions.move_to_end(chat_id)
        while len(self._chat_sessions) > CHAT_SESSIONS_KEPT:
            self._chat_sessions.popitem(last=False)

    async def new_session(
        self, chat_id: int, *, user_id: int | None, language: str | None, envelope_id: str
    ) -> ChatSession:
        """``/new``: stop whatever runs in the current session, then open a fresh one."""
        current = await self.chat_session(chat_id, user_id=user_id, language=language)
        await self.stop(current, envelope_id, quiet=True)
        self.approvals.bypasses.clear(current.id or 0)
        fresh = await self.sessions.open_new(chat_id, user_id=user_id, language=language)
        self._keep_chat_session(chat_id, fresh)
        self.hub.session_changed(fresh, created=True)
        return fresh

    # --- mail in -----------------------------------------------------------------

    async def post_user_message(
        self,
        session: ChatSession,
        text: str,
        *,
        envelope_id: str,
        chat_message_id: int | None = None,
        user_ref: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> PostResult:
        """Accept a user's message as mail (with its source's ``checkpoint``, in one transaction)."""
        assert session.id is not None
        busy = self.hub.is_busy(session.id)
        envelope = Envelope(
            id=envelope_id,
            session_id=session.id,
            sender=Sender(kind=SenderKind.USER, ref=user_ref),
            body=UserMessageBody(text=text, chat_message_id=chat_message_id),
        )
        try:
            receipt = await self.mailbox.accept(envelope, checkpoint)
        except MailboxFull:
            return PostResult.FULL
        if receipt.duplicate:
            return PostResult.DUPLICATE
        if busy:
            return PostResult.WAITING_APPROVAL if self.approvals.awaited(session.id) else PostResult.QUEUED
        if self.hub.known_not_paused(session.id):
            return PostResult.STARTED
        latest = await self.sessions.latest_turn(session.id)
        if (
            latest is not None
            and latest.status == TurnStatus.PAUSED
            and not self.settings.mailbox.resume_on_message
        ):
            return PostResult.PAUSED
        return PostResult.STARTED

    async def _control(
        self, session: ChatSession, action: ControlAction, envelope_id: str, *, quiet: bool = False
    ) -> bool:
        assert session.id is not None
        envelope = Envelope(
            id=envelope_id,
            session_id=session.id,
            sender=Sender(kind=SenderKind.USER),
            priority=Priority.INTERRUPT,
            body=ControlBody(action=action, quiet=quiet),
        )
        return not (await self.mailbox.accept(envelope)).duplicate

    async def stop(self, session: ChatSession, envelope_id: str, *, quiet: bool = False) -> StopResult:
        """Stop at once: store the stop mail, cancel the running turn, let the worker settle the rest.

        The mail is stored first so the worker, once the turn ends, finds it
        before any queued message (which it then drops instead of starting a turn).
        """
        assert session.id is not None
        await self._control(session, ControlAction.STOP, envelope_id, quiet=quiet)
        return StopResult(was_running=self.hub.cancel_turn(session.id))

    async def pause(self, session: ChatSession, envelope_id: str) -> bool:
        assert session.id is not None
        running = self.hub.is_busy(session.id)
        if running:
            await self._control(session, ControlAction.PAUSE, envelope_id)
        return running

    async def resume(self, session: ChatSession, envelope_id: str) -> bool:
        assert session.id is not None
        latest = await self.sessions.latest_turn(session.id)
        paused = latest is not None and latest.status == TurnStatus.PAUSED
        if not paused and not await self.hub.pause_pending(session.id):
            return False
        await self._control(session, ControlAction.RESUME, envelope_id)
        return True

    async def decide(
        self,
        request_id: str,
        *,
        approved: bool,
        reason: str | None,
        envelope_id: str,
        how: DecidedBy = DecidedBy.BUTTON,
    ) -> DecisionResult:
        """A button press or a reply (``how``, for the log): stored as mail first, then applied once."""
        request = await self.approvals.get(request_id)
        if request is None:
            return await self.approvals.decide(request_id, approved, reason, how=how)
        body = ApprovalDecisionBody(request_id=request_id, approved=approved, reason=reason)
        await self.mailbox.accept(
            Envelope(
                id=envelope_id,
                session_id=request.session_id,
                sender=Sender(kind=SenderKind.USER),
                priority=Priority.INTERRUPT,
                body=body,
            )
        )
        return await self._apply_decision(body, how)

    async def _apply_decision(
        self, body: ApprovalDecisionBody, how: DecidedBy = DecidedBy.BUTTON
    ) -> DecisionResult:
        return await self.approvals.decide(body.request_id, body.approved, body.reason, how=how)

    # --- trust -----------------------------------------------------------------

    async def _request_call(self, request_id: str) -> tuple[ApprovalRequestRow, ToolCallRow] | None:
        request = await self.approvals.get(request_id)
        if request is None:
            return None
        call = await self.history.call(request.tool_call_id)
        return None if call is None else (request, call)

    async def trust_for_a_while(
        self, request_id: str, *, envelope_id: str
    ) -> tuple[DecisionResult, int, str]:
        """ "⏱ 15 min": bypass this call's tool group for the session, and approve this call.

        Returns the decision, the minutes and the scope trusted (``""`` for a stale request),
        so the chat can say what it will not ask about."""
        found = await self._request_call(request_id)
        minutes = max(1, round(self.settings.approval.bypass_duration / 60))
        if found is None or found[0].status != ApprovalStatus.PENDING:
            return await self.approvals.decide(request_id, True), minutes, ""
        request, call = found
        scope = bypass_scope(call, self.tools.get(call.name), self.workdir)
        self.approvals.grant_bypass(request.session_id, scope)
        result = await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id)
        return result, minutes, scope

    async def propose_always(self, request_id: str) -> Rule | None:
        found = await self._request_call(request_id)
        if found is None or found[0].status != ApprovalStatus.PENDING:
            return None
        return proposed_rule(found[1], self.tools.get(found[1].name), self.workdir)

    async def trust_always(self, request_id: str, *, envelope_id: str) -> tuple[DecisionResult, Rule | None]:
        """ "🔁 Always", confirmed: save the proposed allow rule, then approve this call."""
        rule = await self.propose_always(request_id)
        if rule is None:
            return await self.approvals.decide(request_id, True), None
        saved = await self.approvals.add_rule(rule)  # before the decision wakes the turn
        result = await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id)
        if not result.applied:  # a concurrent tap decided first: keep no rule nobody confirmed
            await self.approvals.delete_rule(saved.id)
            return result, None
        return result, saved

    async def awaited_approval(self, session: ChatSession) -> AwaitedApproval | None:
        """What the session's turn is blocked on (``PostResult.WAITING_APPROVAL``), if still so."""
        request_id = self.approvals.awaited(session.id or 0)
        found = await self._request_call(request_id) if request_id is not None else None
        if found is None or found[0].status != ApprovalStatus.PENDING:
            return None
        request, call = found
        return AwaitedApproval(request_id=request.id, tool=call.name, message_id=request.message_id)

    async def call_for_request(self, request_id: str) -> ToolCallRow | None:
        found = await self._request_call(request_id)
        return None if found is None else found[1]

    async def call_states(self, call_ids: Sequence[int]) -> list[CallState]:
        """These tool calls as they stand now, in the order asked (unknown ids left out): what a
        status line a restart cut short should read."""
        states = []
        for call_id in call_ids:
            call = await self.history.call(call_id)
            if call is not None:
                states.append(CallState(call_id, call.name, call_summary(call), ToolCallStatus(call.status)))
        return states


__all__ = ["AwaitedApproval", "CallState", "MailKind", "PostResult", "RestartHook", "Runtime", "StopResult"]
