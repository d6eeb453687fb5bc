"""The runtime the adapters hold: its parts, its lifecycle and the door.

:class:`Runtime` asks :func:`~runtime.compose.compose` for its parts (storage,
mailbox, LLM client, tools, approvals, the session hub, the scheduler and the
door's six parts, :mod:`runtime.door`) and keeps them as ``rt.parts``. It
exposes the door: ``rt.chat``, ``rt.approvals``, ``rt.calls``, ``rt.jobs``,
``rt.sessions``, ``rt.rollback``, the key-value store, the lifecycle (start, recover, close),
the event subscription, the restart and close hooks, the file source and the
dead letters. Every input is accepted as mail *before* anything acts on it.

Adapters hold it as a :class:`~runtime.door.protocols.Door`: what they pass in
and get back are the door's values (:mod:`runtime.door.values`, re-exported
here) or the runtime's own value types re-exported here (``Rule``, ``Bypass``,
``ApprovalStatus``…), never an ORM row and never one of its parts (a test
walks ``bot/`` for attribute access on them). ``rt.parts`` is for the
runtime's own wiring and tests.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Self
from zoneinfo import ZoneInfo

from agentgram.runtime.capabilities.attachments.inbox import FileSource
from agentgram.runtime.capabilities.mcp.catalog import McpServerStatus
from agentgram.runtime.capabilities.tools.base import ToolRegistry
from agentgram.runtime.compose import CHAT_SESSIONS_KEPT, compose, runtime_tool_names, unknown_hook_tools
from agentgram.runtime.core.approvals.bypass import Bypass
from agentgram.runtime.core.approvals.manager import DecidedBy, DecisionResult
from agentgram.runtime.core.approvals.rules import Rule, skill_read_rules
from agentgram.runtime.core.mailbox import (
    Checkpoint,
    MailKind,
    Steer,
    Steered,
)
from agentgram.runtime.core.mailbox.envelope import Attachment
from agentgram.runtime.core.turn.background import RunningCall
from agentgram.runtime.core.turn.compaction import (
    CompactionOutcome,
    CompactionReport,
    ContextUsage,
)
from agentgram.runtime.door.chat import past_exchanges
from agentgram.runtime.door.protocols import (
    ApprovalsDoor,
    CallsDoor,
    ChatDoor,
    ClaimHook,
    ClusterDoor,
    Door,
    JobsDoor,
    KeyValueStore,
    RestartHook,
    RollbackDoor,
    SessionsDoor,
)
from agentgram.runtime.door.values import (
    AnswerResult,
    AwaitedApproval,
    CallRun,
    CallState,
    Decision,
    PastExchange,
    PendingApproval,
    Posted,
    PostResult,
    PromptedApproval,
    SessionRef,
    SteerResult,
    StopResult,
    TrustOverview,
)
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.config import Settings
from agentgram.runtime.infra.events import (
    Address,
    QuestionStatus,
    RoundEnded,
    Subscriber,
    TodoItem,
    TodoStatus,
)
from agentgram.runtime.infra.lead import exit_now
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.log import get_logger, register_secret, register_secrets
from agentgram.runtime.infra.send_budget import SendBudget
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.lock import AlreadyRunning, InstanceLock, fingerprint
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import (
    ApprovalStatus,
    DeadLetter,
    SessionSource,
    ToolCallStatus,
    TurnStatus,
    is_headless,
    utcnow,
)
from agentgram.runtime.infra.storage.search import MARK_END, MARK_START, Exchange, SearchHit
from agentgram.runtime.infra.storage.sessions import About
from agentgram.runtime.infra.storage.summary_rows import Summary
from agentgram.runtime.infra.tasks import cancel_and_wait
from agentgram.runtime.scheduler.clock import Clock

if TYPE_CHECKING:  # the web view's reader is loaded with its first read (Runtime.debug)
    from agentgram.runtime.debug_view import DebugView

log = get_logger("runtime")

UNDELIVERED_WINDOW = timedelta(days=1)
"""How old a stored answer the chat never showed may be and still be sent on start."""

LLM_CHECK_FIRST = 1.0
LLM_CHECK_CAP = 60.0
"""Backoff of the start-up check of an unreachable LLM endpoint (seconds)."""


async def migrate_database(url: str) -> int:
    """Open the database at ``url``, bring it to this release's schema and close it again; its
    schema version (``agentgram doctor`` proves the database usable without starting anything)."""
    db = Database(url)
    try:
        return await migrate(db)
    finally:
        await db.close()


class Runtime:
    """A runtime: its :class:`~runtime.compose.Parts` (``rt.parts``), the door's six parts, the
    lifecycle and the door's ports (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        *,
        format_rules: str = "",
        llm: LLMClient | None = None,
        tools: ToolRegistry | None = None,
        home_chat_id: int | None = None,
        clock: Clock | None = None,
        on_lead_lost: Callable[[str], None] = exit_now,
    ) -> None:
        self.settings = settings
        register_secret(settings.llm.api_key.get_secret_value())  # whatever its length
        register_secrets(settings)  # every SecretStr (LLM keys, MCP env and headers), before anything logs
        if llm is None:
            from agentgram.runtime.infra.llm.openai_client import OpenAIClient

            llm = OpenAIClient(settings.llm)
        self.parts = compose(
            settings,
            llm=llm,
            format_rules=format_rules,
            tools=tools,
            home_chat_id=home_chat_id,
            clock=clock,
            on_lead_lost=on_lead_lost,
        )
        """Every part the runtime is made of, for its own wiring and tests (never an adapter's)."""
        self.chat: ChatDoor = self.parts.chat
        self.approvals: ApprovalsDoor = self.parts.approvals
        self.calls: CallsDoor = self.parts.calls
        self.jobs: JobsDoor = self.parts.jobs
        self.sessions: SessionsDoor = self.parts.sessions
        self.rollback: RollbackDoor = self.parts.rollback
        self.values: KeyValueStore = self.parts.session_store
        """The key-value store an adapter may use (see :class:`KeyValueStore`)."""
        self._llm_check: asyncio.Task[None] | None = None
        self._closed = False
        self.close_hooks: list[RestartHook] = []
        """Run on close once the hub stopped, before the database closes: an adapter delivers what
        is queued while it can still record what it showed."""
        self._leading: asyncio.Task[None] | None = None
        self.claim_hooks: list[ClaimHook] = []
        """Run when a cluster's instance has just claimed a chat, before anything of it resumes: an
        adapter tidies what the chat's previous owner left in it (as :attr:`restart_hooks` do for
        every chat after a restart)."""
        self.restart_hooks: list[RestartHook] = []
        """Run on start before anything resumes: an adapter tidies what the previous process left
        in the chats (e.g. status lines it never finished), knowing nothing of this one runs yet."""

    @property
    def cluster(self) -> ClusterDoor | None:
        """This instance's part in a cluster (``None`` unless ``cluster.enabled``)."""
        return self.parts.owners

    @property
    def send_budget(self) -> SendBudget | None:
        """The chat platform's send budget a cluster's instances share (``None`` unless
        ``cluster.enabled``: alone, the adapter paces itself)."""
        return self.parts.send_budget

    @property
    def timezone(self) -> ZoneInfo:
        """The zone the agent's times are shown in."""
        return self.parts.timezone

    @functools.cached_property
    def debug(self) -> DebugView:
        """What the web view reads: sessions, their trees, jobs and runs, approvals, health (its
        module is loaded here, with the first read: a bot without the web view never loads it)."""
        from agentgram.runtime.debug_view import DebugView

        return DebugView(self.parts.db, self.parts.scheduler, self.parts.llm, lead=self.parts.lead)

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.parts.workdir.mkdir(parents=True, exist_ok=True)
        url = self.parts.db.engine.url.render_as_string()  # the password masked
        if self.parts.db.is_sqlite:
            log.info("SQLite %s; database %s", Database.sqlite_version(), url)
        else:
            log.info("database %s", url)
        await migrate(self.parts.db, self.settings.storage.migrate)
        lead, owners = self.parts.lead, self.parts.owners
        spread = owners is not None and owners.spreading
        if lead is not None and owners is not None and spread:  # every instance runs its chats
            await lead.join()
            self.parts.db.fence = owners.fence  # a session's writes check its chat's lease
            lead.lapse_checks.append(owners.still_holds)
        elif lead is not None:  # a cluster's standby waits here until it leads
            await lead.take()
            self.parts.db.fence = lead.fence  # from now on every write checks the lead
        await self.parts.approval_manager.load_rules()
        await self.parts.checkpoints.recover()  # a rollback a crash cut short ends before any turn runs
        # before any interrupted command is re-run or MCP server starts
        await self.parts.processes.reap_orphans(live=await self._live_instances())
        await (
            self.parts.mcp_catalog.list_eager()
        )  # the lazy: false servers' tools, offered from the first turn
        for rule in skill_read_rules((s.folder for s in self.parts.skill_catalog.skills), self.parts.workdir):
            await self.parts.approval_manager.add_rule(rule)
        await self.parts.questions.load()
        await self.parts.watches.load()  # before anything resumes: a resumed turn's events are watched
        self._llm_check = asyncio.create_task(self._check_llm(), name="llm-check")
        if owners is not None and spread:
            self.parts.scheduler.shared = True  # run now, kill and /tic now go to the leader
            owners.on_claimed(self._recover_chat)
            owners.on_mail(self._mail_from_elsewhere)
            owners.on_poll(self.parts.approval_manager.reload)  # an "Always" saved elsewhere
            owners.on_poll(self.parts.scheduler.sync)  # on the leader: jobs edited elsewhere
            owners.on_poll(self.parts.watches.reload)  # watches set or removed on another instance
            self._leading = asyncio.create_task(self._lead_when_free(), name="cluster-lead")
            await owners.start()  # claims the chats nobody live runs, each recovered as it is claimed
            return
        await (
            self.parts.background.orphan_all()
        )  # calls the previous process ran died with it: the agent is told
        self.parts.chat_sessions.fill(await self.parts.session_store.active_chats(CHAT_SESSIONS_KEPT))
        await self.parts.scheduler.start()  # before recover: it settles tic/cron turns a crash cut short
        await self.recover()

    async def _live_instances(self) -> list[int] | None:
        """The ids of a cluster's live instances (their command groups are not orphans); ``None``
        alone."""
        if self.parts.lead is None:
            return None
        return [instance.id for instance in await self.parts.lead.registry.live()]

    async def _lead_when_free(self) -> None:
        """Spread over instances: the scheduler runs on the one that holds the lead (taken here
        once free: at once, or when the leader dies)."""
        assert self.parts.lead is not None
        await self.parts.lead.take()
        await self.parts.scheduler.start()
        await self._resend_undelivered(headless=True)  # reports the previous leader never showed

    async def _recover_chat(self, chat_id: int) -> None:
        """This instance has just claimed ``chat_id`` (:mod:`runtime.infra.ownership`): what its
        previous owner left is recovered as :meth:`recover` does for everything after a crash."""
        for hook in self.claim_hooks:
            await hook(chat_id)
        self.parts.chat_sessions.forget_chat(chat_id)
        await self.parts.questions.load()  # the chat's pending questions, asked on the previous owner
        await self.parts.processes.reap_orphans(live=await self._live_instances())
        await self.parts.background.orphan_all(chat_id=chat_id)
        await self._resend_undelivered(chat_id, headless=False)
        await self._resume(chat_id)

    async def _mail_from_elsewhere(self, session_id: int, envelope_id: str | None) -> None:
        """Another instance stored mail for a session this one runs: control mail named is applied
        here as if stored here, and the session wakes (its unread mail read anew). The poll's
        look (``envelope_id`` ``None``) leaves a busy session alone: it reads its mail next."""
        if envelope_id is None and self.parts.hub.is_busy(session_id):
            return
        self.parts.mailbox.forget(session_id)
        if envelope_id is not None:
            for envelope in await self.parts.mailbox.unread(session_id):
                if envelope.id == envelope_id:
                    self.parts.desk.act(envelope)
        self.parts.hub.wake(session_id)

    async def recover(self) -> None:
        """Resume what a previous process left: answers the chat never showed, interrupted turns,
        unread mail."""
        for hook in self.restart_hooks:
            await hook()
        await self._resend_undelivered()
        await self._resume()

    async def _resume(self, chat_id: int | None = None) -> None:
        """The interrupted turns continue and the unread mail is read (of one chat: ``chat_id``);
        the unread view is read anew (another process may have stored or consumed mail)."""
        for turn in await self.parts.session_store.open_turns(chat_id=chat_id):
            if turn.status == TurnStatus.RUNNING:
                log.info("resuming turn %s of session %s", turn.id, turn.session_id)
                self.parts.hub.resume(turn.session_id, turn.id or 0)
        for session_id in await self.parts.session_store.sessions_with_mail(chat_id=chat_id):
            self.parts.mailbox.forget(session_id)
            for envelope in await self.parts.mailbox.unread(session_id):
                await self.parts.desk.replay(envelope)  # stored, maybe never applied: decisions, answers
            self.parts.hub.wake(session_id)

    async def _resend_undelivered(self, chat_id: int | None = None, *, headless: bool | None = None) -> None:
        """Final answers, notices and reports stored but never shown (killed in between, or
        the chat platform down until the end) go out now, once (of one chat: ``chat_id``; only
        the headless runs' reports or none of them: ``headless``)."""
        since = utcnow() - UNDELIVERED_WINDOW
        for event in await self.parts.outbox.unshown(since=since, chat_id=chat_id, headless=headless):
            log.info("sending the stored %s %s, which the chat never showed", event.kind, event.outbox_id)
            self.parts.bus.emit(event)
        if headless:
            return  # the scheduler's reports only: the chats' answers are their owners'
        for row in await self.parts.history.undelivered_answers(since=since, chat_id=chat_id):
            session = await self.parts.session_store.get(row.session_id)
            if session is None or row.id is None or row.turn_id is None:
                continue
            log.info(
                "sending the stored answer %s of session %s, which the chat never showed", row.id, session.id
            )
            self.parts.bus.emit(
                RoundEnded(
                    to=Address.of(session),
                    turn_id=row.turn_id,
                    text=row.content,
                    has_tool_calls=False,
                    row_id=row.id,
                )
            )

    async def _check_llm(self) -> None:
        """The LLM endpoint, checked in the background from start (the bot answers meanwhile: a
        turn that needs the model says it cannot reach it). One that is down or answers 5xx is
        checked again with backoff, :data:`LLM_CHECK_FIRST` doubling to :data:`LLM_CHECK_CAP`,
        until it answers; a refused key or an unlisted model is a configuration mistake, logged
        once."""
        delays = Backoff(LLM_CHECK_FIRST, LLM_CHECK_CAP).delays()
        waited = False
        while (warning := await self.parts.llm.probe()) is not None:
            if not warning.retry:
                log.warning("LLM endpoint: %s", warning.text)
                return
            delay = next(delays)
            log.warning("LLM endpoint: %s; checking again in %.0fs", warning.text, delay)
            await asyncio.sleep(delay)
            waited = True
        if waited:
            log.info("LLM endpoint answers now")

    async def close(self) -> None:
        """The one shutdown, in order, run once (a second call does nothing): nothing new fires
        (scheduler), the consumers stop without cancelling turns (hub: a restart resumes them),
        the adapters drain (:attr:`close_hooks`), then the LLM client and the database close —
        those even when a step before them failed."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._llm_check is not None:
                await cancel_and_wait(self._llm_check)
            if self._leading is not None:
                await cancel_and_wait(self._leading)
            if self.parts.owners is not None:
                await self.parts.owners.close()  # no more claims, scans or notifications
            await self.parts.scheduler.stop()
            self.parts.background.begin_close()  # what the shutdown cancels is orphaned on the next start
            await self.parts.hub.shutdown()
            await self.parts.background.close()
            await self.parts.inbox.close()  # a fetch cut short is done again by the next start
            await self.parts.deps.requests.close()  # prefetched requests no turn adopted
            for hook in self.close_hooks:
                await hook()
        finally:
            closer = getattr(self.parts.llm, "aclose", None)
            if closer is not None:
                await closer()
            await self.parts.models.aclose()
            if self.parts.inbox.transcriber is not None:
                await self.parts.inbox.transcriber.aclose()
            await self.parts.mcp.close()  # every server's session and process
            await self.parts.watches.close()  # its poster writes mail: stopped before the mailbox
            await self.parts.mailbox.close()
            await self.parts.history.close()  # the "shown" marks under way
            if self.parts.lead is not None:
                await self.parts.lead.release()  # at once: a standby takes over without waiting
            await self.parts.db.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> Self:
        """``async with Runtime(...)``: started on entry (closed again if the start fails), closed on exit."""
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- the door's ports ---------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Hear every event the runtime emits (synchronously: queue it, never block); returns
        the call that unsubscribes."""
        return self.parts.bus.subscribe(subscriber)

    def on_chat_claimed(self, hook: ClaimHook) -> None:
        """Run ``hook(chat_id)`` when this instance of a cluster has just claimed the chat (see
        :attr:`claim_hooks`); never without a cluster."""
        self.claim_hooks.append(hook)

    def on_restart(self, hook: RestartHook) -> None:
        """Run ``hook`` on start before anything resumes (see :attr:`restart_hooks`)."""
        self.restart_hooks.append(hook)

    def on_close(self, hook: RestartHook) -> None:
        """Run ``hook`` on close once the hub stopped, before the database closes (see
        :attr:`close_hooks`)."""
        self.close_hooks.append(hook)

    @property
    def max_tool_rounds(self) -> int:
        """Tool rounds a turn may take before it ends as exhausted (what the chat tells the user)."""
        return self.settings.llm.max_tool_rounds

    def set_file_source(self, source: FileSource, *, max_upload_bytes: int | None = None) -> None:
        """The adapter's download of the files that come with messages, and the largest file its
        platform takes from ``send_file`` (50 MB when not said)."""
        self.parts.inbox.source = source
        if max_upload_bytes is not None:
            self.parts.output.max_upload_bytes = max_upload_bytes

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint | None
    ) -> None:
        """Keep an input the adapter could not parse, and its position past it (if given), in one
        transaction."""
        letter = DeadLetter(source=source, ref=ref, error=error, payload=payload)
        position = None if checkpoint is None else (checkpoint.key, checkpoint.value)
        await self.parts.session_store.dead_letter(letter, position=position)


__all__ = [
    "MARK_END",
    "MARK_START",
    "About",
    "AlreadyRunning",
    "AnswerResult",
    "ApprovalStatus",
    "ApprovalsDoor",
    "Attachment",
    "AwaitedApproval",
    "Bypass",
    "CallRun",
    "CallState",
    "CallsDoor",
    "ChatDoor",
    "Checkpoint",
    "ClusterDoor",
    "CompactionOutcome",
    "CompactionReport",
    "ContextUsage",
    "DecidedBy",
    "Decision",
    "DecisionResult",
    "Door",
    "Exchange",
    "InstanceLock",
    "JobsDoor",
    "KeyValueStore",
    "MailKind",
    "McpServerStatus",
    "PastExchange",
    "PendingApproval",
    "PostResult",
    "Posted",
    "PromptedApproval",
    "QuestionStatus",
    "RestartHook",
    "RollbackDoor",
    "Rule",
    "RunningCall",
    "Runtime",
    "SearchHit",
    "SessionRef",
    "SessionSource",
    "SessionsDoor",
    "Steer",
    "SteerResult",
    "Steered",
    "StopResult",
    "Summary",
    "TodoItem",
    "TodoStatus",
    "ToolCallStatus",
    "TrustOverview",
    "fingerprint",
    "is_headless",
    "migrate_database",
    "past_exchanges",
    "runtime_tool_names",
    "unknown_hook_tools",
]
