from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agentgram.runtime.infra.config import QuietHours
from agentgram.runtime.scheduler.models import TicRunStatus
from agentgram.runtime.scheduler.tic import (
    MAX_EVENTS,
    TIC_INSTRUCTIONS,
    TIC_OK,
    DeferBusy,
    Run,
    SkipNothingToDo,
    SkipQuiet,
    build_tic_input,
    checklist_text,
    decide_tic,
    is_tic_ok,
    read_tic_md,
    tic_has_work,
    tic_header,
)

BERLIN = ZoneInfo("Europe/Berlin")
NIGHT = QuietHours.parse("23:00-07:00")
NOON = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)  # 12:00 CEST
MIDNIGHT = datetime(2026, 6, 1, 22, 0, tzinfo=UTC)  # 00:00 CEST


@pytest.mark.parametrize("reply", ["", "   ", "\n", "TIC_OK", "  TIC_OK\n", None])
def test_tic_ok_and_empty_replies_are_suppressed(reply: str | None) -> None:
    assert is_tic_ok(reply)


@pytest.mark.parametrize("reply", ["TIC_OK.", "tic_ok", "TIC_OK but the build failed", "Your build failed"])
def test_anything_else_is_delivered(reply: str) -> None:
    assert not is_tic_ok(reply)


def test_instructions_tell_the_agent_to_answer_tic_ok() -> None:
    assert f"reply with exactly {TIC_OK}" in TIC_INSTRUCTIONS


@pytest.mark.parametrize(
    ("tic_md", "prompt", "events", "expected"),
    [
        (None, None, [], False),
        ("", "", [], False),
        ("   \n", "  ", ["", "  "], False),
        ("# Checklist\n\n## Daily\n- [ ]\n<!-- add items here -->\n", None, [], False),
        ("- check the build", None, [], True),
        ("# Checklist\n- [ ] water the plants", None, [], True),
        (None, "look at my calendar", [], True),
        (None, None, ["cron job 'inbox' finished"], True),
    ],
)
def test_tic_has_work(tic_md: str | None, prompt: str | None, events: list[str], expected: bool) -> None:
    assert tic_has_work(tic_md, prompt, events) is expected


def test_checklist_keeps_the_file_as_written() -> None:
    text = "# Checklist\n- [ ] water the plants\n"
    assert checklist_text(text) == text.strip()
    assert checklist_text("# only a heading\n") is None


def test_read_tic_md(tmp_path: Path) -> None:
    assert read_tic_md(tmp_path) is None
    (tmp_path / "TIC.md").write_text("- check mail\n", encoding="utf-8")
    assert read_tic_md(tmp_path) == "- check mail\n"


def test_header_has_local_time_and_zone_name() -> None:
    assert tic_header(NOON, BERLIN) == "[TIC] 2026-06-01T12:00:00+02:00 Europe/Berlin"
    assert tic_header(NOON, UTC) == "[TIC] 2026-06-01T10:00:00+00:00 UTC"


def test_tic_input_renders_header_instructions_prompt_checklist_and_digest() -> None:
    tic = build_tic_input(
        NOON,
        BERLIN,
        prompt="  Mention the weather. ",
        tic_md="# Checklist\n- [ ] water the plants\n",
        pending_events=["job #3 'inbox' finished: 2 new mails", "  ", "todo 'call Anna' is due"],
    )
    text = tic.render()
    assert text.startswith("[TIC] 2026-06-01T12:00:00+02:00 Europe/Berlin\n\n" + TIC_INSTRUCTIONS)
    assert "Instruction:\nMention the weather." in text
    assert "Checklist (TIC.md):\n# Checklist\n- [ ] water the plants" in text
    assert text.endswith(
        "Since the last tic:\n- job #3 'inbox' finished: 2 new mails\n- todo 'call Anna' is due"
    )


def test_tic_input_leaves_out_empty_parts() -> None:
    text = build_tic_input(NOON, BERLIN, prompt=None, tic_md="# heading only", pending_events=[]).render()
    assert text == tic_header(NOON, BERLIN) + "\n\n" + TIC_INSTRUCTIONS


def test_long_digest_is_cut() -> None:
    events = [f"event {i}" for i in range(MAX_EVENTS + 7)]
    text = build_tic_input(NOON, BERLIN, prompt=None, tic_md=None, pending_events=events).render()
    assert f"- event {MAX_EVENTS - 1}\n- … and 7 more" in text
    assert f"- event {MAX_EVENTS}\n" not in text


def test_decide_runs_when_there_is_work_and_nobody_is_busy() -> None:
    assert decide_tic(NOON, NIGHT, BERLIN, user_turn_running=False, has_work=True) == Run()


def test_decide_skips_without_work() -> None:
    decision = decide_tic(NOON, NIGHT, BERLIN, user_turn_running=False, has_work=False)
    assert decision == SkipNothingToDo()
    assert decision.status is TicRunStatus.SKIPPED
    assert decision.reason == "nothing to do"


def test_decide_defers_while_the_user_turn_runs() -> None:
    decision = decide_tic(NOON, NIGHT, BERLIN, user_turn_running=True, has_work=True)
    assert decision == DeferBusy()
    assert decision.status is TicRunStatus.DEFERRED


def test_nothing_to_do_wins_over_busy() -> None:
    assert decide_tic(NOON, NIGHT, BERLIN, user_turn_running=True, has_work=False) == SkipNothingToDo()


def test_quiet_hours_win_over_everything() -> None:
    for busy in (False, True):
        for work in (False, True):
            decision = decide_tic(MIDNIGHT, NIGHT, BERLIN, user_turn_running=busy, has_work=work)
            assert decision == SkipQuiet(until=datetime(2026, 6, 2, 5, 0, tzinfo=UTC))
            assert decision.status is TicRunStatus.SKIPPED
            assert decision.reason == "quiet hours"


def test_no_quiet_hours_configured() -> None:
    assert decide_tic(MIDNIGHT, None, BERLIN, user_turn_running=False, has_work=True) == Run()
