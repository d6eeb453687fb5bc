"""The composition function: every part of a runtime, built once from its settings.

:func:`compose` is the one place that knows how the parts fit: storage and the
mailbox, the LLM client and models, tools, approvals and questions, the turn's
frozen dependencies (:class:`~runtime.core.turn.deps.TurnDeps`), the session
hub and its control desk, the scheduler, and the five parts of the adapters'
door (:mod:`runtime.door`). It builds them in dependency order and returns them
as one frozen :class:`Parts`; no part is handed the object that built it, and
nothing is assigned to a part afterwards but what the door's ports set (an
adapter's file source and upload limit) and, in a cluster, the database's
fence once this instance leads (``Runtime.start``). What more than one part needs
to reach the user goes through one :class:`~runtime.core.output.Output`.

:class:`~runtime.app.Runtime` holds the result (``rt.parts``) and adds the
lifecycle (start, recover, close) and the door's ports. Tests build a runtime
the same way; what they read of its parts they read through ``rt.parts``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agentgram.runtime.capabilities.agents import AGENTS_DIR, AgentSpec, load_agents, unknown_models
from agentgram.runtime.capabilities.agents.catalog import AgentCatalog
from agentgram.runtime.capabilities.agents.skills import SkillCatalog, load_skills, skill_dirs
from agentgram.runtime.capabilities.attachments.images import NO_IMAGES, ImageCache
from agentgram.runtime.capabilities.attachments.inbox import Inbox
from agentgram.runtime.capabilities.attachments.transcribe import OpenAITranscriber
from agentgram.runtime.capabilities.checkpoints import Checkpoints, Store, store_root
from agentgram.runtime.capabilities.mcp.activate import ActivateTools
from agentgram.runtime.capabilities.mcp.catalog import McpCatalog
from agentgram.runtime.capabilities.mcp.servers import McpServers
from agentgram.runtime.capabilities.mcp.tools import PREFIX as MCP_PREFIX
from agentgram.runtime.capabilities.mcp.tools import server_rules
from agentgram.runtime.capabilities.questions import AskUserClarification, QuestionManager
from agentgram.runtime.capabilities.tools.base import ProtectedPaths, Tool, ToolRegistry
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
from agentgram.runtime.core.approvals.manager import ApprovalManager
from agentgram.runtime.core.mailbox import SqlMailbox, Steer
from agentgram.runtime.core.output import Output
from agentgram.runtime.core.peer_tools import (
    ListSessions,
    SendMessage,
    SpawnSession,
    UnwatchSession,
    WatchSession,
)
from agentgram.runtime.core.peers import Peers, live_status
from agentgram.runtime.core.prompt import MemoryPrompt, build_static_prompt
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.core.sessions.control_handlers import SessionControl
from agentgram.runtime.core.sessions.hub import HubOptions, SessionHub
from agentgram.runtime.core.task_sessions import TaskSessions
from agentgram.runtime.core.turn.background import BackgroundCalls
from agentgram.runtime.core.turn.compaction import CompactionReport, Compactor
from agentgram.runtime.core.turn.context import ContextSettings
from agentgram.runtime.core.turn.deps import ALONE, ChosenModels, TurnDeps
from agentgram.runtime.core.turn.request import entries_a_round_reads, root_context
from agentgram.runtime.core.turn.subagents import AgentBook, ExecuteTask
from agentgram.runtime.core.watches import Watches, WatchStore
from agentgram.runtime.door.approvals import Approvals
from agentgram.runtime.door.calls import Calls
from agentgram.runtime.door.chat import Chat
from agentgram.runtime.door.jobs import Jobs
from agentgram.runtime.door.rollback import Rollback
from agentgram.runtime.door.sessions import Sessions
from agentgram.runtime.infra.config import Settings
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.events import EventBus
from agentgram.runtime.infra.lead import Lead, exit_now
from agentgram.runtime.infra.llm.models import ModelRegistry
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.ownership import Ownership
from agentgram.runtime.infra.send_budget import SendBudget
from agentgram.runtime.infra.storage.background_rows import BackgroundStore
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.frames import FrameStore
from agentgram.runtime.infra.storage.grant_rows import GrantStore
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.history_tail import HistoryTails
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.outbox import OutboxStore
from agentgram.runtime.infra.storage.prepared_rows import PreparedStore
from agentgram.runtime.infra.storage.search import HistorySearch, history_search
from agentgram.runtime.infra.storage.sessions import ChatSessionCache, SessionStore
from agentgram.runtime.infra.storage.summary_rows import SummaryStore
from agentgram.runtime.infra.storage.usage_rows import SessionModels, UsageStore
from agentgram.runtime.metrics_bus import watch as watch_metrics
from agentgram.runtime.scheduler.clock import Clock
from agentgram.runtime.scheduler.ports import SchedulerPorts
from agentgram.runtime.scheduler.service import SchedulerService
from agentgram.runtime.scheduler.tools import DeleteJob, ListJobs, ScheduleJob, UpdateJob

CHAT_SESSIONS_KEPT = 1024
"""Chats whose active session is kept in memory, least recently used out (the rest are read again)."""


def local_zone(settings: Settings) -> tuple[ZoneInfo, str]:
    """The agent's zone (``agent.timezone``, else the machine's, else UTC) and its name."""
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


ToolMaker = Callable[["Parts"], Tool[Any]]
"""How :func:`compose` builds one of the runtime's tools from the other parts."""


def _ready(tool: Tool[Any]) -> ToolMaker:
    """The maker of a tool that needs no part (built already)."""
    return lambda _: tool


def runtime_tools(settings: Settings) -> list[tuple[type[Tool[Any]], ToolMaker]]:
    """The one list of the tools a runtime built from ``settings`` adds to the built-in ones
    (:func:`default_registry`), in the order it registers them: each tool's class (whose ``name``
    is the tool's name) and how it is built. :func:`compose` registers what the makers build;
    :func:`runtime_tool_names` reads the classes' names without building anything."""
    tools: list[tuple[type[Tool[Any]], ToolMaker]] = [
        (SearchHistory, lambda p: SearchHistory(p.search, p.timezone)),
        (ScheduleJob, lambda p: ScheduleJob(p.scheduler)),
        (ListJobs, lambda p: ListJobs(p.scheduler)),
        (UpdateJob, lambda p: UpdateJob(p.scheduler)),
        (DeleteJob, lambda p: DeleteJob(p.scheduler)),
        (AskUserClarification, lambda p: AskUserClarification(p.questions, p.bus)),
        (UpdateScratchpad, lambda p: UpdateScratchpad(p.notes)),
        (WriteTodos, lambda p: WriteTodos(p.notes, p.bus)),
        *((type(tool), _ready(tool)) for tool in memory_tools(settings.agent)),
        (ExecuteTask, lambda p: ExecuteTask(p.agents)),
        (SpawnSession, lambda p: SpawnSession(p.peers)),
        (SendMessage, lambda p: SendMessage(p.peers)),
        (ListSessions, lambda p: ListSessions(p.peers)),
        (WatchSession, lambda p: WatchSession(p.watches)),
        (UnwatchSession, lambda p: UnwatchSession(p.watches)),
        *((type(tool), _ready(tool)) for tool in call_tools()),
        (SendFile, lambda p: SendFile(p.output)),
        (LoadSkill, lambda p: LoadSkill(p.skill_catalog)),
    ]
    if any(server.enabled and server.lazy for server in settings.mcp.servers.values()):
        tools.append((ActivateTools, lambda p: ActivateTools(p.mcp_catalog)))  # McpCatalog.lazy()
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """Every part :func:`compose` built, wired to each other (see the module docstring)."""

    settings: Settings
    db: Database
    bus: EventBus
    output: Output
    session_store: SessionStore
    chat_sessions: ChatSessionCache
    outbox: OutboxStore
    history: HistoryStore
    mailbox: SqlMailbox
    mcp: McpServers
    mcp_catalog: McpCatalog
    approval_manager: ApprovalManager
    questions: QuestionManager
    notes: NoteStore
    summaries: SummaryStore
    search: HistorySearch
    workdir: Path
    timezone: ZoneInfo
    timezone_name: str
    llm: LLMClient
    models: ModelRegistry
    usage: UsageStore
    tools: ToolRegistry
    agents: AgentCatalog
    skill_catalog: SkillCatalog
    processes: SqlProcessLedger
    background_store: BackgroundStore
    background: BackgroundCalls
    inbox: Inbox
    checkpoints: Checkpoints
    """The workdir's file checkpoints per turn (``/rollback``)."""
    compactor: Compactor
    deps: TurnDeps
    hub: SessionHub
    desk: ControlDesk
    peers: Peers
    watches: Watches
    scheduler: SchedulerService
    chat: Chat
    approvals: Approvals
    calls: Calls
    jobs: Jobs
    sessions: Sessions
    rollback: Rollback
    lead: Lead | None
    """This instance's part in a cluster's lead (``cluster.enabled``; :mod:`runtime.infra.lead`)."""
    owners: Ownership | None
    """The chats this instance of a cluster runs (``cluster.enabled``; :mod:`runtime.infra.ownership`)."""
    send_budget: SendBudget | None
    """The chat platform's send budget every instance of a cluster shares (``cluster.enabled``;
    :mod:`runtime.infra.send_budget`); ``None`` alone, where the adapter paces itself."""

    def knows_tool(self, name: str) -> bool:
        """A registered tool, or a tool of a configured MCP server (listed or not yet)."""
        servers = self.settings.mcp.servers
        return self.tools.get(name) is not None or any(name.startswith(f"{MCP_PREFIX}{s}__") for s in servers)

    async def compact_session(self, session_id: int) -> CompactionReport:
        """/compact: the session's history summarised by its own model."""
        return await self.compactor.compact(session_id, await self.deps.models.client_for(session_id))


def file_checkpoints(
    settings: Settings, db: Database, workdir: Path, history: HistoryStore, *, busy: Callable[[int], bool]
) -> Checkpoints:
    """The workdir's checkpoints (``tools.checkpoint_*``); a rollback is told to the session as a
    note in its history, which its next turn reads."""
    tools = settings.tools
    root = store_root(tools.checkpoint_dir, db.file, workdir)

    async def tell(session_id: int, text: str) -> None:
        await history.append_assistant(session_id=session_id, content=text, is_synthetic=True)

    return Checkpoints(
        Store(root, workdir, int(tools.checkpoint_max_mb * 1024 * 1024)),
        commands=tools.checkpoint_commands,
        keep=timedelta(days=tools.checkpoint_keep_days),
        busy=busy,
        tell=tell,
        now=utcnow,
    )


def compose(
    settings: Settings,
    *,
    llm: LLMClient,
    format_rules: str = "",
    tools: ToolRegistry | None = None,
    home_chat_id: int | None = None,
    clock: Clock | None = None,
    on_lead_lost: Callable[[str], None] = exit_now,
) -> Parts:
    """Build every part from ``settings``, in dependency order (nothing starts: see
    ``Runtime.start``). ``llm`` is the default model's client; ``tools`` a registry the caller
    filled already (its tools stay; the runtime's own are added); ``home_chat_id`` where
    headless runs report; ``clock`` the scheduler's (a test's fake clock; the system's when not
    given); ``on_lead_lost`` what a cluster's leader does when another instance took the lead
    (the process exits: :func:`runtime.infra.lead.exit_now`)."""
    db = Database(settings.storage.url, pool_size=settings.storage.pool_size)
    bus = EventBus()
    session_store = SessionStore(db)
    outbox = OutboxStore(db)
    output = Output(outbox, bus, session_store)
    history = HistoryStore(db, HistoryTails(keep=entries_a_round_reads(settings.llm)))
    mailbox = SqlMailbox(db, settings.mailbox.max_unread)
    lead = Lead(db, settings.cluster, on_lost=on_lead_lost) if settings.cluster.enabled else None
    owners = Ownership(lead, db) if lead is not None else None
    if owners is not None:
        mailbox.announce = owners.announce  # mail for a session another instance runs wakes it
        mailbox.leases = owners  # a worker's mail is fenced by its session's lease
    processes = SqlProcessLedger(  # groups reaped after a kill (in a cluster, a dead instance's)
        session_store, instance=lead.registered_id if lead is not None else (lambda: None)
    )
    mcp = McpServers(settings.mcp, processes)
    mcp_catalog = McpCatalog(mcp, GrantStore(db))
    approval = settings.approval.model_copy(
        update={"rules": [*settings.approval.rules, *server_rules(settings.mcp)]}
    )  # a server's ``approval`` is a configured rule for its tools
    approval_manager = ApprovalManager(db, approval)
    questions = QuestionManager(db)
    notes = NoteStore(db)
    summaries = SummaryStore(db)
    search = history_search(db)
    workdir = settings.agent.workdir.expanduser().resolve()
    timezone, timezone_name = local_zone(settings)
    models = ModelRegistry(settings.llm, llm)  # llm is the default's client
    usage = UsageStore(db)
    registry = tools or default_registry()
    agents = load_agents(settings.agent.agents_dir or workdir / AGENTS_DIR)
    for problem in unknown_models(agents, [info.name for info in models.infos]):
        raise problem  # check-config reports them all (runtime.config_check.check_agents)
    skill_catalog = load_skills(skill_dirs(workdir, settings.agent.skills_dirs))

    def skill_listing(agent: AgentSpec) -> str:
        """The skills block of ``agent``'s static system message: none when it may not load them."""
        offered = agent.tools is None or LOAD_SKILL in agent.tools
        return skill_catalog.listing() if offered else ""

    background_store = BackgroundStore(db)
    background = BackgroundCalls(
        background_store,
        history,
        mailbox,
        bus,
        settings.tools,
        adopt=lambda row: tasks.adopt(row),  # the sub-agents' tasks, made below
    )
    inbox = Inbox(
        workdir=workdir,
        store=PreparedStore(db),
        bus=bus,
        notify=output.notice,
        transcription=settings.transcription,
        transcriber=OpenAITranscriber(settings.transcription, settings.llm)
        if settings.transcription.enabled
        else None,
    )
    compactor = Compactor(settings.llm.compaction, history, summaries)
    checkpoints = file_checkpoints(settings, db, workdir, history, busy=lambda sid: hub.is_busy(sid))
    peers = Peers(
        db,
        session_store,
        mailbox,
        agents,
        max_hops=settings.agent.max_mail_hops,
        status_of=lambda session_id: live_status(hub.state(session_id)),  # the hub, made below
    )
    tasks = TaskSessions(db, peers, mailbox, bus)
    deps = TurnDeps(
        db=db,
        sessions=session_store,
        history=history,
        frames=FrameStore(db),
        mailbox=mailbox,
        models=ChosenModels(SessionModels(models, usage)),
        tools=registry,  # the runtime's own tools are registered below; AgentBook.main_tools filters
        approvals=approval_manager,
        bus=bus,
        notice=output.notice,
        context=ContextSettings(
            static_system=build_static_prompt(
                settings.agent.system_prompt_file,
                format_rules,
                agent_prompt=agents.main.prompt,
                skills=skill_listing(agents.main),
            ),
            workdir=workdir,
            timezone=timezone,
            timezone_name=timezone_name,
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
            agents,
            prompt=lambda spec: build_static_prompt(
                None, "", agent_prompt=spec.prompt, skills=skill_listing(spec)
            ),
            root_prompt=lambda spec: build_static_prompt(
                None, format_rules, agent_prompt=spec.prompt, skills=skill_listing(spec)
            ),
        ),
        max_parallel_subagents=settings.llm.max_parallel_subagents,
        protected=ProtectedPaths(
            secret_paths(settings.config_file, db.file).entries
            | ProtectedPaths.of({checkpoints.store.root: "it holds agentgram's file checkpoints"}).entries
        ),
        wrappers=Wrappers(settings.tools.wrappers, registry.get),
        processes=processes,
        notes=notes,
        questions=questions,
        compaction=compactor,
        memory=MemoryPrompt(
            workdir / MEMORY_DIR, settings.agent.inject_memory, settings.agent.memory_max_chars
        ),
        calls=background,
        files=inbox,
        mcp=mcp_catalog,
        owners=owners if owners is not None else ALONE,
        checkpoints=checkpoints,
        tasks=tasks,
    )
    hub = SessionHub(deps, HubOptions(resume_on_message=settings.mailbox.resume_on_message))
    watches = Watches(
        WatchStore(db),
        session_store,
        peers,
        mailbox,
        history,
        background_store,
        cap=settings.agent.max_watches,
        now=clock.now if clock is not None else utcnow,  # a test's fake clock moves their expiry too
    )
    chat_sessions = ChatSessionCache(CHAT_SESSIONS_KEPT)
    chat = Chat(  # the door's first part: the scheduler opens its sessions through it
        session_store=session_store,
        chat_sessions=chat_sessions,
        history=history,
        outbox=outbox,
        mailbox=mailbox,
        hub=hub,
        desk=hub.desk,
        inbox=inbox,
        background=background,
        approval_manager=approval_manager,
        mcp_catalog=mcp_catalog,
        usage=usage,
        notes=notes,
        compactor=compactor,
        context_for=functools.partial(root_context, deps),
        search=search,
        peers=peers,
        resume_on_message=settings.mailbox.resume_on_message,
        queued_default=Steer.AFTER if settings.agent.queued_default == "after" else None,
    )
    scheduler = SchedulerService(
        SchedulerPorts(
            db=db,
            sessions=session_store,
            history=history,
            mailbox=mailbox,
            approvals=approval_manager,
            turns=hub,
            publish=output.publish,
            chat_session=chat.chat_session,
            timezone=timezone,
            timezone_name=timezone_name,
            workdir=workdir,
            scheduler=settings.scheduler,
            tic=settings.tic,
            quiet_hours=settings.quiet_hours,
            home_chat_id=home_chat_id,
        ),
        clock=clock,
    )
    parts = Parts(
        settings=settings,
        db=db,
        bus=bus,
        output=output,
        session_store=session_store,
        chat_sessions=chat_sessions,
        outbox=outbox,
        history=history,
        mailbox=mailbox,
        mcp=mcp,
        mcp_catalog=mcp_catalog,
        approval_manager=approval_manager,
        questions=questions,
        notes=notes,
        summaries=summaries,
        search=search,
        workdir=workdir,
        timezone=timezone,
        timezone_name=timezone_name,
        llm=llm,
        models=models,
        usage=usage,
        tools=registry,
        agents=agents,
        skill_catalog=skill_catalog,
        processes=processes,
        background_store=background_store,
        background=background,
        inbox=inbox,
        checkpoints=checkpoints,
        compactor=compactor,
        deps=deps,
        hub=hub,
        desk=hub.desk,
        peers=peers,
        watches=watches,
        scheduler=scheduler,
        chat=chat,
        approvals=Approvals(
            approval_manager=approval_manager,
            questions=questions,
            history=history,
            hub=hub,
            desk=hub.desk,
            tools=registry,
            workdir=workdir,
            bypass_duration=settings.approval.bypass_duration,
        ),
        calls=Calls(
            background=background,
            background_store=background_store,
            history=history,
            desk=hub.desk,
            tools=registry,
        ),
        jobs=Jobs(scheduler=scheduler),
        sessions=Sessions(
            models=models,
            usage=usage,
            desk=hub.desk,
            skill_catalog=skill_catalog,
            mcp_catalog=mcp_catalog,
            session_store=session_store,
            peers=peers,
        ),
        rollback=Rollback(checkpoints=checkpoints),
        lead=lead,
        owners=owners,
        send_budget=SendBudget(db) if settings.cluster.enabled else None,
    )
    for cls, make in runtime_tools(settings):
        if registry.get(cls.name) is None:  # a tool the caller registered already stays
            tool = make(parts)
            assert isinstance(tool, cls), (cls, tool)
            registry.register(tool)
    for problem in deps.wrappers.hook_problems():
        raise problem
    SessionControl(
        turns=hub,
        calls=background,
        fetches=inbox,
        decisions=approval_manager,
        answers=questions,
        compact=parts.compact_session,
        compaction_on=compactor.settings.enabled,
        choose_model=usage.choose,
        steering=mailbox,
    ).register(hub.desk)
    watch_metrics(bus.subscribe, mailbox.subscribe, parts.knows_tool)  # runtime.metrics_bus
    bus.subscribe(watches)  # a watched session's events become its watchers' mail (runtime.core.watches)
    return parts


__all__ = [
    "CHAT_SESSIONS_KEPT",
    "Parts",
    "ToolMaker",
    "compose",
    "local_zone",
    "runtime_tool_names",
    "runtime_tools",
    "unknown_hook_tools",
]
