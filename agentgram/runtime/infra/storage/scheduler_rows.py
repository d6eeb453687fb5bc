"""The scheduler's tables: cron jobs, their runs, tic runs and the tic's chat overrides.

They live in storage, below the scheduler, so the migration that creates them
needs nothing from :mod:`runtime.scheduler`; rows stay inside the scheduler
(what reaches the adapter is :mod:`runtime.scheduler.values`).

Importing this module registers the tables on ``SQLModel.metadata``; the
migration step creates every registered table on a fresh database and adds
missing ones to an older database, so no versioned step is needed for them.

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

from sqlalchemy import BigInteger, Index
from sqlmodel import Field, SQLModel

from agentgram.runtime.infra.storage.models import utcnow
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
    __table_args__ = (Index("ix_job_runs_job", "job_id", "id"),)

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

    id: int | None = Field(default=None, primary_key=True)
    started_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    status: TicRunStatus = Field(default=TicRunStatus.RAN, sa_type=StrEnumType(TicRunStatus))
    reason: str | None = None
    delivered: bool = False
    session_id: int | None = None


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
