"""The scheduler's tables, re-exported from :mod:`runtime.storage.scheduler_rows` where they live."""

from agentgram.runtime.infra.storage.scheduler_rows import (
    JobApprovals,
    JobRun,
    JobRunStatus,
    ScheduledJob,
    TicRun,
    TicRunStatus,
    TicState,
    UTCDateTime,
)

__all__ = [
    "JobApprovals",
    "JobRun",
    "JobRunStatus",
    "ScheduledJob",
    "TicRun",
    "TicRunStatus",
    "TicState",
    "UTCDateTime",
]
