"""Sub-agents: ``execute_task``, the tools of each level, parallel batches, restart repair.

An agent hands a task to a sub-agent with ``execute_task`` {agent, task}.
The child runs inline, in the parent's task (same cancellation token, same
session lock: a /stop stops the whole tree), in a stack frame of its own
(:mod:`runtime.storage.frames`) whose history is separate from the
parent's; its final answer is the call's result
(docs/architecture/subagents.md). The child's session is
the parent's, so its tool calls go through the same approval gate and their
prompts reach the same chat. Its text is not streamed to the chat (it
answers its parent, not the user); the chat sees "🤖 main → researcher" and
"✅ researcher finished" (:class:`~runtime.events.SubAgentStarted` /
:class:`~runtime.events.SubAgentFinished`) and the child's tool lines.

What this module owns:

- :class:`Level` — which frame a runner plays, with its agent, tools and context;
- :func:`root_level_as` — the root played by another agent than ``main`` (a session whose
  ``agent_id`` names it, e.g. a forum topic's): its prompt, allowlist and model, as a child
  gets them, at depth 0; :meth:`AgentBook.root_spec` falls back to ``main`` for a name the
  catalog does not know;
- :func:`child_level` — the one place a sub-agent's tools are built: the
  parent's minus root-only and per-level tools
  (:meth:`~runtime.tools.base.ToolRegistry.for_sub_agent`), the per-level
  ones re-added once if offered at the child's depth (``execute_task`` below
  :data:`MAX_DEPTH`), then the agent's allowlist. A registry refuses a name
  twice, so a duplicate tool name cannot be built;
- :func:`is_batch` / :func:`run_bounded` — the parallel batch's phase 2;
- :func:`reap_interrupted_parallel_batches` — restart step 3b.

Choices of ours: a child gets neither the chat's format rules
nor mid-turn mail (mail waits for the root's next round); an unknown agent, a
failed or exhausted child is a failed result the parent reads; a reaped
batch member whose answer was already stored gives that answer instead of
failing (the "completed child never propagated" repair, applied to batches).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import Field

from agentgram.runtime.capabilities.agents import MAIN, AgentCatalog, AgentSpec
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolRegistry, ToolScope
from agentgram.runtime.core.prompt import BUILTIN_PROMPT
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.ports import Frames, TurnHistory
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.llm.types import ToolSpec
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.frames import ChildFrame
from agentgram.runtime.infra.storage.models import Role, RowStatus, ToolCallRow, ToolCallStatus

EXECUTE_TASK = "execute_task"
MAX_DEPTH = 5
"""The deepest a sub-agent may run (the root is depth 0): ``execute_task`` is not offered there."""
PREVIEW_CHARS = 160
FALLBACKS_KEPT = 1024
"""Sessions :meth:`AgentBook.root_spec` remembers having warned about (a bound, not a cache)."""

T = TypeVar("T")
log = get_logger("turn")


class ExecuteTaskArgs(ToolArgs):
    agent: str = Field(description="Name of the agent to run the task")
    task: str = Field(min_length=1, description="The complete, self-contained task for the sub-agent")


class ExecuteTask(Tool[ExecuteTaskArgs]):
    """Runs a sub-agent through the call's :class:`~runtime.tools.base.SubAgents`."""

    name = EXECUTE_TASK
    description = texts.EXECUTE_TASK_DESCRIPTION
    scope = ToolScope.PER_LEVEL
    Args = ExecuteTaskArgs

    def __init__(self, catalog: AgentCatalog | None = None) -> None:
        self.catalog = catalog or AgentCatalog()

    def offered_at(self, depth: int) -> bool:
        return depth < MAX_DEPTH

    @property
    def spec(self) -> ToolSpec:
        base = super().spec
        return ToolSpec(base.name, self.description.format(agents=self.catalog.menu()), base.parameters)

    async def execute(self, args: ExecuteTaskArgs, ctx: ToolContext) -> str:
        return await ctx.sub_agents.run(args.agent, args.task)  # off outside a turn: NO_SUB_AGENTS


@dataclass(slots=True, frozen=True)
class Level:
    """The frame a runner plays: the root (``stack_id`` ``None``, depth 0) or a sub-agent's."""

    agent: str
    tools: ToolRegistry
    system: str | None = None  # the static system message's prompt; None: the root's
    stack_id: int | None = None
    depth: int = 0
    chain: tuple[str, ...] = (MAIN,)  # the agents from the root down to this one
    model: str | None = None  # a model of ``llm.models`` the agent names; None: the session's

    @property
    def is_root(self) -> bool:
        return self.stack_id is None


@dataclass(slots=True)
class AgentBook:
    """The agents and what each level's runner needs of them, built once per agent chain.

    ``prompt`` builds a sub-agent's static system message from its definition;
    it is built once per agent, so it is byte-identical between rounds and turns.
    """

    catalog: AgentCatalog = field(default_factory=AgentCatalog)
    prompt: Callable[[AgentSpec], str] = field(default=lambda spec: spec.prompt or BUILTIN_PROMPT.strip())
    root_prompt: Callable[[AgentSpec], str] | None = None
    """An agent's static prompt when it answers the chat itself (a forum topic's agent): with the
    chat's format rules, which a sub-agent's prompt leaves out; ``prompt`` when unset."""
    _prompts: dict[str, str] = field(default_factory=dict)
    _root_prompts: dict[str, str] = field(default_factory=dict)
    _tools: dict[tuple[str, ...], ToolRegistry] = field(default_factory=dict)
    _roots: dict[str, tuple[ToolRegistry, ToolRegistry]] = field(default_factory=dict)
    """Per agent playing the root: (every tool, the ones it is offered)."""
    _fell_back: dict[tuple[int, str], None] = field(default_factory=dict)
    """The sessions (and the agent they named) already warned of running as ``main``; the oldest
    leave after :data:`FALLBACKS_KEPT`."""

    def main_tools(self, registered: ToolRegistry) -> ToolRegistry:
        """The tools the main agent is offered: ``registered`` within its allowlist (``agents/main``)."""
        return self.root_tools(registered, self.catalog.main)

    def root_tools(self, registered: ToolRegistry, spec: AgentSpec) -> ToolRegistry:
        """The tools ``spec`` is offered at the root: ``registered`` within its allowlist.

        Built once per agent, on its first turn (every tool is registered by then), so the offered
        specs stay cached between rounds."""
        if spec.tools is None:
            return registered
        built = self._roots.get(spec.name)
        if built is None or built[0] is not registered:
            built = self._roots[spec.name] = (registered, registered.only(spec.tools))
        return built[1]

    def root_spec(self, session_id: int, agent_id: str) -> AgentSpec:
        """The agent a session's root runs as: the one its ``agent_id`` names, or ``main`` when
        the catalog has none such (an agent removed since, a config naming a missing one) — a
        warning the first time each session asks, not at each turn."""
        spec = self.catalog.get(agent_id)
        if spec is not None:
            return spec
        key = (session_id, agent_id)
        if key not in self._fell_back:
            self._fell_back[key] = None
            if len(self._fell_back) > FALLBACKS_KEPT:
                del self._fell_back[next(iter(self._fell_back))]
            log.warning(
                "session %d names the agent %r, which agents/ does not define: %s answers instead "
                "(agents: %s)",
                session_id,
                agent_id,
                MAIN,
                ", ".join(self.catalog.names()),
                extra={"session": session_id},
            )
        return self.catalog.main

    def wake_on(self, agent_id: str) -> frozenset[str]:
        """Whose mail starts a turn in an idle session of ``agent_id`` (``main``'s if unknown)."""
        spec = self.catalog.get(agent_id) or self.catalog.main
        return frozenset(spec.wake_on)

    def static_prompt(self, spec: AgentSpec) -> str:
        if spec.name not in self._prompts:
            self._prompts[spec.name] = self.prompt(spec)
        return self._prompts[spec.name]

    def root_static_prompt(self, spec: AgentSpec) -> str:
        """``spec``'s static prompt as the agent answering the chat (built once per agent)."""
        if self.root_prompt is None:
            return self.static_prompt(spec)
        if spec.name not in self._root_prompts:
            self._root_prompts[spec.name] = self.root_prompt(spec)
        return self._root_prompts[spec.name]

    def spec(self, name: str) -> AgentSpec:
        spec = self.catalog.get(name)
        if spec is None:
            raise ToolError(texts.unknown_agent(name, self.catalog.names()))
        return spec


def root_level(tools: ToolRegistry, agent: str = MAIN) -> Level:
    return Level(agent=agent, tools=tools, chain=(agent,))


def root_level_as(spec: AgentSpec, registered: ToolRegistry, book: AgentBook) -> Level:
    """The root level played by ``spec`` (the agent a session's ``agent_id`` names): every
    registered tool within its allowlist, and — for any agent but ``main``, whose prompt is the
    context's and whose model is the session's — its own static prompt (with the chat's format
    rules: it answers the chat) and model, at depth 0 and in no stack frame."""
    tools = book.root_tools(registered, spec)
    if spec.name == MAIN:
        return root_level(tools)
    return Level(
        agent=spec.name,
        tools=tools,
        system=book.root_static_prompt(spec),
        chain=(spec.name,),
        model=spec.model,
    )


def task_level(spec: AgentSpec, registered: ToolRegistry, book: AgentBook) -> Level:
    """The root level of a session that answers an ``execute_task`` call
    (:mod:`runtime.core.task_sessions`): a sub-agent in all but where it runs — its agent's own
    prompt without the chat's format rules, a sub-agent's tools (built once per agent) and its
    model, at depth 0 of its own session."""
    chain = (EXECUTE_TASK, spec.name)
    tools = book._tools.get(chain)
    if tools is None:
        tools = book._tools[chain] = sub_agent_tools(registered, spec, 1)
    return Level(
        agent=spec.name, tools=tools, system=book.static_prompt(spec), chain=(spec.name,), model=spec.model
    )


def child_level(parent: Level, spec: AgentSpec, stack_id: int, book: AgentBook) -> Level:
    """The level of a sub-agent of ``parent``: its tools (see the module docstring) and context."""
    depth = parent.depth + 1
    if depth > MAX_DEPTH:
        raise ToolError(texts.too_deep(MAX_DEPTH))
    chain = (*parent.chain, spec.name)
    tools = book._tools.get(chain)
    if tools is None:
        tools = sub_agent_tools(parent.tools, spec, depth)
        book._tools[chain] = tools
    system = book.static_prompt(spec)
    return Level(
        agent=spec.name,
        tools=tools,
        system=system,
        stack_id=stack_id,
        depth=depth,
        chain=chain,
        model=spec.model,
    )


def sub_agent_tools(parent: ToolRegistry, spec: AgentSpec, depth: int) -> ToolRegistry:
    """The parent's tools as a sub-agent at ``depth`` gets them; each name at most once, by
    construction (``register`` refuses a second)."""
    tools = parent.for_sub_agent()
    for tool in parent.per_level():
        if tool.offered_at(depth):
            tools.register(tool)
    return tools.only(spec.tools) if spec.tools is not None else tools


def is_batch(calls: Sequence[ToolCallRow]) -> bool:
    """A parallel sub-agent batch: two calls or more, every one of them ``execute_task``."""
    return len(calls) >= 2 and all(call.name == EXECUTE_TASK for call in calls)


async def run_bounded(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run ``jobs`` concurrently, at most ``limit`` at a time; results in the jobs' order.

    They run as tasks of one group inside the caller's task, so a cancel of the caller
    (/stop) cancels every one and waits for them; a job that is cancelled itself cancels
    its siblings too (a stop that reached one of them is meant for all).
    """
    gate = asyncio.Semaphore(limit)
    tasks: list[asyncio.Task[T]] = []

    async def bounded(job: Callable[[], Awaitable[T]]) -> T:
        try:
            async with gate:
                return await job()
        except asyncio.CancelledError:
            for task in tasks:
                if task is not asyncio.current_task():
                    task.cancel()
            raise

    async with asyncio.TaskGroup() as group:
        tasks.extend(group.create_task(bounded(job)) for job in jobs)
    if any(task.cancelled() for task in tasks):
        raise asyncio.CancelledError
    return [task.result() for task in tasks]


def shared_wait(
    hook: Callable[[str], AbstractContextManager[None]],
) -> Callable[[str], AbstractContextManager[None]]:
    """The approval-wait hook for the concurrent children of a batch: entered when the first
    starts waiting (with its request), left when the last stops (so the worker waits while any of
    them does)."""
    waiting: list[AbstractContextManager[None]] = []
    count = 0

    @contextmanager
    def shared(request_id: str) -> Iterator[None]:
        nonlocal count
        if count == 0:
            waiting.append(hook(request_id))
            waiting[-1].__enter__()
        count += 1
        try:
            yield
        finally:
            count -= 1
            if count == 0:
                waiting.pop().__exit__(None, None, None)

    return shared


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The start of a sub-agent's answer, on one line, for the chat."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def stored_answer(history: TurnHistory, session_id: int, stack_id: int) -> str | None:
    """A frame's final answer when it is already stored as its last row."""
    entries = await history.entries(session_id, limit=1, stack_id=stack_id)
    if not entries:
        return None
    last = entries[-1]
    if last.role != Role.ASSISTANT or last.status != RowStatus.OK or last.calls:
        return None
    return last.content


async def reap_interrupted_parallel_batches(frames: Frames, history: TurnHistory, session_id: int) -> int:
    """Restart step 3b: a batch a restart cut short is settled so the linear cascade can resume.

    A batch shows as two active frames or more at one depth. From the shallowest such
    depth down, every active frame ends: its spawning call gets the answer the child
    already stored, else fails as interrupted; the batch's calls that never started a
    child fail too, and so does anything left open inside the reaped frames. The parent
    then holds a fully resolved set of calls and continues. Returns the frames reaped.
    """
    active = await frames.active_children(session_id)
    depths = [f.depth for f in active]
    crowded = sorted({d for d in depths if depths.count(d) >= 2})
    if not crowded:
        return 0
    reaped = [f for f in active if f.depth >= crowded[0]]
    batch_rows: set[int] = set()
    for frame in (f for f in reaped if f.depth == crowded[0]):
        await _settle_reaped(frames, history, frame, batch_rows)
    for call in await frames.open_calls_of(sorted(batch_rows)):
        assert call.id is not None
        await history.set_call_status(call.id, ToolCallStatus.FAILED, texts.SUBAGENT_INTERRUPTED)
    await frames.fail_open_calls_in([f.id for f in reaped], texts.SUBAGENT_INTERRUPTED)
    await frames.close([f.id for f in reaped])
    return len(reaped)


async def _settle_reaped(frames: Frames, history: TurnHistory, frame: ChildFrame, rows: set[int]) -> None:
    call = await history.call(frame.parent_tool_call_id)
    if call is None or call.id is None:
        return
    rows.add(call.history_id)
    if ToolCallStatus(call.status).terminal:
        return
    answer = await stored_answer(history, frame.session_id, frame.id)
    if answer is not None:
        await history.set_call_status(call.id, ToolCallStatus.DONE, answer)
    else:
        await history.set_call_status(call.id, ToolCallStatus.FAILED, texts.SUBAGENT_INTERRUPTED)


__all__ = [
    "EXECUTE_TASK",
    "MAX_DEPTH",
    "AgentBook",
    "ExecuteTask",
    "Level",
    "child_level",
    "is_batch",
    "preview",
    "reap_interrupted_parallel_batches",
    "root_level",
    "root_level_as",
    "run_bounded",
    "shared_wait",
    "stored_answer",
    "sub_agent_tools",
    "task_level",
]
