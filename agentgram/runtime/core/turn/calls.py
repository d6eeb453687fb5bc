"""A round's tool calls, each end to end: announce → parse → gate → execute → record.

Live rounds and a resumed turn's open calls (resume_pending_tools) go through
the same functions, so a call re-run after a restart is gated, executed and
recorded exactly like a fresh one. A parallel sub-agent batch
(:func:`~runtime.turn.subagents.is_batch`) is announced in call order, run at
once (bounded), and recorded in call order.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from agentgram.runtime.capabilities.tools.base import Progress, Tool, json_object
from agentgram.runtime.capabilities.tools.wrappers import CallSite, Chain, HookDenied, execute_tool
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.background import Performed, TrackedCall
from agentgram.runtime.core.turn.gate import GateDeps, run_approval_gate
from agentgram.runtime.core.turn.outcome import GateCancelled, Rejected
from agentgram.runtime.core.turn.subagents import EXECUTE_TASK, is_batch, run_bounded, shared_wait
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import ToolActivity, ToolPhase
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.models import (
    INTERACTIVE_SOURCES,
    SessionSource,
    ToolCallRow,
    ToolCallStatus,
)

if TYPE_CHECKING:
    from agentgram.runtime.core.turn.loop import TurnRunner

log = get_logger("turn")

CallFlow = ToolCallStatus | Rejected | GateCancelled
"""How one tool call ended: a recorded status, a refusal, or a stop while it waited."""

_PHASES = {
    ToolCallStatus.DONE: ToolPhase.DONE,
    ToolCallStatus.DETACHED: ToolPhase.DETACHED,
    ToolCallStatus.REJECTED: ToolPhase.REJECTED,
}

DETACHING_SOURCES = INTERACTIVE_SOURCES | {SessionSource.AGENT}
"""Whose calls may detach (``runtime.turn.background``): sessions someone talks to — a chat, the
terminal, a spawned session (its parent's mail, and the call's result, reach it)."""


async def run_calls(turn: TurnRunner, calls: list[ToolCallRow]) -> None:
    """A round's calls in declared order — or, for a parallel sub-agent batch, at once."""
    if is_batch(calls):
        await _run_batch(turn, calls)
        return
    for call in calls:
        await run_call(turn, call)


async def resume_pending_calls(turn: TurnRunner) -> None:
    """Re-gate and re-run calls a previous process left unfinished (resume_pending_tools)."""
    for call in await turn.deps.history.open_calls(turn.session_id, turn.frame.stack_id):
        await run_call(turn, call)


async def run_call(turn: TurnRunner, call: ToolCallRow) -> None:
    """One call end to end; a stop while it waited for approval ends the turn cancelled."""
    summary = _announce(turn, call)
    done = await _perform(turn, call, summary)
    if isinstance(done, tuple):
        await record(turn, call, summary, *done)
    elif isinstance(done, GateCancelled):
        turn.token.cancel()
        raise asyncio.CancelledError


def _announce(turn: TurnRunner, call: ToolCallRow) -> str:
    summary = call_summary(call)
    turn.state.tools_used.append(call.name)
    activity(turn, call, summary, ToolPhase.STARTED)
    return summary


async def _perform(
    turn: TurnRunner, call: ToolCallRow, summary: str, *, in_batch: bool = False
) -> Performed | Rejected | GateCancelled:
    """Parse → gate → execute: what the call came to, not recorded yet (a refusal is)."""
    tool = turn.tools.get(call.name)
    if tool is None:
        names = ", ".join(turn.tools.names())
        return ToolCallStatus.FAILED, texts.UNKNOWN_TOOL.format(name=call.name, names=names)
    try:
        args = tool.parse(call.arguments)
    except ToolError as exc:
        return ToolCallStatus.FAILED, str(exc)
    s = turn.deps
    gate = await run_approval_gate(
        GateDeps(s.approvals, s.history, s.bus, waiting=turn.waiting),
        session=turn.session,
        address=turn.address,
        call=call,
        tool=tool,
        args=args,
        ctx=turn.tool_context(),
    )
    if isinstance(gate, Rejected):
        activity(turn, call, summary, ToolPhase.REJECTED)
        return gate
    if isinstance(gate, GateCancelled):
        return gate
    return await _run_tool(turn, call, summary, tool, in_batch=in_batch)


async def _run_tool(
    turn: TurnRunner, call: ToolCallRow, summary: str, tool: Tool[Any], *, in_batch: bool = False
) -> Performed:
    """Run an approved call under its wrappers (``tools.wrappers``, recorded with the call) —
    as a tracked call that may detach when the tool drives a process, or when it is a root
    agent's ``execute_task`` (not in a parallel batch) whose child is a session of its own
    (:mod:`runtime.core.task_sessions`)."""
    s = turn.deps
    assert call.id is not None
    chain = s.wrappers.chain(tool)
    labels = json.dumps(list(chain.labels)) if chain.labels else None
    await durable(s.history.set_call_status(call.id, ToolCallStatus.RUNNING, wrappers=labels))
    activity(turn, call, summary, ToolPhase.RUNNING)
    detachable = turn.frame.owns_turn and turn.session.source in DETACHING_SOURCES
    as_session = call.name == EXECUTE_TASK and detachable and not in_batch and s.tasks is not None
    if not (tool.tracked or as_session):
        return await _execute(turn, call, tool, chain)
    tracked = TrackedCall(turn.address, call, summary, tool.runs_commands, detachable)
    return await s.calls.run(tracked, lambda live: _execute(turn, call, tool, chain, progress=live))


async def _execute(
    turn: TurnRunner, call: ToolCallRow, tool: Tool[Any], chain: Chain, progress: Progress | None = None
) -> Performed:
    """The wrapped execution; a tool's own failure becomes a failed result the model reads."""
    ctx = replace(turn.call_context(call, progress), progress=progress)
    site = CallSite(tool=tool, arguments=sent_arguments(call), ctx=ctx, agent=turn.frame.level.agent)
    try:
        result = await chain.wrap(execute_tool)(site)
    except HookDenied as exc:
        return ToolCallStatus.REJECTED, str(exc)
    except ToolError as exc:
        return ToolCallStatus.FAILED, str(exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool bug is a failed result, never a crashed turn
        log.exception("tool %s crashed", call.name)
        return ToolCallStatus.FAILED, f"{type(exc).__name__}: {exc}"
    return ToolCallStatus.DONE, result


async def record(
    turn: TurnRunner, call: ToolCallRow, summary: str, status: ToolCallStatus, result: str
) -> ToolCallStatus:
    """The call's result stored (and a finished sub-agent's frame closed), its line updated."""
    assert call.id is not None
    s = turn.deps
    if status is not ToolCallStatus.DETACHED:  # a detached call's placeholder is stored with its run
        await durable(s.history.set_call_status(call.id, status, result))
    if call.name == EXECUTE_TASK:  # the child's result reached its parent: its frame is done
        await durable(s.frames.close_children_of(call.id))
    activity(turn, call, summary, _PHASES.get(status, ToolPhase.FAILED))
    return status


def activity(turn: TurnRunner, call: ToolCallRow, summary: str, phase: ToolPhase) -> None:
    assert call.id is not None
    turn.deps.bus.emit(
        ToolActivity(
            to=turn.address,
            turn_id=turn.turn_id,
            tool_call_id=call.id,
            name=call.name,
            summary=summary,
            phase=phase,
            runs_command=turn.tools.runs_commands(call.name),
        )
    )


async def _run_batch(turn: TurnRunner, calls: list[ToolCallRow]) -> None:
    """A parallel sub-agent batch: announced in call order (their rows exist already), run at
    once (bounded), recorded in call order whatever the finishing order."""
    summaries = [_announce(turn, call) for call in calls]
    waiting, turn.waiting = turn.waiting, shared_wait(turn.waiting)
    try:
        jobs = [
            partial(_perform, turn, call, summary, in_batch=True)
            for call, summary in zip(calls, summaries, strict=True)
        ]
        outcomes = await run_bounded(jobs, turn.deps.max_parallel_subagents)
    finally:
        turn.waiting = waiting
    for call, summary, outcome in zip(calls, summaries, outcomes, strict=True):
        if isinstance(outcome, tuple):
            await record(turn, call, summary, *outcome)
    if any(isinstance(outcome, GateCancelled) for outcome in outcomes):
        turn.token.cancel()
        raise asyncio.CancelledError


def sent_arguments(call: ToolCallRow) -> dict[str, Any]:
    """The arguments as the model sent them (already parsed once: a JSON object)."""
    try:
        return json_object(call.arguments or "{}")
    except ToolError:
        return {}


def call_summary(call: ToolCallRow, limit: int = 60) -> str:
    """A short human hint for the status line: the path or the command."""
    args = sent_arguments(call)
    value = args.get("command") or args.get("path") or args.get("agent") or ""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["CallFlow", "activity", "call_summary", "record", "resume_pending_calls", "run_call", "run_calls"]
