"""Approval rules: which tool calls run, which ask the user, which are refused.

A rule names a tool (exact, glob such as ``mcp__github__*``, or a group
``@fs_read`` / ``@fs_read_outside`` / ``@fs_write`` / ``@shell``; a call's
group comes from :meth:`~runtime.tools.base.Tool.call_group`, so a read beyond
the workdir is ``@fs_read_outside``), optionally a path glob (matched
against the call's resolved path, relative to the workdir when the glob is
relative; for ``execute_cmd`` it is matched against the command, so
``git status*`` trusts a command prefix), optionally a session source
(config.yml's names for an interactive chat all mean ``chat``, :func:`~runtime.config.rule_source`; a terminal
chat is a chat to the rules, :func:`session_rule_source`). Rules
are sorted by priority then id; the first match wins; **no match means
require** — safe by default for tools added later. The seeded defaults have
priority :data:`DEFAULT_PRIORITY`, so any configured or saved rule is tried
before them. Paths that hold secrets are refused before any rule is read
(:class:`~runtime.tools.base.ProtectedPaths`): no rule can allow them.
"""

from __future__ import annotations

import enum
import glob
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from agentgram.runtime.capabilities.tools.base import ToolGroup
from agentgram.runtime.infra.config import rule_source
from agentgram.runtime.infra.storage.models import INTERACTIVE_SOURCES, SessionSource


class Action(enum.StrEnum):
    ALLOW = "allow"
    REQUIRE = "require"
    DENY = "deny"


@dataclass(slots=True, frozen=True)
class Rule:
    tool: str
    action: Action
    path: str | None = None
    priority: int = 100
    source: str | None = None
    note: str | None = None
    id: int = 0
    origin: str = "user"


@dataclass(slots=True, frozen=True)
class CallFacts:
    """What rules look at: the tool, its group, the resolved target, the session source."""

    tool: str
    group: ToolGroup
    source: str
    path: Path | None = None
    command: str | None = None
    workdir: Path | None = None


DEFAULT_PRIORITY = 1000
"""Seeded defaults come after every rule of yours (config or "Always", priority 100 by default)."""

SEEDED_RULES: tuple[Rule, ...] = (
    Rule(
        tool="@fs_write",
        path="memory/**",
        action=Action.ALLOW,
        priority=10,
        note="agent memory",
        origin="seed",
    ),
    # Before the read tools' own allow below: a read beyond the workdir asks.
    Rule(
        tool=f"@{ToolGroup.FS_READ_OUTSIDE}",
        action=Action.REQUIRE,
        priority=DEFAULT_PRIORITY - 1,
        note="reads outside the workdir",
        origin="seed",
    ),
    *(
        Rule(tool=name, action=Action.REQUIRE, priority=DEFAULT_PRIORITY, origin="seed")
        for name in ("execute_cmd", "write_file", "edit_file", "delete_job")  # see runtime/scheduler/tools.py
    ),
    *(
        Rule(tool=name, action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed")
        for name in (
            "read_file",
            "list_dir",
            "list_jobs",
            "schedule_job",
            "update_job",
            "execute_task",
            "send_file",
        )
    ),
    *(  # they ask the user or keep the session's own notes (runtime/questions, runtime/tools/notes.py)
        Rule(tool=name, action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed")
        for name in ("ask_user_clarification", "update_scratchpad", "write_todos")
    ),
    *(  # they only ever touch memory/ (runtime/tools/memory.py), as the memory rule above allows
        Rule(tool=name, action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed")
        for name in ("remember", "recall")
    ),
    # it only reads this chat's own past conversations (runtime/tools/history_search.py)
    Rule(tool="search_history", action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed"),
    # it only makes configured MCP servers' tools visible (runtime/mcp/activate.py); their calls still ask
    Rule(tool="activate_tools", action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed"),
    # it only reads the skills loaded at start (runtime/tools/skills.py); see also skill_read_rules
    Rule(tool="load_skill", action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed"),
    *(  # they act inside agentgram only: sessions and mail between them (runtime/core/peer_tools.py);
        # what a spawned session does with its own tools asks as usual
        Rule(tool=name, action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed")
        for name in ("spawn_session", "send_message", "list_sessions", "watch_session", "unwatch_session")
    ),
    *(  # they only observe or stop the agent's own calls (runtime/tools/calls.py)
        Rule(tool=name, action=Action.ALLOW, priority=DEFAULT_PRIORITY, origin="seed")
        for name in ("wait", "get_tool_call_status", "cancel_tool_call", "list_running_tool_calls")
    ),
)


SKILL_READ_PRIORITY = DEFAULT_PRIORITY - 2
"""Before the seeded "reads outside the workdir" rule, after every rule of yours (a deny still wins)."""


def skill_read_rules(folders: Iterable[Path], workdir: Path) -> list[Rule]:
    """Reads inside a skills folder outside the workdir run without asking (inside it, reads
    already do): ``load_skill`` points the model at the skill's other files there. Seeds, so each
    start rewrites them for the folders configured then."""
    outside = sorted({f for f in folders if workdir_relative(f, workdir) is None})
    return [
        Rule(
            tool=f"@{ToolGroup.FS_READ_OUTSIDE}",
            action=Action.ALLOW,
            path=f"{glob.escape(folder.resolve().as_posix())}/**",
            priority=SKILL_READ_PRIORITY,
            note="skills folder",
            origin="seed",
        )
        for folder in outside
    ]


def session_rule_source(source: str) -> str:
    """The rule source a session's calls match: an interactive chat's, whatever its adapter (the
    terminal's too: it asks the same user the same way), else its own."""
    return SessionSource.CHAT if source in INTERACTIVE_SOURCES else rule_source(source)


def ordered(rules: list[Rule]) -> list[Rule]:
    return sorted(rules, key=lambda r: (r.priority, r.id))


def decide(rules: list[Rule], facts: CallFacts) -> tuple[Action, Rule | None]:
    for rule in ordered(rules):
        if matches(rule, facts):
            return rule.action, rule
    return Action.REQUIRE, None


def matches(rule: Rule, facts: CallFacts) -> bool:
    if rule.source and rule_source(rule.source) != session_rule_source(facts.source):
        return False
    if not tool_matches(rule.tool, facts.tool, facts.group):
        return False
    if rule.path is None:
        return True
    if facts.path is not None:
        return path_matches(rule.path, facts.path, facts.workdir)
    if facts.command is None:
        return False
    return command_matches(rule.path, facts.command, widen=rule.action == Action.ALLOW)


def command_matches(pattern: str, command: str, *, widen: bool) -> bool:
    """Exact text, or the glob; an ``allow`` glob never covers a compound command.

    ``deny`` and ``require`` globs match compound commands too: refusing
    ``rm *`` must also refuse ``rm -rf ~; echo done``.
    """
    if command == pattern:
        return True
    if widen and not command_is_simple(command):
        return False
    return fnmatchcase(command, pattern)


_SHELL_CONTROL = set(";&|`$<>()\n\\")


def command_is_simple(command: str) -> bool:
    """No chaining, pipes, redirection or substitution: a prefix rule may cover it."""
    return not any(ch in _SHELL_CONTROL for ch in command)


def tool_matches(pattern: str, tool: str, group: ToolGroup) -> bool:
    if pattern.startswith("@"):
        return pattern[1:] == group.value
    return fnmatchcase(tool, pattern)


def path_matches(pattern: str, path: Path, workdir: Path | None) -> bool:
    """Glob match where ``**`` spans directories; relative globs are workdir-relative."""
    if PurePosixPath(pattern).is_absolute():
        target = path.resolve().as_posix()
    else:
        inside = workdir_relative(path, workdir) if workdir is not None else None
        if inside is None:
            return False  # outside the workdir: a relative rule never matches
        target = inside
    return fnmatchcase(target, pattern) or (pattern.endswith("/**") and target.startswith(pattern[:-3] + "/"))


def workdir_relative(path: Path, workdir: Path) -> str | None:
    """``path`` relative to the workdir once both are resolved, or ``None`` when outside it."""
    try:
        return path.resolve().relative_to(workdir.resolve()).as_posix()
    except ValueError:
        return None


def shown_path(path: Path, workdir: Path) -> str:
    """How a path reads in prompts and saved rules: workdir-relative inside it, else absolute."""
    return workdir_relative(path, workdir) or path.resolve().as_posix()
