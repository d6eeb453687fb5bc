"""File tools: ``read_file``, ``list_dir``, ``write_file``, ``edit_file``.

Paths resolve against the agent's workdir (absolute paths stay as given); the
resolved path is each tool's approval ``target``, and decides the read tools'
group: ``@fs_read`` inside the workdir, ``@fs_read_outside`` beyond it (which
asks by default). agentgram's own secrets and the user's credential
directories (:func:`secret_paths`) are refused to every file tool, whatever
the rules say. Every failure the model can
fix (missing file, binary file, ambiguous edit) is a :class:`ToolError` with a
message that says what to do next. Blocking file I/O runs in a thread so a
slow disk never stalls the event loop.

:func:`apply_edit` is the one place the edit rule lives: ``edit_file`` and the
approval preview (:mod:`runtime.tools.preview`) both call it.

``write_file`` and ``edit_file`` write inside ``ctx.checkpoints.change``: the turn's checkpoint
keeps the file's prior state first (``/rollback``, :mod:`runtime.capabilities.checkpoints`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import ProtectedPaths, Tool, ToolArgs, ToolContext, ToolGroup
from agentgram.runtime.infra.errors import ToolError

READ_LIMIT_BYTES = 100 * 1024
LIST_LIMIT = 500
_SNIFF_BYTES = 8192

_AGENTGRAM_SECRETS = "it holds agentgram's secrets"
_CREDENTIALS = {
    ".ssh": "it holds your credentials (SSH keys)",
    ".aws": "it holds your credentials (AWS)",
    ".config/gcloud": "it holds your credentials (Google Cloud)",
}


def secret_paths(config_file: Path | None, database_file: Path | None) -> ProtectedPaths:
    """What no file tool may read, list, write or edit: the config file (bot token, API key), the
    database with its journal files (the whole chat history), and ``~/.ssh``, ``~/.aws``,
    ``~/.config/gcloud``."""
    reasons: dict[Path, str] = {Path.home() / name: why for name, why in _CREDENTIALS.items()}
    if config_file is not None:
        reasons[config_file] = f"{_AGENTGRAM_SECRETS} (config file)"
    if database_file is not None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            reasons[database_file.with_name(database_file.name + suffix)] = f"{_AGENTGRAM_SECRETS} (database)"
    return ProtectedPaths.of(reasons)


# --- shared helpers ------------------------------------------------------------


def human_size(size: int) -> str:
    """``532 B``, ``1.2 KB``, ``3.4 MB`` — short enough for a listing."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _looks_binary(head: bytes) -> bool:
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sniff window is still text.
        return exc.start < len(head) - 3
    return False


def read_text(path: Path) -> str:
    """Read a whole UTF-8 text file (newlines kept as stored) or raise :class:`ToolError`."""
    if not path.exists():
        raise ToolError(f"file not found: {path}")
    if path.is_dir():
        raise ToolError(f"{path} is a directory, not a file; use list_dir")
    data = path.read_bytes()
    if _looks_binary(data[:_SNIFF_BYTES]):
        raise ToolError(f"{path} is a binary file, not UTF-8 text")
    return data.decode("utf-8", errors="replace")


def apply_edit(text: str, old: str, new: str, *, replace_all: bool, path: Path) -> tuple[str, int]:
    """Return ``(new_text, replacements)`` or raise the :class:`ToolError` the model reads.

    Files stored with CRLF line endings still match an ``old_text`` written
    with plain ``\\n`` (the model rarely reproduces ``\\r``); the replacement
    then keeps the file's CRLF style.
    """
    if not old:
        raise ToolError("old_text must not be empty; use write_file to create or replace a whole file")
    if old == new:
        raise ToolError("old_text and new_text are identical; nothing to change")
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(f"old_text not found in {path}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_text occurs {count} times in {path}; add surrounding context or set replace_all"
        )
    return text.replace(old, new), count


# --- read_file -----------------------------------------------------------------


class _PathArgs(ToolArgs):
    path: str


PathArgsT = TypeVar("PathArgsT", bound=_PathArgs)


class _PathTool(Tool[PathArgsT]):
    """A file tool: approval rules match its resolved ``path`` argument; protected paths are refused."""

    def target(self, args: PathArgsT, ctx: ToolContext) -> str:
        return str(ctx.resolve(args.path))

    def guard(self, args: PathArgsT, ctx: ToolContext) -> None:
        self.path(args, ctx)

    def path(self, args: PathArgsT, ctx: ToolContext) -> Path:
        """The resolved path, once it is known not to be protected."""
        path = ctx.resolve(args.path)
        ctx.protected.check(path)
        return path


class _ReadTool(_PathTool[PathArgsT]):
    """Reads inside the workdir are ``@fs_read``; anywhere else ``@fs_read_outside``."""

    group = ToolGroup.FS_READ
    idempotent = True

    def call_group(self, args: PathArgsT, ctx: ToolContext) -> ToolGroup:
        inside = ctx.inside_workdir(ctx.resolve(args.path))
        return ToolGroup.FS_READ if inside else ToolGroup.FS_READ_OUTSIDE

    def reads(self, args: PathArgsT, ctx: ToolContext) -> Path:
        return ctx.resolve(args.path)


class ReadFileArgs(_PathArgs):
    path: str = Field(description="File to read, relative to the working directory or absolute.")
    offset: int | None = Field(
        default=None, ge=1, description="First line to return (1-based). Default: the first line."
    )
    limit: int | None = Field(default=None, ge=1, description="How many lines to return. Default: all.")


@dataclass(slots=True)
class _Slice:
    text: str
    first: int
    last: int  # last line included, whole or partly
    cut_mid_line: bool  # output stopped inside line ``last``
    capped: bool  # stopped at READ_LIMIT_BYTES
    past_end: bool  # offset beyond the last line
    total_lines: int | None  # known only when the whole file was scanned


def _read_slice(path: Path, offset: int, limit: int | None) -> _Slice:
    if not path.exists():
        raise ToolError(f"file not found: {path}")
    if path.is_dir():
        raise ToolError(f"{path} is a directory, not a file; use list_dir")
    chunks: list[bytes] = []
    size = 0
    lineno = 0
    with path.open("rb") as fh:
        if _looks_binary(fh.read(_SNIFF_BYTES)):
            raise ToolError(f"{path} is a binary file, not UTF-8 text; it cannot be shown")
        fh.seek(0)
        for lineno, line in enumerate(fh, start=1):
            if lineno < offset:
                continue
            if limit is not None and lineno >= offset + limit:
                return _Slice(_decode(chunks), offset, lineno - 1, False, False, False, None)
            if size + len(line) > READ_LIMIT_BYTES:
                mid = not chunks
                if mid:  # one line longer than the whole budget: show its head
                    chunks.append(line[:READ_LIMIT_BYTES])
                last = lineno if mid else lineno - 1
                return _Slice(_decode(chunks), offset, last, mid, True, False, None)
            chunks.append(line)
            size += len(line)
    if lineno < offset and not (lineno == 0 and offset == 1):
        return _Slice("", offset, lineno, False, False, True, lineno)
    return _Slice(_decode(chunks), offset, lineno, False, False, False, lineno)


def _decode(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", errors="replace")


class ReadFile(_ReadTool[ReadFileArgs]):
    name = "read_file"
    description = (
        "Read a UTF-8 text file. Returns its content; use offset/limit (lines) for large files. "
        f"Output stops at {READ_LIMIT_BYTES // 1024} KB with a note saying where to continue."
    )
    Args = ReadFileArgs

    async def execute(self, args: ReadFileArgs, ctx: ToolContext) -> str:
        path = self.path(args, ctx)
        got = await asyncio.to_thread(_read_slice, path, args.offset or 1, args.limit)
        if got.past_end:
            raise ToolError(f"offset {got.first} is past the end of {path} ({got.total_lines} lines)")
        if got.total_lines == 0:
            return f"({path} is empty)"
        if not got.capped:
            return got.text
        if got.cut_mid_line:
            note = (
                f"[line {got.last} is longer than {READ_LIMIT_BYTES // 1024} KB; only its start is shown. "
                f"Continue with offset={got.last + 1}, or use execute_cmd (e.g. cut, head -c) for this line]"
            )
        else:
            note = (
                f"[output cut at {READ_LIMIT_BYTES // 1024} KB after line {got.last}; "
                f"read further with offset={got.last + 1}]"
            )
        return f"{got.text.rstrip(chr(10))}\n{note}"


# --- list_dir ------------------------------------------------------------------


class ListDirArgs(_PathArgs):
    path: str = Field(
        default=".", description="Directory to list, relative to the working directory or absolute."
    )
    all: bool = Field(default=False, description="Include hidden entries (names starting with '.').")


def _entry_line(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_dir():
            return f"{entry.name}/"
        return f"{entry.name}  {human_size(entry.stat().st_size)}"
    except OSError:
        return f"{entry.name}  (broken link)" if entry.is_symlink() else f"{entry.name}  (unreadable)"


def _list(path: Path, show_hidden: bool) -> str:
    if not path.exists():
        raise ToolError(f"directory not found: {path}")
    if not path.is_dir():
        raise ToolError(f"{path} is a file, not a directory; use read_file")
    with os.scandir(path) as it:
        entries = sorted(it, key=lambda e: e.name)
    hidden = sum(e.name.startswith(".") for e in entries)
    if not show_hidden:
        entries = [e for e in entries if not e.name.startswith(".")]
    lines = [_entry_line(e) for e in entries[:LIST_LIMIT]]
    if not entries:
        lines.append("(empty directory)")
    if len(entries) > LIST_LIMIT:
        lines.append(
            f"[... {len(entries) - LIST_LIMIT} more entries not shown; list a subdirectory or use execute_cmd]"
        )
    if hidden and not show_hidden:
        lines.append(f"({hidden} hidden entries not shown; pass all=true to include them)")
    return "\n".join(lines)


class ListDir(_ReadTool[ListDirArgs]):
    name = "list_dir"
    description = (
        "List a directory: entries sorted by name, directories end with '/', files show their size. "
        f"Hidden entries only with all=true; at most {LIST_LIMIT} entries."
    )
    Args = ListDirArgs

    async def execute(self, args: ListDirArgs, ctx: ToolContext) -> str:
        return await asyncio.to_thread(_list, self.path(args, ctx), args.all)


# --- write_file ----------------------------------------------------------------


class WriteFileArgs(_PathArgs):
    path: str = Field(description="File to write, relative to the working directory or absolute.")
    content: str = Field(description="The complete new content of the file (UTF-8).")


def _write(path: Path, content: str) -> str:
    if path.is_dir():
        raise ToolError(f"{path} is a directory; give a file path")
    existed = path.exists()
    data = content.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    atomic_write(path, data)
    return f"Wrote {len(data)} bytes to {path} ({'overwritten' if existed else 'created'})"


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and a rename: a crash leaves the old file or the new, never half.

    The file's permission bits are kept when it is replaced; a new file gets what the process's
    umask gives it (``0644`` under the usual ``022``), as any program's would — a script the agent
    writes for the user is the user's file. (``tempfile.mkstemp`` would make it ``0600``.) Only
    agentgram's own files (the database, the config ``init`` writes) are private.
    """
    try:
        mode = path.stat().st_mode & 0o7777 if path.exists() else None
        fd, temp = _temp_beside(path)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if mode is not None:
                os.chmod(temp, mode)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None


def _temp_beside(path: Path) -> tuple[int, Path]:
    """A new hidden file next to ``path``, opened for writing with mode ``0666`` less the umask
    (the kernel applies the umask: no process-wide ``os.umask`` round trip, which would race)."""
    for _ in range(100):
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


class WriteFile(_PathTool[WriteFileArgs]):
    name = "write_file"
    description = (
        "Create or overwrite a file with the given content; missing parent directories are created. "
        "Prefer edit_file for changing part of an existing file."
    )
    group = ToolGroup.FS_WRITE
    Args = WriteFileArgs

    async def execute(self, args: WriteFileArgs, ctx: ToolContext) -> str:
        path = self.path(args, ctx)
        async with ctx.checkpoints.change(path):
            return await asyncio.to_thread(_write, path, args.content)


# --- edit_file -----------------------------------------------------------------


class EditFileArgs(_PathArgs):
    path: str = Field(description="File to edit, relative to the working directory or absolute.")
    old_text: str = Field(
        description="Exact text to replace, including whitespace; must occur exactly once unless replace_all."
    )
    new_text: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence of old_text.")


def _edit(path: Path, args: EditFileArgs) -> str:
    text = read_text(path)
    updated, count = apply_edit(text, args.old_text, args.new_text, replace_all=args.replace_all, path=path)
    atomic_write(path, updated.encode("utf-8"))
    return f"Edited {path}: replaced {count} occurrence{'s' if count != 1 else ''}"


class EditFile(_PathTool[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace an exact piece of text in an existing file. old_text must match the file exactly "
        "(read the file first) and occur once, or set replace_all to change every occurrence."
    )
    group = ToolGroup.FS_WRITE
    Args = EditFileArgs

    async def execute(self, args: EditFileArgs, ctx: ToolContext) -> str:
        path = self.path(args, ctx)
        async with ctx.checkpoints.change(path):
            return await asyncio.to_thread(_edit, path, args)
