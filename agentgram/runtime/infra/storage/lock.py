"""One agentgram per database: an OS file lock held for the life of the process.

A second process on the same database would run every turn twice and, with the
same bot token, make Telegram answer both pollers ``409 Conflict``. So the
process takes this lock before it touches the database or the network, and a
second one stops at once with :class:`AlreadyRunning`.

Where the lock lives:

* a SQLite file: ``<database>.lock`` beside it (``data/agentgram.db.lock``),
  keyed by the resolved path, so every config that names the file — relative
  path, ``~``, symlink — meets the same lock, whatever its token (two bots on
  one database would share its sessions);
* any other database (PostgreSQL): ``agentgram-<hash>.lock`` in the user's
  runtime directory (``$XDG_RUNTIME_DIR``, else a private folder in the temp
  directory), the hash taken over the URL without its password and the token
  fingerprint. That guards one host only: several hosts sharing one PostgreSQL
  will need an advisory lock (``pg_try_advisory_lock``) taken in the database
  itself — for the PostgreSQL mode to add;
* in-memory SQLite: nothing is shared, so there is nothing to lock.

``fcntl.flock`` locks die with the process that holds them — ``kill -9``
included — so a lock is never stale and nobody ever deletes the file (deleting
would race with a starter that just opened it). The file holds the holder's pid
for the message. Python opens the descriptor non-inheritable, so a command the
agent started and that outlives it cannot keep the lock. Neither the token nor
a password ever reaches a file name, a file or the log.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from sqlalchemy.engine import make_url

from agentgram.runtime.infra.errors import RuntimeFailure
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import PRIVATE_DIR, PRIVATE_FILE

log = get_logger("storage.lock")

PID_READ_TRIES = 20
"""How often a refused starter reads the holder's pid (it writes it just after locking)."""


class AlreadyRunning(RuntimeFailure):
    """Another process holds the instance lock; ``str(err)`` is the one line shown to the user."""

    def __init__(self, pid: int | None, path: Path) -> None:
        self.pid = pid
        self.path = path
        super().__init__(f"another agentgram is running (pid {pid if pid is not None else 'unknown'})")


def fingerprint(secret: str) -> str:
    """A short, stable, one-way name for a secret (a bot token): safe in a file name."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def lock_path(database_url: str, token_fingerprint: str) -> Path | None:
    """Where the instance lock of this database and token lives; None when nothing is shared."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:"):  # as :class:`~runtime.storage.db.Database` tells them apart
            return None
        resolved = Path(database).expanduser().resolve()
        return resolved.with_name(resolved.name + ".lock")
    key = f"{url.render_as_string(hide_password=True)}\n{token_fingerprint}"
    return runtime_dir() / f"agentgram-{hashlib.sha256(key.encode()).hexdigest()[:24]}.lock"


def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR`` (per user, cleared at boot), else ``<tmp>/agentgram-<uid>``."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg)
    return Path(tempfile.gettempdir()) / f"agentgram-{os.getuid()}"


def _private_folder(folder: Path) -> None:
    """Create a missing folder ``0700`` whatever the umask, as the database's own folder is made
    (:func:`~runtime.storage.db.private_sqlite_file`): the lock may come first on a first run."""
    if not folder.exists():
        folder.mkdir(parents=True, mode=PRIVATE_DIR)
        os.chmod(folder, PRIVATE_DIR)


class InstanceLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process ends, however it ends)."""

    def __init__(self, path: Path | None, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, database_url: str, token_fingerprint: str) -> InstanceLock:
        """Take the lock of this database and token, or raise :class:`AlreadyRunning`."""
        path = lock_path(database_url, token_fingerprint)
        if path is None:
            return cls(None, None)
        _private_folder(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise AlreadyRunning(pid, path) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        log.debug("instance lock %s taken", path)
        return cls(path, fd)

    def release(self) -> None:
        """Let the next process start; the file stays (see the module docstring)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _holder(fd: int) -> int | None:
    """The pid the holder wrote; it may not have written it yet, so try for a moment."""
    for _ in range(PID_READ_TRIES):
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit():
            return int(text)
        time.sleep(0.05)
    return None
