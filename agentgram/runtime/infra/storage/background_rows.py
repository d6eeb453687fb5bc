"""Tracked tool calls (``execute_cmd`` and the like), one row per run (docs/architecture/tools.md).

A tracked call runs as a background task of :mod:`runtime.turn.background`. Its
``tool_calls`` row is what the model reads; this row is the run's own life:
``running`` until it ends ``completed``, ``failed`` or ``cancelled`` — or
``orphaned`` when the process running it died first. ``detached`` says the
turn stopped waiting for it (the model read a placeholder, the result comes
as ``tool_call_finished`` mail); ``read_by_tool`` says the model already read
the final result through ``get_tool_call_status`` or ``wait``, so the mail is
folded in as a one-line notice instead of the payload again.

A call re-run after a restart (an attached call is resumed like any
interrupted call) gets a new row; the newest row of a call is its state.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Field, Session, SQLModel, col

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import ChatSession, utcnow
from agentgram.runtime.infra.storage.sessions import of_chat
from agentgram.runtime.infra.storage.types import StrEnumType, UTCDateTime


class RunStatus(enum.StrEnum):
    """A tracked call's run, as ``get_tool_call_status`` reports it."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ORPHANED = "orphaned"

    @property
    def final(self) -> bool:
        return self is not RunStatus.RUNNING


class BackgroundCallRow(SQLModel, table=True):
    __tablename__ = "background_calls"

    id: int | None = Field(default=None, primary_key=True)
    tool_call_id: int = Field(foreign_key="tool_calls.id", index=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    call_id: str  # the model's id of the call (``call_abc``), what its tools name
    name: str
    summary: str = ""
    status: RunStatus = Field(default=RunStatus.RUNNING, index=True, sa_type=StrEnumType(RunStatus))
    detached: bool = False
    read_by_tool: bool = False
    result: str | None = None
    started_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    detached_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


T = TypeVar("T")
_RUNS: sa.Table = BackgroundCallRow.__table__  # type: ignore[attr-defined]


class BackgroundStore:
    """Reads and writes of ``background_calls``; the ``*_in`` ones run inside a caller's transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def started(
        self, *, tool_call_id: int, session_id: int, call_id: str, name: str, summary: str
    ) -> int:
        values = {
            "tool_call_id": tool_call_id,
            "session_id": session_id,
            "call_id": call_id,
            "name": name,
            "summary": summary,
            "status": RunStatus.RUNNING,
            "detached": False,
            "read_by_tool": False,
            "started_at": utcnow(),
        }

        def insert(tx: Connection) -> int:
            return int(tx.execute(sa.insert(_RUNS).values(values).returning(_RUNS.c.id)).scalar_one())

        return await self._db.write_sync(insert)

    @staticmethod
    def detach_in(tx: Connection, run_id: int) -> None:
        tx.execute(sa.update(_RUNS).where(_RUNS.c.id == run_id).values(detached=True, detached_at=utcnow()))

    @staticmethod
    def finish_in(tx: Connection, run_id: int, status: RunStatus, result: str) -> None:
        tx.execute(
            sa.update(_RUNS)
            .where(_RUNS.c.id == run_id, _RUNS.c.status == RunStatus.RUNNING)
            .values(status=status, result=result, finished_at=utcnow())
        )

    async def finish(self, run_id: int, status: RunStatus, result: str) -> None:
        await self._db.write_sync(lambda tx: self.finish_in(tx, run_id, status, result))

    async def mark_read(self, run_id: int) -> None:
        await self._db.write_sync(
            lambda tx: tx.execute(sa.update(_RUNS).where(_RUNS.c.id == run_id).values(read_by_tool=True))
        )

    @staticmethod
    def read_in(tx: Connection, session_id: int, call_ids: Iterable[str]) -> set[str]:
        """Which of these calls' final results the model already read through a tool."""
        wanted = list(call_ids)
        if not wanted:
            return set()
        found = tx.execute(
            sa.select(_RUNS.c.call_id).where(
                _RUNS.c.session_id == session_id, _RUNS.c.call_id.in_(wanted), _RUNS.c.read_by_tool.is_(True)
            )
        ).scalars()
        return set(found)

    async def get(self, run_id: int) -> BackgroundCallRow | None:
        async with self._db.read() as tx:
            return await tx.get(BackgroundCallRow, run_id)

    async def latest(self, session_id: int, call_id: str) -> BackgroundCallRow | None:
        def read(tx: Session) -> BackgroundCallRow | None:
            row = tx.execute(
                sa.select(_RUNS)
                .where(_RUNS.c.session_id == session_id, _RUNS.c.call_id == call_id)
                .order_by(_RUNS.c.id.desc())
                .limit(1)
            ).first()
            return None if row is None else BackgroundCallRow(**row._asdict())

        return await self._db.read_sync(read)

    async def running(
        self, session_id: int | None = None, *, chat_id: int | None = None
    ) -> list[BackgroundCallRow]:
        """The calls recorded running (of one session, or of one chat's sessions)."""

        def read(tx: Session) -> list[BackgroundCallRow]:
            query = sa.select(_RUNS).where(_RUNS.c.status == RunStatus.RUNNING)
            if session_id is not None:
                query = query.where(_RUNS.c.session_id == session_id)
            if chat_id is not None:  # the chat's own sessions, not the headless runs reporting to it
                query = query.where(
                    _RUNS.c.session_id.in_(sa.select(col(ChatSession.id)).where(*of_chat(chat_id)))
                )
            return [BackgroundCallRow(**r._asdict()) for r in tx.execute(query.order_by(_RUNS.c.id))]

        return await self._db.read_sync(read)

    async def write(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one write transaction: the registry's combined writes (a placeholder with its run)."""
        return await self._db.write_sync(work)

    @staticmethod
    def orphan_in(tx: Connection, run_id: int, result: str) -> None:
        tx.execute(
            sa.update(_RUNS)
            .where(_RUNS.c.id == run_id, _RUNS.c.status == RunStatus.RUNNING)
            .values(status=RunStatus.ORPHANED, result=result, finished_at=utcnow())
        )


__all__ = ["BackgroundCallRow", "BackgroundStore", "RunStatus"]
