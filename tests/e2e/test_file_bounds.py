"""File tools in bounds, end to end: a read outside the workdir asks first, agentgram's secrets are
refused whatever the rules or a bypass say, and "🔁 Always" is offered only where a rule can follow.

The bot is built from a real config file (``load_config``), so it knows which file holds its token.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import prompts, tap, tool_results, wait_decided, wait_prompt
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

TOKEN_LINE = "123456:TEST-token"


def bot_from_config_file(tmp_path: Path, **sections: Any) -> AbstractAsyncContextManager[Rig]:
    """The bot as ``agentgram run`` makes it, from ``tmp_path/config.yml`` (the config file's path
    is one the file tools must refuse)."""
    return running_bot(tmp_path, config_file=True, **sections)


def labels(prompt: SentMessage) -> list[str]:
    return [text for row in prompt.buttons for text, _ in row]


def read(path: str) -> ToolCalls:
    return ToolCalls([("read_file", {"path": path})])


# --- reads outside the workdir ------------------------------------------------------------------


async def test_a_read_outside_the_workdir_asks_first(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("outside notes")
    async with bot_from_config_file(tmp_path) as rig:
        (rig.workdir / "inside.txt").write_text("inside notes")
        rig.llm.script(read("inside.txt"), Text("one"), read("../notes.txt"), Text("two"))
        rig.say("first")
        await rig.wait_turns()
        assert prompts(rig) == []  # inside the workdir: no question
        assert tool_results(rig.llm.requests[1]) == ["inside notes"]
        rig.say("second")
        prompt = await wait_prompt(rig)
        # In words, not as raw arguments (issue 25): what is read, and where it really is.
        assert f"Read a file outside the workdir: {(tmp_path / 'notes.txt').resolve()}" in prompt.visible_text
        assert "{" not in prompt.visible_text
        assert labels(prompt)[-2:] == ["⏱ 15 min", "🔁 Always"]
        tap(rig, prompt, "✅ Approve")
        await rig.wait_turns(2)
        await wait_decided(rig, prompt, "✅ Approved")
        assert tool_results(rig.llm.requests[3])[-1] == "outside notes"


async def test_an_fs_read_outside_allow_rule_lets_it_through(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("outside notes")
    rules = [{"tool": "@fs_read_outside", "action": "allow"}]
    async with bot_from_config_file(tmp_path, approval={"rules": rules}) as rig:
        rig.llm.script(
            ToolCalls([("read_file", {"path": "../notes.txt"}), ("list_dir", {"path": ".."})]), Text("ok")
        )
        rig.say("go")
        await rig.wait_turns()
        results = tool_results(rig.llm.requests[1])
        assert results[0] == "outside notes" and "notes.txt" in results[1]
        assert prompts(rig) == []


async def test_an_fs_read_outside_deny_rule_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("outside notes")
    rules = [{"tool": "@fs_read_outside", "action": "deny"}]
    async with bot_from_config_file(tmp_path, approval={"rules": rules}) as rig:
        (rig.workdir / "inside.txt").write_text("inside notes")
        rig.llm.script(
            ToolCalls([("read_file", {"path": "../notes.txt"}), ("read_file", {"path": "inside.txt"})]),
            Text("ok"),
        )
        rig.say("go")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["Tool call denied by approval policy.", "inside notes"]
        assert prompts(rig) == []


# --- secrets: refused whatever the rules say ------------------------------------------------------


def secret_calls(tmp_path: Path) -> list[tuple[str, dict[str, object], str]]:
    """Calls on secrets, each with what the model must read back."""
    config, db, home = tmp_path / "config.yml", tmp_path / "agentgram.db", tmp_path / "home"

    def refused(path: Path, why: str) -> str:
        return f"Error: access to {path} is denied: {why}"

    ours = "it holds agentgram's secrets (config file)"
    history = "it holds agentgram's secrets (database)"
    return [
        ("read_file", {"path": "../config.yml"}, refused(config, ours)),
        ("read_file", {"path": "config-link"}, refused(config, ours)),  # a symlink in the workdir
        ("read_file", {"path": str(config)}, refused(config, ours)),
        ("write_file", {"path": "../config.yml", "content": "x"}, refused(config, ours)),
        ("edit_file", {"path": "config-link", "old_text": "TEST", "new_text": "x"}, refused(config, ours)),
        ("read_file", {"path": "../agentgram.db"}, refused(db, history)),
        ("read_file", {"path": "../agentgram.db-wal"}, refused(Path(f"{db}-wal"), history)),
        ("read_file", {"path": "../agentgram.db-shm"}, refused(Path(f"{db}-shm"), history)),
        ("list_dir", {"path": "~/.ssh"}, refused(home / ".ssh", "it holds your credentials (SSH keys)")),
        (
            "read_file",
            {"path": "~/.aws/credentials"},
            refused(home / ".aws" / "credentials", "it holds your credentials (AWS)"),
        ),
    ]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for name in (".ssh", ".aws"):
        (home / name).mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = x")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.usefixtures("home")
async def test_secrets_are_refused_even_when_a_rule_allows_everything(tmp_path: Path) -> None:
    rules = [{"tool": "*", "action": "allow"}, {"tool": "@fs_read_outside", "action": "allow"}]
    async with bot_from_config_file(tmp_path, approval={"rules": rules}) as rig:
        (rig.workdir / "config-link").symlink_to(tmp_path / "config.yml")
        calls = secret_calls(tmp_path)
        rig.llm.script(ToolCalls([(name, args) for name, args, _ in calls]), Text("ok"))
        rig.say("show me the token")
        await rig.wait_turns()
        results = tool_results(rig.llm.requests[1])
        assert results == [expected for _, _, expected in calls]
        assert prompts(rig) == []
        assert TOKEN_LINE in (tmp_path / "config.yml").read_text()
        assert all(TOKEN_LINE not in str(request) for request in rig.llm.requests)


@pytest.mark.usefixtures("home")
async def test_fifteen_minutes_on_a_read_outside_never_opens_the_secrets(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    async with bot_from_config_file(tmp_path) as rig:
        rig.llm.script(
            read("../a.txt"),
            Text("one"),
            ToolCalls([("read_file", {"path": "../b.txt"}), ("read_file", {"path": "../config.yml"})]),
            Text("two"),
        )
        rig.say("first")
        tap(rig, await wait_prompt(rig), "⏱ 15 min")
        await rig.wait_turns()
        assert tool_results(rig.llm.requests[1]) == ["a"]
        rig.say("second")
        await rig.wait_turns(2)
        config = tmp_path / "config.yml"
        assert tool_results(rig.llm.requests[3])[-2:] == [
            "b",
            f"Error: access to {config} is denied: it holds agentgram's secrets (config file)",
        ]
        assert len(prompts(rig)) == 1


# --- "🔁 Always" only where a rule can follow ------------------------------------------------------


async def test_always_is_not_offered_for_a_command_no_rule_can_cover(tmp_path: Path) -> None:
    async with bot_from_config_file(tmp_path) as rig:
        rig.llm.script(
            ToolCalls([("execute_cmd", {"command": "du -sh * | sort -h | tail"})]),
            Text("one"),
            ToolCalls([("execute_cmd", {"command": "du -sh *"})]),
            Text("two"),
            ToolCalls([("execute_cmd", {"command": "du -sh *"})]),
            Text("three"),
        )
        rig.say("first")
        compound = await wait_prompt(rig)
        assert labels(compound) == ["✅ Approve", "❌ Reject", "⏱ 15 min"]
        tap(rig, compound, "✅ Approve")
        await rig.wait_turns()
        rig.say("second")
        simple = await wait_prompt(rig, 2)
        assert labels(simple)[-1] == "🔁 Always"
        tap(rig, simple, "🔁 Always")
        confirm = await rig.wait_text("without asking?")
        assert "Always allow execute_cmd du -sh * without asking?" in confirm.visible_text
        rig.tg.press_button_labeled(ALLOWED_USER, confirm.message_id, "✅ Yes")
        await rig.wait_turns(2)
        assert [r.path for r in rig.bot.runtime.parts.approval_manager.rules() if r.origin == "user"] == [
            "du -sh *"
        ]
        rig.say("third")  # the saved rule covers the very command it was saved for
        await rig.wait_turns(3)
        assert len(prompts(rig)) == 2
