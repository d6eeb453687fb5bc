"""The agent's memory tools: ``remember`` and ``recall``, over ``memory/`` in the workdir.

Memory is plain files, so the user can read and edit it, and the model can
also use the file tools on it (writes under ``memory/`` need no approval: the
seeded rule in :mod:`runtime.approvals.rules`). It belongs to the workdir,
not to a session, so it survives ``/new``. The files named by
``agent.inject_memory`` go into the static system prompt of each new session
(:class:`~runtime.prompt.MemoryPrompt`); ``recall`` reaches every file at any
time, including what was remembered earlier in this same session.

``remember`` appends one Markdown list item to a file (by default the first
injected one, so the next session's prompt holds it) and skips an item the
file already holds word for word. ``recall`` without a query shows the files;
with one, the lines holding most of its words. Both stay inside ``memory/``:
a path that leaves it is refused.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolGroup
from agentgram.runtime.capabilities.tools.files import read_text
from agentgram.runtime.infra.config import AgentSettings
from agentgram.runtime.infra.errors import ToolError

MEMORY_DIR = "memory"
"""The agent's memory: this folder of the workdir (its files survive ``/new``)."""

DEFAULT_FILE = "MEMORY.md"
"""Where ``remember`` writes when no file is given and ``agent.inject_memory`` names none."""
RECALL_HITS = 30
"""Lines a query returns at most."""
RECALL_CHARS = 8000
"""Characters ``recall`` without a query shows at most."""
_WORD = re.compile(r"\w+", re.UNICODE)


def memory_dir(ctx: ToolContext) -> Path:
    return (ctx.workdir / MEMORY_DIR).resolve()


def memory_path(ctx: ToolContext, name: str) -> Path:
    """``name`` inside ``memory/``, resolved; a path leaving it (or a protected one) is refused."""
    root = memory_dir(ctx)
    path = (root / name).resolve()
    if not path.is_relative_to(root) or path == root:
        raise ToolError(f"{name!r} is not a file inside {MEMORY_DIR}/; give a relative name like notes.md")
    ctx.protected.check(path)
    return path


# --- remember ---------------------------------------------------------------------------


class RememberArgs(ToolArgs):
    text: str = Field(min_length=1, description="The fact to keep, self-contained (who, what, when).")
    file: str | None = Field(
        default=None, description="File inside memory/ to add it to. Default: the main memory file."
    )


def _item(text: str) -> str:
    lines = text.strip().splitlines() or [""]
    return "\n".join([f"- {lines[0]}", *(f"  {line}" for line in lines[1:])])


def _append(path: Path, item: str) -> str:
    existing = read_text(path) if path.exists() else ""
    if item in existing.splitlines() or f"\n{item}\n" in f"\n{existing}\n":
        return f"Already in memory ({path.name}); nothing added."
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = "" if not existing or existing.endswith("\n") else "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{prefix}{item}\n")
    return f"Remembered in {MEMORY_DIR}/{path.name}."


class Remember(Tool[RememberArgs]):
    name = "remember"
    description = (
        "Keep a fact for later conversations (preferences, names, decisions, ongoing projects). "
        "It is added to your memory files, which new conversations start with."
    )
    group = ToolGroup.FS_WRITE
    Args = RememberArgs

    def __init__(self, default_file: str = DEFAULT_FILE) -> None:
        self.default_file = default_file

    def _path(self, args: RememberArgs, ctx: ToolContext) -> Path:
        return memory_path(ctx, args.file or self.default_file)

    def target(self, args: RememberArgs, ctx: ToolContext) -> str:
        return str(self._path(args, ctx))

    def guard(self, args: RememberArgs, ctx: ToolContext) -> None:
        self._path(args, ctx)

    async def execute(self, args: RememberArgs, ctx: ToolContext) -> str:
        path = self._path(args, ctx)
        return await asyncio.to_thread(_append, path, _item(args.text))


# --- recall -----------------------------------------------------------------------------


class RecallArgs(ToolArgs):
    query: str | None = Field(
        default=None, description="Words to look for. Without it, the memory files are shown."
    )


def _files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def _readable(path: Path) -> str | None:
    try:
        return read_text(path)
    except ToolError:  # binary
        return None


def _show(root: Path) -> str:
    parts: list[str] = []
    used = 0
    for path in _files(root):
        text = _readable(path)
        if text is None:
            continue
        name = path.relative_to(root).as_posix()
        room = RECALL_CHARS - used
        if room <= 0:
            parts.append(f"## {name}\n[not shown: over {RECALL_CHARS} characters; recall with a query]")
            continue
        shown = text if len(text) <= room else text[:room] + "\n[… cut; recall with a query]"
        used += len(shown)
        parts.append(f"## {name}\n{shown.strip()}")
    return "\n\n".join(parts) if parts else f"Memory is empty ({MEMORY_DIR}/ holds no files yet)."


def _search(root: Path, query: str) -> str:
    words = {w.lower() for w in _WORD.findall(query)}
    if not words:
        return _show(root)
    hits: list[tuple[int, str, int, str]] = []
    for path in _files(root):
        text = _readable(path)
        if text is None:
            continue
        name = path.relative_to(root).as_posix()
        for number, line in enumerate(text.splitlines(), start=1):
            found = words & {w.lower() for w in _WORD.findall(line)}
            if found:
                hits.append((-len(found), name, number, line.strip()))
    if not hits:
        return f"Nothing in memory matches {query!r}."
    hits.sort()
    return "\n".join(f"{name}:{number}: {line}" for _, name, number, line in hits[:RECALL_HITS])


class Recall(Tool[RecallArgs]):
    name = "recall"
    description = (
        "Look things up in your memory files (what you were told to remember, in this or earlier "
        "conversations). Give a few words to search, or none to see everything."
    )
    group = ToolGroup.FS_READ
    idempotent = True
    Args = RecallArgs

    def target(self, args: RecallArgs, ctx: ToolContext) -> str:
        return str(memory_dir(ctx))

    async def execute(self, args: RecallArgs, ctx: ToolContext) -> str:
        root = memory_dir(ctx)
        if args.query:
            return await asyncio.to_thread(_search, root, args.query)
        return await asyncio.to_thread(_show, root)


def memory_tools(settings: AgentSettings) -> list[Tool[Any]]:
    """``remember`` (writing to the first injected file by default) and ``recall``."""
    default = settings.inject_memory[0] if settings.inject_memory else DEFAULT_FILE
    return [Remember(default), Recall()]


__all__ = ["DEFAULT_FILE", "Recall", "Remember", "memory_path", "memory_tools"]
