"""The approval preview: resulting content and diff, computed without touching the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.capabilities.tools.preview import preview_change


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path)


async def test_edit_preview_diff(ctx: ToolContext, tmp_path: Path) -> None:
    path = tmp_path / "src" / "app.py"
    path.parent.mkdir()
    original = "".join(f"line{i}\n" for i in range(1, 11))
    path.write_text(original)
    got = await preview_change(
        "edit_file", {"path": "src/app.py", "old_text": "line5\n", "new_text": "five\n"}, ctx
    )
    assert got is not None
    assert got.path == str(path)
    assert not got.new_file
    assert got.old == original
    assert got.new == original.replace("line5\n", "five\n")
    assert got.diff == (
        "--- a/src/app.py\n"
        "+++ b/src/app.py\n"
        "@@ -2,7 +2,7 @@\n"
        " line2\n line3\n line4\n"
        "-line5\n"
        "+five\n"
        " line6\n line7\n line8\n"
    )
    assert path.read_text() == original  # nothing written


async def test_write_preview_new_file(ctx: ToolContext, tmp_path: Path) -> None:
    got = await preview_change("write_file", {"path": "notes/todo.md", "content": "a\nb\n"}, ctx)
    assert got is not None
    assert got.new_file
    assert got.old == ""
    assert got.diff == "--- a/notes/todo.md\n+++ b/notes/todo.md\n@@ -0,0 +1,2 @@\n+a\n+b\n"
    assert not (tmp_path / "notes").exists()


async def test_write_preview_overwrite_marks_missing_newline(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("old\n")
    got = await preview_change("write_file", {"path": str(tmp_path / "x.txt"), "content": "new"}, ctx)
    assert got is not None
    assert not got.new_file
    assert got.diff.endswith("-old\n+new\n\\ No newline at end of file\n")


async def test_edit_preview_replace_all(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\nx\n")
    args = {"path": "f.txt", "old_text": "x", "new_text": "y", "replace_all": True}
    got = await preview_change("edit_file", args, ctx)
    assert got is not None
    assert got.new == "y\ny\n"


async def test_absolute_path_outside_workdir(
    ctx: ToolContext, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("elsewhere") / "f.txt"
    got = await preview_change("write_file", {"path": str(outside), "content": "hi\n"}, ctx)
    assert got is not None
    assert got.diff.startswith(f"--- a/{str(outside).lstrip('/')}\n")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("edit_file", {"path": "f.txt", "old_text": "absent", "new_text": "y"}),  # old_text missing
        ("edit_file", {"path": "f.txt", "old_text": "x", "new_text": "y"}),  # ambiguous
        ("edit_file", {"path": "nope.txt", "old_text": "x", "new_text": "y"}),  # file missing
        ("write_file", {"path": "f.txt"}),  # invalid arguments
        ("write_file", {"path": ".", "content": "x"}),  # a directory
        ("execute_cmd", {"command": "ls"}),  # not a file change
        ("read_file", {"path": "f.txt"}),
    ],
)
async def test_no_preview(ctx: ToolContext, tmp_path: Path, tool: str, args: dict[str, object]) -> None:
    (tmp_path / "f.txt").write_text("x x\n")
    assert await preview_change(tool, args, ctx) is None


async def test_binary_file_has_no_preview(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\0\1\2")
    assert await preview_change("write_file", {"path": "b.bin", "content": "t"}, ctx) is None
