"""Typed lines as the terminal reads them: approval answers, question answers, commands."""

from __future__ import annotations

import pytest

from agentgram.bot.terminal.answers import (
    ApprovalAnswer,
    Command,
    CommandName,
    UnknownCommand,
    Verdict,
    option_chosen,
    parse_approval,
    parse_command,
)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("y", ApprovalAnswer(Verdict.APPROVE)),
        ("YES", ApprovalAnswer(Verdict.APPROVE)),
        ("n", ApprovalAnswer(Verdict.REJECT)),
        ("no", ApprovalAnswer(Verdict.REJECT)),
        ("n too risky", ApprovalAnswer(Verdict.REJECT, "too risky")),
        ("  no   not now  ", ApprovalAnswer(Verdict.REJECT, "not now")),
        ("15m", ApprovalAnswer(Verdict.TRUST_WHILE)),
        ("always", ApprovalAnswer(Verdict.ALWAYS)),
    ],
)
def test_each_approval_answer_is_understood(typed: str, expected: ApprovalAnswer) -> None:
    assert parse_approval(typed, minutes=15) == expected


@pytest.mark.parametrize("typed", ["", "ok", "y please", "30m", "nope", "never mind"])
def test_anything_else_is_no_answer(typed: str) -> None:
    assert parse_approval(typed, minutes=15) is None


def test_the_trust_answer_names_the_configured_minutes() -> None:
    assert parse_approval("30m", minutes=30) == ApprovalAnswer(Verdict.TRUST_WHILE)
    assert parse_approval("15m", minutes=30) is None


def test_a_number_picks_an_option_and_other_text_is_the_users_own_answer() -> None:
    assert option_chosen("2", options=3) == 1
    assert option_chosen(" 1 ", options=3) == 0
    assert option_chosen("4", options=3) is None
    assert option_chosen("0", options=3) is None
    assert option_chosen("the second one", options=3) is None


def test_commands_and_their_arguments() -> None:
    assert parse_command("/cron kill 7") == Command(CommandName.CRON, ("kill", "7"))
    assert parse_command("/STOP") == Command(CommandName.STOP)
    assert parse_command("/quit") == Command(CommandName.EXIT)
    assert parse_command("/frobnicate") == UnknownCommand("/frobnicate")
    assert parse_command("/") == UnknownCommand("/")
    assert parse_command("hello /new") is None


def test_non_ascii_digits_are_no_number() -> None:
    assert option_chosen("²", options=3) is None  # str.isdigit() is true, int() refuses it
    assert option_chosen("١", options=3) is None  # an Arabic-Indic one: int() takes it, we do not


def test_always_is_an_answer_only_where_it_is_offered_and_a_is_none() -> None:
    assert parse_approval("always", minutes=15, can_always=False) is None
    assert parse_approval("a", minutes=15) is None
    assert parse_approval("y", minutes=15, can_always=False) == ApprovalAnswer(Verdict.APPROVE)
