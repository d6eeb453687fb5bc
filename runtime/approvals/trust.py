"""Turning one approved call into standing trust ("🔁 Always").

"Always" proposes the narrowest useful rule: the exact file for file tools,
the command's first two words plus ``*`` for ``execute_cmd``, the tool itself
for anything without a target. Rule matching refuses to let such a prefix
cover a command that chains or substitutes (see
:func:`runtime.approvals.rules.command_is_simple`), so trusting
``git status*`` never trusts ``git status; rm -rf ~``. Glob characters in the
call's own text are escaped, so a rule never covers more than it shows.
"""

from __future__ import annotations

from glob import escape
from pathlib import Path
from typing import Any

from runtime.approvals.rules import Action, Rule, shown_path
from runtime.errors import ToolError
from runtime.storage.models import ToolCallRow
from runtime.tools.base import Tool, ToolContext, ToolGroup

PREFIX_WORDS = 2


def proposed_rule(call: ToolCallRow, tool: Tool[Any] | None, workdir: Path) -> Rule:
    return Rule(tool=call.name, path=_pattern(call, tool, workdir), action=Action.ALLOW, note="always")


def _pattern(call: ToolCallRow, tool: Tool[Any] | None, workdir: Path) -> str | None:
    if tool is None:
        return None
    ctx = ToolContext(workdir=workdir)
    try:
        target = tool.target(tool.parse(call.arguments), ctx)
    except ToolError:
        target = None
    if target is None:
        return None
    if tool.group in (ToolGroup.FS_READ, ToolGroup.FS_WRITE):
        return escape(shown_path(ctx.resolve(target), workdir))
    return command_pattern(target)


def command_pattern(command: str) -> str:
    """The command's first words plus ``*``; a command that short is trusted exactly."""
    words = command.split()
    if len(words) <= 1:
        return escape(command)
    return escape(" ".join(words[:PREFIX_WORDS])) + "*"


def describe(rule: Rule) -> str:
    """How a rule reads in the chat: the tool, then its path or command pattern."""
    return rule.tool if rule.path is None else f"{rule.tool} {rule.path}"
