"""Property tests for the pure, tricky pieces: quiet hours and next runs."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from agentgram.runtime.infra.config import QuietHours
from agentgram.runtime.scheduler.quiet import is_quiet, quiet_ends_at, quiet_period
from agentgram.runtime.scheduler.schedule import CronSchedule, IntervalSchedule, next_run, to_trigger

ZONES = st.sampled_from(
    [
        ZoneInfo(name)
        for name in ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo")
    ]
)
INSTANTS = st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2028, 1, 1)).map(
    lambda naive: naive.replace(tzinfo=UTC)
)
TIMES = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))
RANGES = st.builds(QuietHours, start=TIMES, end=TIMES)


@settings(max_examples=300, deadline=None)
@given(RANGES, INSTANTS, ZONES)
def test_quiet_period_is_a_consistent_span(q: QuietHours, now: datetime, tz: ZoneInfo) -> None:
    period = quiet_period(q, now, tz)
    if period is None:
        assert quiet_ends_at(q, now, tz) == now
        return
    start, end = period
    assert start <= now < end
    assert end == quiet_ends_at(q, now, tz)
    assert is_quiet(q, end - timedelta(microseconds=1), tz)
    assert is_quiet(q, start, tz)
    assert timedelta(0) < end - start <= timedelta(hours=26)


@settings(max_examples=300, deadline=None)
@given(RANGES, INSTANTS, st.sampled_from([ZoneInfo("UTC"), ZoneInfo("Asia/Tokyo")]))
def test_without_dst_quiet_is_the_wall_clock_rule(q: QuietHours, now: datetime, tz: ZoneInfo) -> None:
    local = now.astimezone(tz).time()
    if q.start == q.end:
        expected = False
    elif q.start < q.end:
        expected = q.start <= local < q.end
    else:
        expected = local >= q.start or local < q.end
    assert is_quiet(q, now, tz) is expected


CRONS = st.sampled_from(["0 9 * * 1-5", "*/20 * * * *", "30 2 * * *", "0 0 1,15 * 0", "15 3 * * 0,6"])


@settings(max_examples=200, deadline=None)
@given(CRONS, INSTANTS, ZONES)
@example("30 2 * * *", datetime(2027, 10, 30, 1, 0, tzinfo=UTC), ZoneInfo("Europe/Berlin"))  # the fold
def test_cron_next_run_is_after_and_agrees_with_the_trigger(expr: str, after: datetime, tz: ZoneInfo) -> None:
    schedule = CronSchedule(expr)
    nxt = next_run(schedule, tz, after)
    assert nxt is not None and nxt > after and nxt.tzinfo is UTC
    theirs = to_trigger(schedule, tz).get_next_fire_time(after, after)
    assume(theirs is not None and theirs > after)  # APScheduler 3's repeated-hour quirk: see below
    # in UTC: Python never calls a time in the repeated DST hour equal to one in another zone (PEP 495)
    assert theirs.astimezone(UTC) == nxt


def test_cron_next_run_in_the_repeated_dst_hour_moves_on() -> None:
    """Regression (found by the property above): in New York's repeated hour 01:00–02:00 on
    2025-11-02, APScheduler 3's trigger answers 01:00 EDT again for a previous run at 01:00 EDT
    (it ignores the fold). The schedule's own next run is the next 20 minutes, 05:20 UTC."""
    after = datetime(2025, 11, 2, 5, 0, tzinfo=UTC)
    assert next_run(CronSchedule("*/20 * * * *"), ZoneInfo("America/New_York"), after) == datetime(
        2025, 11, 2, 5, 20, tzinfo=UTC
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(60, 10 * 86400), INSTANTS, st.integers(0, 10**7))
def test_interval_runs_on_the_anchor_grid(seconds: int, anchor: datetime, offset: int) -> None:
    after = anchor + timedelta(seconds=offset)
    nxt = next_run(IntervalSchedule(seconds), ZoneInfo("Europe/Berlin"), after, anchor=anchor)
    assert nxt is not None and after < nxt <= after + timedelta(seconds=seconds)
    assert (nxt - anchor).total_seconds() % seconds == 0
