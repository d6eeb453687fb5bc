"""What a turn runs on, built once: :class:`TurnDeps`, frozen, made of narrow seams.

pydantic-ai keeps a run's dependencies (``GraphAgentDeps``) apart from its
mutable state; this is that half. The runtime's composition
(``runtime/app.py``) builds one value and hands it to the session hub; nothing
assigns to it afterwards. The stores, the mailbox, the approval service and
the event bus are the narrow seams of :mod:`runtime.turn.ports` (what the turn
and its worker call of them, nothing more). Each optional feature is a small
Protocol here, and a feature that is off is its null object (:data:`NO_NOTES`,
:class:`OneModel`, :data:`UNTRACKED`, …), never ``None``: the turn's code
has no "is it on?" branch. The tools' own seams and their null objects
(:data:`NO_PROCESSES`, :data:`NO_CALL_CONTROL`) live in :mod:`runtime.tools.base`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from agentgram.runtime.capabilities.tools.base import (
    NO_CALL_CONTROL,
    NO_CHECKPOINTS,
    NO_PROCESSES,
    CallControl,
    FileCheckpoints,
    ProcessLedger,
    Progress,
    ProtectedPaths,
    ToolRegistry,
)
from agentgram.runtime.capabilities.tools.wrappers import Wrappers
from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.core.prompt import in_group, with_instructions, with_memory
from agentgram.runtime.core.turn.background import Performed, TrackedCall
from agentgram.runtime.core.turn.compaction import HistoryView
from agentgram.runtime.core.turn.context import ContextSettings
from agentgram.runtime.core.turn.inject import Prepared
from agentgram.runtime.core.turn.ports import (
    Events,
    Frames,
    Gate,
    Transactions,
    TurnHistory,
    TurnMail,
    TurnSessions,
)
from agentgram.runtime.core.turn.subagents import AgentBook
from agentgram.runtime.infra.events import Address, Notify
from agentgram.runtime.infra.llm.models import ModelRegistry
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.storage.models import ChatSession
from agentgram.runtime.infra.storage.question_rows import QuestionRow
from agentgram.runtime.infra.tasks import TaskSet

AnyWork = Callable[[Progress | None], Awaitable[Performed]]
"""A call's execution, told where its output can be read while it runs (if tracked)."""

# --- models -------------------------------------------------------------------------------------


class Models(Protocol):
    """Which client a request goes to: the session's model (``/model``) or one an agent names."""

    async def client_for(self, session_id: int) -> LLMClient: ...

    def named(self, name: str | None) -> LLMClient | None:
        """The client of a configured model ``name``; ``None`` for no name or an unknown one."""
        ...


@dataclass(slots=True, frozen=True)
class OneModel:
    """One model for every session (no ``/model``)."""

    llm: LLMClient

    async def client_for(self, session_id: int) -> LLMClient:
        return self.llm

    def named(self, name: str | None) -> LLMClient | None:
        return None


class ChosenModel(Protocol):
    """What :class:`ChosenModels` needs of ``runtime.storage.usage_rows.SessionModels``."""

    registry: ModelRegistry

    async def client_for(self, session_id: int) -> LLMClient: ...


@dataclass(slots=True, frozen=True)
class ChosenModels:
    """Each session's chosen model; a sub-agent's named one if ``llm.models`` lists it."""

    models: ChosenModel

    async def client_for(self, session_id: int) -> LLMClient:
        return await self.models.client_for(session_id)

    def named(self, name: str | None) -> LLMClient | None:
        registry = self.models.registry
        return registry.client(name) if name is not None and registry.knows(name) else None


# --- optional features and their null objects ----------------------------------------------------


class Notes(Protocol):
    async def context_text(self, session_id: int) -> str | None:
        """The session's scratchpad and todos, shown before the history; ``None``: nothing."""
        ...

    def known_empty(self, session_id: int) -> None:
        """The session was created just now: it has no notes, and its first request reads none."""
        ...

    def forget(self, session_id: int) -> None:
        """This process no longer runs the session (idle, or another instance owns it): what it
        keeps of its notes goes, and the next request reads them."""
        ...


class Questions(Protocol):
    async def cancel_session(self, session_id: int) -> Sequence[QuestionRow]:
        """A stopped turn's pending questions, cancelled; those cancelled."""
        ...


class Compaction(Protocol):
    def applies(self, *, ephemeral: bool) -> bool: ...

    async def view(self, session_id: int) -> HistoryView: ...

    async def prepared(self, session_id: int, llm: LLMClient, static_chars: int = 0) -> HistoryView: ...


class Memory(Protocol):
    def for_session(self, session_id: int) -> str:
        """The memory snapshot a session's static prompt ends with (``""``: none)."""
        ...


class TrackedCalls(Protocol):
    """Tool calls run as tracked runs that may detach (``runtime.turn.background``)."""

    @property
    def control(self) -> CallControl:
        """What the model's call tools read; ``NO_CALL_CONTROL`` when calls are not tracked."""
        ...

    async def run(self, tracked: TrackedCall, work: AnyWork) -> Performed: ...


@dataclass(slots=True, frozen=True)
class TaskCall:
    """One ``execute_task`` call to be answered by a session of its own: where the parent's output
    goes, its turn, the stored call (``tool_calls.id``) and the agent that made it."""

    parent: Address
    turn_id: int
    call_id: int
    parent_agent: str


class SessionTasks(Protocol):
    """``execute_task`` run as a spawned session whose call may detach
    (``runtime.core.task_sessions``)."""

    async def run(self, call: TaskCall, agent: str, task: str, progress: Progress | None) -> str:
        """The child's final answer, or a ``ToolError`` saying why there is none."""
        ...


class Files(Protocol):
    async def prepare(self, envelopes: list[Envelope], address: Address) -> Prepared:
        """The files of these messages, fetched; raises ``PreparationStopped`` on a /stop."""
        ...


class McpTools(Protocol):
    async def extend(
        self, base: ToolRegistry, session_id: int, frame: int, allow: frozenset[str] | None = None
    ) -> ToolRegistry: ...


class Owners(Protocol):
    """Whether this instance runs a session now (a cluster shares the chats:
    :mod:`runtime.infra.ownership`); the worker asks before it consumes anything."""

    async def admit(self, session: ChatSession) -> bool: ...


class _RunsEverything:
    async def admit(self, session: ChatSession) -> bool:
        return True


class _NoNotes:
    async def context_text(self, session_id: int) -> str | None:
        return None

    def known_empty(self, session_id: int) -> None:
        pass

    def forget(self, session_id: int) -> None:
        pass


class _NoQuestions:
    async def cancel_session(self, session_id: int) -> Sequence[QuestionRow]:
        return ()


class _NoCompaction:
    def applies(self, *, ephemeral: bool) -> bool:
        return False

    async def view(self, session_id: int) -> HistoryView:
        raise AssertionError("compaction is off")

    async def prepared(self, session_id: int, llm: LLMClient, static_chars: int = 0) -> HistoryView:
        raise AssertionError("compaction is off")


class _NoMemory:
    def for_session(self, session_id: int) -> str:
        return ""


class _Untracked:
    @property
    def control(self) -> CallControl:
        return NO_CALL_CONTROL

    async def run(self, tracked: TrackedCall, work: AnyWork) -> Performed:
        return await work(None)


class _NoFiles:
    async def prepare(self, envelopes: list[Envelope], address: Address) -> Prepared:
        return {}


class TurnFiles(Protocol):
    """The workdir's file checkpoints, bound to one turn (``runtime.capabilities.checkpoints``)."""

    def for_turn(self, session_id: int, turn_id: int) -> FileCheckpoints: ...


class _NoTurnFiles:
    def for_turn(self, session_id: int, turn_id: int) -> FileCheckpoints:
        return NO_CHECKPOINTS


class _NoMcp:
    async def extend(
        self, base: ToolRegistry, session_id: int, frame: int, allow: frozenset[str] | None = None
    ) -> ToolRegistry:
        return base


NO_NOTES: Notes = _NoNotes()
NO_QUESTIONS: Questions = _NoQuestions()
NO_COMPACTION: Compaction = _NoCompaction()
NO_MEMORY: Memory = _NoMemory()
UNTRACKED: TrackedCalls = _Untracked()
"""Every call runs attached, in the turn."""
NO_FILES: Files = _NoFiles()
NO_MCP: McpTools = _NoMcp()
NO_TURN_FILES: TurnFiles = _NoTurnFiles()
"""Nothing is checkpointed (``/rollback`` has nothing to offer)."""
ALONE: Owners = _RunsEverything()
"""One process runs every session."""


def _no_wrappers() -> Wrappers:
    return Wrappers((), lambda name: None)


# --- the dependencies ---------------------------------------------------------------------------


@dataclass(slots=True, frozen=True, kw_only=True)
class TurnDeps:
    """Everything a turn and its session's worker use, built once by the runtime."""

    db: Transactions  # the transactions that open a turn and fold its mail in
    sessions: TurnSessions
    history: TurnHistory
    frames: Frames  # the sessions' call stacks (sub-agent frames)
    mailbox: TurnMail
    models: Models
    tools: ToolRegistry
    """Every registered tool; the agent at the root is offered those its allowlist names
    (:meth:`~runtime.turn.subagents.AgentBook.root_tools`)."""
    approvals: Gate
    bus: Events
    notice: Notify
    context: ContextSettings
    max_rounds: int
    clock: Callable[[], datetime]
    agents: AgentBook = field(default_factory=AgentBook)
    max_parallel_subagents: int = 4  # the children of one parallel batch running at once
    protected: ProtectedPaths = field(default_factory=ProtectedPaths)  # no file tool touches these
    wrappers: Wrappers = field(default_factory=_no_wrappers)
    processes: ProcessLedger = NO_PROCESSES
    notes: Notes = NO_NOTES
    questions: Questions = NO_QUESTIONS
    compaction: Compaction = NO_COMPACTION
    memory: Memory = NO_MEMORY
    calls: TrackedCalls = UNTRACKED
    files: Files = NO_FILES
    mcp: McpTools = NO_MCP
    owners: Owners = ALONE
    checkpoints: TurnFiles = NO_TURN_FILES
    tasks: SessionTasks | None = None
    """Where a root agent's ``execute_task`` runs as a session of its own (its call may detach);
    ``None``: every sub-agent runs inline, in a frame."""
    requests: TaskSet = field(default_factory=lambda: TaskSet("prefetched requests"))
    """Owns the requests sent before their turn opened (:mod:`runtime.turn.steps`); closed by the
    runtime after the hub, so none outlives the LLM client."""

    def context_for(
        self,
        session_id: int,
        system: str | None = None,
        *,
        title: str | None = None,
        instructions: str | None = None,
    ) -> ContextSettings:
        """One session's context settings: the static prompt (``system``, or the main agent's),
        where the session is (a group chat's ``title``), what its place adds (a forum topic's
        ``instructions``) and its memory snapshot, byte-identical for the whole session."""
        placed = with_instructions(in_group(system or self.context.static_system, title), instructions)
        static = with_memory(placed, self.memory.for_session(session_id))
        return replace(self.context, static_system=static)


__all__ = [
    "NO_COMPACTION",
    "NO_FILES",
    "NO_MCP",
    "NO_MEMORY",
    "NO_NOTES",
    "NO_PROCESSES",
    "NO_QUESTIONS",
    "UNTRACKED",
    "ChosenModels",
    "Compaction",
    "Files",
    "McpTools",
    "Memory",
    "Models",
    "Notes",
    "OneModel",
    "Questions",
    "SessionTasks",
    "TaskCall",
    "TrackedCalls",
    "TurnDeps",
]
