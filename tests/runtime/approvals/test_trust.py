""" "🔁 Always" proposals: the narrowest rule that covers the call, and never more than it shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.approvals.rules import Action, CallFacts, matches
from runtime.approvals.trust import describe, proposed_rule
from runtime.storage.models import ToolCallRow
from runtime.tools.base import ToolGroup
from runtime.tools.builtin import default_registry

REGISTRY = default_registry()


def call_row(name: str, args: dict[str, object]) -> ToolCallRow:
    return ToolCallRow(session_id=1, history_id=1, call_id="c1", name=name, arguments=json.dumps(args))


def propose(name: str, args: dict[str, object], workdir: Path) -> tuple[str | None, str]:
    rule = proposed_rule(call_row(name, args), REGISTRY.get(name), workdir)
    assert (rule.tool, rule.action, rule.origin) == (name, Action.ALLOW, "user")
    return rule.path, describe(rule)


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("git status --short", "git status*"),
        ("git status", "git status*"),
        ("ls", "ls"),  # one word: exactly that, not `ls*` (which would cover `lsblk`)
        ("ls *.py", "ls [*].py*"),  # the call's own glob characters are literal
        ("  du   -sh  ", "du -sh*"),
    ],
)
def test_a_command_is_trusted_by_its_first_two_words(command: str, pattern: str, tmp_path: Path) -> None:
    assert propose("execute_cmd", {"command": command}, tmp_path)[0] == pattern


def test_an_empty_command_never_becomes_trust_for_every_command(tmp_path: Path) -> None:
    rule = proposed_rule(call_row("execute_cmd", {"command": ""}), REGISTRY.get("execute_cmd"), tmp_path)
    assert rule.path == ""
    other = CallFacts(tool="execute_cmd", group=ToolGroup.SHELL, source="telegram", command="rm -rf ~")
    assert not matches(rule, other)


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

    def facts(name: str) -> CallFacts:
        return CallFacts(
            tool="write_file",
            group=ToolGroup.FS_WRITE,
            source="telegram",
            path=tmp_path / name,
            workdir=tmp_path,
        )

    assert matches(rule, facts("a[1].md"))
    assert not matches(rule, facts("a1.md"))


def test_a_tool_without_a_target_is_trusted_as_a_whole(tmp_path: Path) -> None:
    rule = proposed_rule(call_row("mcp__x__y", {}), None, tmp_path)
    assert (rule.tool, rule.path, describe(rule)) == ("mcp__x__y", None, "mcp__x__y")
