"""The tool contract: typed arguments, a group for approval rules, one ``execute``.

A tool's own failure is a :class:`~runtime.errors.ToolError` whose message the
model reads; anything else escaping ``execute`` is a bug and is reported as a
failed result too (the turn never crashes on a tool). Cancellation arrives as
``asyncio.CancelledError`` in ``execute``: a tool that holds outside resources
(a process group) must release them and re-raise.

What a tool may use beyond its arguments is its :class:`ToolContext`; each service
there is a Protocol defined here, and a service that is off (outside a turn, or
not configured) is its null object next to it (:data:`NO_SUB_AGENTS`,
:data:`NO_PROCESSES`, :data:`NO_CALL_CONTROL`, :data:`NO_CHECKPOINTS`), never ``None``: a tool has no
"is it on?" branch.
"""

from __future__ import annotations

import enum
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import Address
from agentgram.runtime.infra.llm.types import ToolSpec


class ToolGroup(enum.StrEnum):
    """Groups named in approval rules as ``@fs_read``, ``@fs_write``, ``@shell``.

    A call's group can depend on its arguments (:meth:`Tool.call_group`): a
    read outside the workdir is ``@fs_read_outside``, not ``@fs_read``.
    """

    FS_READ = "fs_read"
    FS_READ_OUTSIDE = "fs_read_outside"
    FS_WRITE = "fs_write"
    SHELL = "shell"
    SCHEDULE = "schedule"
    OTHER = "other"


class ToolScope(enum.StrEnum):
    """Which agents of a call stack see a tool (:meth:`ToolRegistry.for_sub_agent`).

    ``inherited`` tools pass from an agent to the sub-agents it starts;
    ``root_only`` ones never reach a sub-agent; ``per_level`` ones are dropped
    from what a sub-agent inherits and re-added once by the one place that
    builds a sub-agent's tools (:mod:`runtime.turn.subagents`), if
    :meth:`Tool.offered_at` its depth — so no name can be both inherited and
    re-added.
    """

    INHERITED = "inherited"
    ROOT_ONLY = "root_only"
    PER_LEVEL = "per_level"


class SubAgents(Protocol):
    """How a tool hands a task to a sub-agent (``execute_task``): the child's final answer, or a
    :class:`ToolError` the model reads."""

    async def run(self, agent: str, task: str) -> str: ...


class _NoSubAgents:
    async def run(self, agent: str, task: str) -> str:
        raise ToolError("sub-agents can only be started from a turn")


NO_SUB_AGENTS: SubAgents = _NoSubAgents()
"""Outside a turn's call: starting a sub-agent is an error the model reads."""


class ProcessLedger(Protocol):
    """Where tools record the process groups they start (see runtime.tools.processes)."""

    async def started(self, pgid: int) -> None: ...

    async def finished(self, pgid: int) -> None: ...


class _NoProcesses:
    async def started(self, pgid: int) -> None:
        return None

    async def finished(self, pgid: int) -> None:
        return None


NO_PROCESSES: ProcessLedger = _NoProcesses()
"""No ledger: the process groups tools start are not recorded."""


class CallControl(Protocol):
    """The session's tracked calls as the model's call tools see them (``runtime.turn.background``).

    Every answer is a JSON-able mapping the tool returns as its result; a call id the session does
    not know is a :class:`ToolError`."""

    @property
    def max_wait(self) -> float: ...

    async def wait(self, session_id: int, target: list[str] | str, timeout: float) -> dict[str, Any]: ...

    async def status(
        self, session_id: int, call_id: str, *, wait: bool, timeout: float
    ) -> dict[str, Any]: ...

    async def cancel(self, session_id: int, call_id: str, reason: str | None) -> dict[str, Any]: ...

    async def running_report(self, session_id: int) -> list[dict[str, Any]]: ...


def _untracked() -> ToolError:
    return ToolError("tracked tool calls are not available here")


class _NoCallControl:
    """Calls are not tracked: whatever a call tool asks first is an error the model reads."""

    @property
    def max_wait(self) -> float:
        raise _untracked()

    async def wait(self, session_id: int, target: list[str] | str, timeout: float) -> dict[str, Any]:
        raise _untracked()

    async def status(self, session_id: int, call_id: str, *, wait: bool, timeout: float) -> dict[str, Any]:
        raise _untracked()

    async def cancel(self, session_id: int, call_id: str, reason: str | None) -> dict[str, Any]:
        raise _untracked()

    async def running_report(self, session_id: int) -> list[dict[str, Any]]:
        raise _untracked()


NO_CALL_CONTROL: CallControl = _NoCallControl()
"""Outside a turn, or calls not tracked (``runtime.turn.deps.UNTRACKED``): the call tools fail clearly."""


class FileCheckpoints(Protocol):
    """Where a turn's changes to the workdir are checkpointed (``runtime.capabilities.checkpoints``):
    a tool that writes a file wraps the write in :meth:`change`, one that runs a command wraps it
    in :meth:`command`."""

    def change(self, path: Path) -> AbstractAsyncContextManager[None]: ...

    def command(self, command: str) -> AbstractAsyncContextManager[None]: ...


class _NoCheckpoints:
    def change(self, path: Path) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def command(self, command: str) -> AbstractAsyncContextManager[None]:
        return nullcontext()


NO_CHECKPOINTS: FileCheckpoints = _NoCheckpoints()
"""Outside a turn: nothing is checkpointed."""


class Progress(Protocol):
    """Where a tracked call tells how far it got: ``watch`` hands over a reader of its output so far."""

    def watch(self, output: Callable[[], str]) -> None: ...

    def names_session(self, session_id: int) -> None:
        """The session doing this call's work (a sub-agent's task, ``runtime.core.task_sessions``):
        the detached placeholder and the call's status name it."""
        ...


@dataclass(slots=True, frozen=True)
class ProtectedPaths:
    """Files and directories no tool may touch, whatever the approval rules say, each with why.

    An entry covers itself and everything under it. Both sides are compared
    resolved (symlinks and ``..`` gone) and, for what exists, by identity
    (device and inode), so a hard link or another spelling on a
    case-insensitive disk is the same file.
    """

    entries: frozenset[tuple[Path, str]] = field(default_factory=frozenset)

    @classmethod
    def of(cls, reasons: Mapping[Path, str]) -> ProtectedPaths:
        return cls(frozenset((path.expanduser().resolve(), why) for path, why in reasons.items()))

    def reason(self, path: Path) -> str | None:
        """Why the resolved ``path`` is off limits, or ``None`` when it is not."""
        for root, why in self.entries:
            if path == root or root in path.parents:
                return why
        if not self.entries:
            return None
        seen = {ident for p in (path, *path.parents) if (ident := _identity(p)) is not None}
        for root, why in self.entries:
            if _identity(root) in seen:
                return why
        return None

    def check(self, path: Path) -> None:
        """Raise the :class:`ToolError` the model reads when ``path`` is off limits."""
        why = self.reason(path)
        if why is not None:
            raise ToolError(f"access to {path} is denied: {why}")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


@dataclass(slots=True, frozen=True)
class ToolContext:
    """What a tool may know about where it runs."""

    workdir: Path
    session_id: int = 0
    source: str = "chat"  # SessionSource.CHAT: storage is a layer above tools
    chat_id: int | None = None
    thread_id: int = 0  # the session's forum topic (0: none)
    processes: ProcessLedger = NO_PROCESSES
    protected: ProtectedPaths = field(default_factory=ProtectedPaths)
    sub_agents: SubAgents = NO_SUB_AGENTS  # bound to the call being run; off outside a turn
    depth: int = 0  # the calling agent's depth in the call stack (0: the root agent)
    stack_id: int | None = None  # the calling sub-agent's frame; None: the root agent
    tool_call_id: int | None = None  # the stored call being run (a question is bound to it)
    calls: CallControl = NO_CALL_CONTROL  # the session's tracked calls (wait, get_tool_call_status, …)
    progress: Progress | None = None  # set while a tracked call runs: where its output can be read
    checkpoints: FileCheckpoints = NO_CHECKPOINTS  # the turn's file checkpoints (/rollback)

    def resolve(self, path: str) -> Path:
        """Resolve ``path`` against the workdir (absolute paths stay as given)."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.workdir / candidate
        return candidate.resolve()

    @property
    def address(self) -> Address:
        """Where the calling session's output goes (an event a tool emits is addressed here)."""
        return Address(
            session_id=self.session_id, source=self.source, chat_id=self.chat_id, thread_id=self.thread_id
        )

    def inside_workdir(self, path: Path) -> bool:
        """Whether the resolved ``path`` is the workdir or lies under it."""
        return path.is_relative_to(self.workdir.resolve())


def json_object(raw: str | dict[str, Any]) -> dict[str, Any]:
    """The model's arguments as a JSON object; a :class:`ToolError` the model can read otherwise."""
    try:
        data = json.loads(raw or "{}") if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ToolError("arguments must be a JSON object")
    return data


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown keys are an error the model can read."""

    model_config = ConfigDict(extra="forbid")


ArgsT = TypeVar("ArgsT", bound=ToolArgs)


class Tool(ABC, Generic[ArgsT]):
    """Subclass with ``name``, ``description``, ``group``, ``Args`` and ``execute``."""

    name: ClassVar[str]
    description: ClassVar[str]
    group: ClassVar[ToolGroup] = ToolGroup.OTHER
    scope: ClassVar[ToolScope] = ToolScope.INHERITED
    asks_user: ClassVar[bool] = False
    """It waits for the user's answer: not offered where nobody answers (tic and cron sessions)."""
    tracked: ClassVar[bool] = False
    """It drives an OS entity (a process): it runs as a tracked call that may detach
    (``runtime.turn.background``, ``tools.attach_seconds``)."""
    idempotent: ClassVar[bool] = False
    """It only reads, so running a call twice does no harm: a ``retries`` wrapper may repeat it."""
    Args: type[ArgsT]

    def offered_at(self, depth: int) -> bool:
        """A ``per_level`` tool: whether an agent at ``depth`` gets it."""
        return True

    @property
    def runs_commands(self) -> bool:
        """It runs the shell command its call names (the ``@shell`` group): an approval shows the
        command and its workdir, a status line marks it as a command."""
        return self.group is ToolGroup.SHELL

    @property
    def spec(self) -> ToolSpec:
        schema = self.Args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def parse(self, raw: str | dict[str, Any]) -> ArgsT:
        """Parse the model's JSON arguments; a clear :class:`ToolError` otherwise."""
        data = json_object(raw)
        try:
            return self.Args.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments: {problems}") from None

    def target(self, args: ArgsT, ctx: ToolContext) -> str | None:
        """The path or command approval rules match against (``None`` if none)."""
        return None

    def call_group(self, args: ArgsT, ctx: ToolContext) -> ToolGroup:
        """The group approval rules and bypasses see for this call (the tool's, unless it depends on
        the arguments)."""
        return self.group

    def reads(self, args: ArgsT, ctx: ToolContext) -> Path | None:
        """The resolved path a call that only reads names (``None``: it reads no one path, or it
        changes something). An approval names it in words instead of showing the raw arguments."""
        return None

    def guard(self, args: ArgsT, ctx: ToolContext) -> None:
        """Refuse a call no rule or approval may allow, with a :class:`ToolError` the model reads.

        The approval gate calls it before any rule, and :meth:`execute` again
        before acting (the disk may have changed while the user decided).
        """

    @abstractmethod
    async def execute(self, args: ArgsT, ctx: ToolContext) -> str:
        """Do the work and return the text the model reads."""


def read_target(tool: Tool[Any], raw: str | dict[str, Any], ctx: ToolContext) -> Path | None:
    """:meth:`Tool.reads` for the model's raw arguments; ``None`` when they do not parse either."""
    try:
        return tool.reads(tool.parse(raw), ctx)
    except ToolError:
        return None


class ToolRegistry:
    """Tools by name, in registration order (the order the model sees)."""

    def __init__(self, tools: list[Tool[Any]] | None = None) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._specs: list[ToolSpec] | None = None
        self._headless: ToolRegistry | None = None  # for_headless(), kept: its specs are cached too
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        self._specs = self._headless = None

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        # cached: pydantic's JSON-schema generation costs ~2 ms per round otherwise (bench/README.md)
        if self._specs is None:
            self._specs = [tool.spec for tool in self._tools.values()]
        return list(self._specs)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool[Any]]:
        return list(self._tools.values())

    def for_headless(self) -> ToolRegistry:
        """What a tic or cron session is offered: no tool that waits for the user's answer."""
        if self._headless is None:
            self._headless = ToolRegistry([t for t in self._tools.values() if not t.asks_user])
        return self._headless

    def for_sub_agent(self) -> ToolRegistry:
        """What a sub-agent inherits: neither the ``root_only`` tools nor the ``per_level`` ones
        (the sub-agent's builder re-adds those, each once)."""
        return ToolRegistry([t for t in self._tools.values() if t.scope is ToolScope.INHERITED])

    def per_level(self) -> list[Tool[Any]]:
        return [t for t in self._tools.values() if t.scope is ToolScope.PER_LEVEL]

    def extended(self, tools: list[Tool[Any]]) -> ToolRegistry:
        """These tools and then ``tools`` (a name already here is kept, not added twice)."""
        return ToolRegistry([*self._tools.values(), *(t for t in tools if t.name not in self._tools)])

    def only(self, names: frozenset[str]) -> ToolRegistry:
        """The tools named in ``names`` (an agent's allowlist), in registration order."""
        return ToolRegistry([t for t in self._tools.values() if t.name in names])

    def runs_commands(self, name: str) -> bool:
        """Whether the tool called ``name`` runs shell commands (an unknown name does not)."""
        tool = self._tools.get(name)
        return tool is not None and tool.runs_commands
