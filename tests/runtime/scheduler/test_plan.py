"""The scheduler service's pure decisions: tic plan, delivery in quiet hours, run results.

The held results' digest is worded by the adapter: ``tests/bot/telegram/test_reports.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agentgram.runtime.core.turn.outcome import Cancelled, Exhausted, Failed, Final, Paused
from agentgram.runtime.infra.config import QuietHoursSettings, TicSettings
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.scheduler.clock import FakeClock
from agentgram.runtime.scheduler.models import JobRun, JobRunStatus, TicState
from agentgram.runtime.scheduler.plan import (
    Hold,
    Send,
    cron_event,
    plan_delivery,
    run_result,
    short,
    tic_plan,
)
from agentgram.runtime.scheduler.schedule import CronSchedule, IntervalSchedule

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
NIGHT = QuietHoursSettings.model_validate({"range": "23:00-07:00"})
NIGHT_HOLD = QuietHoursSettings.model_validate({"range": "23:00-07:00", "hold": True})


# --- tic plan ----------------------------------------------------------------------------------


def test_config_interval_is_used_without_overrides() -> None:
    plan = tic_plan(TicSettings(interval=1.5), TicState(), BERLIN, NOW)
    assert plan.enabled and plan.schedule == IntervalSchedule(1.5)


def test_config_cron_wins_over_config_interval() -> None:
    plan = tic_plan(TicSettings(interval=60, cron="0 9-18 * * 1-5"), TicState(), BERLIN, NOW)
    assert plan.schedule == CronSchedule("0 9-18 * * 1-5")


def test_chat_overrides_win_over_the_config() -> None:
    settings = TicSettings(enabled=False, cron="0 9 * * *")
    plan = tic_plan(settings, TicState(enabled=True, interval_seconds=2700), BERLIN, NOW)
    assert plan.enabled and plan.schedule == IntervalSchedule(2700)
    assert not tic_plan(TicSettings(), TicState(enabled=False), BERLIN, NOW).enabled


@pytest.mark.parametrize("cron", ["every 2h", "0 9 * *", "in 20m"])
def test_a_bad_tic_cron_is_a_config_error(cron: str) -> None:
    with pytest.raises(ConfigError, match=r"tic\.cron"):
        tic_plan(TicSettings(cron=cron), TicState(), BERLIN, NOW)


# --- delivery in quiet hours ---------------------------------------------------------------------


def test_results_are_loud_outside_quiet_hours() -> None:
    noon = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
    assert plan_delivery(noon, NIGHT, BERLIN) == Send(silent=False)
    assert plan_delivery(noon, NIGHT_HOLD, BERLIN) == Send(silent=False)
    assert plan_delivery(noon, QuietHoursSettings(), BERLIN) == Send(silent=False)


def test_results_are_silent_or_held_during_quiet_hours_across_midnight() -> None:
    clock = FakeClock(datetime(2026, 6, 1, 21, 30, tzinfo=UTC))  # 23:30 CEST
    assert plan_delivery(clock.now(), NIGHT, BERLIN) == Send(silent=True)
    morning = datetime(2026, 6, 2, 5, 0, tzinfo=UTC)  # 07:00 CEST
    assert plan_delivery(clock.advance(timedelta(hours=2)), NIGHT_HOLD, BERLIN) == Hold(until=morning)
    clock.set(morning)
    assert plan_delivery(clock.now(), NIGHT_HOLD, BERLIN) == Send(silent=False)


def test_held_until_the_end_of_a_dst_shortened_night() -> None:
    # 29 March 2026: clocks jump 02:00 → 03:00 in Berlin, so 07:00 CEST is 05:00 UTC
    at_one = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)  # 01:00 CET
    assert plan_delivery(at_one, NIGHT_HOLD, BERLIN) == Hold(until=datetime(2026, 3, 29, 5, 0, tzinfo=UTC))


# --- run results ---------------------------------------------------------------------------------


def test_run_results() -> None:
    assert run_result(Final("done")).status == JobRunStatus.SUCCESS
    assert run_result(Final("done")).response == "done"
    assert run_result(Cancelled()).status == JobRunStatus.CANCELLED
    exhausted = run_result(Exhausted(12))
    assert exhausted.status == JobRunStatus.FAILED and "12 tool-call rounds" in (exhausted.error or "")
    assert run_result(Failed("LLM down")).error == "LLM down"
    assert run_result(Paused()).status == JobRunStatus.FAILED


# --- digests -------------------------------------------------------------------------------------


def test_cron_event_names_the_job_its_status_and_a_snippet() -> None:
    run = JobRun(
        job_id=3,
        started_at=NOW,
        ended_at=NOW + timedelta(minutes=5),
        status=JobRunStatus.SUCCESS,
        final_response="Two new invoices:\n- ACME\n- Globex",
    )
    assert cron_event(run, "Inbox", BERLIN) == (
        "2026-03-27 13:05 cron #3 “Inbox”: success — Two new invoices: - ACME - Globex"
    )
    failed = JobRun(job_id=4, started_at=NOW, ended_at=NOW, status=JobRunStatus.FAILED, error="x" * 500)
    line = cron_event(failed, "Backup", BERLIN)
    assert "failed — " in line and line.endswith("…") and len(line) < 250


def test_short_keeps_one_line_within_the_limit() -> None:
    assert short("a\n\nb   c") == "a b c"
    assert short("abcdef", 4) == "abc…"
