"""What the approval prompt shows before a file-changing call runs.

For ``write_file`` and ``edit_file`` this computes the file's resulting content
*without writing it* and a unified diff against the current content. The edit
rule itself is :func:`runtime.tools.files.apply_edit`, the same function
``edit_file`` runs, so the preview can never disagree with what will happen.
``None`` means "no preview": another tool, arguments that do not parse, or an
edit that would fail — the caller then shows the raw arguments.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.capabilities.tools.files import EditFileArgs, WriteFileArgs, apply_edit, read_text
from agentgram.runtime.infra.errors import ToolError

DIFF_CONTEXT_LINES = 3


@dataclass(slots=True, frozen=True)
class ChangePreview:
    """A proposed change: ``path`` as resolved, full old and new text, and their diff."""

    path: str
    old: str
    new: str
    diff: str
    new_file: bool


def _display_path(path: Path, workdir: Path) -> str:
    try:
        return str(path.relative_to(workdir.resolve()))
    except ValueError:
        return str(path).lstrip("/")


def unified_diff(old: str, new: str, rel_path: str) -> str:
    """``a/<rel_path>`` → ``b/<rel_path>`` diff with :data:`DIFF_CONTEXT_LINES` of context."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{rel_path}",
        tofile=f"b/{rel_path}",
        n=DIFF_CONTEXT_LINES,
    )
    # A last line without "\n" would glue onto the next diff line.
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _compute(tool_name: str, args: dict[str, Any], ctx: ToolContext) -> ChangePreview | None:
    """Blocking part of :func:`preview_change`; raises what ``execute`` would raise."""
    if tool_name == "write_file":
        write = WriteFileArgs.model_validate(args)
        path = ctx.resolve(write.path)
        if path.is_dir():
            return None
        new_file = not path.exists()
        old = "" if new_file else read_text(path)
        new = write.content
    else:
        edit = EditFileArgs.model_validate(args)
        path = ctx.resolve(edit.path)
        new_file = False
        old = read_text(path)
        new, _ = apply_edit(old, edit.old_text, edit.new_text, replace_all=edit.replace_all, path=path)
    diff = unified_diff(old, new, _display_path(path, ctx.workdir))
    return ChangePreview(path=str(path), old=old, new=new, diff=diff, new_file=new_file)


async def preview_change(tool_name: str, args: dict[str, Any], ctx: ToolContext) -> ChangePreview | None:
    """The change ``tool_name(args)`` would make, or ``None`` if it cannot be shown."""
    if tool_name not in ("write_file", "edit_file"):
        return None
    try:
        return await asyncio.to_thread(_compute, tool_name, args, ctx)
    except (ToolError, ValidationError, OSError):
        return None
