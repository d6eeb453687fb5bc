"""The call stack of a session: its agent frames (``stack_frames``).

Depth 0 is the root frame, the agent that answers the chat; its history rows
carry no ``stack_id`` (as every row did before sub-agents). A sub-agent runs
in a frame of its own, opened by its parent's ``execute_task`` call
(``parent_tool_call_id``) together with the task as its first user row, and
active until the parent's call has its result. An active frame is therefore
the mark of a sub-agent whose result has not reached its parent yet: what a
restart resumes (:mod:`runtime.turn.subagents`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Session, col, select

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    HistoryRow,
    Role,
    StackFrame,
    ToolCallRow,
    ToolCallStatus,
    utcnow,
)
from agentgram.runtime.infra.storage.rows import insert_row, table_of

_FRAMES = table_of(StackFrame)
_ROWS = table_of(HistoryRow)
_CALLS = table_of(ToolCallRow)
_OPEN = (ToolCallStatus.PENDING, ToolCallStatus.RUNNING)


@dataclass(slots=True, frozen=True)
class ChildFrame:
    """An active sub-agent frame as the runtime uses it."""

    id: int
    session_id: int
    parent_tool_call_id: int
    depth: int
    agent: str


class FrameStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def open_child(
        self, *, session_id: int, turn_id: int, parent_call_id: int, depth: int, agent: str, task: str
    ) -> ChildFrame:
        """One transaction: the frame and the task as its first user row."""

        def write(tx: Connection) -> ChildFrame:
            frame = StackFrame(
                session_id=session_id, parent_tool_call_id=parent_call_id, depth=depth, agent_id=agent
            )
            frame_id = insert_row(tx, frame)
            task_row = HistoryRow(
                session_id=session_id, stack_id=frame_id, turn_id=turn_id, role=Role.USER, content=task
            )
            insert_row(tx, task_row)
            return ChildFrame(frame_id, session_id, parent_call_id, depth, agent)

        return await self._db.write_sync(write)

    async def close(self, frame_ids: list[int]) -> None:
        if not frame_ids:
            return
        close = sa.update(_FRAMES).where(_FRAMES.c.id.in_(frame_ids)).values(active=False)
        await self._db.write_sync(lambda tx: tx.execute(close))

    async def close_children_of(self, call_id: int) -> None:
        """The parent's call has its result: the frame it opened is done."""
        close = (
            sa.update(_FRAMES)
            .where(_FRAMES.c.parent_tool_call_id == call_id, _FRAMES.c.active.is_(True))
            .values(active=False)
        )
        await self._db.write_sync(lambda tx: tx.execute(close))

    async def close_all_children(self, session_id: int) -> None:
        """A stopped turn: every sub-agent frame of the session ends with it."""
        close = (
            sa.update(_FRAMES)
            .where(_FRAMES.c.session_id == session_id, _FRAMES.c.depth > 0, _FRAMES.c.active.is_(True))
            .values(active=False)
        )
        await self._db.write_sync(lambda tx: tx.execute(close))

    async def active_children(self, session_id: int) -> list[ChildFrame]:
        """The session's active sub-agent frames, shallowest first (then in the order opened)."""

        def read(tx: Session) -> list[ChildFrame]:
            rows = tx.exec(
                select(StackFrame)
                .where(
                    StackFrame.session_id == session_id,
                    col(StackFrame.depth) > 0,
                    col(StackFrame.active).is_(True),
                )
                .order_by(col(StackFrame.depth), col(StackFrame.id))
            ).all()
            return [
                ChildFrame(r.id or 0, r.session_id, r.parent_tool_call_id or 0, r.depth, r.agent_id)
                for r in rows
            ]

        return await self._db.read_sync(read)

    async def open_calls_of(self, history_ids: list[int]) -> list[ToolCallRow]:
        """The calls of these assistant rows still ``pending``/``running``, in declared order."""

        def read(tx: Session) -> list[ToolCallRow]:
            return list(
                tx.exec(
                    select(ToolCallRow)
                    .where(col(ToolCallRow.history_id).in_(history_ids), col(ToolCallRow.status).in_(_OPEN))
                    .order_by(col(ToolCallRow.history_id), col(ToolCallRow.position))
                ).all()
            )

        return await self._db.read_sync(read) if history_ids else []

    async def fail_open_calls_in(self, frame_ids: list[int], note: str) -> None:
        """Calls a reaped frame left open fail: nothing in a frame stays unanswered."""
        if not frame_ids:
            return
        rows = sa.select(_ROWS.c.id).where(_ROWS.c.stack_id.in_(frame_ids))
        fail = (
            sa.update(_CALLS)
            .where(_CALLS.c.history_id.in_(rows), _CALLS.c.status.in_(_OPEN))
            .values(status=ToolCallStatus.FAILED, result=note, finished_at=utcnow())
        )
        await self._db.write_sync(lambda tx: tx.execute(fail))
