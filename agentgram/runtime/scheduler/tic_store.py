"""Durable tic facts: one ``tic_runs`` row per decision, and the chat's overrides.

``/tic`` reads :meth:`TicStore.last` for "last result"; ``/tic on|off`` and
``/tic every 45m`` write :class:`~runtime.storage.scheduler_rows.TicState`, which
wins over ``tic.*`` from the config until changed again.
"""

from __future__ import annotations

import enum
from typing import Literal

from sqlmodel import col, select

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.scheduler_rows import TicRun, TicRunStatus, TicState
from agentgram.runtime.scheduler.clock import Clock


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET
Keep = Literal[_Unset.UNSET]


class TicStore:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def record(
        self, status: TicRunStatus, *, reason: str | None = None, session_id: int | None = None
    ) -> TicRun:
        """A decided tic; a ``ran`` tic stays open until :meth:`finish`."""
        now = self._clock.now()
        done = status is not TicRunStatus.RAN
        row = TicRun(
            started_at=now,
            ended_at=now if done else None,
            status=status,
            reason=reason,
            session_id=session_id,
        )
        async with self._db.write() as session:
            session.add(row)
            await session.flush()
        return row

    async def finish(
        self, tic_id: int, *, delivered: bool, failed: bool = False, reason: str | None = None
    ) -> TicRun:
        async with self._db.write() as session:
            row = await session.get(TicRun, tic_id)
            if row is None:
                raise ValueError(f"no tic run #{tic_id}")
            row.ended_at = self._clock.now()
            row.delivered = delivered
            if failed:
                row.status = TicRunStatus.FAILED
            if reason is not None:
                row.reason = reason
            session.add(row)
        return row

    async def last(self) -> TicRun | None:
        async with self._db.read() as session:
            query = select(TicRun).order_by(col(TicRun.id).desc()).limit(1)
            return (await session.exec(query)).first()

    async def state(self) -> TicState:
        async with self._db.read() as session:
            return await session.get(TicState, 1) or TicState()

    async def set_state(
        self,
        *,
        enabled: bool | Keep | None = _UNSET,
        interval_seconds: float | Keep | None = _UNSET,
        cron: str | Keep | None = _UNSET,
    ) -> TicState:
        """Change the given overrides; pass ``None`` to fall back to the config."""
        async with self._db.write() as session:
            row = await session.get(TicState, 1) or TicState()
            if enabled is not _UNSET:
                row.enabled = enabled
            if interval_seconds is not _UNSET:
                row.interval_seconds = interval_seconds
            if cron is not _UNSET:
                row.cron = cron
            row.updated_at = self._clock.now()
            session.add(row)
        return row
