"""What every adapter shows alike follows the runtime's rules, never a copy of them (issue 24).

Which sources are headless is the runtime's one rule (``is_headless``); a chat shows a headless
run's approvals, reports and files, never its streamed text. A session another spawned (issue 29)
shows its final answers, approvals, questions, notices and files, never its streamed text or tool
lines.
"""

from __future__ import annotations

import pytest

from agentgram.bot.shown import reaches_chat, read_wording
from agentgram.runtime.app import SessionSource, is_headless
from agentgram.runtime.infra.events import (
    Address,
    ApprovalDetails,
    ApprovalRequested,
    Notice,
    QuestionAsked,
    RoundEnded,
    RuntimeEvent,
    TextDelta,
    ToolActivity,
    ToolPhase,
    TurnStarted,
)


@pytest.mark.parametrize("source", [source for source in SessionSource if source != SessionSource.AGENT])
def test_a_chat_shows_a_runs_text_exactly_when_the_runtime_calls_it_not_headless(
    source: SessionSource,
) -> None:
    to = Address(session_id=1, source=source, chat_id=7)
    assert reaches_chat(TextDelta(to=to, turn_id=1, text="hi")) is not is_headless(source)
    asked = ApprovalRequested(
        to=to, request_id="r", tool_call_id=1, details=ApprovalDetails(tool_name="x", arguments={})
    )
    assert reaches_chat(asked)


def test_only_a_read_is_worded_as_one() -> None:
    assert read_wording(ApprovalDetails(tool_name="execute_cmd", arguments={}, command="ls")) is None
    read = ApprovalDetails(tool_name="list_dir", arguments={}, read_path="/etc", outside=True)
    assert read_wording(read) == ("approval-list-dir", {"path": "/etc", "tool": "list_dir", "outside": "yes"})


def test_a_spawned_session_shows_only_what_it_says_to_the_user() -> None:
    to = Address(session_id=2, source=SessionSource.AGENT, chat_id=7)
    shown: list[RuntimeEvent] = [
        RoundEnded(to=to, turn_id=1, text="42", has_tool_calls=False),
        ApprovalRequested(
            to=to, request_id="r", tool_call_id=1, details=ApprovalDetails(tool_name="x", arguments={})
        ),
        QuestionAsked(to=to, question_id="q", question="Which?"),
        Notice(to=to, key="stopped"),
    ]
    hidden: list[RuntimeEvent] = [
        TextDelta(to=to, turn_id=1, text="4"),
        RoundEnded(to=to, turn_id=1, text="let me look", has_tool_calls=True),
        ToolActivity(
            to=to, turn_id=1, tool_call_id=1, name="read_file", summary="x", phase=ToolPhase.STARTED
        ),
        TurnStarted(to=to, turn_id=1),
    ]
    assert all(reaches_chat(event) for event in shown)
    assert not any(reaches_chat(event) for event in hidden)
