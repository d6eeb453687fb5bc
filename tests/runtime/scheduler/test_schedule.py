from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agentgram.runtime.infra.errors import AgentgramError, ToolError
from agentgram.runtime.scheduler.schedule import (
    CronSchedule,
    IntervalSchedule,
    OnceSchedule,
    ScheduleError,
    ScheduleKind,
    describe,
    next_run,
    parse_schedule,
    to_trigger,
)

BERLIN = ZoneInfo("Europe/Berlin")
NY = ZoneInfo("America/New_York")
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # Friday 13:00 CET


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0 9 * * 1-5", CronSchedule("0 9 * * 1-5")),
        ("  */15   8-18 * * mon-fri ", CronSchedule("*/15 8-18 * * mon-fri")),
        ("@daily", CronSchedule("0 0 * * *")),
        ("@Hourly", CronSchedule("0 * * * *")),
        ("every 2h", IntervalSchedule(7200)),
        ("every 45m", IntervalSchedule(2700)),
        ("Every 90 seconds", IntervalSchedule(90)),
        ("every 1.5 hours", IntervalSchedule(5400)),
        ("every hour", IntervalSchedule(3600)),
        ("every 2 days", IntervalSchedule(172800)),
        ("in 20m", OnceSchedule(utc(2026, 3, 27, 12, 20))),
        ("in 2 hours", OnceSchedule(utc(2026, 3, 27, 14, 0))),
        ("at 2026-12-01 09:00", OnceSchedule(utc(2026, 12, 1, 8, 0))),  # CET, UTC+1
        ("at 2026-07-01T09:00:30", OnceSchedule(utc(2026, 7, 1, 7, 0, 30))),  # CEST, UTC+2
        ("at 18:30", OnceSchedule(utc(2026, 3, 27, 17, 30))),  # later today
        ("at 09:00", OnceSchedule(utc(2026, 3, 28, 8, 0))),  # already past today → tomorrow
    ],
)
def test_parses_every_accepted_form(text: str, expected: object) -> None:
    assert parse_schedule(text, BERLIN, NOW) == expected


def test_kinds() -> None:
    assert parse_schedule("0 9 * * *", BERLIN, NOW).kind is ScheduleKind.CRON
    assert parse_schedule("every 1h", BERLIN, NOW).kind is ScheduleKind.INTERVAL
    assert parse_schedule("in 1h", BERLIN, NOW).kind is ScheduleKind.ONCE


def test_schedule_error_is_a_tool_error() -> None:
    assert issubclass(ScheduleError, ToolError)
    assert issubclass(ScheduleError, AgentgramError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a schedule is required"),
        ("   ", "a schedule is required"),
        ("tomorrow morning", "a crontab has 5 fields (minute hour day month weekday), got 2"),
        ("0 9 * *", "got 4"),
        ("0 0 9 * * *", "got 6; seconds and years are not supported"),
        ("61 9 * * *", "is not a valid crontab"),
        ("0 25 * * *", "is not a valid crontab"),
        ("0 9 32 * *", "is not a valid crontab"),
        ("0 9 * 13 *", "is not a valid crontab"),
        ("0 9 * * 8", "weekday '8' is not 0-7"),
        ("0 9 * * 5-1", "weekday range '5-1' goes backwards"),
        ("0 9 * * funday", "weekday 'funday' is not 0-7"),
        ("0 9 * * monx", "weekday 'monx' is not 0-7"),
        ("0 9 * * */0", "weekday step in '*/0' must be at least 1"),
        ("0 0 31 2 *", "never fires"),
        ("@reboot", "is not a known cron macro"),
        ("every", "'nothing' is not a duration (e.g. 'every 2h', 'every 45m')"),
        ("every often", "'often' is not a duration"),
        ("every 5 fortnights", "is not a duration"),
        ("every 10s", "is too frequent: the shortest interval is 1m"),
        ("every 0m", "is too frequent"),
        ("in", "is not a duration (e.g. 'in 20m', 'in 2h')"),
        ("in a while", "is not a duration"),
        ("in 0m", "the delay must be positive"),
        ("at noon", "write the time as 'at YYYY-MM-DD HH:MM' or 'at HH:MM'"),
        ("at 2026-02-30 09:00", "is not a real date and time"),
        ("at 25:00", "is not a real date and time"),
        ("at 2026-01-01 09:00", "is in the past (it is now 2026-03-27 13:00 in Europe/Berlin)"),
        ("at 2026-03-29 02:30", "2026-03-29 02:30 does not exist in Europe/Berlin (clocks skip it)"),
    ],
)
def test_rejects_bad_input_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text, BERLIN, NOW)
    assert message in str(info.value)


def test_unrecognised_text_names_the_accepted_forms() -> None:
    with pytest.raises(ScheduleError, match="'every 2h', 'at 2026-12-01 09:00' or 'in 20m'"):
        parse_schedule("sometime soon", BERLIN, NOW)


def test_min_interval_can_be_lowered() -> None:
    assert parse_schedule("every 5s", BERLIN, NOW, min_interval=1) == IntervalSchedule(5)


def test_ambiguous_wall_time_takes_the_first_occurrence() -> None:
    # 02:30 happens twice on 2026-10-25 in Berlin: first in CEST (00:30Z), then in CET (01:30Z)
    assert parse_schedule("at 2026-10-25 02:30", BERLIN, NOW) == OnceSchedule(utc(2026, 10, 25, 0, 30))


# --- triggers ------------------------------------------------------------------


def test_to_trigger_builds_apscheduler_triggers() -> None:
    assert isinstance(to_trigger(CronSchedule("0 9 * * 1-5"), BERLIN), CronTrigger)
    assert isinstance(to_trigger(IntervalSchedule(60), BERLIN, anchor=NOW), IntervalTrigger)
    assert isinstance(to_trigger(OnceSchedule(NOW), BERLIN), DateTrigger)


def fires(text: str, tz: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    schedule = parse_schedule(text, tz, after)
    out: list[datetime] = []
    for _ in range(count):
        nxt = next_run(schedule, tz, out[-1] if out else after)
        assert nxt is not None
        out.append(nxt)
    return out


def test_weekdays_count_from_sunday_as_in_standard_cron() -> None:
    # APScheduler 3 alone would read 1-5 as Tuesday..Saturday
    days = [f.astimezone(BERLIN).strftime("%a %H:%M") for f in fires("0 9 * * 1-5", BERLIN, NOW, 5)]
    assert days == ["Mon 09:00", "Tue 09:00", "Wed 09:00", "Thu 09:00", "Fri 09:00"]


@pytest.mark.parametrize(
    ("dow", "expected"),
    [
        ("0", {"Sun"}),
        ("7", {"Sun"}),
        ("sun", {"Sun"}),
        ("5-7", {"Fri", "Sat", "Sun"}),
        ("*/2", {"Sun", "Tue", "Thu", "Sat"}),
        ("1/2", {"Mon", "Wed", "Fri", "Sun"}),
        ("mon,wed-thu", {"Mon", "Wed", "Thu"}),
        ("Monday-Tuesday", {"Mon", "Tue"}),
        ("1-5/2", {"Mon", "Wed", "Fri"}),
    ],
)
def test_weekday_field_dialect(dow: str, expected: set[str]) -> None:
    days = {f.astimezone(BERLIN).strftime("%a") for f in fires(f"0 9 * * {dow}", BERLIN, NOW, 14)}
    assert days == expected


def test_day_of_month_and_weekday_both_restricted_means_either() -> None:
    # standard cron: the 13th of the month OR any Friday
    runs = fires("0 0 13 * 5", BERLIN, utc(2026, 4, 1), 4)
    local = [f.astimezone(BERLIN).strftime("%a %d") for f in runs]
    assert local == ["Fri 03", "Fri 10", "Mon 13", "Fri 17"]


def test_cron_next_run_is_strictly_after() -> None:
    at_nine = datetime(2026, 3, 30, 9, 0, tzinfo=BERLIN)
    nxt = next_run(CronSchedule("0 9 * * *"), BERLIN, at_nine)
    assert nxt == datetime(2026, 3, 31, 9, 0, tzinfo=BERLIN)
    assert nxt is not None and nxt.tzinfo is UTC


def test_cron_follows_the_zone_across_dst() -> None:
    # 09:00 local is 08:00Z before the spring change and 07:00Z after it
    runs = fires("0 9 * * *", BERLIN, utc(2026, 3, 28, 0), 2)
    assert runs == [utc(2026, 3, 28, 8), utc(2026, 3, 29, 7)]
    runs = fires("0 9 * * *", NY, utc(2026, 3, 7, 0), 2)
    assert runs == [utc(2026, 3, 7, 14), utc(2026, 3, 8, 13)]


def test_cron_matches_apscheduler_exactly() -> None:
    schedule = CronSchedule("*/7 3-5 * * 2,4")
    trigger = to_trigger(schedule, BERLIN)
    after = NOW
    previous = None
    for _ in range(20):
        ours = next_run(schedule, BERLIN, after)
        theirs = trigger.get_next_fire_time(previous, after)
        assert ours == theirs
        assert ours is not None
        after = previous = ours


def test_interval_next_run_counts_from_after_or_anchor() -> None:
    every_2h = IntervalSchedule(7200)
    assert next_run(every_2h, BERLIN, NOW) == NOW + timedelta(hours=2)
    anchor = utc(2026, 3, 27, 9, 30)
    assert next_run(every_2h, BERLIN, NOW, anchor=anchor) == utc(2026, 3, 27, 13, 30)
    assert next_run(every_2h, BERLIN, utc(2026, 3, 27, 13, 30), anchor=anchor) == utc(2026, 3, 27, 15, 30)
    assert next_run(every_2h, BERLIN, utc(2026, 3, 27, 9, 0), anchor=anchor) == utc(2026, 3, 27, 11, 30)


def test_interval_is_absolute_time_across_dst() -> None:
    anchor = utc(2026, 3, 29, 0, 0)  # 01:00 CET, one hour before clocks jump
    nxt = next_run(IntervalSchedule(7200), BERLIN, anchor, anchor=anchor)
    assert nxt == utc(2026, 3, 29, 2, 0)  # 04:00 CEST: two real hours later


def test_once_fires_once() -> None:
    once = OnceSchedule(utc(2026, 12, 1, 8))
    assert next_run(once, BERLIN, NOW) == utc(2026, 12, 1, 8)
    assert next_run(once, BERLIN, utc(2026, 12, 1, 8)) is None
    assert next_run(once, BERLIN, utc(2027, 1, 1)) is None


def test_describe() -> None:
    assert describe(CronSchedule("0 9 * * 1-5")) == "cron 0 9 * * 1-5"
    assert describe(IntervalSchedule(7200)) == "every 2h"
    assert describe(IntervalSchedule(5400)) == "every 1h30m"
    assert describe(IntervalSchedule(90)) == "every 1m30s"
    once = OnceSchedule(utc(2026, 12, 1, 8))
    assert describe(once, BERLIN) == "once at 2026-12-01 09:00 CET"
    assert describe(once) == "once at 2026-12-01 08:00 UTC"
