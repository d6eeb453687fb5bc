"""What to do about fire times that passed while the bot was down.

Pure: given a job's schedule, the instant it last ran (or was set, if it never
ran) and the instant we came back, :func:`decide_misfire` answers with one
typed step. All missed fire times are coalesced into one run of the newest,
and only when that newest one is within ``scheduler.misfire_grace``; an older
miss is recorded as ``missed`` instead of run late.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Literal

from agentgram.runtime.scheduler.clock import as_utc
from agentgram.runtime.scheduler.schedule import IntervalSchedule, Schedule, next_run


@dataclass(frozen=True, slots=True)
class RunNow:
    """Run once now, standing for every fire time from ``first_missed`` to ``fire_time``."""

    fire_time: datetime
    first_missed: datetime
    kind: Literal["run_now"] = field(default="run_now", init=False)


@dataclass(frozen=True, slots=True)
class RecordMissed:
    """Too late to run: record a ``missed`` run for ``fire_time``, the newest missed one."""

    fire_time: datetime
    kind: Literal["record_missed"] = field(default="record_missed", init=False)


@dataclass(frozen=True, slots=True)
class Nothing:
    kind: Literal["nothing"] = field(default="nothing", init=False)


MisfireDecision = RunNow | RecordMissed | Nothing


def decide_misfire(
    schedule: Schedule,
    tz: tzinfo,
    *,
    since: datetime,
    now: datetime,
    grace: float | timedelta,
    anchor: datetime | None = None,
) -> MisfireDecision:
    """Decide for fire times strictly after ``since`` and at or before ``now``.

    ``anchor`` places an interval's grid (see :func:`~runtime.scheduler.schedule.to_trigger`);
    it defaults to ``since``.
    """
    since, now = as_utc(since), as_utc(now)
    window = grace if isinstance(grace, timedelta) else timedelta(seconds=grace)
    if isinstance(schedule, IntervalSchedule) and anchor is None:
        anchor = since
    first = next_run(schedule, tz, since, anchor=anchor)
    if first is None or first > now:
        return Nothing()
    newest = _newest_fire(schedule, tz, since=since, now=now, anchor=anchor, span=window)
    if newest >= now - window:
        return RunNow(fire_time=newest, first_missed=first)
    return RecordMissed(fire_time=newest)


LOOKBACK = timedelta(days=366)
"""How far back :func:`last_fire` looks for a fire time (a yearly crontab's is within it)."""


def last_fire(schedule: Schedule, tz: tzinfo, now: datetime, *, anchor: datetime) -> datetime | None:
    """The schedule's newest fire time at or before ``now`` (within :data:`LOOKBACK`): the slot a
    fire at ``now`` stands for. ``anchor`` places an interval's grid; two instances that share
    it name the same slots."""
    now = as_utc(now)
    since = now - LOOKBACK
    first = next_run(schedule, tz, since, anchor=anchor)
    if first is None or first > now:
        return None
    return _newest_fire(schedule, tz, since=since, now=now, anchor=anchor, span=timedelta(minutes=1))


def _newest_fire(
    schedule: Schedule,
    tz: tzinfo,
    *,
    since: datetime,
    now: datetime,
    anchor: datetime | None,
    span: timedelta,
) -> datetime:
    """The last fire time in ``(since, now]``; the caller knows there is one.

    Looks back over a doubling span instead of walking every fire time since
    ``since`` (a per-minute crontab after a week offline is 10,000 of them).
    """
    span = max(span, timedelta(minutes=1))
    while True:
        start = max(since, now - span)
        fire = next_run(schedule, tz, start, anchor=anchor)
        if fire is not None and fire <= now:
            while (later := next_run(schedule, tz, fire, anchor=anchor)) is not None and later <= now:
                fire = later
            return fire
        span *= 2
