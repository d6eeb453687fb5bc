"""The database handle: one engine, short write transactions.

SQLite rules (see platform notes): WAL is switched on explicitly, every
connection gets a busy timeout, and write transactions start with
``BEGIN IMMEDIATE`` so a read-then-write never fails with "database is
locked". Only one connection of this process ever writes at a time (one writer
is SQLite's nature; it also sidesteps SQLite's WAL-reset bug in older
versions): the file's writes run on one writer thread, one after another (see
:meth:`Database.write_sync`), and an async :meth:`Database.write` first takes
that thread's turn.

PostgreSQL gets no write lock: each write is its own transaction on a
connection of the pool (``storage.pool_size``), concurrent with the others,
at READ COMMITTED. Every read-then-write is therefore one statement or takes
a row lock (``INSERT … ON CONFLICT``, compare-and-set updates, ``SELECT … FOR
NO KEY UPDATE``, partial unique indexes: :mod:`.upsert`, the stores), so the
database settles races and a caller never sees an ``IntegrityError`` for one.

:meth:`Database.write_sync` runs a whole write transaction as one blocking
call on a worker thread, over a dedicated synchronous connection to the same
SQLite file (same pragmas, same ``BEGIN IMMEDIATE``): one thread hop per
transaction instead of several per statement, for hot paths such as the
mailbox's accept. The transactions queue on that one thread, which runs each
as soon as the one before committed: the next writer never waits for the event
loop to get round to it (under load a loop turn takes milliseconds, and an
``asyncio.Lock`` handed from writer to writer cost one each, on every write of
every turn: issue 31, the throughput ceiling).

:func:`after_commit` lets code that runs inside someone else's transaction
(a cursor move, a history row) keep an in-memory view in step with what
committed: the callback runs on the event loop after the commit, and views
see commits in commit order — and never a rollback. On SQLite the writer
thread schedules them on the loop as it commits, in its order; on PostgreSQL a transaction that registered callbacks commits
under a short commit lock and runs them before releasing it (transactions
without callbacks commit freely), so this process's commits that views
follow are issued, and seen, one after another.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Literal, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlmodel import Session
from sqlmodel.ext.asyncio.session import AsyncSession

from agentgram.runtime.infra.log import get_logger

log = get_logger("storage")
T = TypeVar("T")

PERSIST_TIMEOUT = 10.0
"""How long a write that must survive cancellation may take (docs/architecture/history.md)."""

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
Hook = Callable[[], None]
_AFTER_COMMIT = "agentgram.after_commit"


def after_commit(tx: Connection, callback: Hook) -> None:
    """Run ``callback`` once the transaction ``tx`` belongs to has committed (not if it rolls back).

    For transactions of :meth:`Database.write_sync` / :meth:`Database.write_orm` /
    :meth:`Database.write`; an ORM session passes ``session.connection()``.
    """
    tx.info.setdefault(_AFTER_COMMIT, []).append(callback)


def _take_hooks(info: dict[Any, Any]) -> list[Hook]:
    hooks: list[Hook] = info.pop(_AFTER_COMMIT, [])
    return hooks


def _run_hooks(hooks: list[Hook]) -> None:
    for hook in hooks:
        try:
            hook()
        except Exception:  # the write committed: a view's bug must not turn it into an error
            log.exception("after-commit hook failed")


WRITER_CACHE_KIB = 1024
"""The writer's page cache (SQLite's default is 2,000 KiB): what a write touches is the right
edges of the tables and their indexes."""
READER_CACHE_KIB = 512
"""The page cache of each connection that reads. A hot session's reads are served from memory
(:mod:`.views`), so readers read little and the OS caches the file anyway; every reader, sync or
async, also releases its pages when it goes back to the pool (:func:`release_pages_on_checkin`). With the default
cache and no release, the pool's connections kept filling their caches as the file grew: SQLite's
own heap grew by 3 MB over 8,000 turns (``bench/README.md``, session 20)."""


def sqlite_pragmas(
    dbapi_conn: Any, synchronous: Synchronous = "NORMAL", *, cache_kib: int | None = None
) -> None:
    """The pragmas every SQLite connection of a :class:`Database` gets, async or not, and a file's
    connections their page cache (``cache_kib``: :data:`WRITER_CACHE_KIB`, :data:`READER_CACHE_KIB`)."""
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute(f"PRAGMA synchronous={synchronous}")
    cursor.execute("PRAGMA foreign_keys=ON")
    if cache_kib is not None:
        cursor.execute(f"PRAGMA cache_size=-{cache_kib}")
    cursor.close()


PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def release_pages_on_checkin(engine: Engine) -> None:
    """A connection back in ``engine``'s pool keeps no pages (``PRAGMA shrink_memory``, SQLite's own
    release): a pooled connection's cache would otherwise fill as the file grows (:data:`READER_CACHE_KIB`)."""

    @event.listens_for(engine, "checkin")
    def _release(dbapi_conn: Any, _record: Any) -> None:
        if dbapi_conn is not None:  # None: the connection was invalidated
            cursor = dbapi_conn.cursor()  # the async driver's adapter has no execute of its own
            cursor.execute("PRAGMA shrink_memory")
            cursor.close()


def private_sqlite_file(path: Path) -> Path:
    """Make the database file (and its directory, if missing) readable by this user only.

    The file holds the whole chat history. Its directory is created ``0700``
    and the file ``0600`` before SQLite opens it, whatever the umask; SQLite
    gives the ``-wal``, ``-shm`` and ``-journal`` files it creates later the
    database file's mode. A file or side file left wider by an older version
    is narrowed. Returns the resolved path.
    """
    parent = path.expanduser().parent
    if not parent.exists():
        parent.mkdir(parents=True, mode=PRIVATE_DIR)
        os.chmod(parent, PRIVATE_DIR)  # mkdir's mode is filtered by the umask
    resolved = path.expanduser().resolve()
    with suppress(FileExistsError):  # never wider than 0600; the loop below makes it exactly that
        os.close(os.open(resolved, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    for side in (resolved, *(resolved.with_name(resolved.name + s) for s in SQLITE_SIDE_FILES)):
        try:
            if side.stat().st_mode & 0o777 != PRIVATE_FILE:
                os.chmod(side, PRIVATE_FILE)
        except FileNotFoundError:
            continue
        except OSError as exc:  # not ours to change: say so, the database still works
            log.warning("cannot make %s private: %s", side, exc.strerror or exc)
    return resolved


class Database:
    """Engine plus the transaction helpers every repository uses.

    ``synchronous`` is SQLite's ``PRAGMA synchronous`` for every connection
    (``NORMAL``: a commit survives the process being killed; ``FULL``: power
    loss too). ``pool_size`` is a server's (``storage.pool_size``).
    """

    def __init__(self, url: str, *, synchronous: Synchronous = "NORMAL", pool_size: int = 10) -> None:
        self.url = url
        self.synchronous: Synchronous = synchronous
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {}
        self._sync_url: Any = None  # a SQLite file: write_sync runs on a thread over this
        self.file: Path | None = None
        """The resolved SQLite file, when the database is one (its -wal and -shm files sit beside it)."""
        if self.is_sqlite:
            database = parsed.database or ""
            if database in ("", ":memory:"):
                kwargs["poolclass"] = StaticPool
            else:
                self.file = private_sqlite_file(Path(database))
                self._sync_url = parsed.set(drivername="sqlite+pysqlite")
            kwargs["connect_args"] = {"timeout": 30, "isolation_level": None}
        else:  # a server (PostgreSQL): storage.pool_size, as many again under load, dead ones replaced
            kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        self._sync_engine: Engine | None = None
        self._sync_read_engine: Engine | None = None
        self._write_lock = asyncio.Lock()  # SQLite: the async writes, one at a time
        self._writer: ThreadPoolExecutor | None = None  # a SQLite file: its one writing thread
        self._writing = threading.Lock()  # a SQLite file: held while a connection writes it
        self._commit_lock = asyncio.Lock()  # PostgreSQL: commits whose hooks views follow, in order
        self.fence: Callable[[Connection], None] | None = None
        """Run first in every write transaction, inside it (a cluster's leader checks it still leads:
        ``runtime.infra.lead``); it raises to refuse the write."""
        if self.is_sqlite:
            self._install_sqlite_rules(self.engine.sync_engine, always_write=False)
            if self.file is not None:  # in memory, the cache is the database
                release_pages_on_checkin(self.engine.sync_engine)

    def _install_sqlite_rules(self, engine: Engine, *, always_write: bool) -> None:
        synchronous = self.synchronous
        # in memory, SQLite's default: the cache is the database
        cache_kib = None if self._sync_url is None else WRITER_CACHE_KIB if always_write else READER_CACHE_KIB

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            sqlite_pragmas(dbapi_conn, synchronous, cache_kib=cache_kib)

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if always_write or conn.info.get("write") else "BEGIN")

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """One short write transaction, committed on exit: serialized in-process on SQLite,
        concurrent with the others on PostgreSQL (see the module docstring)."""
        if not self.is_sqlite:
            async with self._transaction() as session:
                yield session
            return
        async with self._write_lock:
            if self._sync_url is None:  # in memory: no writer thread
                async with self._transaction() as session:
                    yield session
                return
            await self._take_writing()
            try:
                async with self._transaction() as session:  # its hooks run before the next write
                    yield session
            finally:
                self._writing.release()

    async def _take_writing(self) -> None:
        """Hold the file's write lock for an async write: taken on the writer thread, in turn
        behind the transactions queued there (and released here, once the write is done)."""
        taking = asyncio.wrap_future(self._writer_thread().submit(self._writing.acquire))
        try:
            await asyncio.shield(taking)
        except asyncio.CancelledError:
            await _outlast_cancels(taking)
            self._writing.release()
            raise

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncSession]:
        """A write transaction on a connection of its own; its after-commit hooks run once it
        committed (on PostgreSQL under the commit lock, so in this process's commit order)."""
        async with AsyncExitStack() as ordered:  # holds the commit lock, when taken, past the hooks
            async with self.engine.connect() as conn:
                info = conn.sync_connection.info  # type: ignore[union-attr]
                info["write"] = True
                try:
                    async with AsyncSession(bind=conn, expire_on_commit=False) as session:
                        async with session.begin():
                            if self.fence is not None:
                                fence = self.fence
                                await session.run_sync(lambda s: fence(s.connection()))
                            yield session
                            if not self.is_sqlite and info.get(_AFTER_COMMIT):
                                await ordered.enter_async_context(self._commit_lock)
                    hooks = _take_hooks(info)  # reached only after the commit
                finally:
                    info.pop("write", None)
                    _take_hooks(info)
            _run_hooks(hooks)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with AsyncSession(self.engine, expire_on_commit=False) as session:
            yield session

    async def write_sync(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` inside one write transaction, committed if it returns, rolled back if it raises.

        On a SQLite file the whole transaction (``BEGIN IMMEDIATE``, ``fn``,
        ``COMMIT``) is one blocking call on the writer thread, over a dedicated
        synchronous connection to the same file (created on first use, the
        same pragmas, closed by :meth:`close`); ``fn`` must then do nothing but
        database work, and must not touch the event loop. The transactions
        queue there and run one after another, so there is only ever one
        writer; the thread schedules each one's after-commit hooks on the loop
        as it commits, so they run in commit order, before the caller resumes.
        A caller cancelled while its transaction waits in the queue drops it; one
        cancelled while it runs waits until it has finished (committed or
        rolled back), and the cancel is re-raised after.

        Elsewhere (PostgreSQL, in-memory SQLite) ``fn`` runs through
        ``run_sync`` on the async connection of an ordinary :meth:`write`.
        """
        if self._sync_url is None:
            async with self.write() as tx:
                conn = await tx.connection()
                return await conn.run_sync(fn)
        loop = asyncio.get_running_loop()

        def transaction() -> T:
            engine = self._sync_engine or self._make_sync_engine()
            with self._writing, engine.begin() as conn:
                try:
                    result = fn(conn)
                finally:
                    hooks = _take_hooks(conn.info)
            if hooks:  # committed: the views follow, in commit order, before the caller resumes
                with suppress(RuntimeError):  # the loop is gone (interpreter shutdown)
                    loop.call_soon_threadsafe(_run_hooks, hooks)
            return result

        queued: Future[T] = self._writer_thread().submit(transaction)
        future = asyncio.wrap_future(queued)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if queued.cancel():  # still waiting its turn: it never runs
                raise
            await _outlast_cancels(future)  # the thread cannot be stopped: it commits or rolls back
            if not future.cancelled() and future.exception() is not None:
                log.error("write after cancellation failed", exc_info=future.exception())
            raise

    def _writer_thread(self) -> ThreadPoolExecutor:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentgram-sqlite-writer")
        return self._writer

    async def write_orm(self, fn: Callable[[Session], T]) -> T:
        """:meth:`write_sync` with an ORM session joined to its transaction (flushed, then committed).

        For the hot writes of a turn: the same ORM code as an async write, one thread hop.
        """

        def run(conn: Connection) -> T:
            with Session(bind=conn, expire_on_commit=False) as session:
                result = fn(session)
                session.flush()
                return result

        return await self.write_sync(run)

    async def read_sync(self, fn: Callable[[Session], T]) -> T:
        """Run a read-only ``fn`` with a synchronous session, on a worker thread for a SQLite file.

        The hot reads (unread mail, the history of a round) cost several of
        aiosqlite's thread hops per statement; one call on a thread with a plain
        ``sqlite3`` connection is several times cheaper, and the ORM's row
        hydration leaves the event loop too. WAL lets it read while a writer
        writes, so no lock is taken. The objects ``fn`` returns are detached
        with their columns loaded. Elsewhere ``fn`` runs through ``run_sync``.
        """
        if self._sync_url is None:
            async with self.read() as session:  # its sync_session_class is sqlmodel's Session
                return await session.run_sync(fn)  # type: ignore[arg-type]
        engine = self._sync_read_engine or self._make_sync_read_engine()

        def transaction() -> T:
            with Session(engine, expire_on_commit=False) as session:
                return fn(session)

        return await asyncio.get_running_loop().run_in_executor(None, transaction)

    def _make_sync_read_engine(self) -> Engine:
        engine = create_engine(
            self._sync_url,
            connect_args={"timeout": 30, "isolation_level": None, "check_same_thread": False},
            pool_size=4,
        )
        self._install_sqlite_rules(engine, always_write=False)
        release_pages_on_checkin(engine)
        self._sync_read_engine = engine
        return engine

    def _make_sync_engine(self) -> Engine:
        engine = create_engine(
            self._sync_url,
            connect_args={"timeout": 30, "isolation_level": None, "check_same_thread": False},
            pool_size=1,
        )
        self._install_sqlite_rules(engine, always_write=True)
        self._sync_engine = engine
        return engine

    async def close(self) -> None:
        if self._writer is not None:  # the queued writes land first
            writer, self._writer = self._writer, None
            await asyncio.to_thread(writer.shutdown)
        if self._sync_engine is not None:
            engine, self._sync_engine = self._sync_engine, None
            engine.dispose()
        if self._sync_read_engine is not None:
            engine, self._sync_read_engine = self._sync_read_engine, None
            engine.dispose()
        await self.engine.dispose()

    @staticmethod
    def sqlite_version() -> str:
        return sqlite3.sqlite_version


async def _outlast_cancels(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, absorbing every cancel of the waiter meanwhile.

    Called from a waiter's ``except CancelledError``, which re-raises once this returns.
    """
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError:
            continue


async def durable(awaitable: Awaitable[T], timeout: float = PERSIST_TIMEOUT) -> T:
    """Finish a write even if the caller is cancelled, then re-raise the cancel.

    The write runs as its own task bounded by ``timeout``; a cancel of the
    caller waits for it to land before propagating (a persist after a cancel
    must still land: docs/architecture/history.md). Further cancels while it waits
    (a second /stop, shutdown behind it) are absorbed until the write is
    done; the first one is re-raised once, as :meth:`Database.write_sync` does.
    """
    task = asyncio.ensure_future(asyncio.wait_for(awaitable, timeout))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await _outlast_cancels(task)
        if not task.cancelled() and task.exception() is not None:
            # the write's own failure (or its timeout) is logged; the cancel wins
            log.error("write after cancellation failed", exc_info=task.exception())
        raise
