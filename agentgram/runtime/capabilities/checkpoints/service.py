"""File checkpoints per turn and ``/rollback``: what is recorded when, and how a rollback runs.

**Recording.** ``write_file`` and ``edit_file`` wrap their write in :meth:`TurnCheckpoints.change`:
before the turn's first change to a path its prior state is stored (a blob, or "absent") and the
turn's record written, durably, before the tool writes; after the write the new state is recorded.
``execute_cmd`` wraps its command in :meth:`TurnCheckpoints.command`: with
``tools.checkpoint_commands`` the workdir is scanned before the command (every file stored, an
unchanged one known from the stat cache) and again after it ends — attached or detached, whenever
that is — and the difference is the command's change. Paths under ``.git`` or ``node_modules``,
the inbox, and files over ``tools.checkpoint_max_mb`` are not checkpointed; the turn's record lists
them as skipped, and so does ``/rollback``. Sub-agents' changes belong to the turn that started them.

**Rolling back** turn *N* undoes it and every later turn of the session that changed files (the
preview names them; pressing Undo confirms). Each path goes back to its state before the earliest
of those turns: restored, or deleted when the turn created it. A path whose content is no longer
what the last of those turns left (the user changed it since) is not overwritten until a second
confirmation names it: :meth:`Checkpoints.undo` answers ``changed_since`` with the paths and a
``confirm`` token (a hash of their names), and only an undo that brings the same token overwrites
them — a file changed after the question was asked is asked about again.

**Safety.** A rollback is refused while the session's turn runs or any command runs in the workdir
(a detached one too; the answer names it). File writes and the rollback take one lock per workdir,
so a turn that starts meanwhile writes after it. The steps are written to ``rollback.json`` first;
each file is replaced with ``os.replace`` from a temporary file beside it; a SIGKILL leaves each
file old or new, and the next start applies the plan again (every step is idempotent) before
anything resumes. Every path is checked to lie inside the workdir before it is touched.

**Telling the agent.** Once the files are back, the session's history gets a note (a synthetic
assistant row: it is in the context of the session's next turn, and being the agent's own row it
never counts as a message left unanswered).

**Pruning.** Records of turns older than ``tools.checkpoint_keep_days`` are dropped, with the
blobs nothing else refers to, at start and whenever ``/rollback`` lists turns.
"""

from __future__ import annotations

import asyncio
import difflib
import enum
import hashlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from agentgram.runtime.capabilities.checkpoints.store import (
    ABSENT,
    FileChange,
    FileState,
    Plan,
    Snapshot,
    Step,
    Store,
    TurnRecord,
    current_hash,
)
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable

log = get_logger("checkpoints")

LISTED_TURNS = 5
"""How many turns ``/rollback`` offers (the newest that changed files)."""

Tell = Callable[[int, str], Awaitable[None]]
"""Tells session ``session_id`` this text in its next turn."""


@dataclass(slots=True, frozen=True)
class FileSummary:
    """One path of a turn's change: how, and by how many lines."""

    path: str
    how: Literal["created", "changed", "deleted"]
    added: int = 0
    removed: int = 0
    binary: bool = False  # not text (or too large to keep): no line counts, no diff


@dataclass(slots=True, frozen=True)
class ChangedTurn:
    """A turn that changed files, as ``/rollback`` lists it."""

    turn_id: int
    started_at: datetime
    files: tuple[FileSummary, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (path, why) not checkpointed

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)


@dataclass(slots=True, frozen=True)
class RollbackPreview:
    """What undoing ``turn`` would do: it and the ``later`` turns, and their diff."""

    turn: ChangedTurn
    later: tuple[ChangedTurn, ...]
    diff: str


class RollbackStatus(enum.StrEnum):
    DONE = "done"
    CHANGED_SINCE = "changed_since"  # files the user changed since: confirm with the token
    TURN_RUNNING = "turn_running"
    COMMAND_RUNNING = "command_running"
    GONE = "gone"  # no such turn of this session (rolled back already, pruned, another's)


@dataclass(slots=True, frozen=True)
class RollbackOutcome:
    status: RollbackStatus
    turn_ids: tuple[int, ...] = ()
    restored: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    """``changed_since``: the paths the user changed since the turns."""
    confirm: str = ""
    """``changed_since``: what :meth:`Checkpoints.undo` takes to overwrite exactly ``changed``."""
    command: str = ""
    """``command_running``: the command that runs in the workdir."""


@dataclass(slots=True, frozen=True)
class _Running:
    session_id: int
    command: str


@dataclass(slots=True)
class _Merged:
    """A path over several turns: its state before the first, and what the last left."""

    before: str | None
    mode: int | None
    after: str | None
    after_known: bool


class Checkpoints:
    """The checkpoints of one workdir (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        *,
        commands: bool,
        keep: timedelta,
        busy: Callable[[int], bool],
        tell: Tell,
        now: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.commands = commands
        self.keep = keep
        self.busy = busy
        """Whether the session's turn runs now."""
        self.tell = tell
        self.now = now
        self._lock = asyncio.Lock()
        self._running: dict[int, _Running] = {}
        self._tokens = itertools.count(1)

    def for_turn(self, session_id: int, turn_id: int) -> TurnCheckpoints:
        return TurnCheckpoints(self, session_id, turn_id)

    # --- recording --------------------------------------------------------------------------

    def _record(self, session_id: int, turn_id: int) -> TurnRecord:
        found = self.store.load_turn(turn_id)
        return found or TurnRecord(turn_id=turn_id, session_id=session_id, started_at=self.now())

    async def _save(self, record: TurnRecord) -> None:
        await asyncio.to_thread(self.store.save_turn, record)

    @asynccontextmanager
    async def change(self, session_id: int, turn_id: int, path: Path) -> AsyncIterator[None]:
        """Around a tool's write of ``path``: the prior state first, the new one after."""
        rel = self.store.relative(path)
        if rel is None:  # outside the workdir: not the workdir's history
            yield
            return
        async with self._lock:
            record = self._record(session_id, turn_id)
            reason = self.store.ignored(rel)
            if reason is not None:
                record.skip(rel, reason)
                await self._save(record)
                yield
                return
            known = record.files.get(rel)
            if known is None:
                prior = await asyncio.to_thread(self.store.capture, path)
                if not prior.stored:
                    record.skip(rel, self._too_large())
                    await self._save(record)
                    yield
                    return
                known = FileChange(before=prior.hash, mode=prior.mode)
                record.files[rel] = known
            known.after_known = False
            await self._save(record)
            try:
                yield
            finally:
                await durable(self._written(record, rel, path))

    async def _written(self, record: TurnRecord, rel: str, path: Path) -> None:
        state = await asyncio.to_thread(self.store.capture, path)
        _settle(record, rel, state)
        await self._save(record)

    @asynccontextmanager
    async def command(self, session_id: int, turn_id: int, command: str) -> AsyncIterator[None]:
        """Around a command: it counts as running in the workdir (a rollback waits for it), and
        with ``tools.checkpoint_commands`` what it changed there is recorded when it ends."""
        token = next(self._tokens)
        async with self._lock:
            self._running[token] = _Running(session_id, command)
        try:
            if not self.commands:
                yield
                return
            before = await asyncio.to_thread(self.store.snapshot)
            try:
                yield
            finally:
                await durable(self._commanded(session_id, turn_id, before), timeout=600)
        finally:
            self._running.pop(token, None)

    async def _commanded(self, session_id: int, turn_id: int, before: Snapshot) -> None:
        after = await asyncio.to_thread(self.store.snapshot)
        async with self._lock:
            record = self._record(session_id, turn_id)
            changed = _command_changes(record, before, after, self._too_large())
            if changed:
                await self._save(record)

    def _too_large(self) -> str:
        return f"larger than {self.store.max_bytes / 1024 / 1024:g} MB"

    # --- what /rollback lists ---------------------------------------------------------------

    async def changed_turns(self, session_id: int, limit: int = LISTED_TURNS) -> list[ChangedTurn]:
        """The session's newest turns that changed files and were not rolled back, newest first."""
        await self.prune()
        records = [r for r in await self._open_records(session_id) if r.files][-limit:]
        return [await asyncio.to_thread(self._summary, r) for r in reversed(records)]

    async def preview(self, session_id: int, turn_id: int) -> RollbackPreview | None:
        """What undoing ``turn_id`` (and the session's later turns) would undo; ``None`` when it
        is not a turn of the session that can be rolled back."""
        records = await self._included(session_id, turn_id)
        if not records:
            return None
        summaries = [await asyncio.to_thread(self._summary, r) for r in records]
        diff = await asyncio.to_thread(self._diff, records)
        return RollbackPreview(summaries[0], tuple(summaries[1:]), diff)

    async def _open_records(self, session_id: int) -> list[TurnRecord]:
        records = await asyncio.to_thread(self.store.turns)
        return [r for r in records if r.session_id == session_id and r.rolled_back_at is None]

    async def _included(self, session_id: int, turn_id: int) -> list[TurnRecord]:
        """``turn_id`` and the session's later turns that changed files, oldest first; empty when
        ``turn_id`` is not one of the session's that can be rolled back."""
        records = [r for r in await self._open_records(session_id) if r.files]
        if all(r.turn_id != turn_id for r in records):
            return []
        return [r for r in records if r.turn_id >= turn_id]

    def _summary(self, record: TurnRecord) -> ChangedTurn:
        files = tuple(self._file_summary(rel, c) for rel, c in sorted(record.files.items()))
        skipped = tuple((s.path, s.reason) for s in record.skipped)
        return ChangedTurn(record.turn_id, record.started_at, files, skipped)

    def _file_summary(self, rel: str, change: FileChange) -> FileSummary:
        how: Literal["created", "changed", "deleted"] = (
            "created" if change.before is None else "deleted" if change.after is None else "changed"
        )
        old = self._text(change.before)
        new = self._text(change.after) if change.after_stored else None
        if old is None or new is None:
            return FileSummary(rel, how, binary=True)
        added = removed = 0
        for line in difflib.unified_diff(old, new, lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        return FileSummary(rel, how, added, removed)

    def _text(self, digest: str | None) -> list[str] | None:
        """A blob's lines (``[]`` for an absent file); ``None`` when it is not text or not kept."""
        if digest is None:
            return []
        try:
            return self.store.read_blob(digest).decode("utf-8").splitlines(keepends=True)
        except (OSError, UnicodeDecodeError):
            return None

    def _diff(self, records: list[TurnRecord]) -> str:
        """The turns' change as one unified diff: each path from before the first to after the last."""
        parts: list[str] = []
        for rel, merged in sorted(_merge(records).items()):
            old, new = self._text(merged.before), self._text(merged.after)
            if old is None or new is None:
                parts.append(
                    f"Binary or large file {rel} {'created' if merged.before is None else 'changed'}\n"
                )
                continue
            source = "/dev/null" if merged.before is None else f"a/{rel}"
            target = "/dev/null" if merged.after is None else f"b/{rel}"
            lines = list(difflib.unified_diff(old, new, source, target))
            parts.append("".join(line if line.endswith("\n") else line + "\n" for line in lines))
        return "".join(parts)

    # --- undo -------------------------------------------------------------------------------

    async def undo(self, session_id: int, turn_id: int, *, confirm: str = "") -> RollbackOutcome:
        """Undo ``turn_id`` and the session's later turns (see the module docstring); ``confirm``
        is the token of a ``changed_since`` answer the user agreed to."""
        async with self._lock:
            refused = self._refusal(session_id)
            if refused is not None:
                return refused
            records = await self._included(session_id, turn_id)
            if not records:
                return RollbackOutcome(RollbackStatus.GONE)
            merged = _merge(records)
            changed = await asyncio.to_thread(self._changed_since, merged)
            token = _token(changed)
            turn_ids = tuple(r.turn_id for r in records)
            if changed and confirm != token:
                return RollbackOutcome(RollbackStatus.CHANGED_SINCE, turn_ids, changed=changed, confirm=token)
            steps = [Step(path=rel, restore=m.before, mode=m.mode) for rel, m in sorted(merged.items())]
            plan = Plan(
                session_id=session_id, turn_ids=list(turn_ids), steps=steps, note=_note(steps, turn_ids)
            )
            await durable(self._carry_out(plan))
        restored = tuple(s.path for s in steps if s.restore is not None)
        deleted = tuple(s.path for s in steps if s.restore is None)
        log.info(
            "rolled back turns %s of session %s: %d restored, %d deleted",
            turn_ids,
            session_id,
            len(restored),
            len(deleted),
        )
        return RollbackOutcome(RollbackStatus.DONE, turn_ids, restored, deleted)

    def _refusal(self, session_id: int) -> RollbackOutcome | None:
        if self.busy(session_id):
            return RollbackOutcome(RollbackStatus.TURN_RUNNING)
        running = next(iter(self._running.values()), None)
        if running is not None:
            return RollbackOutcome(RollbackStatus.COMMAND_RUNNING, command=running.command)
        return None

    def _changed_since(self, merged: dict[str, _Merged]) -> tuple[str, ...]:
        changed = []
        for rel, m in sorted(merged.items()):
            if m.after_known and current_hash(self.store.inside(rel)) != m.after:
                changed.append(rel)
        return tuple(changed)

    async def _carry_out(self, plan: Plan) -> None:
        """The plan stored, then applied, then the turns marked and the agent told: the order a
        restart repeats (:meth:`recover`)."""
        await asyncio.to_thread(self.store.save_plan, plan)
        await self._finish(plan)

    async def _finish(self, plan: Plan) -> None:
        await asyncio.to_thread(self.store.apply, plan)
        when = self.now()
        for turn_id in plan.turn_ids:
            record = self.store.load_turn(turn_id)
            if record is not None and record.rolled_back_at is None:
                record.rolled_back_at = when
                await self._save(record)
        await self.tell(plan.session_id, plan.note)
        await asyncio.to_thread(self.store.drop_plan)

    # --- start and pruning ----------------------------------------------------------------------

    async def recover(self) -> None:
        """At start, before anything resumes: a rollback a crash cut short is finished; old
        checkpoints are pruned."""
        async with self._lock:
            plan = await asyncio.to_thread(self.store.load_plan)
            if plan is not None:
                log.warning("finishing the rollback of turns %s a restart cut short", plan.turn_ids)
                await self._finish(plan)
        await self.prune()

    async def prune(self) -> int:
        """Drop the records older than ``tools.checkpoint_keep_days`` and the blobs no record
        needs (not while a command's scan may refer to them); how many records."""
        async with self._lock:
            cutoff = self.now() - self.keep
            records = await asyncio.to_thread(self.store.turns)
            old = [r.turn_id for r in records if r.started_at < cutoff]
            for turn_id in old:
                await asyncio.to_thread(self.store.drop_turn, turn_id)
            if old and not self._running:
                await asyncio.to_thread(self.store.collect_garbage)
            return len(old)


@dataclass(slots=True, frozen=True)
class TurnCheckpoints:
    """The checkpoints as one turn's tools use them (``ToolContext.checkpoints``)."""

    checkpoints: Checkpoints
    session_id: int
    turn_id: int

    def change(self, path: Path) -> AbstractAsyncContextManager[None]:
        return self.checkpoints.change(self.session_id, self.turn_id, path)

    def command(self, command: str) -> AbstractAsyncContextManager[None]:
        return self.checkpoints.command(self.session_id, self.turn_id, command)


def _settle(record: TurnRecord, rel: str, state: FileState) -> None:
    """A path after a write: its new state recorded; dropped when it is as it was before."""
    change = record.files[rel]
    if state.hash == change.before:
        del record.files[rel]
        return
    change.after, change.after_known, change.after_stored = state.hash, True, state.stored


def _command_changes(record: TurnRecord, before: Snapshot, after: Snapshot, too_large: str) -> bool:
    """What a command changed, from its two scans, into ``record``; whether anything did."""
    touched = False
    for rel in sorted(before.large.keys() | after.large.keys()):
        if before.large.get(rel) != after.large.get(rel):
            record.skip(rel, too_large)
            touched = True
    for rel in sorted(before.files.keys() | after.files.keys()):
        old, new = before.files.get(rel, ABSENT), after.files.get(rel, ABSENT)
        if old.hash == new.hash or rel in before.large or rel in after.large:
            continue
        touched = True
        change = record.files.get(rel)
        if change is None:
            change = record.files[rel] = FileChange(before=old.hash, mode=old.mode)
        change.after, change.after_known, change.after_stored = new.hash, True, new.stored
        if change.after == change.before:
            del record.files[rel]
    for rel in sorted(before.ignored.keys() | after.ignored.keys()):
        if before.ignored.get(rel) != after.ignored.get(rel):
            record.skip(rel, "ignored path")
            touched = True
    return touched


def _merge(records: list[TurnRecord]) -> dict[str, _Merged]:
    """Every path the turns changed: its state before the first that changed it, and the state
    the last one left."""
    merged: dict[str, _Merged] = {}
    for record in records:
        for rel, change in record.files.items():
            known = merged.get(rel)
            if known is None:
                merged[rel] = _Merged(change.before, change.mode, change.after, change.after_known)
            else:
                known.after, known.after_known = change.after, change.after_known
    return merged


def _token(paths: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(paths).encode()).hexdigest()[:12] if paths else ""


def _note(steps: list[Step], turn_ids: tuple[int, ...]) -> str:
    restored = [s.path for s in steps if s.restore is not None]
    deleted = [s.path for s in steps if s.restore is None]
    turns = ", ".join(str(t) for t in turn_ids)
    lines = [f"[agentgram: the user rolled back the file changes of turn(s) {turns} with /rollback]"]
    if restored:
        lines.append("Restored to their earlier content: " + ", ".join(restored))
    if deleted:
        lines.append("Deleted (they did not exist before): " + ", ".join(deleted))
    lines.append("The workdir no longer holds those changes; read the files again before relying on them.")
    return "\n".join(lines)


__all__ = [
    "LISTED_TURNS",
    "ChangedTurn",
    "Checkpoints",
    "FileSummary",
    "RollbackOutcome",
    "RollbackPreview",
    "RollbackStatus",
    "Tell",
    "TurnCheckpoints",
]
