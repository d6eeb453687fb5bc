"""Turning one approved call into standing trust ("⏱ 15 min", "🔁 Always").

"Always" proposes the narrowest useful rule: the exact file for file tools,
the command's first two words plus ``*`` for ``execute_cmd``. Rule matching
refuses to let such a prefix cover a command that chains or substitutes
(see :func:`runtime.approvals.rules.command_is_simple`), so trusting
``git status*`` never trusts ``git status; rm -rf ~``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.approvals.rules import Action, Rule
from runtime.storage.models import ToolCallRow
from runtime.tools.base import Tool, ToolContext


def proposed_rule(call: ToolCallRow, tool: Tool[Any] | None, workdir: Path) -> Rule:
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        args = {}
    if call.name == "execute_cmd" and isinstance(args, dict):
        words = str(args.get("command", "")).split()
        prefix = " ".join(words[:2])
        return Rule(tool=call.name, path=f"{prefix}*" if prefix else None, action=Action.ALLOW, note="always")
    if tool is not None and isinstance(args, dict) and tool.group.value.startswith("fs_"):
        target = tool.target(tool.parse(args), ToolContext(workdir=workdir))
        if target:
            resolved = ToolContext(workdir=workdir).resolve(target)
            try:
                shown = resolved.relative_to(workdir.resolve()).as_posix()
            except ValueError:
                shown = resolved.as_posix()
            return Rule(tool=call.name, path=shown, action=Action.ALLOW, note="always")
    return Rule(tool=call.name, action=Action.ALLOW, note="always")


def describe(rule: Rule) -> str:
    return f"{rule.tool} {rule.path}" if rule.path else rule.tool
