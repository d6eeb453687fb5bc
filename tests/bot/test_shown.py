"""What every adapter shows alike follows the runtime's rules, never a copy of them (issue 24).

Which sources are headless is the runtime's one rule (``is_headless``); a chat shows a headless
run's approvals, reports and files, never its streamed text.
"""

from __future__ import annotations

import pytest

from agentgram.bot.shown import reaches_chat, read_wording
from agentgram.runtime.app import SessionSource, is_headless
from agentgram.runtime.infra.events import Address, ApprovalDetails, ApprovalRequested, TextDelta


@pytest.mark.parametrize("source", list(SessionSource))
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
