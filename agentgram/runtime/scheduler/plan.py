"""The scheduler service's decisions, kept pure so they are tested with a fake clock.

* :func:`tic_plan` — whether tics run and on which schedule: ``/tic`` overrides
  (:class:`~runtime.storage.scheduler_rows.TicState`) over ``tic.*`` from the config;
* :func:`plan_delivery` — a result sent now (silently during quiet hours) or
  held for the digest sent when quiet hours end (``quiet_hours.hold``);
* :func:`run_result` — a finished turn's outcome as a ``job_runs`` status;
* :func:`cron_event` — the lines a tic reads about finished cron runs.

Nothing here words anything for the user: a result the chat sees is a
:class:`~runtime.events.Report` the adapter renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Literal

from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.outcome import Cancelled, Exhausted, Failed, Final, Paused, TurnOutcome
from agentgram.runtime.infra.config import QuietHoursSettings, TicSettings
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.events import CronResult
from agentgram.runtime.infra.storage.scheduler_rows import JobRun, JobRunStatus, TicState
from agentgram.runtime.scheduler.clock import as_utc
from agentgram.runtime.scheduler.quiet import is_quiet, quiet_ends_at
from agentgram.runtime.scheduler.schedule import (
    CronSchedule,
    IntervalSchedule,
    ScheduleError,
    parse_schedule,
)

SNIPPET = 160
"""Characters of a run's response or error a tic's digest quotes."""

# --- when tics run ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TicPlan:
    enabled: bool
    schedule: IntervalSchedule | CronSchedule


def tic_plan(settings: TicSettings, state: TicState, tz: tzinfo, now: datetime) -> TicPlan:
    """The effective tic schedule: a chat override wins over the config.

    ``/tic every 45m`` stores an interval and clears a stored crontab, so the
    newest override is the one in force; with no override, ``tic.cron`` wins
    over ``tic.interval``. A bad ``tic.cron`` is a :class:`ConfigError`.
    """
    enabled = settings.enabled if state.enabled is None else state.enabled
    if state.interval_seconds is not None:
        return TicPlan(enabled, IntervalSchedule(state.interval_seconds))
    cron, key = (state.cron, "tic_state.cron") if state.cron else (settings.cron, "tic.cron")
    if not cron:
        return TicPlan(enabled, IntervalSchedule(settings.interval))
    try:
        schedule = parse_schedule(cron, tz, now, min_interval=0)
    except ScheduleError as exc:
        raise ConfigError(key, str(exc)) from None
    if not isinstance(schedule, CronSchedule):
        raise ConfigError(key, f"{cron!r} is not a crontab (use tic.interval for 'every …')")
    return TicPlan(enabled, schedule)


# --- how a result reaches the chat ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    silent: bool = False
    kind: Literal["send"] = field(default="send", init=False)


@dataclass(frozen=True, slots=True)
class Hold:
    until: datetime  # when quiet hours end (aware UTC)
    kind: Literal["hold"] = field(default="hold", init=False)


DeliveryPlan = Send | Hold


def plan_delivery(now: datetime, quiet: QuietHoursSettings, tz: tzinfo) -> DeliveryPlan:
    """Loud outside quiet hours; inside them silent, or held with ``quiet_hours.hold``."""
    if not is_quiet(quiet.range, now, tz):
        return Send(silent=False)
    if quiet.hold:
        return Hold(until=quiet_ends_at(quiet.range, now, tz))
    return Send(silent=True)


# --- what a run came to -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notice:
    """A locale message and its parameters: what a chat is told, in the user's language."""

    key: str
    params: dict[str, str | int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunResult:
    status: JobRunStatus
    response: str | None = None
    error: str | None = None  # English, for the ``job_runs`` row, the log and a tic's digest
    notice: Notice | None = None  # what the user is told instead of ``error``


def run_result(outcome: TurnOutcome) -> RunResult:
    match outcome:
        case Final(text=text):
            return RunResult(JobRunStatus.SUCCESS, response=text)
        case Cancelled():
            return RunResult(JobRunStatus.CANCELLED, error="cancelled")  # answered by the kill itself
        case Exhausted(rounds=rounds):
            notice = Notice("turn-exhausted", {"rounds": rounds})
            return RunResult(JobRunStatus.FAILED, error=texts.exhausted(rounds), notice=notice)
        case Failed(error=error, failure=failure):
            notice = Notice(failure.locale_key, failure.params)
            return RunResult(JobRunStatus.FAILED, error=error or "failed", notice=notice)
        case Paused():
            return RunResult(JobRunStatus.FAILED, error="paused", notice=Notice("cron-run-failed"))


def short(text: str, limit: int = SNIPPET) -> str:
    """One line of at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def cron_event(run: JobRun, title: str, tz: tzinfo) -> str:
    """``14:05 cron #3 “Inbox”: success — 2 new invoices`` for a tic's digest."""
    when = as_utc(run.ended_at or run.started_at).astimezone(tz)
    detail = run.final_response if run.status == JobRunStatus.SUCCESS else run.error
    tail = f" — {short(detail)}" if detail and detail.strip() else ""
    return f"{when:%Y-%m-%d %H:%M} cron #{run.job_id} “{short(title, 60)}”: {run.status}{tail}"


@dataclass(frozen=True, slots=True)
class HeldReport:
    """A result kept during quiet hours (``quiet_hours.hold``), for its chat's (or its forum
    topic's, ``thread_id``; 0: none) digest."""

    chat_id: int
    result: CronResult
    language: str | None = None
    thread_id: int = 0
