"""The scheduler's tables: cron jobs, their runs, tic runs and the tic's chat overrides.

They live in storage, below the scheduler, so the migration that creates them
needs nothing from :mod:`runtime.scheduler`; rows stay inside the scheduler
(what reaches the adapter is :mod:`runtime.scheduler.values`).

Importing this module registers the tables on ``SQLModel.metadata``; the
baseline revision creates them, revision 0010 adds the slot keys.

**A slot is one row.** A fire of a cron job or of the tic stands for one
*slot*, the fire time it is due at: ``job_runs (job_id, scheduled_for)`` and
``tic_runs.slot`` are unique where set, and :func:`insert_slot` inserts a
fire's row with ``INSERT … ON CONFLICT DO NOTHING``. Only the instance whose
insert went in runs the fire; any other (a second scheduler on the database,
or this one before a restart) finds the slot taken and leaves it. A manual
run ("Run now", ``/tic now``) has no slot and is always inserted.

Timestamps are stored as UTC and read back *aware*
(:data:`~runtime.storage.types.UTCDateTime`, as in every table): SQLite keeps
no offset, and naive datetimes must not leak into the scheduling arithmetic.
Kinds and statuses are ``StrEnum`` columns
(:class:`~runtime.storage.types.StrEnumType`). ``running_session_id``/``session_id`` carry no foreign
key so a job row never blocks a session's clean-up (and vice versa).
"""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import BigInteger, Connection, Index, text
from sqlmodel import Field, SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from agentgram.runtime.infra.storage.concurrency import insert_for
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.rows import row_values, table_of
from agentgram.runtime.infra.storage.types import StrEnumType, UTCDateTime


class ScheduleKind(enum.StrEnum):
    CRON = "cron"
    INTERVAL = "interval"
    ONCE = "once"


class JobApprovals(enum.StrEnum):
    DENY = "deny"  # approval-requiring calls are refused without asking
    ASK = "ask"  # approval prompts go to the job's chat with the normal buttons


class JobRunStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    MISSED = "missed"


class TicRunStatus(enum.StrEnum):
    RAN = "ran"
    SKIPPED = "skipped"
    DEFERRED = "deferred"
    FAILED = "failed"


class ScheduledJob(SQLModel, table=True):
    __tablename__ = "scheduled_jobs"
    __table_args__ = (Index("ix_scheduled_jobs_due", "enabled", "next_run_at"),)

    id: int | None = Field(default=None, primary_key=True)
    title: str
    schedule: str  # as the user typed it
    kind: ScheduleKind = Field(sa_type=StrEnumType(ScheduleKind))
    timezone: str
    prompt: str
    chat_id: int = Field(sa_type=BigInteger)
    thread_id: int = Field(default=0, sa_type=BigInteger)
    """The forum topic the job reports to (``message_thread_id``; revision 0014); 0: none."""
    enabled: bool = True
    approvals: JobApprovals = Field(default=JobApprovals.DENY, sa_type=StrEnumType(JobApprovals))
    anchor_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    """When the schedule was set: ``in 20m`` counts from here, ``every 2h`` is aligned to it."""
    next_run_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_run_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_fire_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    """The newest fire time dealt with (run or recorded missed); manual runs leave it alone."""
    running_session_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class JobRun(SQLModel, table=True):
    __tablename__ = "job_runs"
    __table_args__ = (
        Index("ix_job_runs_job", "job_id", "id"),
        # a fire time is run (or recorded missed) once: revision 0010, insert_slot
        Index(
            "ux_job_runs_slot",
            "job_id",
            "scheduled_for",
            unique=True,
            # and PostgreSQL's: models.partial_indexes_for_postgresql
            sqlite_where=text("scheduled_for IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="scheduled_jobs.id")
    session_id: int | None = None
    scheduled_for: datetime | None = Field(default=None, sa_type=UTCDateTime)
    started_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    duration_ms: int | None = None
    status: JobRunStatus = Field(default=JobRunStatus.RUNNING, index=True, sa_type=StrEnumType(JobRunStatus))
    final_response: str | None = None
    error: str | None = None


class TicRun(SQLModel, table=True):
    __tablename__ = "tic_runs"
    __table_args__ = (
        # a tic slot is decided once: revision 0010, insert_slot
        Index(
            "ux_tic_runs_slot",
            "slot",
            unique=True,
            # and PostgreSQL's: models.partial_indexes_for_postgresql
            sqlite_where=text("slot IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    slot: datetime | None = Field(default=None, sa_type=UTCDateTime)
    """The scheduled fire time this row stands for; ``None`` for ``/tic now`` and a deferred tic's run."""
    started_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    status: TicRunStatus = Field(default=TicRunStatus.RAN, sa_type=StrEnumType(TicRunStatus))
    reason: str | None = None
    delivered: bool = False
    session_id: int | None = None


_SLOT_KEYS: dict[type[SQLModel], tuple[str, ...]] = {
    JobRun: ("job_id", "scheduled_for"),
    TicRun: ("slot",),
}
"""Each table's slot key: the columns of its partial unique index, the last one the nullable slot."""


async def insert_slot(session: AsyncSession, row: JobRun | TicRun) -> bool:
    """Insert ``row`` in ``session``'s transaction unless its slot has a row already; whether it
    went in (its ``id`` then set).

    A row without a slot (a manual run) is outside the partial index and always goes in. One
    statement, so the database settles two schedulers firing one slot: on PostgreSQL the
    second insert waits for the first to commit and then does nothing.
    """
    return await session.run_sync(lambda tx: _insert_slot(tx.connection(), row))


def _insert_slot(conn: Connection, row: JobRun | TicRun) -> bool:
    table = table_of(type(row))
    keys = _SLOT_KEYS[type(row)]
    values = {column: value for column, value in row_values(row).items() if column != "id"}
    statement = (
        insert_for(conn, table)
        .values(values)
        .on_conflict_do_nothing(index_elements=list(keys), index_where=table.c[keys[-1]].is_not(None))
        .returning(table.c.id)
    )
    row_id = conn.execute(statement).scalar()
    if row_id is None:
        return False
    row.id = int(row_id)
    return True


class TicState(SQLModel, table=True):
    """Overrides set from the chat (``/tic on|off``, ``/tic every 45m``); one row, id 1.

    ``None`` means "as configured in ``tic.*``".
    """

    __tablename__ = "tic_state"

    id: int = Field(default=1, primary_key=True)
    enabled: bool | None = None
    interval_seconds: float | None = None
    cron: str | None = None
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
