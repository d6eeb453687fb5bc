"""The scheduler's values at its edge: what a chat command or a tool hands in and gets back.

Rows (:mod:`runtime.storage.scheduler_rows`) stay inside the scheduler; what
crosses to the adapter and to the agent's tools is one of these frozen values,
made when asked for, so nobody outside holds a live ORM object.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from agentgram.runtime.infra.storage.scheduler_rows import JobApprovals, TicRunStatus
from agentgram.runtime.scheduler.schedule import Schedule


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """A job to schedule, as the chat (``/cron add``) or the agent (``schedule_job``) asks for it.

    An empty ``title`` becomes the prompt's start; no ``timezone`` means the agent's zone.
    ``thread_id`` is the forum topic it was asked in (0: none): its runs report there.
    """

    title: str
    schedule: str
    prompt: str
    chat_id: int
    thread_id: int = 0
    timezone: str | None = None
    approvals: JobApprovals = JobApprovals.DENY


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A stored job as it stands when asked for, with what a card or a tool's line shows."""

    id: int
    title: str
    schedule: str
    """As the user typed it."""
    parsed: Schedule
    zone: tzinfo
    timezone: str
    prompt: str
    chat_id: int
    thread_id: int
    """The forum topic its runs report to (0: none); it is listed with its chat's jobs all the same."""
    enabled: bool
    approvals: JobApprovals
    next_run: datetime | None
    running: bool
    finished: bool
    """No run left: a one-shot that ran or whose time passed (listed as done, cannot resume)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TicRecord:
    """One tic decision as ``/tic`` reports it ("last result")."""

    started_at: datetime
    ended_at: datetime | None
    status: TicRunStatus
    delivered: bool
    reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HomeChat:
    """The chat tics report to, with its active session and its user's language."""

    session_id: int
    chat_id: int
    language: str | None


__all__ = ["HomeChat", "Job", "JobApprovals", "JobSpec", "TicRecord", "TicRunStatus"]
