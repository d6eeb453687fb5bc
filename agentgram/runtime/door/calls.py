"""The calls part of the door (``rt.calls``): a session's tracked tool calls, as ``/jobs`` and a
status line show them, and the ⏹ that cancels one (stored as control mail first)."""

from __future__ import annotations

from collections.abc import Sequence

from agentgram.runtime.capabilities.tools.base import ToolRegistry
from agentgram.runtime.core.mailbox import ControlAction, ControlBody
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.core.turn.background import BackgroundCalls, RunningCall
from agentgram.runtime.core.turn.loop import call_summary
from agentgram.runtime.door.control import control_mail
from agentgram.runtime.door.values import CallRun, CallState, SessionRef
from agentgram.runtime.infra.storage.background_rows import BackgroundStore
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.models import ToolCallStatus


class Calls:
    def __init__(
        self,
        *,
        background: BackgroundCalls,
        background_store: BackgroundStore,
        history: HistoryStore,
        desk: ControlDesk,
        tools: ToolRegistry,
    ) -> None:
        self.background = background
        self.background_store = background_store
        self.history = history
        self.desk = desk
        self.tools = tools

    def running_calls(self, session: SessionRef) -> list[RunningCall]:
        """The session's tracked calls still running (``/jobs``), oldest first."""
        assert session.id is not None
        return self.background.running(session.id)

    async def cancel_call(self, session: SessionRef, run_id: int, *, envelope_id: str) -> bool:
        """The chat's ⏹ on a running call: its processes are killed, its result mail says
        cancelled. ``False`` when it is not running (any more) or not this session's."""
        body = ControlBody(action=ControlAction.CANCEL_CALLS, call_ids=[str(run_id)])
        return await self.desk.send(control_mail(session.id, body, envelope_id), bool)

    async def call_run(self, run_id: int) -> CallRun | None:
        """A tracked call's run as it stands (what a status line a restart cut short should read)."""
        row = await self.background_store.get(run_id)
        if row is None:
            return None
        return CallRun(
            run_id=run_id,
            name=row.name,
            summary=row.summary,
            status=str(row.status),
            runs_command=self.tools.runs_commands(row.name),
            started_at=row.started_at,
            finished_at=row.finished_at,
        )

    async def call_states(self, call_ids: Sequence[int]) -> list[CallState]:
        """These tool calls as they stand now, in the order asked (unknown ids left out): what a
        status line a restart cut short should read."""
        states = []
        for call_id in call_ids:
            call = await self.history.call(call_id)
            if call is not None:
                status, runs_command = ToolCallStatus(call.status), self.tools.runs_commands(call.name)
                states.append(CallState(call_id, call.name, call_summary(call), status, runs_command))
        return states
