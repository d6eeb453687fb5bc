"""A tool service that is off is its null object (runtime/tools/base.py), and says so as before.

A bare :class:`ToolContext` (outside a turn) has no tracked calls and no process ledger: each
call tool fails with the one message the model reads, before it looks at its arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.tools.base import NO_PROCESSES, Tool, ToolContext
from agentgram.runtime.capabilities.tools.calls import call_tools
from agentgram.runtime.infra.errors import ToolError

ARGS: dict[str, dict[str, Any]] = {
    "wait": {"for": []},  # an empty list is its own error, but only once calls are tracked
    "get_tool_call_status": {"tool_call_id": "c1", "wait_for_completion": True},
    "cancel_tool_call": {"tool_call_id": "c1"},
    "list_running_tool_calls": {},
}


@pytest.mark.parametrize("tool", call_tools(), ids=lambda tool: tool.name)
async def test_each_call_tool_outside_a_turn_says_calls_are_not_tracked(
    tool: Tool[Any], tmp_path: Path
) -> None:
    with pytest.raises(ToolError) as raised:
        await tool.execute(tool.parse(ARGS[tool.name]), ToolContext(workdir=tmp_path))
    assert str(raised.value) == "tracked tool calls are not available here"


async def test_no_process_ledger_records_nothing(tmp_path: Path) -> None:
    assert ToolContext(workdir=tmp_path).processes is NO_PROCESSES
    assert await NO_PROCESSES.started(1) is None and await NO_PROCESSES.finished(1) is None
