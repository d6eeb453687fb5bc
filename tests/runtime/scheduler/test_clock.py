from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentgram.runtime.scheduler.clock import FakeClock, SystemClock, as_utc


def test_system_clock_is_aware_utc() -> None:
    assert SystemClock().now().tzinfo is UTC


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(datetime(2026, 1, 1, 10, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == datetime(2026, 1, 1, 8, tzinfo=UTC)
    assert clock.now().tzinfo is UTC
    assert clock.advance(90) == datetime(2026, 1, 1, 8, 1, 30, tzinfo=UTC)
    assert clock.advance(timedelta(hours=1)) == datetime(2026, 1, 1, 9, 1, 30, tzinfo=UTC)
    clock.set(datetime(2027, 1, 1, tzinfo=UTC))
    assert clock.now() == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_naive_datetimes_are_taken_as_utc() -> None:
    assert as_utc(datetime(2026, 1, 1, 8)) == datetime(2026, 1, 1, 8, tzinfo=UTC)
