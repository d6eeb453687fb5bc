"""A call that only reads a path is offered for approval in words, not as raw arguments.

Regression (issue 25): a ``read_file`` outside the workdir asked with
``Call read_file with: { "path": "/etc/hostname" }``; every other prompt reads like a sentence.
The tool says which path it reads (:meth:`Tool.reads`), the gate puts it in
:class:`ApprovalDetails` as the prompts show paths (workdir-relative inside, absolute beyond).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.tools.base import Tool, ToolContext, read_target
from agentgram.runtime.capabilities.tools.files import EditFile, ListDir, ReadFile, WriteFile
from agentgram.runtime.capabilities.tools.send_file import SendFile
from agentgram.runtime.core.turn.gate import approval_details
from agentgram.runtime.infra.storage.models import ToolCallRow


class _Sender:
    max_upload_bytes = 1024

    async def send_file(self, session_id: int, path: Path, caption: str | None, *, as_photo: bool) -> None:
        raise AssertionError("not sent while asking")


def _row(tool: Tool[Any], args: dict[str, object]) -> ToolCallRow:
    return ToolCallRow(session_id=1, history_id=1, call_id="c1", name=tool.name, arguments=json.dumps(args))


@pytest.mark.parametrize("tool", [ReadFile(), ListDir(), SendFile(_Sender())], ids=lambda t: t.name)
async def test_a_read_outside_the_workdir_names_its_resolved_path(tool: Tool[Any], tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    ctx = ToolContext(workdir=workdir)
    details = await approval_details(_row(tool, {"path": "../elsewhere/notes.txt"}), ctx, tool)
    assert details.read_path == (tmp_path / "elsewhere" / "notes.txt").resolve().as_posix()
    assert details.outside is True
    assert details.command is None and details.path is None and details.diff is None


async def test_a_read_inside_the_workdir_names_it_relative(tmp_path: Path) -> None:
    ctx = ToolContext(workdir=tmp_path)
    details = await approval_details(
        _row(ReadFile(), {"path": str(tmp_path / "a" / "b.txt")}), ctx, ReadFile()
    )
    assert (details.read_path, details.outside) == ("a/b.txt", False)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (WriteFile(), {"path": "/tmp/x.txt", "content": "x"}),
        (EditFile(), {"path": "/tmp/x.txt", "old_text": "a", "new_text": "b"}),
        (ReadFile(), {"path": 7}),  # arguments that do not parse: no path to name
        (ReadFile(), "not json"),
    ],
)
def test_only_reads_with_valid_arguments_have_a_read_target(
    tool: Tool[Any], args: Any, tmp_path: Path
) -> None:
    assert read_target(tool, args, ToolContext(workdir=tmp_path)) is None
