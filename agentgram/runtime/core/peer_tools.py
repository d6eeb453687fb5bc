"""The model's tools for sessions that talk to each other (:mod:`runtime.core.peers`).

``spawn_session``, ``send_message`` and ``list_sessions`` act inside agentgram only, so they need
no approval (what a spawned session then does with its own tools goes through the approval rules
as usual). Each answers JSON; a refusal is the call's error, naming its cause. They are the root
agent's (a sub-agent's task does not spawn sessions or write mail).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import ArgsT, Tool, ToolArgs, ToolContext, ToolError, ToolScope
from agentgram.runtime.core.peers import ListScope, Peers, Refused


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
            child = await self.peers.spawn(ctx.session_id, args.agent, args.task, args.name)
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
        description="Deliver it to a working session at its next step rather than with its next turn.",
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
            receipt = await self.peers.send(ctx.session_id, args.session, args.text, interrupt=args.interrupt)
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


__all__ = ["ListSessions", "SendMessage", "SpawnSession"]
