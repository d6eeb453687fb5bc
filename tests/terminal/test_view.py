"""How the terminal renders: line breaks kept as Telegram keeps them, reads asked in words.

Regressions (issue 25): a two-line result the model quoted showed on one line in the terminal
(CommonMark joins a paragraph's lines), and a read outside the workdir was asked as raw JSON.
"""

from __future__ import annotations

import io

from rich.console import Console, RenderableType

from agentgram.bot.terminal.view import answer, approval_prompt
from agentgram.runtime.infra.events import ApprovalDetails
from agentgram.runtime.infra.i18n import Translator


def shown(renderable: RenderableType) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=80, color_system=None, highlight=False).print(renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_each_line_of_an_answer_stays_a_line() -> None:
    lines = shown(answer("The file says:\nalpha = 1\nbeta = 2"))
    assert lines[:3] == ["The file says:", "alpha = 1", "beta = 2"]


def test_lines_stay_lines_in_lists_and_quotes_and_markdown_still_renders() -> None:
    lines = shown(answer("- **one**\n  more\n\n> q1\nq2"))
    assert [line.strip() for line in lines if line.strip()] == ["• one", "more", "▌ q1", "▌ q2"]


def test_a_paragraph_break_stays_one_blank_line() -> None:
    assert shown(answer("first\n\nsecond")) == ["first", "", "second"]


def test_a_read_outside_the_workdir_is_asked_in_words() -> None:
    details = ApprovalDetails(
        tool_name="read_file", arguments={"path": "/etc/hostname"}, read_path="/etc/hostname", outside=True
    )
    lines = shown(approval_prompt(Translator(), details, 15))
    assert lines[1] == "Read a file outside the workdir: /etc/hostname"
    assert not any("{" in line for line in lines)
