"""Turning one approved call into standing trust ("⏱ 15 min", "🔁 Always").

"Always" proposes the narrowest useful rule: the exact file for file tools,
the command's first two words plus `` *`` for ``execute_cmd`` (a command of
one or two words exactly), the tool itself for anything without a target.
Rule matching refuses to let an allow pattern cover a command that chains,
pipes, redirects or substitutes (see
:func:`runtime.approvals.rules.command_is_simple`), so for such a command no
rule is proposed at all (:func:`proposed_rule` returns ``None``) and the
prompt offers no "Always": a rule that would never match must not be saved.
Glob characters in the call's own text are escaped, so a rule never covers
more than it shows.

"⏱ 15 min" trusts the call's group (:func:`bypass_scope`), as the rules see
it: a read outside the workdir trusts ``@fs_read_outside``.
"""

from __future__ import annotations

import re
from glob import escape
from pathlib import Path
from typing import Any

from agentgram.runtime.capabilities.tools.base import Tool, ToolContext, ToolGroup
from agentgram.runtime.core.approvals.rules import Action, Rule, command_is_simple, shown_path
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.models import ToolCallRow

_PREFIX = re.compile(r"\s*\S+\s+\S+\s(?=\s*\S)")
"""The command's first two words and one whitespace character after them, when a third follows."""


def proposed_rule(call: ToolCallRow, tool: Tool[Any] | None, workdir: Path) -> Rule | None:
    """The allow rule "Always" would save, or ``None`` when no saved rule could cover this call."""
    if tool is None:
        return Rule(tool=call.name, action=Action.ALLOW, note="always")
    ctx = ToolContext(workdir=workdir)
    try:
        target = tool.target(tool.parse(call.arguments), ctx)
    except ToolError:
        target = None
    if target is None:
        pattern = None
    elif tool.group in (ToolGroup.FS_READ, ToolGroup.FS_WRITE):
        pattern = escape(shown_path(ctx.resolve(target), workdir))
    else:
        pattern = command_pattern(target)
        if pattern is None:
            return None
    return Rule(tool=call.name, path=pattern, action=Action.ALLOW, note="always")


def command_pattern(command: str) -> str | None:
    """The command's first two words, a space and ``*``; a command of one or two words exactly.

    ``None`` for a blank command or one no allow pattern may cover. The
    pattern keeps the command's own text up to the ``*`` (escaped), so it
    always matches the command it came from: ``du -sh *`` → ``du -sh *``,
    ``git  status -s`` → ``git  status *``, ``ls [ab]`` → ``ls [[]ab]``. The
    space before ``*`` keeps ``du -sh *`` from covering ``du -shx``.
    """
    if not command.strip() or not command_is_simple(command):
        return None
    head = _PREFIX.match(command)
    return escape(command) if head is None else escape(head.group()) + "*"


def bypass_scope(call: ToolCallRow, tool: Tool[Any] | None, workdir: Path) -> str:
    """What "⏱ 15 min" on this call trusts: the call's group, or the tool itself when unknown."""
    if tool is None:
        return call.name
    ctx = ToolContext(workdir=workdir)
    try:
        group = tool.call_group(tool.parse(call.arguments), ctx)
    except ToolError:
        group = tool.group
    return f"@{group.value}"


def describe(rule: Rule) -> str:
    """How a rule reads in the chat: the tool, then its path or command pattern."""
    return rule.tool if rule.path is None else f"{rule.tool} {rule.path}"
