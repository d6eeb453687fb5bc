"""Quiet hours: when no tic runs and cron results are delivered silently or held.

A quiet period is a span of *instants*: it starts when the wall clock in the
agent's zone first shows ``start`` and ends when it shows ``end`` (the next
day when the range crosses midnight, e.g. ``23:00-07:00``). Across a DST
change the period is as long as the clocks make it: a start or end that falls
into a spring-forward gap happens at the jump, and one that happens twice on a
fall-back night takes the earlier start and the later end, so the night stays
quiet as one piece. ``start == end`` means never quiet.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

from agentgram.runtime.infra.config import QuietHours
from agentgram.runtime.scheduler.clock import as_utc
from agentgram.runtime.scheduler.localtime import Fold, resolve, wall


def quiet_period(q: QuietHours | None, now_utc: datetime, tz: tzinfo) -> tuple[datetime, datetime] | None:
    """The ``(start, end)`` instants of the quiet period holding ``now_utc``, if any."""
    if q is None or q.start == q.end:
        return None
    now = as_utc(now_utc)
    crosses_midnight = q.end < q.start
    today = wall(now, tz).date()
    for first_day in (today - timedelta(days=1), today):
        start = resolve(first_day, q.start, tz, Fold.EARLIEST)
        end_day = first_day + timedelta(days=1) if crosses_midnight else first_day
        end = resolve(end_day, q.end, tz, Fold.LATEST)
        if start <= now < end:
            return start, end
    return None


def is_quiet(q: QuietHours | None, now_utc: datetime, tz: tzinfo) -> bool:
    return quiet_period(q, now_utc, tz) is not None


def quiet_ends_at(q: QuietHours | None, now_utc: datetime, tz: tzinfo) -> datetime:
    """When the current quiet period ends (aware UTC); ``now_utc`` itself when not quiet.

    So "hold until ``quiet_ends_at``" and "defer to ``quiet_ends_at``" need no
    special case for a loud moment.
    """
    period = quiet_period(q, now_utc, tz)
    return as_utc(now_utc) if period is None else period[1]
