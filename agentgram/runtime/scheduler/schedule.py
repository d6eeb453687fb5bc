"""A user's schedule text as a typed :data:`Schedule`, and its APScheduler trigger.

Accepted forms (``parse_schedule``):

* a standard 5-field crontab — ``0 9 * * 1-5`` — or a macro (``@daily``, …);
* an interval — ``every 2h``, ``every 45m``, ``every 90 seconds``;
* one shot — ``at 2026-12-01 09:00`` / ``at 18:30`` (wall time in the job's
  zone) or ``in 20m``.

Anything else raises :class:`ScheduleError`, a :class:`ToolError`, whose text
says what was wrong and what is accepted, so an agent tool call fails
readably; its ``key`` and ``params`` name the same problem for a chat, which
words it in the user's language (``schedule-error-*`` in the locales).

Crontab fields follow standard cron, not APScheduler 3's dialect: weekday 0
(and 7) is Sunday (APScheduler 3 counts from Monday), and when both day of
month and weekday are restricted a day matching *either* fires (APScheduler
ANDs them). :func:`to_trigger` translates, so ``next_run`` — computed with the
trigger's own ``get_next_fire_time`` — is exactly what the scheduler will do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Literal

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.scheduler_rows import ScheduleKind
from agentgram.runtime.scheduler.clock import as_utc
from agentgram.runtime.scheduler.localtime import Fold, exists, resolve, wall

MIN_INTERVAL = 60.0
"""Shortest ``every …`` a user may set, in seconds: each run is a model call."""

USAGE = "use a crontab like '0 9 * * 1-5', 'every 2h', 'at 2026-12-01 09:00' or 'in 20m'"


@dataclass(frozen=True, slots=True)
class Span:
    """A length of time in an error's parameters, worded per locale by the chat."""

    seconds: float


ErrorParam = str | int | Span | datetime
"""A :class:`ScheduleError` parameter; a datetime is aware, in the zone it is to be shown in."""


class ScheduleError(ToolError):
    """The schedule text cannot be used; the message says why and what works.

    ``str(error)`` is the English text the model reads. ``key`` (the locale
    message ``schedule-error-<key>``) and ``params`` say the same for a chat.
    """

    def __init__(self, message: str, key: str, **params: ErrorParam) -> None:
        super().__init__(message)
        self.key = f"schedule-error-{key}"
        self.params = params


@dataclass(frozen=True, slots=True)
class CronSchedule:
    expr: str
    kind: Literal[ScheduleKind.CRON] = field(default=ScheduleKind.CRON, init=False)


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    seconds: float
    kind: Literal[ScheduleKind.INTERVAL] = field(default=ScheduleKind.INTERVAL, init=False)


@dataclass(frozen=True, slots=True)
class OnceSchedule:
    at: datetime  # aware UTC
    kind: Literal[ScheduleKind.ONCE] = field(default=ScheduleKind.ONCE, init=False)


Schedule = CronSchedule | IntervalSchedule | OnceSchedule


# --- parsing ----------------------------------------------------------------

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("w", "week", "weeks"), 604800.0),
}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)?\s*([a-z]+)$")
_AT = re.compile(r"^(?:(\d{4})-(\d{1,2})-(\d{1,2})[ t])?(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def parse_schedule(text: str, tz: tzinfo, now: datetime, *, min_interval: float = MIN_INTERVAL) -> Schedule:
    """Parse ``text``; relative and wall-clock forms are resolved against ``now`` in ``tz``."""
    spec = " ".join(text.split())
    lowered = spec.lower()
    if not spec:
        raise ScheduleError(f"a schedule is required: {USAGE}", "empty")
    if lowered.startswith("every ") or lowered == "every":
        return _parse_every(spec, lowered.removeprefix("every").strip(), min_interval)
    if lowered.startswith("in ") or lowered == "in":
        return _parse_in(spec, lowered.removeprefix("in").strip(), now)
    if lowered.startswith("at ") or lowered == "at":
        return _parse_at(spec, lowered.removeprefix("at").strip(), tz, now)
    if lowered.startswith("@"):
        if lowered not in _MACROS:
            names = ", ".join(_MACROS)
            raise ScheduleError(
                f"{spec!r} is not a known cron macro (known: {names})", "macro", spec=spec, names=names
            )
        return _parse_cron(_MACROS[lowered], tz, now)
    return _parse_cron(spec, tz, now)


def _duration(spec: str, value: str, example: str) -> float:
    match = _DURATION.match(value.replace(" ", "")) if value else None
    unit = _UNITS.get(match.group(2)) if match else None
    if match is None or unit is None:
        raise ScheduleError(
            f"{spec!r}: {value or 'nothing'!r} is not a duration (e.g. {example})",
            "duration" if value else "no-duration",
            spec=spec,
            value=value,
        )
    return float(match.group(1) or 1) * unit


def _parse_every(spec: str, value: str, min_interval: float) -> IntervalSchedule:
    seconds = _duration(spec, value, "'every 2h', 'every 45m'")
    if seconds < min_interval:
        raise ScheduleError(
            f"{spec!r} is too frequent: the shortest interval is {_span(min_interval)}",
            "too-frequent",
            spec=spec,
            shortest=Span(min_interval),
        )
    return IntervalSchedule(seconds)


def _parse_in(spec: str, value: str, now: datetime) -> OnceSchedule:
    seconds = _duration(spec, value, "'in 20m', 'in 2h'")
    if seconds <= 0:
        raise ScheduleError(f"{spec!r}: the delay must be positive", "not-positive", spec=spec)
    return OnceSchedule(as_utc(now) + timedelta(seconds=seconds))


def _parse_at(spec: str, value: str, tz: tzinfo, now: datetime) -> OnceSchedule:
    match = _AT.match(value)
    if match is None:
        raise ScheduleError(
            f"{spec!r}: write the time as 'at YYYY-MM-DD HH:MM' or 'at HH:MM'", "at", spec=spec
        )
    year, month, day, hour, minute, second = match.groups()
    try:
        at = time(int(hour), int(minute), int(second or 0))
        on = date(int(year), int(month), int(day)) if year else None
    except ValueError as exc:
        raise ScheduleError(
            f"{spec!r} is not a real date and time ({exc})", "no-such-date", spec=spec
        ) from None
    local_now = wall(now, tz)
    if on is None:  # next occurrence of that wall time
        on = local_now.date() if at > local_now.time() else local_now.date() + timedelta(days=1)
    naive = datetime.combine(on, at)
    if not exists(naive, tz):
        raise ScheduleError(
            f"{spec!r}: {naive:%Y-%m-%d %H:%M} does not exist in {tz} (clocks skip it)",
            "skipped-time",
            spec=spec,
            time=f"{naive:%Y-%m-%d %H:%M}",
            zone=str(tz),
        )
    instant = resolve(on, at, tz, Fold.EARLIEST)
    if instant <= as_utc(now):
        raise ScheduleError(
            f"{spec!r} is in the past (it is now {local_now:%Y-%m-%d %H:%M} in {tz})",
            "past",
            spec=spec,
            now=as_utc(now).astimezone(tz),
        )
    return OnceSchedule(instant)


def _parse_cron(spec: str, tz: tzinfo, now: datetime) -> CronSchedule:
    fields = spec.split()
    if len(fields) != 5:
        hint = "; seconds and years are not supported" if len(fields) in (6, 7) else ""
        raise ScheduleError(
            f"{spec!r} is not a schedule: a crontab has 5 fields "
            f"(minute hour day month weekday), got {len(fields)}{hint}; {USAGE}",
            "seconds" if hint else "fields",
            spec=spec,
            count=len(fields),
        )
    schedule = CronSchedule(spec)
    try:
        trigger = to_trigger(schedule, tz)
    except ValueError as exc:
        raise ScheduleError(f"{spec!r} is not a valid crontab: {exc}", "crontab", spec=spec) from None
    if trigger.get_next_fire_time(None, as_utc(now).astimezone(tz)) is None:
        raise ScheduleError(f"{spec!r} never fires", "never", spec=spec)
    return schedule


# --- crontab dialect ---------------------------------------------------------

_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW_FULL = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_DOW_ITEM = re.compile(r"^(\*|[a-z0-9]+)(?:-([a-z0-9]+))?(?:/(\d+))?$")


def _dow_value(token: str) -> int:
    if token.isdigit() and int(token) <= 7:
        return int(token)
    for number, name in enumerate(_DOW_NAMES):
        if token in (name, _DOW_FULL[number]):
            return number
    raise ValueError(f"weekday {token!r} is not 0-7 or a name such as mon")


def _weekdays(dow: str) -> str:
    """Standard-cron weekday field → APScheduler's, as an explicit list of names."""
    days: set[int] = set()
    for item in dow.lower().split(","):
        match = _DOW_ITEM.match(item)
        if match is None:
            raise ValueError(f"weekday item {item!r} is not understood")
        start, end, step = match.groups()
        if start == "*" and end:
            raise ValueError(f"weekday item {item!r} is not understood")
        low = 0 if start == "*" else _dow_value(start)
        high = 7 if start == "*" or (step and not end) else (_dow_value(end) if end else low)
        if high < low:
            raise ValueError(f"weekday range {item!r} goes backwards")
        stride = int(step) if step else 1
        if stride < 1:
            raise ValueError(f"weekday step in {item!r} must be at least 1")
        days.update(value % 7 for value in range(low, high + 1, stride))
    return ",".join(_DOW_NAMES[day] for day in sorted(days))


def _cron_trigger(expr: str, tz: tzinfo) -> BaseTrigger:
    minute, hour, dom, month, dow = expr.split()
    days = _weekdays(dow)

    def cron(day: str, day_of_week: str) -> CronTrigger:
        return CronTrigger(
            minute=minute, hour=hour, day=day, month=month, day_of_week=day_of_week, timezone=tz
        )

    if not dom.startswith("*") and not dow.startswith("*"):  # standard cron: either matches
        return OrTrigger([cron(dom, "*"), cron("*", days)])
    return cron(dom, days)


# --- triggers and next runs ----------------------------------------------------


def to_trigger(schedule: Schedule, tz: tzinfo, *, anchor: datetime | None = None) -> BaseTrigger:
    """The APScheduler trigger for ``schedule`` in ``tz``.

    An interval fires at ``anchor + k·interval`` (k ≥ 1); without an anchor
    APScheduler counts from the moment the trigger is built.
    """
    match schedule:
        case CronSchedule(expr=expr):
            return _cron_trigger(expr, tz)
        case IntervalSchedule(seconds=seconds):
            start = as_utc(anchor) + timedelta(seconds=seconds) if anchor else None
            return IntervalTrigger(seconds=seconds, start_date=start, timezone=tz)
        case OnceSchedule(at=at):
            return DateTrigger(run_date=at, timezone=tz)


def next_run(
    schedule: Schedule, tz: tzinfo, after: datetime, *, anchor: datetime | None = None
) -> datetime | None:
    """The first fire time strictly after ``after`` (aware UTC), or ``None`` when done.

    ``anchor`` places an interval's grid (default: ``after``, i.e. one interval on).
    """
    after = as_utc(after)
    if isinstance(schedule, IntervalSchedule) and anchor is None:
        anchor = after
    trigger = to_trigger(schedule, tz, anchor=anchor)
    fire = trigger.get_next_fire_time(None, (after + timedelta(microseconds=1)).astimezone(tz))
    if fire is None or as_utc(fire) <= after:  # a DateTrigger answers its date even when past
        return None
    return as_utc(fire)


# --- descriptions -------------------------------------------------------------


def describe(schedule: Schedule, tz: tzinfo | None = None) -> str:
    """One line for listings: ``cron 0 9 * * 1-5``, ``every 2h``, ``once at 2026-12-01 09:00 CET``."""
    match schedule:
        case CronSchedule(expr=expr):
            return f"cron {expr}"
        case IntervalSchedule(seconds=seconds):
            return f"every {_span(seconds)}"
        case OnceSchedule(at=at):
            local = at.astimezone(tz) if tz else at
            return f"once at {local:%Y-%m-%d %H:%M} {local.tzname()}"


def _span(seconds: float) -> str:
    """``5400`` → ``1h30m``; fractions of a second are dropped."""
    rest = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
