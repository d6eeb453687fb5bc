"""The approval gate: the single place a tool call's go/no-go is decided.

Live turns and resumed turns both call :func:`run_approval_gate`, so a call
re-run after a restart is gated exactly like a fresh one (and a decision the
user already made is honoured, not asked again). While the gate waits for the
user it is inside ``GateDeps.waiting``, which is how the session worker knows
its turn waits for approval. :func:`approval_resolved` is the one way a
decided request is told to the adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentgram.runtime.capabilities.mcp.tools import McpTool
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, json_object, read_target
from agentgram.runtime.capabilities.tools.preview import preview_change
from agentgram.runtime.core.approvals.manager import DecidedBy, log_decision
from agentgram.runtime.core.approvals.rules import Action, CallFacts, shown_path
from agentgram.runtime.core.approvals.trust import proposed_rule
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.outcome import GateCancelled, GateOutcome, Proceed, Rejected
from agentgram.runtime.core.turn.ports import Events, Gate, TurnHistory
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import (
    Address,
    ApprovalDetails,
    ApprovalRequested,
    ApprovalResolved,
)
from agentgram.runtime.infra.storage.models import (
    ApprovalRequestRow,
    ApprovalStatus,
    ChatSession,
    ToolCallRow,
    ToolCallStatus,
)

WaitHook = Callable[[str], AbstractContextManager[None]]
"""Entered with the request's id while the gate waits for the user's decision, left when the wait
ends (however): how the session worker knows what its turn waits on."""


def no_wait(request_id: str) -> AbstractContextManager[None]:
    """The hook of a gate nobody watches."""
    return nullcontext()


@dataclass(slots=True, frozen=True)
class GateDeps:
    approvals: Gate
    history: TurnHistory
    bus: Events
    waiting: WaitHook = field(default=no_wait)


async def run_approval_gate(
    deps: GateDeps,
    *,
    session: ChatSession,
    address: Address,
    call: ToolCallRow,
    tool: Tool[Any],
    args: ToolArgs,
    ctx: ToolContext,
) -> GateOutcome:
    assert call.id is not None and session.id is not None
    try:
        tool.guard(args, ctx)  # before any rule: what it refuses, no rule or bypass may allow
    except ToolError as refused:
        return await _reject(deps, call, texts.failed_result(str(refused)))
    facts = call_facts(tool, args, ctx)
    action = deps.approvals.check(session.id, facts)
    if action == Action.ALLOW:
        log_decision(None, call.name, ApprovalStatus.APPROVED, DecidedBy.RULE, session.id)
        return Proceed()
    if action == Action.DENY:
        log_decision(None, call.name, ApprovalStatus.REJECTED, DecidedBy.RULE, session.id)
        return await _reject(deps, call, texts.DENIED_BY_POLICY)
    if session.auto_deny_approvals:
        log_decision(None, call.name, ApprovalStatus.REJECTED, DecidedBy.AUTO_DENY, session.id)
        return await _reject(deps, call, texts.AUTO_DENIED)
    request, fresh = await deps.approvals.request_for_call(session.id, call.id, address.chat_id)
    if request.status == ApprovalStatus.PENDING and (fresh or request.message_id is None):
        details = await approval_details(call, ctx, tool)
        deps.bus.emit(
            ApprovalRequested(to=address, request_id=request.id, tool_call_id=call.id, details=details)
        )
    with deps.waiting(request.id):
        decided = await deps.approvals.wait(request.id)
    deps.bus.emit(approval_resolved(address, decided))
    return await _apply_decision(deps, call, ApprovalStatus(decided.status), decided.reason)


def approval_resolved(address: Address, request: ApprovalRequestRow) -> ApprovalResolved:
    """The event that tells the adapter a request is settled (decided, expired or cancelled)."""
    return ApprovalResolved(
        to=address,
        request_id=request.id,
        status=request.status,
        reason=request.reason,
        message_id=request.message_id,
    )


async def _apply_decision(
    deps: GateDeps, call: ToolCallRow, status: ApprovalStatus, reason: str | None
) -> GateOutcome:
    if status == ApprovalStatus.APPROVED:
        return Proceed()
    if status == ApprovalStatus.REJECTED:
        return await _reject(deps, call, texts.rejection_message(reason))
    if status == ApprovalStatus.EXPIRED:
        return await _reject(deps, call, texts.expiry_message(reason))
    return GateCancelled()


async def _reject(deps: GateDeps, call: ToolCallRow, text: str) -> Rejected:
    assert call.id is not None
    await deps.history.set_call_status(call.id, ToolCallStatus.REJECTED, text)
    return Rejected(text)


def call_facts(tool: Tool[Any], args: ToolArgs, ctx: ToolContext) -> CallFacts:
    target = tool.target(args, ctx)
    group = tool.call_group(args, ctx)
    is_path = group.value.startswith("fs_")
    return CallFacts(
        tool=tool.name,
        group=group,
        source=ctx.source,
        path=ctx.resolve(target) if (target and is_path) else None,
        command=target if (target and not is_path) else None,
        workdir=ctx.workdir,
    )


async def approval_details(call: ToolCallRow, ctx: ToolContext, tool: Tool[Any]) -> ApprovalDetails:
    details = await _shown_details(call, ctx, tool)
    return replace(details, can_always=proposed_rule(call, tool, ctx.workdir) is not None)


async def _shown_details(call: ToolCallRow, ctx: ToolContext, tool: Tool[Any]) -> ApprovalDetails:
    try:
        raw = json_object(call.arguments or "{}")
    except ToolError:  # shown as sent: the user judges what the model asked for
        raw = {"arguments": call.arguments}
    if isinstance(tool, McpTool):
        return ApprovalDetails(
            tool_name=call.name, arguments=raw, mcp_server=tool.server.name, mcp_tool=tool.remote
        )
    if tool.runs_commands:
        workdir = ctx.resolve(str(raw.get("workdir") or "."))
        return ApprovalDetails(
            tool_name=call.name, arguments=raw, command=str(raw.get("command", "")), workdir=str(workdir)
        )
    preview = await preview_change(call.name, raw, ctx)
    if preview is not None:
        return ApprovalDetails(
            tool_name=call.name,
            arguments=raw,
            path=shown_path(Path(preview.path), ctx.workdir),
            diff=preview.diff,
            new_file=preview.new_file,
        )
    read = read_target(tool, raw, ctx)
    if read is not None:  # a read in words: "Read a file outside the workdir: /etc/hostname"
        shown, outside = shown_path(read, ctx.workdir), not ctx.inside_workdir(read)
        return ApprovalDetails(tool_name=call.name, arguments=raw, read_path=shown, outside=outside)
    return ApprovalDetails(tool_name=call.name, arguments=raw)
