"""read_file, list_dir, write_file, edit_file and the built-in registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentgram.runtime.capabilities.tools.base import ToolContext, ToolGroup
from agentgram.runtime.capabilities.tools.builtin import builtin_tools, default_registry
from agentgram.runtime.capabilities.tools.files import (
    LIST_LIMIT,
    READ_LIMIT_BYTES,
    EditFile,
    ListDir,
    ReadFile,
    WriteFile,
)
from agentgram.runtime.infra.errors import ToolError


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path)


async def read(ctx: ToolContext, **raw: object) -> str:
    tool = ReadFile()
    return await tool.execute(tool.parse(raw), ctx)


async def listing(ctx: ToolContext, **raw: object) -> str:
    tool = ListDir()
    return await tool.execute(tool.parse(raw), ctx)


async def write(ctx: ToolContext, **raw: object) -> str:
    tool = WriteFile()
    return await tool.execute(tool.parse(raw), ctx)


async def edit(ctx: ToolContext, **raw: object) -> str:
    tool = EditFile()
    return await tool.execute(tool.parse(raw), ctx)


# --- read_file -------------------------------------------------------------------


async def test_read_relative_and_absolute(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("héllo\nworld\n")
    assert await read(ctx, path="sub/a.txt") == "héllo\nworld\n"
    assert await read(ctx, path=str(tmp_path / "sub" / "a.txt")) == "héllo\nworld\n"


async def test_read_offset_and_limit(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert await read(ctx, path="n.txt", offset=3, limit=2) == "line 3\nline 4\n"
    assert await read(ctx, path="n.txt", offset=10) == "line 10\n"
    assert await read(ctx, path="n.txt", limit=1) == "line 1\n"


async def test_read_offset_past_end(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("a\nb\n")
    with pytest.raises(ToolError, match=r"offset 5 is past the end of .*n\.txt \(2 lines\)"):
        await read(ctx, path="n.txt", offset=5)


async def test_read_empty_file(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "e.txt").write_text("")
    assert "is empty" in await read(ctx, path="e.txt")


async def test_read_missing_file(ctx: ToolContext, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=re.escape(f"file not found: {tmp_path / 'nope.txt'}")):
        await read(ctx, path="nope.txt")


async def test_read_directory(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory, not a file; use list_dir"):
        await read(ctx, path="d")


async def test_read_binary_file(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolError, match="is a binary file"):
        await read(ctx, path="b.bin")


async def test_read_too_large_is_cut_with_how_to_continue(ctx: ToolContext, tmp_path: Path) -> None:
    line = "x" * 99 + "\n"  # 100 bytes a line
    (tmp_path / "big.txt").write_text(line * 3000)
    out = await read(ctx, path="big.txt")
    shown = READ_LIMIT_BYTES // 100
    assert out.startswith(line)
    assert out.count(line) == shown
    assert out.endswith(f"[output cut at 100 KB after line {shown}; read further with offset={shown + 1}]")
    # Following the note continues exactly where the cut was.
    rest = await read(ctx, path="big.txt", offset=shown + 1)
    assert rest.count(line) == shown


async def test_read_single_huge_line(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("a" * (READ_LIMIT_BYTES * 2) + "\nnext\n")
    out = await read(ctx, path="min.js")
    assert out.startswith("a" * READ_LIMIT_BYTES)
    assert "line 1 is longer than 100 KB" in out
    assert "offset=2" in out


# --- write_file ------------------------------------------------------------------


async def test_write_creates_parents_and_counts_bytes(ctx: ToolContext, tmp_path: Path) -> None:
    out = await write(ctx, path="a/b/c.txt", content="héllo\n")
    target = tmp_path / "a" / "b" / "c.txt"
    assert out == f"Wrote 7 bytes to {target} (created)"
    assert target.read_text() == "héllo\n"


async def test_write_overwrites_absolute_path(ctx: ToolContext, tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    target.write_text("old")
    out = await write(ctx, path=str(target), content="new")
    assert out == f"Wrote 3 bytes to {target} (overwritten)"
    assert target.read_text() == "new"


async def test_write_keeps_newlines_verbatim(ctx: ToolContext, tmp_path: Path) -> None:
    await write(ctx, path="crlf.txt", content="a\r\nb\n")
    assert (tmp_path / "crlf.txt").read_bytes() == b"a\r\nb\n"


async def test_write_onto_directory(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await write(ctx, path="d", content="x")


# --- edit_file -------------------------------------------------------------------


async def test_edit_replaces_once(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("a = 1\nb = 2\n")
    out = await edit(ctx, path="f.py", old_text="b = 2", new_text="b = 3")
    assert out == f"Edited {tmp_path / 'f.py'}: replaced 1 occurrence"
    assert (tmp_path / "f.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_old_text_not_found(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("a = 1\n")
    with pytest.raises(ToolError, match=re.escape(f"old_text not found in {tmp_path / 'f.py'}") + "$"):
        await edit(ctx, path="f.py", old_text="zzz", new_text="y")


async def test_edit_ambiguous_then_replace_all(ctx: ToolContext, tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x x x\n")
    with pytest.raises(ToolError) as err:
        await edit(ctx, path="f.txt", old_text="x", new_text="y")
    assert str(err.value) == f"old_text occurs 3 times in {path}; add surrounding context or set replace_all"
    assert path.read_text() == "x x x\n"
    out = await edit(ctx, path="f.txt", old_text="x", new_text="y", replace_all=True)
    assert out.endswith("replaced 3 occurrences")
    assert path.read_text() == "y y y\n"


async def test_edit_missing_file(ctx: ToolContext, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="file not found"):
        await edit(ctx, path="gone.txt", old_text="a", new_text="b")


async def test_edit_empty_old_text(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a")
    with pytest.raises(ToolError, match="old_text must not be empty"):
        await edit(ctx, path="f.txt", old_text="", new_text="b")


async def test_edit_crlf_file_matches_plain_newlines(ctx: ToolContext, tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await edit(ctx, path="w.txt", old_text="one\ntwo", new_text="1\n2")
    assert path.read_bytes() == b"1\r\n2\r\nthree\r\n"


# --- list_dir --------------------------------------------------------------------


async def test_list_sorted_with_dirs_and_sizes(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("12345")
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "c.bin").write_bytes(b"\0" * 2048)
    (tmp_path / ".hidden").write_text("h")
    out = await listing(ctx)
    assert out.splitlines() == [
        "a_dir/",
        "b.txt  5 B",
        "c.bin  2.0 KB",
        "(1 hidden entries not shown; pass all=true to include them)",
    ]
    assert (await listing(ctx, all=True)).splitlines()[0] == ".hidden  1 B"


async def test_list_relative_and_absolute(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("")
    assert await listing(ctx, path="sub") == "f  0 B"
    assert await listing(ctx, path=str(tmp_path / "sub")) == "f  0 B"


async def test_list_empty_missing_and_file(ctx: ToolContext, tmp_path: Path) -> None:
    assert await listing(ctx) == "(empty directory)"
    with pytest.raises(ToolError, match="directory not found"):
        await listing(ctx, path="nope")
    (tmp_path / "f").write_text("")
    with pytest.raises(ToolError, match="is a file, not a directory; use read_file"):
        await listing(ctx, path="f")


async def test_list_caps_entries(ctx: ToolContext, tmp_path: Path) -> None:
    for i in range(LIST_LIMIT + 7):
        (tmp_path / f"f{i:04d}").write_text("")
    lines = (await listing(ctx)).splitlines()
    assert len(lines) == LIST_LIMIT + 1
    assert lines[0] == "f0000  0 B"
    assert lines[-1].startswith("[... 7 more entries not shown")


# --- targets and registry ----------------------------------------------------------


def test_targets_are_resolved_paths(ctx: ToolContext, tmp_path: Path) -> None:
    tool = ReadFile()
    assert tool.target(tool.parse({"path": "a/../b.txt"}), ctx) == str(tmp_path / "b.txt")
    lister = ListDir()
    assert lister.target(lister.parse({}), ctx) == str(tmp_path)


def test_builtin_order_groups_and_schemas() -> None:
    registry = default_registry()
    assert registry.names() == ["read_file", "list_dir", "write_file", "edit_file", "execute_cmd"]
    groups = {tool.name: tool.group for tool in builtin_tools()}
    assert groups == {
        "read_file": ToolGroup.FS_READ,
        "list_dir": ToolGroup.FS_READ,
        "write_file": ToolGroup.FS_WRITE,
        "edit_file": ToolGroup.FS_WRITE,
        "execute_cmd": ToolGroup.SHELL,
    }
    for spec in registry.specs():
        assert spec.description
        for name, prop in spec.parameters["properties"].items():
            assert prop.get("description"), f"{spec.name}.{name} has no description"


def test_unknown_argument_is_rejected() -> None:
    with pytest.raises(ToolError, match="invalid arguments"):
        ReadFile().parse({"path": "a", "bogus": 1})


def test_writes_are_atomic_and_keep_permissions(tmp_path: Path) -> None:
    from agentgram.runtime.capabilities.tools.files import atomic_write

    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o750)
    atomic_write(target, b"new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["script.sh"], "no temporary file is left behind"
