"""One agentgram per database: an OS file lock held for the life of the process.

A second process on the same database would run every turn twice and, with the
same bot token, make the chat platform answer both pollers ``409 Conflict``. So the
process takes this lock before it touches the database or the network, and a
second one stops at once with :class:`AlreadyRunning`.

Where the lock lives:

* a SQLite file: ``<database>.lock`` beside it (``data/agentgram.db.lock``),
  keyed by the resolved path, so every config that names the file — relative
  path, ``~``, symlink — meets the same lock, whatever its token (two bots on
  one database would share its sessions);
* PostgreSQL: in the database itself, from any host — ``pg_try_advisory_lock``
  on a connection of its own held for the life of the process
  (:class:`_ServerLock`), keyed by the bot (a hash of the token fingerprint;
  advisory locks belong to one database). The connection's
  ``application_name`` says ``agentgram <host> <pid>``, which is how a refused
  starter names the holder. A killed holder's connection closes and its lock
  goes with it. The connection lives on a thread with its own event loop, so
  the lock is taken before the bot's loop does anything and is released from
  anywhere;
* in-memory SQLite: nothing is shared, so there is nothing to lock.

A cluster's instances (``cluster.enabled``, :mod:`runtime.infra.lead`) take the same
PostgreSQL lock **shared** (``pg_try_advisory_lock_shared``): they start beside each other,
while a lone agentgram (exclusive) and a cluster never run on one database at once, whichever
started first.

``fcntl.flock`` locks die with the process that holds them — ``kill -9``
included — so a lock is never stale and nobody ever deletes the file (deleting
would race with a starter that just opened it). The file holds the holder's pid
for the message. Python opens the descriptor non-inheritable, so a command the
agent started and that outlives it cannot keep the lock. Neither the token nor
a password ever reaches a file name, a file or the log.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from sqlalchemy.engine import make_url

from agentgram.runtime.infra.errors import RuntimeFailure
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import PRIVATE_DIR, PRIVATE_FILE
from agentgram.runtime.infra.storage.reach import refusal

log = get_logger("storage.lock")

PID_READ_TRIES = 20
"""How often a refused starter reads the holder's pid (it writes it just after locking)."""


class AlreadyRunning(RuntimeFailure):
    """Another process holds the instance lock; ``str(err)`` is the one line shown to the user."""

    def __init__(self, pid: int | None, path: Path | None, host: str | None = None) -> None:
        self.pid = pid
        self.path = path
        self.host = host
        shown = f"pid {pid if pid is not None else 'unknown'}"
        super().__init__(f"another agentgram is running ({f'host {host}, ' if host else ''}{shown})")


def fingerprint(secret: str) -> str:
    """A short, stable, one-way name for a secret (a bot token): safe in a file name."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


def lock_path(database_url: str, token_fingerprint: str) -> Path | None:
    """Where the instance lock file of this database lives: beside a SQLite file; ``None`` for an
    in-memory database (nothing is shared) and for PostgreSQL (the lock is in the database)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database in ("", ":memory:"):  # as :class:`~runtime.storage.db.Database` tells them apart
        return None
    resolved = Path(database).expanduser().resolve()
    return resolved.with_name(resolved.name + ".lock")


def _private_folder(folder: Path) -> None:
    """Create a missing folder ``0700`` whatever the umask, as the database's own folder is made
    (:func:`~runtime.storage.db.private_sqlite_file`): the lock may come first on a first run."""
    if not folder.exists():
        folder.mkdir(parents=True, mode=PRIVATE_DIR)
        os.chmod(folder, PRIVATE_DIR)


def server_lock_key(token_fingerprint: str) -> int:
    """The advisory lock key of a bot on a PostgreSQL database: a signed 64-bit number."""
    digest = hashlib.sha256(f"agentgram instance\n{token_fingerprint}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class InstanceLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process ends, however it ends)."""

    def __init__(self, path: Path | None, fd: int | None, server: _ServerLock | None = None) -> None:
        self.path = path
        self._fd = fd
        self._server = server

    @classmethod
    def acquire(cls, database_url: str, token_fingerprint: str, *, shared: bool = False) -> InstanceLock:
        """Take the lock of this database and token, or raise :class:`AlreadyRunning`
        (:class:`ConfigError` for credentials PostgreSQL refuses)."""
        if make_url(database_url).get_backend_name() == "postgresql":
            key = server_lock_key(token_fingerprint)
            return cls(None, None, _ServerLock.acquire(database_url, key, shared=shared))
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
        server, self._server = self._server, None
        if server is not None:
            server.release()

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


SERVER_CONNECT_TIMEOUT = 30.0
HOLDER_QUERY = """
SELECT a.application_name FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database
WHERE datname = current_database()) AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid
AND l.objsubid = 1
"""
"""Who holds a bigint advisory lock: pg_locks splits the key into its high and low 32 bits."""


class _ServerLock:
    """``pg_try_advisory_lock`` on one asyncpg connection, owned by a thread with its own loop."""

    def __init__(self, dsn: str, key: int, *, shared: bool = False) -> None:
        self._dsn = dsn
        self._key = key
        self._shared = shared
        self._ready = threading.Event()
        self._outcome: BaseException | str | None = None  # an error, the holder's name, or taken
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="agentgram-instance-lock", daemon=True)

    @classmethod
    def acquire(cls, database_url: str, key: int, *, shared: bool = False) -> _ServerLock:
        dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        lock = cls(dsn, key, shared=shared)
        lock._thread.start()
        lock._ready.wait()
        outcome = lock._outcome
        if isinstance(outcome, BaseException):
            lock._thread.join()
            raise _as_failure(outcome)
        if isinstance(outcome, str):
            lock._thread.join()
            host, pid = _holder_of(outcome)
            raise AlreadyRunning(pid, None, host or "unknown")
        log.debug("instance lock %s taken on the database", key)
        return lock

    def release(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        self._thread.join(SERVER_CONNECT_TIMEOUT)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._hold())
        finally:
            loop.close()

    async def _hold(self) -> None:
        import asyncpg  # only a PostgreSQL database needs it

        self._stop = asyncio.Event()
        try:
            conn = await asyncpg.connect(
                self._dsn,
                timeout=SERVER_CONNECT_TIMEOUT,
                server_settings={"application_name": f"agentgram {socket.gethostname()} {os.getpid()}"[:63]},
            )
        except BaseException as error:
            self._outcome = error
            self._ready.set()
            return
        try:
            take = "pg_try_advisory_lock_shared" if self._shared else "pg_try_advisory_lock"
            if not await conn.fetchval(f"SELECT {take}($1)", self._key):
                high, low = (self._key >> 32) & 0xFFFFFFFF, self._key & 0xFFFFFFFF
                self._outcome = str(await conn.fetchval(HOLDER_QUERY, high, low) or "")
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
        except BaseException as error:
            if not self._ready.is_set():
                self._outcome = error
                self._ready.set()
        finally:
            await conn.close()  # the lock goes with the connection


def _holder_of(application_name: str) -> tuple[str | None, int | None]:
    """``agentgram <host> <pid>`` → host and pid (``None`` where unreadable)."""
    parts = application_name.split()
    if len(parts) == 3 and parts[0] == "agentgram":
        return parts[1], int(parts[2]) if parts[2].isdigit() else None
    return None, None


def _as_failure(error: BaseException) -> BaseException:
    """Refused credentials are the config's mistake (one line, exit 2, :func:`.reach.refusal`);
    the rest stays as it is."""
    return refusal(error) or error
