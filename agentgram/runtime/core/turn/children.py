"""Sub-agents inside a turn: ``execute_task`` runs a child frame inline; a restart resumes them.

The child is a :class:`~runtime.turn.loop.TurnRunner` of its own on a child
:class:`~runtime.turn.frame.Frame` (same session, same cancel token, same
approval-wait hook); its final answer is the call's result. What a sub-agent
is (its tools, its prompt) is :mod:`runtime.turn.subagents`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentgram.runtime.capabilities.tools.base import Progress
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.background import Performed
from agentgram.runtime.core.turn.calls import call_summary, record
from agentgram.runtime.core.turn.deps import TaskCall
from agentgram.runtime.core.turn.outcome import Exhausted, Failed, Final, TurnOutcome
from agentgram.runtime.core.turn.subagents import (
    MAX_DEPTH,
    Level,
    child_level,
    preview,
    reap_interrupted_parallel_batches,
)
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import SubAgentFinished, SubAgentStarted
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.frames import ChildFrame
from agentgram.runtime.infra.storage.models import ToolCallRow, ToolCallStatus

if TYPE_CHECKING:
    from agentgram.runtime.core.turn.loop import TurnRunner


@dataclass(slots=True, frozen=True)
class ChildSpawner:
    """:class:`~runtime.tools.base.SubAgents` for one ``execute_task`` call of one runner."""

    turn: TurnRunner
    call: ToolCallRow
    progress: Progress | None = None
    """Set when the call is tracked (``runtime.core.turn.calls``): the child is then a session of
    its own (``TurnDeps.tasks``) and the call may detach; else it runs inline, in a frame."""

    async def run(self, agent: str, task: str) -> str:
        tasks = self.turn.deps.tasks
        if self.progress is None or tasks is None:
            return await spawn_child(self.turn, self.call, agent, task)
        assert self.call.id is not None
        here = TaskCall(self.turn.address, self.turn.turn_id, self.call.id, self.turn.frame.level.agent)
        return await tasks.run(here, agent, task, self.progress)


async def spawn_child(turn: TurnRunner, call: ToolCallRow, agent: str, task: str) -> str:
    """``execute_task``: the child's turn, inline; its final answer (or a ToolError)."""
    s = turn.deps
    assert call.id is not None
    spec = s.agents.spec(agent)
    here = turn.frame.level
    if here.depth >= MAX_DEPTH:
        raise ToolError(texts.too_deep(MAX_DEPTH))
    frame = await durable(
        s.frames.open_child(
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            parent_call_id=call.id,
            depth=here.depth + 1,
            agent=spec.name,
            task=task,
        )
    )
    return await _run_child(turn, call, here, frame)


async def _run_child(
    turn: TurnRunner, call: ToolCallRow, parent: Level, frame: ChildFrame, *, resumed: bool = False
) -> str:
    s = turn.deps
    assert call.id is not None
    level = child_level(parent, s.agents.spec(frame.agent), frame.id, s.agents)
    to, turn_id = turn.address, turn.turn_id
    s.bus.emit(
        SubAgentStarted(
            to=to,
            turn_id=turn_id,
            tool_call_id=call.id,
            parent=parent.agent,
            agent=level.agent,
            depth=level.depth,
        )
    )
    outcome = await turn.child(level, resumed=resumed).run()
    ok = isinstance(outcome, Final)
    text = outcome.text if isinstance(outcome, Final) else texts.subagent_failed(level.agent, _why(outcome))
    s.bus.emit(
        SubAgentFinished(
            to=to, turn_id=turn_id, tool_call_id=call.id, agent=level.agent, ok=ok, preview=preview(text)
        )
    )
    if not ok:
        raise ToolError(text)
    return text


async def resume_children(turn: TurnRunner) -> None:
    """Restart recovery (docs/architecture/subagents.md, "After a restart"): settle an interrupted batch, then resume the
    deepest active frame and carry its result into its parent's call, up to the root."""
    s = turn.deps
    await reap_interrupted_parallel_batches(s.frames, s.history, turn.session_id)
    while frames := await s.frames.active_children(turn.session_id):
        await _resume_child(turn, frames)


async def _resume_child(turn: TurnRunner, frames: list[ChildFrame]) -> None:
    s = turn.deps
    deepest = frames[-1]
    call = await s.history.call(deepest.parent_tool_call_id)
    if call is None or ToolCallStatus(call.status).terminal:  # its result already landed
        await s.frames.close([deepest.id])
        return
    parent = turn.frame.level
    try:
        for frame in frames[:-1]:  # one frame per depth once batches are reaped
            parent = child_level(parent, s.agents.spec(frame.agent), frame.id, s.agents)
        result: Performed = ToolCallStatus.DONE, await _run_child(turn, call, parent, deepest, resumed=True)
    except ToolError as exc:
        result = ToolCallStatus.FAILED, str(exc)
    await record(turn, call, call_summary(call), *result)


def _why(outcome: TurnOutcome) -> str:
    """Why a sub-agent gave no answer, as its parent reads it."""
    if isinstance(outcome, Exhausted):
        return texts.exhausted(outcome.rounds)
    if isinstance(outcome, Failed):
        return outcome.error
    return str(outcome.kind)


__all__ = ["ChildSpawner", "resume_children", "spawn_child"]
