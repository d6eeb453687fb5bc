"""Durable tic facts: one ``tic_runs`` row per decision, and the chat's overrides.

A fired tic's row carries its slot (the scheduled fire time) and is inserted
once (:func:`~runtime.infra.storage.scheduler_rows.insert_slot`): of two
schedulers deciding one slot, only the one whose row went in acts on it.

``/tic`` reads :meth:`TicStore.last` for "last result"; ``/tic on|off`` and
``/tic every 45m`` write :class:`~runtime.storage.scheduler_rows.TicState`, which
wins over ``tic.*`` from the config until changed again.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Literal

from sqlalchemy import func
from sqlmodel import col, select

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.scheduler_rows import TicRun, TicRunStatus, TicState, insert_slot
from agentgram.runtime.scheduler.clock import Clock, as_utc


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET
Keep = Literal[_Unset.UNSET]


class TicStore:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def record(
        self,
        status: TicRunStatus,
        *,
        reason: str | None = None,
        session_id: int | None = None,
        slot: datetime | None = None,
    ) -> TicRun | None:
        """A decided tic; a ``ran`` tic stays open until :meth:`finish`.

        With a ``slot`` the row is inserted once: ``None`` when the slot has a row already
        (another instance decided it, or this one before a restart).
        """
        now = self._clock.now()
        done = status is not TicRunStatus.RAN
        row = TicRun(
            slot=as_utc(slot) if slot is not None else None,
            started_at=now,
            ended_at=now if done else None,
            status=status,
            reason=reason,
            session_id=session_id,
        )
        async with self._db.write() as session:
            inserted = await insert_slot(session, row)
        return row if inserted else None

    async def attach_session(self, tic_id: int, session_id: int) -> None:
        """The tic's headless session, once created (its row is written first, to claim the slot)."""
        async with self._db.write() as session:
            row = await session.get(TicRun, tic_id)
            if row is not None:
                row.session_id = session_id
                session.add(row)

    async def newest_slot(self) -> datetime | None:
        """The newest slot any tic row stands for (``None``: no fired tic recorded yet)."""
        async with self._db.read() as session:
            newest = (await session.exec(select(func.max(col(TicRun.slot))))).one()
        return as_utc(newest) if newest is not None else None

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
