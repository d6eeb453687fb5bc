"""The model's tools for sessions that talk to each other (:mod:`runtime.core.peers`) and watch
each other (:mod:`runtime.core.watches`).

``spawn_session``, ``send_message``, ``list_sessions``, ``watch_session`` and ``unwatch_session``
act inside agentgram only, so they need no approval (what a spawned session then does with its
own tools goes through the approval rules as usual). Each answers JSON; a refusal is the call's
error, naming its cause. They are the root agent's (a sub-agent's task does not spawn sessions,
write mail or watch).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import ArgsT, Tool, ToolArgs, ToolContext, ToolError, ToolScope
from agentgram.runtime.core.peers import ListScope, Peers, Refused
from agentgram.runtime.core.watches import DEFAULT_TTL, MAX_TTL, Watches, WatchEvent


class _PeerTool(Tool[ArgsT]):
    scope = ToolScope.ROOT_ONLY

    def __init__(self, peers: Peers) -> None:
        self.peers = peers


class SpawnArgs(ToolArgs):
    agent: str = Field(description="The agent definition the new session runs (see execute_task's list).")
    task: str = Field(description="What the new session should do: its first message, from you.")
    name: str | None = Field(
        default=None, description="A short name the user sees its messages under (default: the agent's)."
    )


class SpawnSession(_PeerTool[SpawnArgs]):
    name = "spawn_session"
    description = (
        "Start a new session of an agent that works on its own, in the background, as your child: it "
        'returns at once with {"session_id": …}. Talk to it with send_message; its mail to you arrives '
        "as [mail …] messages (call wait with for='mail' to wait for one). Its answers also reach the user."
    )
    Args = SpawnArgs

    async def execute(self, args: SpawnArgs, ctx: ToolContext) -> str:
        try:
            child = await self.peers.spawn(
                ctx.session_id, args.agent, args.task, args.name, call_id=ctx.tool_call_id
            )
        except Refused as refused:
            raise ToolError(str(refused)) from None
        return json.dumps({"session_id": child.id, "agent": child.agent_id, "name": child.name})


class SendArgs(ToolArgs):
    session: str = Field(
        description='The recipient: a session id, or "parent" for the session that started you.'
    )
    text: str = Field(description="The message.")
    interrupt: bool = Field(
        default=False,
        description=(
            "If the recipient is waiting on a long command, detach that command so it reads this "
            "at once (your children only, unless your interrupt_scope is wider)."
        ),
    )


class SendMessage(_PeerTool[SendArgs]):
    name = "send_message"
    description = (
        "Send mail to another session (your parent, a child you spawned, or another within your scope). "
        'Returns a receipt {"id": …, "seq": …}. The reply, if any, arrives as a [mail …] message.'
    )
    Args = SendArgs

    async def execute(self, args: SendArgs, ctx: ToolContext) -> str:
        try:
            receipt = await self.peers.send(
                ctx.session_id, args.session, args.text, interrupt=args.interrupt, call_id=ctx.tool_call_id
            )
        except Refused as refused:
            raise ToolError(str(refused)) from None
        return json.dumps({"id": receipt.id, "seq": receipt.seq})


class ListArgs(ToolArgs):
    scope: Literal["children", "tree", "all"] = Field(
        default="tree",
        description="children: the sessions you spawned; tree: every session under this chat's; all: every one.",
    )


class ListSessions(_PeerTool[ListArgs]):
    name = "list_sessions"
    description = (
        "List sessions: id, name, agent, parent id, status (idle, running, waiting for approval, "
        "paused, finished) and last activity."
    )
    idempotent = True
    Args = ListArgs

    async def execute(self, args: ListArgs, ctx: ToolContext) -> str:
        infos = await self.peers.listed(ctx.session_id, ListScope(args.scope))
        return json.dumps(
            [
                {
                    "id": info.id,
                    "name": info.name,
                    "agent": info.agent,
                    "parent_id": info.parent_id,
                    "status": str(info.status),
                    "last_active": info.last_active.isoformat() if info.last_active else None,
                    "you": info.id == ctx.session_id,
                }
                for info in infos
            ]
        )


class _WatchTool(Tool[ArgsT]):
    scope = ToolScope.ROOT_ONLY

    def __init__(self, watches: Watches) -> None:
        self.watches = watches


EventName = Literal["turn.finished", "tool.started", "tool.completed", "approval.requested"]


class WatchArgs(ToolArgs):
    session: str = Field(description='The session to watch: its id, or "parent".')
    events: list[EventName] = Field(
        min_length=1,
        description="What to hear of: turn.finished, tool.started, tool.completed, approval.requested.",
    )
    tool: str | None = Field(
        default=None,
        description='Only tool calls (and approvals) of tools whose name matches this glob, e.g. "execute_*".',
    )
    ttl_seconds: int = Field(
        default=DEFAULT_TTL, ge=1, le=MAX_TTL, description="How long the watch lasts, in seconds."
    )


class WatchSession(_WatchTool[WatchArgs]):
    name = "watch_session"
    description = (
        "Hear of another session's events (a session you may write to): each matching event arrives "
        "as a [mail …] message starting [watch], e.g. when its turn finished or a tool call completed "
        "(with the start of the result). One watch per session: watching it again replaces the watch. "
        'Returns {"watch_id": …, "expires_at": …}; it ends with its ttl, with either session, or with '
        "unwatch_session."
    )
    Args = WatchArgs

    async def execute(self, args: WatchArgs, ctx: ToolContext) -> str:
        events = [WatchEvent(name) for name in args.events]
        try:
            watch = await self.watches.watch(
                ctx.session_id, args.session, events, args.tool, args.ttl_seconds
            )
        except Refused as refused:
            raise ToolError(str(refused)) from None
        return json.dumps(
            {
                "watch_id": watch.id,
                "session_id": watch.watched,
                "events": sorted(watch.events),
                "tool": watch.tool,
                "expires_at": watch.expires_at.isoformat(),
            }
        )


class UnwatchArgs(ToolArgs):
    session: str = Field(description='The watched session: its id, or "parent".')


class UnwatchSession(_WatchTool[UnwatchArgs]):
    name = "unwatch_session"
    description = "Stop watching a session (watch_session): no more [watch] mail from it."
    Args = UnwatchArgs

    async def execute(self, args: UnwatchArgs, ctx: ToolContext) -> str:
        try:
            watch_id = await self.watches.unwatch(ctx.session_id, args.session)
        except Refused as refused:
            raise ToolError(str(refused)) from None
        return json.dumps({"removed": watch_id})


__all__ = ["ListSessions", "SendMessage", "SpawnSession", "UnwatchSession", "WatchSession"]
