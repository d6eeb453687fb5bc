"""The runtime's composition root, and the door it hands the adapters.

:class:`Runtime` wires storage, mailbox, LLM client, tools, approvals, the
session hub and the scheduler from :class:`~runtime.config.Settings`, and at the
end of its ``__init__`` the door's five parts from them (:mod:`runtime.door`):
``rt.chat``, ``rt.approvals``, ``rt.calls``, ``rt.jobs``, ``rt.sessions``. It
keeps the lifecycle (start, recover, close), the event subscription, the
restart and close hooks, the file source and the ports the runtime's own parts
use (``notice``, ``publish``, ``send_file``). Every input is accepted as mail
*before* anything acts on it.

Adapters hold it as a :class:`~runtime.door.protocols.Door`: what they pass in
and get back are the door's values (:mod:`runtime.door.values`, re-exported
here) or the runtime's own value types re-exported here (``Rule``, ``Bypass``,
``ApprovalStatus``…), never an ORM row and never one of the parts it wires (a
test walks ``bot/`` for attribute access on them). Its other attributes
(``db``, ``session_store``, ``approval_manager``, ``hub``…) are for the
runtime's own wiring and tests.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Self
from zoneinfo import ZoneInfo

from agentgram.runtime.capabilities.agents import AGENTS_DIR, AgentSpec, load_agents, unknown_models
from agentgram.runtime.capabilities.agents.skills import load_skills, skill_dirs
from agentgram.runtime.capabilities.attachments.images import NO_IMAGES, ImageCache
from agentgram.runtime.capabilities.attachments.inbox import FileSource, Inbox
from agentgram.runtime.capabilities.attachments.transcribe import OpenAITranscriber
from agentgram.runtime.capabilities.mcp.activate import ActivateTools
from agentgram.runtime.capabilities.mcp.catalog import McpCatalog, McpServerStatus
from agentgram.runtime.capabilities.mcp.servers import McpServers
from agentgram.runtime.capabilities.mcp.tools import PREFIX as MCP_PREFIX
from agentgram.runtime.capabilities.mcp.tools import server_rules
from agentgram.runtime.capabilities.questions import AskUserClarification, QuestionManager
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
from agentgram.runtime.core.mailbox import (
    Checkpoint,
    MailKind,
    SqlMailbox,
)
from agentgram.runtime.core.mailbox.envelope import Attachment
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
from agentgram.runtime.core.turn.subagents import AgentBook, ExecuteTask
from agentgram.runtime.debug_view import DebugView
from agentgram.runtime.door.approvals import Approvals
from agentgram.runtime.door.calls import Calls
from agentgram.runtime.door.chat import Chat, past_exchanges
from agentgram.runtime.door.jobs import Jobs
from agentgram.runtime.door.protocols import (
    ApprovalsDoor,
    CallsDoor,
    ChatDoor,
    Door,
    JobsDoor,
    KeyValueStore,
    RestartHook,
    SessionsDoor,
)
from agentgram.runtime.door.sessions import Sessions
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
    StopResult,
    TrustOverview,
)
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.config import Settings
from agentgram.runtime.infra.errors import ConfigError, ToolError
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
from agentgram.runtime.infra.llm.models import ModelRegistry
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.log import get_logger, register_secret, register_secrets
from agentgram.runtime.infra.storage.background_rows import BackgroundStore
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.frames import FrameStore
from agentgram.runtime.infra.storage.grant_rows import GrantStore
from agentgram.runtime.infra.storage.history import HistoryStore
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
        self.session_store = SessionStore(self.db)
        self.values: KeyValueStore = self.session_store
        """The key-value store an adapter may use (see :class:`KeyValueStore`)."""
        self.outbox = OutboxStore(self.db)
        self.history = HistoryStore(self.db)
        self.mailbox = SqlMailbox(self.db, settings.mailbox.max_unread)
        watch_metrics(self.bus.subscribe, self.mailbox.subscribe, self._knows_tool)  # runtime.metrics_bus
        self.mcp = McpServers(
            settings.mcp, SqlProcessLedger(self.session_store)
        )  # groups reaped after a kill
        self.mcp_catalog = McpCatalog(self.mcp, GrantStore(self.db))
        approval = settings.approval.model_copy(
            update={"rules": [*settings.approval.rules, *server_rules(settings.mcp)]}
        )  # a server's ``approval`` is a configured rule for its tools
        self.approval_manager = ApprovalManager(self.db, approval)
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
        self.processes = SqlProcessLedger(self.session_store)
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
            sessions=self.session_store,
            history=self.history,
            frames=FrameStore(self.db),
            mailbox=self.mailbox,
            models=ChosenModels(SessionModels(self.models, self.usage)),
            tools=self.tools,  # filled below; the main agent's allowlist is AgentBook.main_tools
            approvals=self.approval_manager,
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
                images=ImageCache(settings.llm.max_image_px) if settings.llm.vision else NO_IMAGES,
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
            decisions=self.approval_manager,
            answers=self.questions,
            compact=self._compact_session,
            compaction_on=self.compactor.settings.enabled,
            choose_model=self.usage.choose,
        ).register(self.desk)
        self.chat = Chat(  # the door's first part: the scheduler opens its sessions through it
            session_store=self.session_store,
            chat_sessions=self._chat_sessions,
            history=self.history,
            outbox=self.outbox,
            mailbox=self.mailbox,
            hub=self.hub,
            desk=self.desk,
            inbox=self.inbox,
            background=self.background,
            approval_manager=self.approval_manager,
            mcp_catalog=self.mcp_catalog,
            usage=self.usage,
            notes=self.notes,
            compactor=self.compactor,
            context_for=self.deps.context_for,
            search=self.search,
            resume_on_message=settings.mailbox.resume_on_message,
        )
        self.scheduler = SchedulerService(
            SchedulerPorts(
                db=self.db,
                sessions=self.session_store,
                history=self.history,
                mailbox=self.mailbox,
                approvals=self.approval_manager,
                turns=self.hub,
                publish=self.publish,
                chat_session=self.chat.chat_session,
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
        self.approvals = Approvals(
            approval_manager=self.approval_manager,
            questions=self.questions,
            history=self.history,
            hub=self.hub,
            desk=self.desk,
            tools=self.tools,
            workdir=self.workdir,
            bypass_duration=settings.approval.bypass_duration,
        )
        self.calls = Calls(
            background=self.background,
            background_store=self.background_store,
            history=self.history,
            desk=self.desk,
            tools=self.tools,
        )
        self.jobs = Jobs(scheduler=self.scheduler)
        self.sessions = Sessions(
            models=self.models,
            usage=self.usage,
            desk=self.desk,
            skill_catalog=self.skill_catalog,
            mcp_catalog=self.mcp_catalog,
        )

    def _knows_tool(self, name: str) -> bool:
        """A registered tool, or a tool of a configured MCP server (listed or not yet)."""
        servers = self.settings.mcp.servers
        return self.tools.get(name) is not None or any(name.startswith(f"{MCP_PREFIX}{s}__") for s in servers)

    @functools.cached_property
    def debug(self) -> DebugView:
        """What the web view reads: sessions, their trees, jobs and runs, approvals, health."""
        return DebugView(self.db, self.scheduler, self.llm)

    def _skill_listing(self, agent: AgentSpec) -> str:
        """The skills block of ``agent``'s static system message: none when it may not load them."""
        offered = agent.tools is None or LOAD_SKILL in agent.tools
        return self.skill_catalog.listing() if offered else ""

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        url = self.db.engine.url.render_as_string()  # the password masked
        if self.db.is_sqlite:
            log.info("SQLite %s; database %s", Database.sqlite_version(), url)
        else:
            log.info("database %s", url)
        await migrate(self.db, self.settings.storage.migrate)
        await self.approval_manager.load_rules()
        await self.processes.reap_orphans()  # before any interrupted command is re-run or MCP server starts
        await self.mcp_catalog.list_eager()  # the lazy: false servers' tools, offered from the first turn
        for rule in skill_read_rules((s.folder for s in self.skill_catalog.skills), self.workdir):
            await self.approval_manager.add_rule(rule)
        await self.questions.load()
        self._llm_check = asyncio.create_task(self._check_llm(), name="llm-check")
        await self.background.orphan_all()  # calls the previous process ran died with it: the agent is told
        self._chat_sessions.fill(await self.session_store.active_chats(CHAT_SESSIONS_KEPT))
        await self.scheduler.start()  # before recover: it settles tic/cron turns a crash cut short
        await self.recover()

    async def recover(self) -> None:
        """Resume what a previous process left: answers the chat never showed, interrupted turns,
        unread mail."""
        for hook in self.restart_hooks:
            await hook()
        await self._resend_undelivered()
        for turn in await self.session_store.open_turns():
            if turn.status == TurnStatus.RUNNING:
                log.info("resuming turn %s of session %s", turn.id, turn.session_id)
                self.hub.resume(turn.session_id, turn.id or 0)
        for session_id in await self.session_store.sessions_with_mail():
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
            session = await self.session_store.get(row.session_id)
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

    # --- the runtime's own ports (not the adapters' door) ---------------------------

    async def send_file(self, session_id: int, path: Path, caption: str | None, *, as_photo: bool) -> None:
        """``send_file``'s :class:`~runtime.tools.send_file.FileSender`: recorded, then uploaded by the
        adapter (:class:`~runtime.events.FileOutput`)."""
        session = await self.session_store.get(session_id)
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

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint
    ) -> None:
        """Keep an input the adapter could not parse, and its position past it, in one transaction."""
        letter = DeadLetter(source=source, ref=ref, error=error, payload=payload)
        await self.session_store.dead_letter(letter, key=checkpoint.key, value=checkpoint.value)

    async def _compact_session(self, session_id: int) -> CompactionReport:
        return await self.compactor.compact(session_id, await self.deps.models.client_for(session_id))


__all__ = [
    "MARK_END",
    "MARK_START",
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
    "Rule",
    "RunningCall",
    "Runtime",
    "SearchHit",
    "SessionRef",
    "SessionSource",
    "SessionsDoor",
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
]
