"""The model's tools over its own tracked calls: ``wait``, ``get_tool_call_status``,
``cancel_tool_call``, ``list_running_tool_calls`` (docs/architecture/tools.md).

They only observe or stop calls of the session they run in, so the seeded
approval rules allow them (``runtime.approvals.rules``). Each returns JSON.
The work is the session's :class:`~runtime.tools.base.CallControl`
(``runtime.turn.background``); outside a turn, or with calls not tracked, it is
:data:`~runtime.tools.base.NO_CALL_CONTROL` and they fail clearly.

``wait`` waits for *one* event: a listed call (or any running call, with
``"any-call"``) ending, mail arriving — anybody's message always ends a wait,
the user may interrupt — or its timeout. It always has a timeout, capped by
``tools.max_wait_seconds``: two agents waiting on each other time out instead
of deadlocking.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext
from agentgram.runtime.infra.errors import ToolError


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class WaitArgs(ToolArgs):
    for_: list[str] | Literal["any-call", "mail"] = Field(
        alias="for",
        description='What to wait for: a list of tool_call_ids (returns when one of them ends), "any-call" '
        '(any of your running calls), or "mail" (any new mail: a message, a result).',
    )
    timeout_seconds: float = Field(
        default=30, gt=0, description="Give up after this long (capped by the operator)."
    )


class Wait(Tool[WaitArgs]):
    name = "wait"
    description = (
        "Wait until a running tool call ends, new mail arrives, or the timeout passes. Returns "
        '{"woken_by": "call"|"mail"|"timeout", ...}; a user message always ends the wait.'
    )
    idempotent = True
    Args = WaitArgs

    async def execute(self, args: WaitArgs, ctx: ToolContext) -> str:
        timeout = min(args.timeout_seconds, ctx.calls.max_wait)  # first: untracked calls fail here
        target = args.for_ if isinstance(args.for_, str) else list(args.for_)
        if isinstance(target, list) and not target:
            raise ToolError('"for" lists no tool_call_id')
        return _json(await ctx.calls.wait(ctx.session_id, target, timeout))


class StatusArgs(ToolArgs):
    tool_call_id: str
    wait_for_completion: bool = Field(
        default=False, description="Wait (up to timeout_seconds) for it to end."
    )
    timeout_seconds: float = Field(default=5, gt=0)


class GetToolCallStatus(Tool[StatusArgs]):
    name = "get_tool_call_status"
    description = (
        "The status of one of your tool calls: pending, running (with its recent output), completed, "
        "failed, cancelled or orphaned (the process running it restarted), with the result once it ended."
    )
    idempotent = True
    Args = StatusArgs

    async def execute(self, args: StatusArgs, ctx: ToolContext) -> str:
        timeout = min(args.timeout_seconds, ctx.calls.max_wait)
        return _json(
            await ctx.calls.status(
                ctx.session_id, args.tool_call_id, wait=args.wait_for_completion, timeout=timeout
            )
        )


class CancelArgs(ToolArgs):
    tool_call_id: str
    reason: str | None = None


class CancelToolCall(Tool[CancelArgs]):
    name = "cancel_tool_call"
    description = (
        "Cancel one of your running tool calls (its processes are killed). Returns "
        '{"tool_call_id", "cancelled", "previous_status"}.'
    )
    Args = CancelArgs

    async def execute(self, args: CancelArgs, ctx: ToolContext) -> str:
        return _json(await ctx.calls.cancel(ctx.session_id, args.tool_call_id, args.reason))


class NoArgs(ToolArgs):
    pass


class ListRunningToolCalls(Tool[NoArgs]):
    name = "list_running_tool_calls"
    description = "Your tool calls still running (detached or not), with how long each has run."
    idempotent = True
    Args = NoArgs

    async def execute(self, args: NoArgs, ctx: ToolContext) -> str:
        return _json({"running": await ctx.calls.running_report(ctx.session_id)})


def call_tools() -> list[Tool[Any]]:
    return [Wait(), GetToolCallStatus(), CancelToolCall(), ListRunningToolCalls()]
