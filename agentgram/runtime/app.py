"""The runtime facade: what a chat adapter is allowed to call.

:class:`Runtime` wires storage, mailbox, LLM client, tools, approvals, the
session hub and the scheduler from :class:`~runtime.config.Settings`.
Adapters post mail through it (``post_user_message``, ``stop``, ``decide``…)
and :meth:`Runtime.subscribe` to its events for output. Every input is accepted
as mail *before* anything acts on it.

It is the adapters' only door: what they pass in and get back are the values
defined here (:class:`SessionRef`, :class:`PendingApproval`, …) or the
runtime's own value types re-exported here (``Rule``, ``Bypass``,
``ApprovalStatus``…), never an ORM row and never one of the parts it wires
(a test walks ``bot/`` for attribute access on them). Its attributes ``db``,
``sessions``, ``approvals``, ``hub``… are for the runtime's own wiring and
tests.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, Self
from zoneinfo import ZoneInfo

from agentgram.runtime.capabilities.agents import AGENTS_DIR, AgentSpec, load_agents, unknown_models
from agentgram.runtime.capabilities.agents.skills import Skill, load_skills, skill_dirs
from agentgram.runtime.capabilities.attachments.images import ImageCache
from agentgram.runtime.capabilities.attachments.inbox import FileSource, Inbox
from agentgram.runtime.capabilities.attachments.transcribe import OpenAITranscriber
from agentgram.runtime.capabilities.mcp.activate import ActivateTools
from agentgram.runtime.capabilities.mcp.catalog import McpCatalog, McpServerStatus
from agentgram.runtime.capabilities.mcp.servers import McpServers
from agentgram.runtime.capabilities.mcp.tools import PREFIX as MCP_PREFIX
from agentgram.runtime.capabilities.mcp.tools import server_rules
from agentgram.runtime.capabilities.questions import AskUserClarification, QuestionManager
from agentgram.runtime.capabilities.questions.manager import Settled
from agentgram.runtime.capabilities.tools.base import Tool, ToolRegistry
from agentgram.runtime.capabilities.tools.builtin import default_registry
from agentgram.runtime.capabilities.tools.calls import call_tools
from agentgram.runtime.capabilities.tools.files import secret_paths
from agentgram.runtime.capabilities.tools.history_search import SearchHistory
from agentgram.runtime.capabilities.tools.memory import MEMORY_DIR, memory_tools
from agentgram.runtime.capabilities.tools.notes import NoteStore, UpdateScratchpad, WriteTodos
from agentgram.runtime.capabilities.tools.processes import SqlProcessLedger
from agentgram.runtime.capabilities.tools.send_file import SendFile
from agentgram.runtime.capabilities.tools.skills import LOAD_SKILL, LoadSkill
from agentgram.runtime.capabilities.tools.wrappers import Wrappers
from agentgram.runtime.core.approvals.bypass import Bypass
from agentgram.runtime.core.approvals.manager import ApprovalManager, DecidedBy, DecisionResult
from agentgram.runtime.core.approvals.rules import Rule, skill_read_rules
from agentgram.runtime.core.approvals.trust import bypass_scope, proposed_rule
from agentgram.runtime.core.mailbox import (
    ApprovalDecisionBody,
    Checkpoint,
    ControlAction,
    ControlBody,
    Envelope,
    MailKind,
    Priority,
    Receipt,
    Sender,
    SenderKind,
    SqlMailbox,
    UserMessageBody,
)
from agentgram.runtime.core.mailbox.envelope import Attachment, MailBody, QuestionAnswerBody
from agentgram.runtime.core.prompt import MemoryPrompt, build_static_prompt
from agentgram.runtime.core.sessions.control_handlers import SessionControl
from agentgram.runtime.core.sessions.hub import HubOptions, SessionHub
from agentgram.runtime.core.turn.background import BackgroundCalls, RunningCall
from agentgram.runtime.core.turn.compaction import (
    CompactionOutcome,
    CompactionReport,
    Compactor,
    ContextUsage,
)
from agentgram.runtime.core.turn.context import ContextSettings
from agentgram.runtime.core.turn.deps import ChosenModels, TurnDeps
from agentgram.runtime.core.turn.loop import call_summary
from agentgram.runtime.core.turn.subagents import AgentBook, ExecuteTask
from agentgram.runtime.debug_view import DebugView
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.config import DEFAULT_MODEL_NAME, Settings
from agentgram.runtime.infra.errors import ConfigError, MailboxFull, ToolError
from agentgram.runtime.infra.events import (
    Address,
    DurableOutput,
    EventBus,
    FileOutput,
    Notice,
    QuestionStatus,
    RoundEnded,
    Subscriber,
    TodoItem,
    TodoStatus,
)
from agentgram.runtime.infra.llm.models import ModelInfo, ModelRegistry, SessionCost, session_cost
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.log import get_logger, register_secret, register_secrets
from agentgram.runtime.infra.storage.background_rows import BackgroundStore
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.frames import FrameStore
from agentgram.runtime.infra.storage.grant_rows import GrantStore
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.lock import AlreadyRunning, InstanceLock, fingerprint
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import (
    ApprovalRequestRow,
    ApprovalStatus,
    ChatSession,
    DeadLetter,
    Role,
    SessionSource,
    ToolCallRow,
    ToolCallStatus,
    TurnStatus,
    is_headless,
    utcnow,
)
from agentgram.runtime.infra.storage.outbox import OutboxStore
from agentgram.runtime.infra.storage.prepared_rows import PreparedStore
from agentgram.runtime.infra.storage.search import MARK_END, MARK_START, Exchange, SearchHit, history_search
from agentgram.runtime.infra.storage.sessions import ChatSessionCache, SessionStore
from agentgram.runtime.infra.storage.summary_rows import Summary, SummaryStore
from agentgram.runtime.infra.storage.usage_rows import SessionModels, UsageStore
from agentgram.runtime.infra.tasks import cancel_and_wait
from agentgram.runtime.metrics_bus import watch as watch_metrics
from agentgram.runtime.scheduler.ports import SchedulerPorts
from agentgram.runtime.scheduler.service import SchedulerService
from agentgram.runtime.scheduler.tools import DeleteJob, ListJobs, ScheduleJob, UpdateJob

log = get_logger("runtime")

UNDELIVERED_WINDOW = timedelta(days=1)
"""How old a stored answer the chat never showed may be and still be sent on start."""

LLM_CHECK_FIRST = 1.0
LLM_CHECK_CAP = 60.0
"""Backoff of the start-up check of an unreachable LLM endpoint (seconds)."""

CHAT_SESSIONS_KEPT = 1024
"""Chats whose active session is kept in memory, least recently used out (the rest are read again)."""


RECENT_ROWS_READ = 200
"""History rows :meth:`Runtime.recent_exchanges` looks through for the last few exchanges."""


def past_exchanges(entries: Sequence[HistoryEntry], limit: int) -> list[PastExchange]:
    """Each message the user wrote (not mail the runtime wrote for them) with the last text the
    agent answered it with before the next one; the newest ``limit``, oldest first."""
    found: list[PastExchange] = []
    answering = False  # mail the runtime wrote ends the exchange: what follows answers that mail
    for entry in entries:
        row = entry.row
        if row.role == Role.USER:
            answering = not row.is_synthetic
            if answering:
                found.append(PastExchange(row.content, "", None))
        elif row.role == Role.ASSISTANT and row.content.strip() and answering:
            found[-1] = PastExchange(found[-1].question, row.content, row.id)
    return found[-limit:] if limit > 0 else []


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
class CallRun:
    """A tracked call's run: ``status`` is running, completed, failed, cancelled or orphaned."""

    run_id: int
    name: str
    summary: str
    status: str
    runs_command: bool
    started_at: datetime
    finished_at: datetime | None


@dataclass(slots=True, frozen=True)
class CallState:
    """A tool call as a status line shows it, as it stands in the database."""

    id: int
    name: str
    summary: str
    status: ToolCallStatus
    runs_command: bool = False  # the tool runs shell commands (``Tool.runs_commands``)


@dataclass(slots=True, frozen=True)
class SessionRef:
    """A chat's session as an adapter holds it: which one, whose chat, its user's language, and
    its source (a platform's chat, or the terminal)."""

    id: int
    chat_id: int | None
    user_id: int | None
    language_code: str | None
    source: SessionSource = SessionSource.CHAT

    @classmethod
    def of(cls, row: ChatSession) -> SessionRef:
        assert row.id is not None
        return cls(row.id, row.chat_id, row.user_id, row.language_code, SessionSource(row.source))


@dataclass(slots=True, frozen=True)
class PastExchange:
    """A user's message and the answer it got, as a chat shows it again after a restart;
    ``answer_row_id`` is the answer's stored row (``RoundEnded.row_id``), ``None`` if unanswered."""

    question: str
    answer: str
    answer_row_id: int | None


@dataclass(slots=True, frozen=True)
class Posted:
    """A user's message as the mailbox took it, and whether the source's checkpoint was stored
    with it (then the source need not store it again)."""

    result: PostResult
    checkpoint_stored: bool


@dataclass(slots=True, frozen=True)
class PromptedApproval:
    """The approval request a chat message (its prompt) asks about, as it stands."""

    request_id: str
    status: ApprovalStatus


@dataclass(slots=True, frozen=True)
class PendingApproval:
    """A request still waiting for its decision: its prompt in the chat and the call it is about."""

    request_id: str
    message_id: int | None  # None until the prompt's send returned
    tool: str  # "?" when the call is gone
    summary: str


@dataclass(slots=True, frozen=True)
class AnswerResult:
    """What an answer to a clarifying question achieved: ``applied`` once; else where it stands."""

    applied: bool
    status: QuestionStatus
    answer: str | None


@dataclass(slots=True, frozen=True)
class TrustOverview:
    """What a session does not ask about: its live bypasses and the user's saved allow rules."""

    bypasses: tuple[Bypass, ...]
    rules: tuple[Rule, ...]


class KeyValueStore(Protocol):
    """The runtime's durable key-value store, handed to an adapter for what it must remember
    itself (message ids to edit later, pairing, its read position)."""

    async def get_value(self, key: str) -> str | None: ...
    async def set_value(self, key: str, value: str) -> None: ...
    async def delete_value(self, key: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]: ...


RestartHook = Callable[[], Awaitable[None]]


async def migrate_database(url: str) -> int:
    """Open the database at ``url``, bring it to this release's schema and close it again; its
    schema version (``agentgram doctor`` proves the database usable without starting anything)."""
    db = Database(url)
    try:
        return await migrate(db)
    finally:
        await db.close()


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


DEFAULT_UPLOAD_BYTES = 50 * 1024 * 1024
"""The largest file ``send_file`` sends unless the adapter says otherwise (a chat bot's usual 50 MB)."""


ToolMaker = Callable[["Runtime"], Tool[Any]]
"""How a :class:`Runtime` builds one of its tools (from its own parts)."""


def _ready(tool: Tool[Any]) -> ToolMaker:
    """The maker of a tool that needs no part of the runtime (built already)."""
    return lambda _: tool


def runtime_tools(settings: Settings) -> list[tuple[type[Tool[Any]], ToolMaker]]:
    """The one list of the tools a runtime built from ``settings`` adds to the built-in ones
    (:func:`default_registry`), in the order it registers them: each tool's class (whose ``name``
    is the tool's name) and how the runtime builds it. :class:`Runtime` registers what the makers
    build; :func:`runtime_tool_names` reads the classes' names without building anything."""
    tools: list[tuple[type[Tool[Any]], ToolMaker]] = [
        (SearchHistory, lambda rt: SearchHistory(rt.search, rt.timezone)),
        (ScheduleJob, lambda rt: ScheduleJob(rt.scheduler)),
        (ListJobs, lambda rt: ListJobs(rt.scheduler)),
        (UpdateJob, lambda rt: UpdateJob(rt.scheduler)),
        (DeleteJob, lambda rt: DeleteJob(rt.scheduler)),
        (AskUserClarification, lambda rt: AskUserClarification(rt.questions, rt.bus)),
        (UpdateScratchpad, lambda rt: UpdateScratchpad(rt.notes)),
        (WriteTodos, lambda rt: WriteTodos(rt.notes, rt.bus)),
        *((type(tool), _ready(tool)) for tool in memory_tools(settings.agent)),
        (ExecuteTask, lambda rt: ExecuteTask(rt.agents)),
        *((type(tool), _ready(tool)) for tool in call_tools()),
        (SendFile, lambda rt: SendFile(rt)),
        (LoadSkill, lambda rt: LoadSkill(rt.skill_catalog)),
    ]
    if any(server.enabled and server.lazy for server in settings.mcp.servers.values()):
        tools.append((ActivateTools, lambda rt: ActivateTools(rt.mcp_catalog)))  # McpCatalog.lazy()
    return tools


def runtime_tool_names(settings: Settings) -> frozenset[str]:
    """Every tool a runtime built from ``settings`` registers, by class (nothing but the built-in
    registry is built): what a wrapper hook's ``tool`` may name (any registered tool, offered to
    the model or not)."""
    return frozenset([*default_registry().names(), *(cls.name for cls, _ in runtime_tools(settings))])


def unknown_hook_tools(settings: Settings) -> list[ConfigError]:
    """``tools.wrappers`` hooks naming a tool no runtime registers (``check-config`` and ``run``
    report them alike)."""
    known = runtime_tool_names(settings)
    return Wrappers(settings.tools.wrappers, lambda _: None).hook_problems(known.__contains__)


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        format_rules: str = "",
        llm: LLMClient | None = None,
        tools: ToolRegistry | None = None,
        clock: type[datetime] | None = None,
        home_chat_id: int | None = None,
    ) -> None:
        self.settings = settings
        register_secret(settings.llm.api_key.get_secret_value())  # whatever its length
        register_secrets(settings)  # every SecretStr (LLM keys, MCP env and headers), before anything logs
        self.db = Database(settings.storage.url, pool_size=settings.storage.pool_size)
        self.bus = EventBus()
        self.sessions = SessionStore(self.db)
        self.values: KeyValueStore = self.sessions
        """The key-value store an adapter may use (see :class:`KeyValueStore`)."""
        self.outbox = OutboxStore(self.db)
        self.history = HistoryStore(self.db)
        self.mailbox = SqlMailbox(self.db, settings.mailbox.max_unread)
        watch_metrics(self.bus.subscribe, self.mailbox.subscribe, self._knows_tool)  # runtime.metrics_bus
        self.mcp = McpServers(settings.mcp, SqlProcessLedger(self.sessions))  # groups reaped after a kill
        self.mcp_catalog = McpCatalog(self.mcp, GrantStore(self.db))
        approval = settings.approval.model_copy(
            update={"rules": [*settings.approval.rules, *server_rules(settings.mcp)]}
        )  # a server's ``approval`` is a configured rule for its tools
        self.approvals = ApprovalManager(self.db, approval)
        self.questions = QuestionManager(self.db)
        self.notes = NoteStore(self.db)
        self.summaries = SummaryStore(self.db)
        self.search = history_search(self.db)
        self.workdir = settings.agent.workdir.expanduser().resolve()
        self.timezone, self.timezone_name = local_zone(settings)
        if llm is None:
            from agentgram.runtime.infra.llm.openai_client import OpenAIClient

            llm = OpenAIClient(settings.llm)
        self.llm = llm
        self.models = ModelRegistry(settings.llm, llm)  # llm is the default's client
        self.usage = UsageStore(self.db)
        self.tools = tools or default_registry()
        self.agents = load_agents(settings.agent.agents_dir or self.workdir / AGENTS_DIR)
        for problem in unknown_models(self.agents, [info.name for info in self.models.infos]):
            raise problem  # check-config reports them all (runtime.config_check.check_agents)
        self.skill_catalog = load_skills(skill_dirs(self.workdir, settings.agent.skills_dirs))
        self.processes = SqlProcessLedger(self.sessions)
        self._chat_sessions = ChatSessionCache(CHAT_SESSIONS_KEPT)
        self._llm_check: asyncio.Task[None] | None = None
        self._closed = False
        self.close_hooks: list[RestartHook] = []
        """Run on close once the hub stopped, before the database closes: an adapter delivers what
        is queued while it can still record what it showed."""
        self.restart_hooks: list[RestartHook] = []
        """Run on start before anything resumes: an adapter tidies what the previous process left
        in the chats (e.g. status lines it never finished), knowing nothing of this one runs yet."""
        self.background_store = BackgroundStore(self.db)
        self.background = BackgroundCalls(
            self.background_store, self.history, self.mailbox, self.bus, settings.tools
        )
        self.inbox = Inbox(
            workdir=self.workdir,
            store=PreparedStore(self.db),
            bus=self.bus,
            notify=self.notice,
            transcription=settings.transcription,
            transcriber=OpenAITranscriber(settings.transcription, settings.llm)
            if settings.transcription.enabled
            else None,
        )
        self.compactor = Compactor(settings.llm.compaction, self.history, self.summaries)
        self.deps = TurnDeps(
            db=self.db,
            sessions=self.sessions,
            history=self.history,
            frames=FrameStore(self.db),
            mailbox=self.mailbox,
            models=ChosenModels(SessionModels(self.models, self.usage)),
            tools=self.tools,  # filled below; the main agent's allowlist is AgentBook.main_tools
            approvals=self.approvals,
            bus=self.bus,
            notice=self.notice,
            context=ContextSettings(
                static_system=build_static_prompt(
                    settings.agent.system_prompt_file,
                    format_rules,
                    agent_prompt=self.agents.main.prompt,
                    skills=self._skill_listing(self.agents.main),
                ),
                workdir=self.workdir,
                timezone=self.timezone,
                timezone_name=self.timezone_name,
                max_history_messages=settings.llm.max_history_messages,
                max_tool_result_chars=settings.llm.max_tool_result_chars,
                vision=settings.llm.vision,
                max_history_images=settings.llm.max_history_images,
                inline_text_kb=settings.llm.inline_text_kb,
                images=ImageCache(settings.llm.max_image_px) if settings.llm.vision else None,
            ),
            max_rounds=settings.llm.max_tool_rounds,
            clock=utcnow,
            agents=AgentBook(
                self.agents,
                prompt=lambda spec: build_static_prompt(
                    None, "", agent_prompt=spec.prompt, skills=self._skill_listing(spec)
                ),
            ),
            max_parallel_subagents=settings.llm.max_parallel_subagents,
            protected=secret_paths(settings.config_file, self.db.file),
            wrappers=Wrappers(settings.tools.wrappers, self.tools.get),
            processes=self.processes,
            notes=self.notes,
            questions=self.questions,
            compaction=self.compactor,
            memory=MemoryPrompt(
                self.workdir / MEMORY_DIR, settings.agent.inject_memory, settings.agent.memory_max_chars
            ),
            calls=self.background,
            files=self.inbox,
            mcp=self.mcp_catalog,
        )
        self.max_upload_bytes = DEFAULT_UPLOAD_BYTES
        self.hub = SessionHub(self.deps, HubOptions(resume_on_message=settings.mailbox.resume_on_message))
        self.desk = self.hub.desk
        """Acts on control mail once it is stored (``runtime.core.sessions.control``)."""
        SessionControl(
            turns=self.hub,
            calls=self.background,
            fetches=self.inbox,
            decisions=self.approvals,
            answers=self.questions,
            compact=self._compact_session,
            compaction_on=self.compactor.settings.enabled,
            choose_model=self.usage.choose,
        ).register(self.desk)
        self.scheduler = SchedulerService(
            SchedulerPorts(
                db=self.db,
                sessions=self.sessions,
                history=self.history,
                mailbox=self.mailbox,
                approvals=self.approvals,
                turns=self.hub,
                publish=self.publish,
                chat_session=self.chat_session,
                timezone=self.timezone,
                timezone_name=self.timezone_name,
                workdir=self.workdir,
                scheduler=settings.scheduler,
                tic=settings.tic,
                quiet_hours=settings.quiet_hours,
                home_chat_id=home_chat_id,
            )
        )
        for cls, make in runtime_tools(settings):
            if self.tools.get(cls.name) is None:  # a tool the caller registered already stays
                tool = make(self)
                assert isinstance(tool, cls), (cls, tool)
                self.tools.register(tool)
        for problem in self.deps.wrappers.hook_problems():
            raise problem

    def _knows_tool(self, name: str) -> bool:
        """A registered tool, or a tool of a configured MCP server (listed or not yet)."""
        servers = self.settings.mcp.servers
        return self.tools.get(name) is not None or any(name.startswith(f"{MCP_PREFIX}{s}__") for s in servers)

    @functools.cached_property
    def debug(self) -> DebugView:
        """What the web view reads: sessions, their trees, jobs and runs, approvals, health."""
        return DebugView(self.db, self.scheduler, self.llm)

    async def kill_job(self, job_id: int) -> bool:
        """A running cron job's session cancelled at once, as ``/cron kill`` does; ``False`` if
        it is not running."""
        return await self.scheduler.kill(job_id)

    def _skill_listing(self, agent: AgentSpec) -> str:
        """The skills block of ``agent``'s static system message: none when it may not load them."""
        offered = agent.tools is None or LOAD_SKILL in agent.tools
        return self.skill_catalog.listing() if offered else ""

    def skills(self) -> tuple[Skill, ...]:
        """The Agent Skills loaded at start, sorted by name (``/skills``)."""
        return self.skill_catalog.skills

    async def mcp_overview(self, session: SessionRef) -> list[McpServerStatus]:
        """Every enabled MCP server, sorted by name, with its state and whether ``session``
        activated it (``/mcp``)."""
        return await self.mcp_catalog.status(session.id)

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log.info("SQLite %s; database %s", Database.sqlite_version(), self.db.engine.url.render_as_string())
        await migrate(self.db, self.settings.storage.migrate)
        await self.approvals.load_rules()
        await self.processes.reap_orphans()  # before any interrupted command is re-run or MCP server starts
        await self.mcp_catalog.list_eager()  # the lazy: false servers' tools, offered from the first turn
        for rule in skill_read_rules((s.folder for s in self.skill_catalog.skills), self.workdir):
            await self.approvals.add_rule(rule)
        await self.questions.load()
        self._llm_check = asyncio.create_task(self._check_llm(), name="llm-check")
        await self.background.orphan_all()  # calls the previous process ran died with it: the agent is told
        self._chat_sessions.fill(await self.sessions.active_chats(CHAT_SESSIONS_KEPT))
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
                await self.desk.replay(envelope)  # stored, maybe never applied: decisions, answers
            self.hub.wake(session_id)

    async def _resend_undelivered(self) -> None:
        """Final answers, notices and reports stored but never shown (killed in between, or
        the chat platform down until the end) go out now, once."""
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
                    to=Address.of(session),
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
        delays = Backoff(LLM_CHECK_FIRST, LLM_CHECK_CAP).delays()
        waited = False
        while (warning := await self.llm.probe()) is not None:
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
            await self.scheduler.stop()
            self.background.begin_close()  # what the shutdown cancels is orphaned on the next start
            await self.hub.shutdown()
            await self.background.close()
            await self.inbox.close()  # a fetch cut short is done again by the next start
            await self.deps.requests.close()  # prefetched requests no turn adopted
            for hook in self.close_hooks:
                await hook()
        finally:
            closer = getattr(self.llm, "aclose", None)
            if closer is not None:
                await closer()
            await self.models.aclose()
            if self.inbox.transcriber is not None:
                await self.inbox.transcriber.aclose()
            await self.mcp.close()  # every server's session and process
            await self.mailbox.close()
            await self.db.close()

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

    # --- output ----------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Hear every event the runtime emits (synchronously: queue it, never block); returns
        the call that unsubscribes."""
        return self.bus.subscribe(subscriber)

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

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint
    ) -> None:
        """Keep an input the adapter could not parse, and its position past it, in one transaction."""
        letter = DeadLetter(source=source, ref=ref, error=error, payload=payload)
        await self.sessions.dead_letter(letter, key=checkpoint.key, value=checkpoint.value)

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

    async def chat_session(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        source: SessionSource = SessionSource.CHAT,
    ) -> SessionRef:
        """The chat's active session of ``source`` (opened if it has none)."""
        return SessionRef.of(
            await self._chat_session(chat_id, user_id=user_id, language=language, source=source)
        )

    async def _chat_session(
        self, chat_id: int, *, user_id: int | None, language: str | None, source: SessionSource
    ) -> ChatSession:
        """Kept in memory (filled at start); a chat the cache does not know, when it knows them
        all, is new: one write opens its session, with no read before it."""
        cached = self._chat_sessions.get(chat_id, language, source)
        if cached is not None:
            return cached
        session, created = await self.sessions.find_or_open(
            chat_id,
            user_id=user_id,
            language=language,
            look_first=not self._chat_sessions.complete,
            source=source,
        )
        self._chat_sessions.keep(session)
        self.hub.session_changed(session, created=created)
        return session

    async def new_session(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        envelope_id: str,
        source: SessionSource = SessionSource.CHAT,
    ) -> SessionRef:
        """``/new``: stop whatever runs in the current session, then open a fresh one."""
        current = await self.chat_session(chat_id, user_id=user_id, language=language, source=source)
        await self.stop(current, envelope_id, quiet=True)
        self.approvals.bypasses.clear(current.id)
        await self.mcp_catalog.grants.forget(current.id)  # the new session activates its own servers
        fresh = await self.sessions.open_new(chat_id, user_id=user_id, language=language, source=source)
        await self._carry_model(current.id, fresh)
        self._chat_sessions.keep(fresh)
        self.hub.session_changed(fresh, created=True)
        return SessionRef.of(fresh)

    async def recent_exchanges(self, session: SessionRef, limit: int) -> list[PastExchange]:
        """The session's last ``limit`` exchanges, oldest first: what a chat shows again on start."""
        return past_exchanges(await self.history.entries(session.id, RECENT_ROWS_READ), limit)

    # --- models and usage ---------------------------------------------------------

    @property
    def model_choices(self) -> tuple[ModelInfo, ...]:
        """The models ``/model`` offers: ``llm.model`` as ``default`` first, then ``llm.models``."""
        return self.models.infos

    async def session_model(self, session: SessionRef) -> ModelInfo:
        """The model the session's turns run on."""
        return self.models.info(await self.usage.chosen(session.id))

    async def choose_model(self, session: SessionRef, name: str) -> ModelInfo | None:
        """Switch the session to the named model from its next request on; ``None`` for a name
        not configured (nothing changes)."""
        if not self.models.knows(name):
            return None
        body = ControlBody(action=ControlAction.MODEL, model=None if name == DEFAULT_MODEL_NAME else name)
        envelope_id = f"model:{session.id}:{uuid.uuid4().hex}"
        await self.desk.send(self._control(session.id, body, envelope_id), bool)
        return self.models.info(name)

    async def session_cost(self, session: SessionRef) -> SessionCost:
        """The session's tokens per model (its rounds and its sub-agents'), priced where prices are set."""
        usage, chosen = await self.usage.usage(session.id), await self.usage.chosen(session.id)
        return session_cost(self.models, usage, chosen)

    async def _carry_model(self, old_session_id: int, fresh: ChatSession) -> None:
        """``/new`` keeps the chat on the model it chose (its usage starts again at zero)."""
        chosen = await self.usage.chosen(old_session_id)
        if chosen is not None and fresh.id is not None:
            await self.usage.choose(fresh.id, chosen)

    # --- mail in -----------------------------------------------------------------

    async def post_user_message(
        self,
        session: SessionRef,
        text: str,
        *,
        envelope_id: str,
        chat_message_id: int | None = None,
        user_ref: str | None = None,
    ) -> PostResult:
        """Accept a user's message as mail."""
        posted = await self.accept_user_message(
            session, text, envelope_id=envelope_id, chat_message_id=chat_message_id, user_ref=user_ref
        )
        return posted.result

    async def accept_user_message(
        self,
        session: SessionRef,
        text: str,
        *,
        envelope_id: str,
        chat_message_id: int | None = None,
        user_ref: str | None = None,
        checkpoint: Checkpoint | None = None,
        attachments: Sequence[Attachment] = (),
        media_group_id: str | None = None,
    ) -> Posted:
        """:meth:`post_user_message`, with the source's ``checkpoint`` stored in the mail's own
        transaction; says whether it was (not when the mailbox refused the message).

        ``attachments`` get their workspace paths before the mail is stored and are fetched as soon
        as it is (:mod:`runtime.attachments.inbox`), off this call's path."""
        busy = self.hub.is_busy(session.id)
        envelope = Envelope(
            id=envelope_id,
            session_id=session.id,
            sender=Sender(kind=SenderKind.USER, ref=user_ref),
            body=UserMessageBody(
                text=text,
                chat_message_id=chat_message_id,
                attachments=self.inbox.assign(attachments, utcnow()),
                media_group_id=media_group_id,
            ),
        )
        try:
            receipt = await self.mailbox.accept(envelope, checkpoint)
        except MailboxFull:
            return Posted(PostResult.FULL, checkpoint_stored=False)
        if attachments and not receipt.duplicate:
            self.inbox.start(envelope, Address.of(session))
        return Posted(await self._post_result(session, receipt, busy), receipt.checkpoint_stored)

    async def send_file(self, session_id: int, path: Path, caption: str | None, *, as_photo: bool) -> None:
        """``send_file``'s :class:`~runtime.tools.send_file.FileSender`: recorded, then uploaded by the
        adapter (:class:`~runtime.events.FileOutput`)."""
        session = await self.sessions.get(session_id)
        if session is None:
            raise ToolError("this session is gone")
        output = FileOutput(to=Address.of(session), path=str(path), caption=caption, as_photo=as_photo)
        await self.publish(output)

    def set_file_source(self, source: FileSource, *, max_upload_bytes: int | None = None) -> None:
        """The adapter's download of the files that come with messages, and the largest file its
        platform takes from ``send_file`` (50 MB when not said)."""
        self.inbox.source = source
        if max_upload_bytes is not None:
            self.max_upload_bytes = max_upload_bytes

    async def _post_result(self, session: SessionRef, receipt: Receipt, busy: bool) -> PostResult:
        """What became of accepted mail: ``busy`` is whether a turn ran before it was accepted."""
        if receipt.duplicate:
            return PostResult.DUPLICATE
        if busy:
            return PostResult.WAITING_APPROVAL if self.hub.awaited(session.id) else PostResult.QUEUED
        paused = await self.hub.paused_turn(session.id) is not None
        if paused and not self.settings.mailbox.resume_on_message:
            return PostResult.PAUSED
        return PostResult.STARTED

    def _control(self, session_id: int, body: MailBody, envelope_id: str) -> Envelope:
        """Control mail from the user: it goes ahead of the messages queued in the session."""
        return Envelope(
            id=envelope_id,
            session_id=session_id,
            sender=Sender(kind=SenderKind.USER),
            priority=Priority.INTERRUPT,
            body=body,
        )

    async def stop(self, session: SessionRef, envelope_id: str, *, quiet: bool = False) -> StopResult:
        """Stop at once: the stop mail is stored, and its handler cancels the running turn, the
        session's running tool calls and file fetches (``runtime.core.sessions.control``).

        The worker, once the turn ends, finds the stop before any queued message (which it then
        drops instead of starting a turn).
        """
        work = self.background.busy(session.id) or self.inbox.busy(session.id)
        body = ControlBody(action=ControlAction.STOP, quiet=quiet, stops_work=work)
        running = await self.desk.send(self._control(session.id, body, envelope_id), bool)
        return StopResult(was_running=running or work)

    async def pause(self, session: SessionRef, envelope_id: str) -> bool:
        running = self.hub.is_busy(session.id)
        if running:
            body = ControlBody(action=ControlAction.PAUSE)
            await self.desk.send(self._control(session.id, body, envelope_id), bool)
        return running

    async def resume(self, session: SessionRef, envelope_id: str) -> bool:
        paused = await self.hub.paused_turn(session.id) is not None
        if not paused and not await self.hub.pause_pending(session.id):
            return False
        body = ControlBody(action=ControlAction.RESUME)
        return await self.desk.send(self._control(session.id, body, envelope_id), bool)

    async def decide(
        self,
        request_id: str,
        *,
        approved: bool,
        reason: str | None,
        envelope_id: str,
        how: DecidedBy = DecidedBy.BUTTON,
        trust_scope: str | None = None,
    ) -> DecisionResult:
        """A button press or a reply (``how``, for the log): stored as mail, applied once by its
        handler; ``trust_scope`` is trusted for a while first."""
        request = await self.approvals.get(request_id)
        if request is None:  # no session to send it to: what became of it is all there is to say
            return DecisionResult(applied=False, status=ApprovalStatus.EXPIRED, request=None)
        body = ApprovalDecisionBody(
            request_id=request_id, approved=approved, reason=reason, how=how, trust_scope=trust_scope
        )
        return await self.desk.send(self._control(request.session_id, body, envelope_id), DecisionResult)

    # --- clarifying questions and the session's notes --------------------------------

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
        settled = await self.desk.send(self._control(row.session_id, body, envelope_id), Settled)
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

    async def todos(self, session: SessionRef) -> tuple[TodoItem, ...]:
        """The session's todo list (``/todos``), in the model's order."""
        return await self.notes.todos(session.id)

    # --- context compaction and search -------------------------------------------------

    async def compact(self, session: SessionRef) -> CompactionReport:
        """``/compact``: summarise the session's older history now (not while a turn runs: it
        compacts by itself when it must)."""
        body = ControlBody(action=ControlAction.COMPACT)
        envelope_id = f"compact:{session.id}:{uuid.uuid4().hex}"
        return await self.desk.send(self._control(session.id, body, envelope_id), CompactionReport)

    async def _compact_session(self, session_id: int) -> CompactionReport:
        return await self.compactor.compact(session_id, await self.deps.models.client_for(session_id))

    async def context_usage(self, session: SessionRef) -> ContextUsage:
        """``/context``: how big the next request is, the threshold, what the summary covers."""
        compactor = self.compactor
        static = len(self.deps.context_for(session.id).static_system)
        return compactor.usage(await compactor.view(session.id), static)

    async def search_history(self, chat_id: int, query: str, limit: int = 10) -> list[SearchHit]:
        """``/search``: the chat's past messages (ended sessions too) that match ``query``."""
        return await self.search.search(chat_id, query, limit)

    async def exchange(self, chat_id: int, row_id: int) -> Exchange | None:
        """The user's message and the answer a search hit belongs to (``None``: not this chat's)."""
        return await self.search.exchange(chat_id, row_id)

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
        return max(1, round(self.settings.approval.bypass_duration / 60))

    async def propose_always(self, request_id: str) -> Rule | None:
        found = await self._request_call(request_id)
        if found is None or found[0].status != ApprovalStatus.PENDING:
            return None
        return proposed_rule(found[1], self.tools.get(found[1].name), self.workdir)

    async def trust_always(self, request_id: str, *, envelope_id: str) -> tuple[DecisionResult, Rule | None]:
        """ "🔁 Always", confirmed: save the proposed allow rule, then approve this call."""
        rule = await self.propose_always(request_id)
        if rule is None:
            return await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id), None
        saved = await self.approvals.add_rule(rule)  # before the decision wakes the turn
        result = await self.decide(request_id, approved=True, reason=None, envelope_id=envelope_id)
        if not result.applied:  # a concurrent tap decided first: keep no rule nobody confirmed
            await self.approvals.delete_rule(saved.id)
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
        request = await self.approvals.by_message(chat_id, message_id)
        return None if request is None else PromptedApproval(request.id, ApprovalStatus(request.status))

    async def pending_approvals(self, session: SessionRef, limit: int | None = None) -> list[PendingApproval]:
        """The session's requests still waiting for a decision, oldest first (the first ``limit``),
        with their calls."""
        pending = []
        for request in (await self.approvals.pending(session.id))[:limit]:
            call = await self.history.call(request.tool_call_id)
            tool, summary = (call.name, call_summary(call)) if call is not None else ("?", "")
            pending.append(PendingApproval(request.id, request.message_id, tool, summary))
        return pending

    async def prompt_shown(self, request_id: str, chat_id: int, message_id: int) -> None:
        """The request's prompt is this chat message: a reply to it can name the request."""
        await self.approvals.attach_message(request_id, chat_id, message_id)

    async def prompt_not_shown(self, request_id: str) -> DecisionResult:
        """Nobody can see the request's prompt: it expires, so the turn goes on instead of hanging."""
        return await self.approvals.expire_unshown(request_id)

    def trust_overview(self, session: SessionRef) -> TrustOverview:
        """What the session is not asked about now: ``/trust``."""
        bypasses = self.approvals.bypasses.active(session.id, utcnow())
        rules = [rule for rule in self.approvals.rules() if rule.origin == "user"]
        return TrustOverview(tuple(bypasses), tuple(rules))

    def revoke_bypass(self, session: SessionRef, scope: str) -> bool:
        """``False`` when no such bypass is live (revoked already, or expired)."""
        return self.approvals.bypasses.revoke(session.id, scope)

    async def revoke_rule(self, rule_id: int) -> bool:
        """``False`` when no such rule is saved (revoked already)."""
        return await self.approvals.delete_rule(rule_id)

    def running_calls(self, session: SessionRef) -> list[RunningCall]:
        """The session's tracked calls still running (``/jobs``), oldest first."""
        assert session.id is not None
        return self.background.running(session.id)

    async def cancel_call(self, session: SessionRef, run_id: int, *, envelope_id: str) -> bool:
        """The chat's ⏹ on a running call: its processes are killed, its result mail says
        cancelled. ``False`` when it is not running (any more) or not this session's."""
        body = ControlBody(action=ControlAction.CANCEL_CALLS, call_ids=[str(run_id)])
        return await self.desk.send(self._control(session.id, body, envelope_id), bool)

    async def call_run(self, run_id: int) -> CallRun | None:
        """A tracked call's run as it stands (what a status line a restart cut short should read)."""
        row = await self.background_store.get(run_id)
        if row is None:
            return None
        return CallRun(
            run_id=run_id,
            name=row.name,
            summary=row.summary,
            status=str(row.status),
            runs_command=self.tools.runs_commands(row.name),
            started_at=row.started_at,
            finished_at=row.finished_at,
        )

    async def call_states(self, call_ids: Sequence[int]) -> list[CallState]:
        """These tool calls as they stand now, in the order asked (unknown ids left out): what a
        status line a restart cut short should read."""
        states = []
        for call_id in call_ids:
            call = await self.history.call(call_id)
            if call is not None:
                status, runs_command = ToolCallStatus(call.status), self.tools.runs_commands(call.name)
                states.append(CallState(call_id, call.name, call_summary(call), status, runs_command))
        return states


__all__ = [
    "MARK_END",
    "MARK_START",
    "AlreadyRunning",
    "AnswerResult",
    "ApprovalStatus",
    "Attachment",
    "AwaitedApproval",
    "Bypass",
    "CallRun",
    "CallState",
    "Checkpoint",
    "CompactionOutcome",
    "CompactionReport",
    "ContextUsage",
    "DecidedBy",
    "DecisionResult",
    "Exchange",
    "InstanceLock",
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
    "Rule",
    "RunningCall",
    "Runtime",
    "SearchHit",
    "SessionRef",
    "SessionSource",
    "StopResult",
    "Summary",
    "TodoItem",
    "TodoStatus",
    "ToolCallStatus",
    "TrustOverview",
    "fingerprint",
    "is_headless",
    "migrate_database",
]
