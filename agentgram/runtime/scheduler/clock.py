"""The clock every piece of scheduling logic reads, so tests can move time.

Nothing under :mod:`runtime.scheduler` calls ``datetime.now`` itself: it asks
a :class:`Clock`. Production wires :class:`SystemClock`; tests use
:class:`FakeClock` and move it with :meth:`FakeClock.advance` or
:meth:`FakeClock.set` instead of sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant as an aware UTC datetime."""
        ...


class SystemClock:
    __slots__ = ()

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that only moves when told to."""

    __slots__ = ("_now",)

    def __init__(self, start: datetime | None = None) -> None:
        self._now = as_utc(start or datetime(2026, 1, 1, tzinfo=UTC))

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        self._now = as_utc(when)

    def advance(self, by: timedelta | float) -> datetime:
        """Move forward by a timedelta or a number of seconds; return the new now."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if step < timedelta(0):
            raise ValueError("a clock does not go backwards")
        self._now += step
        return self._now


def as_utc(when: datetime) -> datetime:
    """``when`` as aware UTC; a naive value (as SQLite returns) is taken to be UTC."""
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when.astimezone(UTC)
