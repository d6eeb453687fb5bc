"""Wall-clock times in a zone turned into instants, DST gaps and folds included.

One rule for the two awkward cases, used by quiet hours and by ``at …``
schedules alike:

* a wall time that does not exist (clocks spring forward over it) resolves to
  the instant of the jump — the first moment the wall clock shows a later time;
* a wall time that happens twice (clocks fall back) resolves to the earlier or
  the later occurrence, as the caller asks.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class Fold(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ``ValueError`` with a readable message if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)") from exc


def wall(when: datetime, tz: tzinfo) -> datetime:
    """The naive local wall time of the instant ``when`` in ``tz``."""
    # via UTC: astimezone to the zone a datetime already carries is a no-op
    return when.astimezone(UTC).astimezone(tz).replace(tzinfo=None)


def exists(naive: datetime, tz: tzinfo) -> bool:
    """Whether the wall time ``naive`` is ever shown by a clock in ``tz``."""
    return wall(naive.replace(tzinfo=tz), tz) == naive


def resolve(day: date, at: time, tz: tzinfo, prefer: Fold = Fold.EARLIEST) -> datetime:
    """The UTC instant when the wall clock in ``tz`` shows ``day`` ``at``."""
    naive = datetime.combine(day, at)
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if exists(naive, tz):
        return max(first, second) if prefer is Fold.LATEST else min(first, second)
    return _jump_instant(naive, tz, min(first, second), max(first, second))


def _jump_instant(naive: datetime, tz: tzinfo, low: datetime, high: datetime) -> datetime:
    """First instant in ``[low, high]`` whose wall time is past ``naive`` (a DST gap)."""
    lo, hi = 0, int((high - low).total_seconds())
    while lo < hi:  # transitions fall on whole seconds
        mid = (lo + hi) // 2
        if wall(low + timedelta(seconds=mid), tz) >= naive:
            hi = mid
        else:
            lo = mid + 1
    return low + timedelta(seconds=lo)
