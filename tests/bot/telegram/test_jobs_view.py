"""How a tracked call reads in the chat (:mod:`bot.telegram.jobs_view`): one wording per end, the
command escaped, elapsed time from the call's own instants, the ⏹ button's data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, decode
from agentgram.bot.telegram.views.jobs_view import (
    JOB,
    _parse,
    command_html,
    elapsed_text,
    ended_html,
    stop_keyboard,
)
from agentgram.runtime.infra.i18n import Translator

T = Translator()
START = datetime(2026, 3, 30, 9, 0, tzinfo=UTC)


def test_the_command_is_escaped_code_and_a_call_without_a_summary_shows_its_tool() -> None:
    assert command_html("make && echo <ok>", "execute_cmd") == "<code>make &amp;&amp; echo &lt;ok&gt;</code>"
    assert command_html("", "execute_cmd") == "<code>execute_cmd</code>"


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        ("completed", "✅ <code>pytest -x</code> finished · 3 min 2 s"),
        ("failed", "❌ <code>pytest -x</code> failed · 3 min 2 s"),
        ("cancelled", "⏹ <code>pytest -x</code> cancelled · 3 min 2 s"),
        ("orphaned", "⚠️ <code>pytest -x</code> interrupted by a restart"),
        ("something new", "⚠️ <code>pytest -x</code> interrupted by a restart"),
    ],
)
def test_each_end_has_its_own_final_line(status: str, shown: str) -> None:
    elapsed = elapsed_text(T, "en", START, START + timedelta(seconds=182))
    assert ended_html(T, "en", "<code>pytest -x</code>", status, elapsed) == shown


def test_elapsed_time_is_worded_in_the_users_language_and_never_negative() -> None:
    assert elapsed_text(T, "ru", START, START + timedelta(seconds=130)) == "2 мин 10 с"
    assert elapsed_text(T, "en", START, START - timedelta(seconds=5)) == "0 s"


def test_the_stop_button_names_the_run_and_nothing_else() -> None:
    keyboard = stop_keyboard(T, "en", 42)
    (row,) = keyboard.rows
    (button,) = row
    assert button.text == "⏹ Stop"
    assert decode(button.callback_data) == Button(ButtonAction.CALL_CANCEL, "42")


def test_a_malformed_record_is_refused() -> None:
    good = '{"chat": 1, "message": 2, "command": "<code>x</code>", "language": "en"}'
    assert _parse(f"{JOB}7", good) == (7, 1, 2, "<code>x</code>", "en")
    for key, raw in [
        (f"{JOB}x", good),
        (f"{JOB}7", "not json"),
        (f"{JOB}7", "[1]"),
        (f"{JOB}7", '{"chat": "1", "message": 2, "command": "x"}'),
        (f"{JOB}7", '{"chat": 1, "message": 2, "command": "x", "language": 5}'),
    ]:
        assert _parse(key, raw) is None, raw
