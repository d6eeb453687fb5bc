"""File checkpoints on disk: content-addressed copies, one record per turn, the rollback plan.

Everything lives under the store's root, outside the workdir (``tools.checkpoint_dir``)::

    blobs/ab/cdef…       a file's content, named by its SHA-256; written once (temp, fsync, rename)
    turns/<turn>.json    what one turn changed: per path its prior state (a blob, or absent) and
                         its state after the turn, and what was skipped and why
    index.json           the stat cache of the last scan of the workdir (a command's snapshot)
    rollback.json        a rollback under way: every step, written before the first file is touched

Why copies and not a shadow git repository: a restore must be one ``os.replace`` per file (a
SIGKILL leaves the old file or the new, never a torn one), and "did the user change it since?" is
one hash compared with the recorded one. Both are a few lines over a blob store; with git they
would be the same lines around ``git cat-file`` and ``git hash-object`` subprocesses, plus the
workdir's own ``.gitignore`` files and nested repositories silently deciding what is tracked.

Every JSON file carries a schema version and is written atomically. The functions here are
blocking (the service runs them in a thread) and know nothing of turns running or of sessions:
:mod:`.service` decides when to call them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError

SCHEMA = 1
"""The version every stored JSON file carries."""

IGNORED_NAMES = frozenset({".git", "node_modules"})
"""Directories never checkpointed, at any depth."""
INBOX = "inbox"
"""The attachments folder at the workdir's top (``runtime.capabilities.attachments.inbox``): the
user's files, never the agent's changes."""
_CHUNK = 1 << 20
M = TypeVar("M", bound=BaseModel)


class FileChange(BaseModel):
    """One path a turn changed: its state before the turn's first change, and after its last."""

    before: str | None
    """The prior content's blob; ``None``: the file did not exist."""
    mode: int | None = None
    """The prior file's permission bits (restored with it)."""
    after: str | None = None
    """The content's hash after the turn's last change; ``None``: the turn deleted it."""
    after_known: bool = False
    """``False`` while a change is under way (a crash there leaves the after state unknown: the
    user-changed-it check is then skipped for this path)."""
    after_stored: bool = True
    """The after content is a blob too (``False``: too large; the diff cannot show it)."""


class Skipped(BaseModel):
    path: str
    reason: str


class TurnRecord(BaseModel):
    """What one turn changed in the workdir (``turns/<turn>.json``)."""

    version: int = SCHEMA
    turn_id: int
    session_id: int
    started_at: datetime
    files: dict[str, FileChange] = Field(default_factory=dict)
    skipped: list[Skipped] = Field(default_factory=list)
    rolled_back_at: datetime | None = None

    def skip(self, path: str, reason: str) -> None:
        if all(s.path != path for s in self.skipped):
            self.skipped.append(Skipped(path=path, reason=reason))


class Step(BaseModel):
    """One file of a rollback: put back this blob (with these bits), or delete the file."""

    path: str
    restore: str | None
    mode: int | None = None


class Plan(BaseModel):
    """A rollback under way (``rollback.json``): applied again from the start after a crash."""

    version: int = SCHEMA
    session_id: int
    turn_ids: list[int]
    steps: list[Step]
    note: str
    """What the agent is told once the files are back."""


@dataclass(slots=True, frozen=True)
class FileState:
    """A path as it is now: its content's hash (``None``: absent), size and permission bits;
    ``stored``: its content is a blob (``False`` when larger than the limit)."""

    hash: str | None
    size: int = 0
    mode: int | None = None
    stored: bool = True


ABSENT = FileState(None)


@dataclass(slots=True)
class Snapshot:
    """The workdir as one scan saw it: every checkpointed file, and what it left out."""

    files: dict[str, FileState]
    large: dict[str, tuple[int, int]]  # path → (size, mtime_ns): over the limit, not copied
    ignored: dict[str, int]  # ignored directory → its mtime_ns


def store_root(configured: Path | None, database_file: Path | None, workdir: Path) -> Path:
    """Where the checkpoints live: ``tools.checkpoint_dir``; else ``checkpoints/`` beside the
    SQLite database; else (a database server) ``.<workdir name>.checkpoints`` beside the workdir."""
    if configured is not None:
        return configured.expanduser().resolve()
    if database_file is not None:
        return database_file.parent / "checkpoints"
    return workdir.parent / f".{workdir.name}.checkpoints"


class Store:
    """The checkpoint store of one workdir (see the module docstring)."""

    def __init__(self, root: Path, workdir: Path, max_bytes: int) -> None:
        self.root = root
        self.workdir = workdir.resolve()
        self.max_bytes = max_bytes
        self._blobs = root / "blobs"
        self._turns = root / "turns"
        self._plan = root / "rollback.json"
        self._index = root / "index.json"

    # --- paths -----------------------------------------------------------------------------

    def relative(self, path: Path) -> str | None:
        """``path`` (resolved) as a workdir-relative POSIX path; ``None`` outside the workdir."""
        if not path.is_relative_to(self.workdir) or path == self.workdir:
            return None
        return path.relative_to(self.workdir).as_posix()

    def ignored(self, rel: str) -> str | None:
        """Why ``rel`` is never checkpointed, or ``None``."""
        parts = PurePosixPath(rel).parts
        if IGNORED_NAMES & set(parts):
            return "ignored path"
        if parts and parts[0] == INBOX:
            return "the inbox (files sent to the agent)"
        if (self.workdir / rel).resolve().is_relative_to(self.root.resolve()):
            return "the checkpoint store"
        return None

    def inside(self, rel: str) -> Path:
        """The workdir path of ``rel``, refusing any that would lead outside (``..``, a symlinked
        folder): a rollback never touches anything outside the workdir."""
        path = self.workdir / rel
        parent = path.parent.resolve()
        if not parent.is_relative_to(self.workdir) or ".." in PurePosixPath(rel).parts:
            raise ValueError(f"{rel} lies outside the workdir")
        return parent / path.name

    # --- blobs -----------------------------------------------------------------------------

    def blob(self, digest: str) -> Path:
        return self._blobs / digest[:2] / digest[2:]

    def read_blob(self, digest: str) -> bytes:
        return self.blob(digest).read_bytes()

    def capture(self, path: Path, *, limit: bool = True) -> FileState:
        """``path``'s state now, its content stored as a blob unless over the limit (then only
        hashed). A directory, a symlink or anything but a regular file reads as absent."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return ABSENT
        if not stat.S_ISREG(st.st_mode):
            return ABSENT
        mode = stat.S_IMODE(st.st_mode)
        if limit and st.st_size > self.max_bytes:
            return FileState(_hash_file(path), st.st_size, mode, stored=False)
        return FileState(self._store_file(path), st.st_size, mode)

    def _store_file(self, path: Path) -> str:
        """Copy ``path`` into the blob store while hashing it; its digest."""
        tmp_dir = self._blobs / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        temp = tmp_dir / secrets.token_hex(8)
        digest = hashlib.sha256()
        try:
            with path.open("rb") as source, temp.open("wb") as copy:
                while chunk := source.read(_CHUNK):
                    digest.update(chunk)
                    copy.write(chunk)
                copy.flush()
                os.fsync(copy.fileno())
            name = digest.hexdigest()
            final = self.blob(name)
            if final.exists():
                temp.unlink()
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temp, final)
            return name
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    def present(self, digest: str) -> bool:
        return self.blob(digest).exists()

    # --- turn records ------------------------------------------------------------------------

    def load_turn(self, turn_id: int) -> TurnRecord | None:
        return _load(self._turns / f"{turn_id}.json", TurnRecord)

    def save_turn(self, record: TurnRecord) -> None:
        _write_json(self._turns / f"{record.turn_id}.json", record)

    def turns(self) -> list[TurnRecord]:
        """Every turn record, oldest first."""
        if not self._turns.is_dir():
            return []
        found = [_load(path, TurnRecord) for path in self._turns.glob("*.json")]
        return sorted((r for r in found if r is not None), key=lambda r: r.turn_id)

    def drop_turn(self, turn_id: int) -> None:
        (self._turns / f"{turn_id}.json").unlink(missing_ok=True)

    def collect_garbage(self) -> int:
        """Delete the blobs no turn record refers to; how many."""
        kept = {d for r in self.turns() for c in r.files.values() for d in (c.before, c.after) if d}
        dropped = 0
        if not self._blobs.is_dir():
            return 0
        for folder in self._blobs.iterdir():
            if folder.name == "tmp" or not folder.is_dir():
                continue
            for blob in folder.iterdir():
                if folder.name + blob.name not in kept:
                    blob.unlink(missing_ok=True)
                    dropped += 1
        return dropped

    # --- the rollback plan --------------------------------------------------------------------

    def load_plan(self) -> Plan | None:
        return _load(self._plan, Plan)

    def save_plan(self, plan: Plan) -> None:
        _write_json(self._plan, plan)

    def drop_plan(self) -> None:
        self._plan.unlink(missing_ok=True)
        _sync_dir(self.root)

    def apply(self, plan: Plan) -> None:
        """Every step of ``plan``, each file replaced at once (old or new, never torn); applying it
        again (after a crash) gives the same result."""
        for step in plan.steps:
            target = self.inside(step.path)
            temp = target.with_name(f".{target.name}.agentgram-rollback")
            if step.restore is None:
                temp.unlink(missing_ok=True)
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_file(temp, self.read_blob(step.restore), step.mode)
            os.replace(temp, target)
            _sync_dir(target.parent)

    # --- scans (commands) ---------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every file of the workdir, each stored as a blob (unchanged ones known from the stat
        cache, not read again), minus the ignored paths and the files over the limit."""
        cache = _load_index(self._index)
        fresh: dict[str, list[int | str]] = {}
        shot = Snapshot({}, {}, {})
        for rel, st in self._walk(shot):
            if st.st_size > self.max_bytes:
                shot.large[rel] = (st.st_size, st.st_mtime_ns)
                continue
            key = [st.st_size, st.st_mtime_ns, st.st_ino]
            known = cache.get(rel)
            digest = known[3] if known is not None and known[:3] == key and _settled(known) else None
            if isinstance(digest, str) and self.present(digest):
                state = FileState(digest, st.st_size, stat.S_IMODE(st.st_mode))
            else:
                state = self.capture(self.workdir / rel)
                if state.hash is None:
                    continue  # gone while we looked
            shot.files[rel] = state
            fresh[rel] = [*key, state.hash or "", _now_ns()]
        _write_json_raw(self._index, {"version": SCHEMA, "files": fresh})
        return shot

    def _walk(self, shot: Snapshot) -> list[tuple[str, os.stat_result]]:
        found: list[tuple[str, os.stat_result]] = []
        for top, dirs, files in os.walk(self.workdir):
            here = Path(top)
            for name in list(dirs):
                rel = (here / name).relative_to(self.workdir).as_posix()
                if self.ignored(rel) is not None:
                    dirs.remove(name)
                    with contextlib.suppress(OSError):
                        shot.ignored[rel] = os.lstat(here / name).st_mtime_ns
            for name in files:
                rel = (here / name).relative_to(self.workdir).as_posix()
                if self.ignored(rel) is not None:
                    continue
                try:
                    st = os.lstat(here / name)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    found.append((rel, st))
        return found


def _settled(entry: list[int | str]) -> bool:
    """A cached hash is trusted only when the file's mtime was over two seconds older than the
    moment it was hashed: a write within the same clock tick would otherwise go unseen."""
    mtime, hashed_at = entry[1], entry[4] if len(entry) > 4 else 0
    return isinstance(mtime, int) and isinstance(hashed_at, int) and hashed_at - mtime > 2_000_000_000


def _now_ns() -> int:
    return time.time_ns()


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def current_hash(path: Path) -> str | None:
    """The content hash of the regular file at ``path`` now; ``None`` when there is none."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return _hash_file(path) if stat.S_ISREG(st.st_mode) else None


def _write_file(path: Path, data: bytes, mode: int | None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if mode is not None:
        os.chmod(path, mode)


def _sync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_json(path: Path, model: BaseModel) -> None:
    _atomic(path, model.model_dump_json().encode())


def _write_json_raw(path: Path, data: object) -> None:
    _atomic(path, json.dumps(data, separators=(",", ":")).encode())


def _atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        _write_file(temp, data, None)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _sync_dir(path.parent)


def _load(path: Path, model: type[M]) -> M | None:
    """The stored ``model`` at ``path``; ``None`` when absent or unreadable (a record from a newer
    release, or damaged: skipped rather than trusted)."""
    try:
        loaded = model.model_validate_json(path.read_bytes())
    except (FileNotFoundError, ValidationError):
        return None
    return loaded if getattr(loaded, "version", SCHEMA) == SCHEMA else None


def _load_index(path: Path) -> dict[str, list[int | str]]:
    try:
        data = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) and data.get("version") == SCHEMA else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(v, list) and len(v) == 5}


__all__ = [
    "ABSENT",
    "INBOX",
    "FileChange",
    "FileState",
    "Plan",
    "Skipped",
    "Snapshot",
    "Step",
    "Store",
    "TurnRecord",
    "current_hash",
    "store_root",
]
