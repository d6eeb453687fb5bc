"""File tools stay in bounds: their group says whether a read leaves the workdir, and agentgram's
secrets and the user's credentials are refused to every file tool, however the path is spelled."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.tools.base import Tool, ToolContext, ToolGroup
from agentgram.runtime.capabilities.tools.files import EditFile, ListDir, ReadFile, WriteFile, secret_paths
from agentgram.runtime.infra.errors import ToolError


@dataclass
class Layout:
    root: Path
    workdir: Path
    home: Path
    config: Path
    database: Path
    ctx: ToolContext


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    home = tmp_path / "home"
    for name in (".ssh", ".aws", ".config/gcloud"):
        (home / name).mkdir(parents=True)
        (home / name / "key").write_text("secret")
    monkeypatch.setenv("HOME", str(home))
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    config = tmp_path / "config.yml"
    config.write_text("telegram: {token: 123:abc}\n")
    database = tmp_path / "data" / "agentgram.db"
    database.parent.mkdir()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").write_text("rows")
    ctx = ToolContext(workdir=workdir, protected=secret_paths(config, database))
    return Layout(tmp_path, workdir, home, config, database, ctx)


async def run(tool: Tool[Any], ctx: ToolContext, **raw: object) -> str:
    args = tool.parse(raw)
    tool.guard(args, ctx)
    return await tool.execute(args, ctx)


def calls(path: str) -> list[tuple[Tool[Any], dict[str, object]]]:
    return [
        (ReadFile(), {"path": path}),
        (ListDir(), {"path": path}),
        (WriteFile(), {"path": path, "content": "pwned"}),
        (EditFile(), {"path": path, "old_text": "secret", "new_text": "pwned"}),
    ]


SECRETS = [
    ("../config.yml", "it holds agentgram's secrets (config file)"),
    ("../data/agentgram.db", "it holds agentgram's secrets (database)"),
    ("../data/agentgram.db-wal", "it holds agentgram's secrets (database)"),
    ("../data/agentgram.db-shm", "it holds agentgram's secrets (database)"),
    ("~/.ssh", "it holds your credentials (SSH keys)"),
    ("~/.ssh/key", "it holds your credentials (SSH keys)"),
    ("~/.ssh/new_key", "it holds your credentials (SSH keys)"),
    ("~/.aws/key", "it holds your credentials (AWS)"),
    ("~/.config/gcloud/key", "it holds your credentials (Google Cloud)"),
]


def unchanged(layout: Layout) -> None:
    assert layout.config.read_text() == "telegram: {token: 123:abc}\n"
    assert (layout.home / ".ssh" / "key").read_text() == "secret"
    assert not (layout.home / ".ssh" / "new_key").exists()


@pytest.mark.parametrize(("path", "why"), SECRETS)
async def test_every_file_tool_refuses_a_protected_path(layout: Layout, path: str, why: str) -> None:
    resolved = layout.ctx.resolve(path)
    for tool, raw in calls(path):
        with pytest.raises(ToolError) as refused:
            await run(tool, layout.ctx, **raw)
        assert str(refused.value) == f"access to {resolved} is denied: {why}", tool.name
    unchanged(layout)


@pytest.mark.parametrize(("path", "why"), SECRETS)
async def test_execute_refuses_too_even_when_nothing_was_guarded(layout: Layout, path: str, why: str) -> None:
    """The gate calls ``guard`` first; ``execute`` checks again, so an approval never opens the door."""
    for tool, raw in calls(path):
        with pytest.raises(ToolError, match="is denied: it holds"):
            await tool.execute(tool.parse(raw), layout.ctx)
    unchanged(layout)


@pytest.mark.parametrize(
    "spelling",
    [
        "{root}/config.yml",
        "{root}/workspace/../config.yml",
        "./../workspace/../config.yml",
        "link-to-config",  # a symlink in the workdir
        "link-to-root/config.yml",  # through a symlinked directory
        "hard-link",  # another name for the same file
        "{home}/../home/.ssh/key",
        "link-to-ssh/key",
    ],
)
async def test_symlinks_dot_dot_and_hard_links_do_not_get_round_it(layout: Layout, spelling: str) -> None:
    (layout.workdir / "link-to-config").symlink_to(layout.config)
    (layout.workdir / "link-to-root").symlink_to(layout.root)
    (layout.workdir / "link-to-ssh").symlink_to(layout.home / ".ssh")
    os.link(layout.config, layout.workdir / "hard-link")
    path = spelling.format(root=layout.root, home=layout.home)
    for tool, raw in calls(path):
        with pytest.raises(ToolError, match="is denied: it holds"):
            await run(tool, layout.ctx, **raw)
    unchanged(layout)


async def test_other_files_next_to_the_secrets_are_not_refused(layout: Layout) -> None:
    (layout.root / "config.yml.bak").write_text("old")
    (layout.home / ".sshrc").write_text("rc")
    assert await run(ReadFile(), layout.ctx, path="../config.yml.bak") == "old"
    assert await run(ReadFile(), layout.ctx, path="~/.sshrc") == "rc"
    assert "agentgram.db" in await run(ListDir(), layout.ctx, path="../data")  # listing names is fine
    assert "Wrote" in await run(WriteFile(), layout.ctx, path="notes.md", content="hi")


async def test_without_protected_paths_nothing_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.yml").write_text("x")
    assert await run(ReadFile(), ToolContext(workdir=tmp_path), path="config.yml") == "x"


# --- the group a read has ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("notes.md", ToolGroup.FS_READ),
        (".", ToolGroup.FS_READ),
        ("sub/../notes.md", ToolGroup.FS_READ),
        ("{workdir}/notes.md", ToolGroup.FS_READ),
        ("..", ToolGroup.FS_READ_OUTSIDE),
        ("../config.yml.bak", ToolGroup.FS_READ_OUTSIDE),
        ("/etc/hostname", ToolGroup.FS_READ_OUTSIDE),
        ("~/notes.md", ToolGroup.FS_READ_OUTSIDE),
        ("escape/notes.md", ToolGroup.FS_READ_OUTSIDE),  # a symlink out of the workdir
        ("{workdir}-evil/notes.md", ToolGroup.FS_READ_OUTSIDE),  # a sibling sharing the prefix
    ],
)
def test_a_read_outside_the_workdir_is_in_its_own_group(layout: Layout, path: str, group: ToolGroup) -> None:
    (layout.workdir / "escape").symlink_to(layout.root)
    shown = path.format(workdir=layout.workdir)
    for tool in (ReadFile(), ListDir()):
        assert tool.call_group(tool.parse({"path": shown}), layout.ctx) == group


def test_writes_keep_their_group_wherever_they_go(layout: Layout) -> None:
    for path in ("notes.md", "../elsewhere.md"):
        write = WriteFile()
        assert write.call_group(write.parse({"path": path, "content": ""}), layout.ctx) == ToolGroup.FS_WRITE
