from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from agentgram.runtime.scheduler.misfire import Nothing, RecordMissed, RunNow, decide_misfire
from agentgram.runtime.scheduler.schedule import CronSchedule, IntervalSchedule, OnceSchedule

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3600.0


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_nothing_missed() -> None:
    decision = decide_misfire(
        CronSchedule("0 9 * * *"), BERLIN, since=utc(2026, 3, 27, 8), now=utc(2026, 3, 27, 12), grace=HOUR
    )
    assert decision == Nothing()


def test_missed_runs_are_coalesced_into_one_run_of_the_newest() -> None:
    # every 15 minutes, down from 10:00 to 11:20 → five fire times, one run for 11:15
    decision = decide_misfire(
        CronSchedule("*/15 * * * *"),
        BERLIN,
        since=utc(2026, 3, 27, 10),
        now=utc(2026, 3, 27, 11, 20),
        grace=HOUR,
    )
    assert decision == RunNow(fire_time=utc(2026, 3, 27, 11, 15), first_missed=utc(2026, 3, 27, 10, 15))


def test_newest_missed_within_grace_runs_even_if_older_ones_are_not() -> None:
    decision = decide_misfire(
        CronSchedule("0 * * * *"), BERLIN, since=utc(2026, 3, 20), now=utc(2026, 3, 27, 12, 30), grace=HOUR
    )
    assert isinstance(decision, RunNow)
    assert decision.fire_time == utc(2026, 3, 27, 12)
    assert decision.first_missed == utc(2026, 3, 20, 1)


def test_grace_exceeded_records_missed() -> None:
    # daily 09:00 Berlin (08:00Z), bot back at 12:00Z: 4 h late with 1 h grace
    decision = decide_misfire(
        CronSchedule("0 9 * * *"), BERLIN, since=utc(2026, 3, 26, 12), now=utc(2026, 3, 27, 12), grace=HOUR
    )
    assert decision == RecordMissed(fire_time=utc(2026, 3, 27, 8))


def test_grace_boundary_is_inclusive() -> None:
    decision = decide_misfire(
        CronSchedule("0 9 * * *"),
        BERLIN,
        since=utc(2026, 3, 26, 12),
        now=utc(2026, 3, 27, 9),
        grace=timedelta(hours=1),
    )
    assert decision == RunNow(fire_time=utc(2026, 3, 27, 8), first_missed=utc(2026, 3, 27, 8))


def test_long_downtime_of_a_per_minute_job_finds_the_newest_fast() -> None:
    decision = decide_misfire(
        CronSchedule("* * * * *"), BERLIN, since=utc(2026, 1, 1), now=utc(2026, 3, 27, 12, 0, 30), grace=HOUR
    )
    assert decision == RunNow(fire_time=utc(2026, 3, 27, 12), first_missed=utc(2026, 1, 1, 0, 1))


def test_old_miss_after_long_downtime_is_recorded() -> None:
    decision = decide_misfire(
        CronSchedule("0 9 1 1 *"), BERLIN, since=utc(2025, 6, 1), now=utc(2026, 3, 27), grace=HOUR
    )
    assert decision == RecordMissed(fire_time=utc(2026, 1, 1, 8))


def test_interval_on_its_anchor_grid() -> None:
    anchor = utc(2026, 3, 27, 0, 10)
    decision = decide_misfire(
        IntervalSchedule(2 * HOUR),
        BERLIN,
        since=utc(2026, 3, 27, 6, 10),
        now=utc(2026, 3, 27, 10, 40),
        grace=HOUR,
        anchor=anchor,
    )
    assert decision == RunNow(fire_time=utc(2026, 3, 27, 10, 10), first_missed=utc(2026, 3, 27, 8, 10))
    decision = decide_misfire(
        IntervalSchedule(2 * HOUR),
        BERLIN,
        since=utc(2026, 3, 27, 6, 10),
        now=utc(2026, 3, 27, 11, 40),
        grace=HOUR,
        anchor=anchor,
    )
    assert decision == RecordMissed(fire_time=utc(2026, 3, 27, 10, 10))


def test_one_shot() -> None:
    once = OnceSchedule(utc(2026, 3, 27, 11, 30))
    set_at = utc(2026, 3, 27, 11)
    assert decide_misfire(once, BERLIN, since=set_at, now=utc(2026, 3, 27, 11, 20), grace=HOUR) == Nothing()
    assert decide_misfire(once, BERLIN, since=set_at, now=utc(2026, 3, 27, 12), grace=HOUR) == RunNow(
        fire_time=once.at, first_missed=once.at
    )
    assert decide_misfire(once, BERLIN, since=set_at, now=utc(2026, 3, 27, 13), grace=HOUR) == RecordMissed(
        fire_time=once.at
    )
    # it already ran: nothing, however late
    assert decide_misfire(once, BERLIN, since=once.at, now=utc(2026, 3, 28), grace=HOUR) == Nothing()
