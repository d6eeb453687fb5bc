""" "🔁 Always" proposals: the narrowest rule that covers the call, never more than it shows, and none
at all for a call no saved rule could cover; "⏱ 15 min" scopes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgram.runtime.capabilities.tools.base import ToolContext, ToolGroup
from agentgram.runtime.capabilities.tools.builtin import default_registry
from agentgram.runtime.core.approvals.rules import (
    SEEDED_RULES,
    Action,
    CallFacts,
    command_is_simple,
    decide,
    matches,
)
from agentgram.runtime.core.approvals.trust import bypass_scope, describe, proposed_rule
from agentgram.runtime.core.turn.gate import approval_details, call_facts
from agentgram.runtime.infra.storage.models import ToolCallRow

REGISTRY = default_registry()
SHELL = REGISTRY.get("execute_cmd")
assert SHELL is not None


def call_row(name: str, args: dict[str, object]) -> ToolCallRow:
    return ToolCallRow(session_id=1, history_id=1, call_id="c1", name=name, arguments=json.dumps(args))


def propose(name: str, args: dict[str, object], workdir: Path) -> tuple[str | None, str]:
    rule = proposed_rule(call_row(name, args), REGISTRY.get(name), workdir)
    assert rule is not None
    assert (rule.tool, rule.action, rule.origin) == (name, Action.ALLOW, "user")
    return rule.path, describe(rule)


def shell_facts(command: str, workdir: Path) -> CallFacts:
    """What the gate hands the rules for this command (the real ``call_facts``)."""
    assert SHELL is not None
    return call_facts(SHELL, SHELL.parse({"command": command}), ToolContext(workdir=workdir))


# --- commands -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("git status --short", "git status *"),  # the space: `git statusx` is another command
        ("git status", "git status"),  # two words: exactly that
        ("ls", "ls"),  # one word: exactly that, not `ls*` (which would cover `lsblk`)
        ("ls *.py", "ls [*].py"),  # the call's own glob characters are literal
        ("du -sh *", "du -sh *"),  # not `du -sh*`, which covered `du -shx` and read as a typo
        ("du -sh * .cache", "du -sh *"),
        ("git  status\t-s", "git  status\t*"),  # the command's own whitespace, so it matches
        ("  du   -sh  ", "  du   -sh  "),
    ],
)
def test_a_command_is_trusted_by_its_first_two_words(command: str, pattern: str, tmp_path: Path) -> None:
    assert propose("execute_cmd", {"command": command}, tmp_path)[0] == pattern


@pytest.mark.parametrize(
    "command",
    [
        "du -sh * | sort -h | tail",
        "git status; rm -rf ~",
        "echo $HOME",
        "ls > out",
        "(cd x)",
        "a && b",
        "",
        "  ",
    ],
)
def test_no_rule_is_proposed_for_a_command_no_allow_pattern_covers(command: str, tmp_path: Path) -> None:
    assert proposed_rule(call_row("execute_cmd", {"command": command}), SHELL, tmp_path) is None


def test_du_sh_star_once_trusted_is_not_asked_again(tmp_path: Path) -> None:
    """Regression: "Always" on `du -sh *` saved `du -sh*`; the command it was saved for must match."""
    rule = proposed_rule(call_row("execute_cmd", {"command": "du -sh *"}), SHELL, tmp_path)
    assert rule is not None
    assert matches(rule, shell_facts("du -sh *", tmp_path))
    assert matches(rule, shell_facts("du -sh docs", tmp_path))
    assert not matches(rule, shell_facts("du -shx", tmp_path))
    assert not matches(rule, shell_facts("du -sh * | sort -h", tmp_path))


_SHELLISH = st.text(alphabet=st.sampled_from(list("ab-_./~*?[]!^ \t;|&$<>()`\\\n'\"=#é")), max_size=24)
COMMANDS = st.one_of(st.text(max_size=24), _SHELLISH, st.lists(_SHELLISH, max_size=5).map(" ".join))


@settings(max_examples=300, deadline=None)
@given(command=COMMANDS)
def test_whenever_always_is_offered_the_rule_it_saves_stops_the_asking(command: str) -> None:
    """Offered ⇒ the rule it saves matches that very command and the rules then allow it without
    asking (never anything chained onto it); not offered ⇒ no allow pattern could ever cover it."""
    workdir = Path("/srv/agent/workspace")
    assert SHELL is not None
    call = call_row("execute_cmd", {"command": command})
    offered = asyncio.run(approval_details(call, ToolContext(workdir=workdir), SHELL)).can_always
    rule = proposed_rule(call, SHELL, workdir)
    assert offered == (rule is not None)
    facts = shell_facts(command, workdir)
    if rule is None:
        assert not command.strip() or not command_is_simple(command)
        return
    assert matches(rule, facts)
    stored = [replace(r, id=i) for i, r in enumerate((*SEEDED_RULES, rule), start=1)]
    assert decide(stored, facts)[0] == Action.ALLOW
    assert not matches(rule, shell_facts(command + "; rm -rf ~", workdir))


# --- files and other tools ----------------------------------------------------------------------


def test_a_file_is_trusted_exactly_relative_to_the_workdir(tmp_path: Path) -> None:
    path, shown = propose("write_file", {"path": "notes/todo.md", "content": "x"}, tmp_path)
    assert (path, shown) == ("notes/todo.md", "write_file notes/todo.md")
    assert propose("edit_file", {"path": "/etc/hosts", "old_text": "a", "new_text": "b"}, tmp_path)[0] == (
        "/etc/hosts"
    )
    assert propose("write_file", {"path": "data[1].csv", "content": ""}, tmp_path)[0] == "data[[]1].csv"


def test_the_proposed_file_rule_covers_that_file_and_no_other(tmp_path: Path) -> None:
    rule = proposed_rule(
        call_row("write_file", {"path": "a[1].md", "content": ""}), REGISTRY.get("write_file"), tmp_path
    )
    assert rule is not None

    def facts(name: str) -> CallFacts:
        return CallFacts(
            tool="write_file",
            group=ToolGroup.FS_WRITE,
            source="chat",
            path=tmp_path / name,
            workdir=tmp_path,
        )

    assert matches(rule, facts("a[1].md"))
    assert not matches(rule, facts("a1.md"))


def test_a_read_outside_the_workdir_is_trusted_by_its_absolute_path(tmp_path: Path) -> None:
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    path, shown = propose("read_file", {"path": "../notes.txt"}, workdir)
    assert (path, shown) == (str(tmp_path / "notes.txt"), f"read_file {tmp_path / 'notes.txt'}")


def test_a_tool_without_a_target_is_trusted_as_a_whole(tmp_path: Path) -> None:
    rule = proposed_rule(call_row("mcp__x__y", {}), None, tmp_path)
    assert rule is not None
    assert (rule.tool, rule.path, describe(rule)) == ("mcp__x__y", None, "mcp__x__y")


# --- ⏱ 15 min -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "scope"),
    [
        ("read_file", {"path": "notes.md"}, "@fs_read"),
        ("read_file", {"path": "../config.yml"}, "@fs_read_outside"),
        ("list_dir", {"path": "/etc"}, "@fs_read_outside"),
        ("write_file", {"path": "../x", "content": ""}, "@fs_write"),
        ("execute_cmd", {"command": "ls | wc"}, "@shell"),
        ("mcp__x__y", {}, "mcp__x__y"),
    ],
)
def test_fifteen_minutes_trusts_the_group_the_rules_see(
    name: str, args: dict[str, object], scope: str, tmp_path: Path
) -> None:
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    assert bypass_scope(call_row(name, args), REGISTRY.get(name), workdir) == scope
