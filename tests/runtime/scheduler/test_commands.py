"""``/cron add <schedule> <prompt>``: where the schedule ends and the prompt begins."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from agentgram.runtime.scheduler.commands import split_schedule
from agentgram.runtime.scheduler.schedule import ScheduleError

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "schedule", "prompt"),
    [
        ("every 2h check the build", "every 2h", "check the build"),
        ("every 90 seconds ping the router", "every 90 seconds", "ping the router"),
        ("in 20m call Anna", "in 20m", "call Anna"),
        ("in 20 minutes call Anna", "in 20 minutes", "call Anna"),
        ("at 18:30 call Anna", "at 18:30", "call Anna"),
        ("at 2026-12-01 09:00 renew the domain", "at 2026-12-01 09:00", "renew the domain"),
        ("0 9 * * 1-5 summarise my inbox", "0 9 * * 1-5", "summarise my inbox"),
        ("*/15 * * * * check the queue", "*/15 * * * *", "check the queue"),
        ("@daily water the plants", "@daily", "water the plants"),
    ],
)
def test_the_longest_schedule_prefix_wins(text: str, schedule: str, prompt: str) -> None:
    assert split_schedule(text, BERLIN, NOW) == (schedule, prompt)


def test_the_prompt_keeps_its_own_spacing() -> None:
    assert split_schedule("every 1h  first line\n  - second", BERLIN, NOW) == (
        "every 1h",
        "first line\n  - second",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a schedule and a prompt are required"),
        ("every 2h", "write what to do"),
        ("every 5s spam me", "too frequent"),
        ("every blue moon howl", "not a duration"),
        ("at 2020-01-01 09:00 too late", "in the past"),
        ("0 9 * * 1-9 weekdays", "not a valid crontab"),
        ("@fortnightly tidy up", "not a known cron macro"),
    ],
)
def test_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        split_schedule(text, BERLIN, NOW)
