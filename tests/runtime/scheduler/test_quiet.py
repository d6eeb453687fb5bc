from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agentgram.runtime.infra.config import QuietHours
from agentgram.runtime.scheduler.quiet import is_quiet, quiet_ends_at, quiet_period

BERLIN = ZoneInfo("Europe/Berlin")
NIGHT = QuietHours.parse("23:00-07:00")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def local(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=BERLIN).astimezone(UTC)


@pytest.mark.parametrize(
    ("when", "quiet"),
    [
        (local(2026, 1, 15, 22, 59), False),
        (local(2026, 1, 15, 23, 0), True),
        (local(2026, 1, 16, 0, 0), True),
        (local(2026, 1, 16, 6, 59), True),
        (local(2026, 1, 16, 7, 0), False),
        (local(2026, 1, 16, 12, 0), False),
    ],
)
def test_range_across_midnight(when: datetime, quiet: bool) -> None:
    assert is_quiet(NIGHT, when, BERLIN) is quiet


def test_range_within_a_day() -> None:
    lunch = QuietHours.parse("12:00-13:30")
    assert not is_quiet(lunch, local(2026, 1, 15, 11, 59), BERLIN)
    assert is_quiet(lunch, local(2026, 1, 15, 12, 0), BERLIN)
    assert is_quiet(lunch, local(2026, 1, 15, 13, 29), BERLIN)
    assert not is_quiet(lunch, local(2026, 1, 15, 13, 30), BERLIN)
    assert quiet_ends_at(lunch, local(2026, 1, 15, 12, 10), BERLIN) == local(2026, 1, 15, 13, 30)


def test_no_range_or_empty_range_is_never_quiet() -> None:
    same = QuietHours.parse("07:00-07:00")
    for hour in range(24):
        when = local(2026, 1, 15, hour, 0)
        assert not is_quiet(None, when, BERLIN)
        assert not is_quiet(same, when, BERLIN)
        assert quiet_ends_at(same, when, BERLIN) == when


def test_quiet_ends_at_next_end_across_midnight() -> None:
    assert quiet_ends_at(NIGHT, local(2026, 1, 15, 23, 30), BERLIN) == local(2026, 1, 16, 7, 0)
    assert quiet_ends_at(NIGHT, local(2026, 1, 16, 3, 0), BERLIN) == local(2026, 1, 16, 7, 0)


def test_quiet_ends_at_is_now_when_not_quiet() -> None:
    noon = local(2026, 1, 15, 12, 0)
    assert quiet_ends_at(NIGHT, noon, BERLIN) == noon


def test_spring_forward_night_is_an_hour_shorter() -> None:
    # 2026-03-29: 02:00 CET → 03:00 CEST at 01:00Z
    start, end = quiet_period(NIGHT, utc(2026, 3, 29, 0, 30), BERLIN) or (None, None)
    assert start == utc(2026, 3, 28, 22, 0)  # 23:00 CET
    assert end == utc(2026, 3, 29, 5, 0)  # 07:00 CEST
    assert end - start == timedelta(hours=7)
    assert is_quiet(NIGHT, utc(2026, 3, 29, 4, 59), BERLIN)
    assert not is_quiet(NIGHT, utc(2026, 3, 29, 5, 0), BERLIN)


def test_fall_back_night_is_an_hour_longer() -> None:
    # 2026-10-25: 03:00 CEST → 02:00 CET at 01:00Z
    start, end = quiet_period(NIGHT, utc(2026, 10, 25, 1, 30), BERLIN) or (None, None)
    assert start == utc(2026, 10, 24, 21, 0)  # 23:00 CEST
    assert end == utc(2026, 10, 25, 6, 0)  # 07:00 CET
    assert end - start == timedelta(hours=9)
    assert quiet_ends_at(NIGHT, utc(2026, 10, 25, 0, 30), BERLIN) == utc(2026, 10, 25, 6, 0)
    assert not is_quiet(NIGHT, utc(2026, 10, 25, 6, 0), BERLIN)


def test_boundary_inside_the_spring_gap_happens_at_the_jump() -> None:
    # 02:30 does not exist on 2026-03-29; quiet starts when the clock jumps past it
    early = QuietHours.parse("02:30-06:00")
    assert not is_quiet(early, utc(2026, 3, 29, 0, 59, 59), BERLIN)
    assert is_quiet(early, utc(2026, 3, 29, 1, 0), BERLIN)  # 03:00 CEST
    ends_in_gap = QuietHours.parse("22:00-02:30")
    assert quiet_ends_at(ends_in_gap, utc(2026, 3, 28, 23, 0), BERLIN) == utc(2026, 3, 29, 1, 0)
    assert not is_quiet(ends_in_gap, utc(2026, 3, 29, 1, 0), BERLIN)


def test_boundary_in_the_repeated_hour_keeps_the_night_in_one_piece() -> None:
    # 02:30 happens twice on 2026-10-25; the quiet period ends at the second one
    q = QuietHours.parse("22:00-02:30")
    assert quiet_ends_at(q, utc(2026, 10, 25, 0, 45), BERLIN) == utc(2026, 10, 25, 1, 30)
    assert is_quiet(q, utc(2026, 10, 25, 1, 15), BERLIN)  # 02:15 CET, the second pass
    assert not is_quiet(q, utc(2026, 10, 25, 1, 30), BERLIN)


def test_every_minute_of_both_dst_days_agrees_with_its_period() -> None:
    for day in (utc(2026, 3, 28, 12), utc(2026, 10, 24, 12)):
        for minute in range(0, 24 * 60, 7):
            now = day + timedelta(minutes=minute)
            period = quiet_period(NIGHT, now, BERLIN)
            if period is None:
                assert quiet_ends_at(NIGHT, now, BERLIN) == now
            else:
                assert period[0] <= now < period[1] == quiet_ends_at(NIGHT, now, BERLIN)
                assert not is_quiet(NIGHT, period[1], BERLIN)
