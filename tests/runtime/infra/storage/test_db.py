"""Storage: WAL on, versioned migrations upgrade in place, writes survive cancellation, and
``write_sync`` is a write transaction on the writer thread, with the same pragmas, one writer at a time.

A next revision upgrading in place and a newer database refused: test_migrations.py, on both backends."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, insert
from sqlmodel import Session

from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import (
    READER_CACHE_KIB,
    WRITER_CACHE_KIB,
    Database,
    Synchronous,
    after_commit,
    durable,
)
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ChatSession, KeyValue, SessionSource, utcnow
from agentgram.runtime.infra.storage.rows import padded


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def test_fresh_database_is_created_in_wal_mode_and_stamped(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    assert await migrate(db) == migrations.SCHEMA_VERSION
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("SELECT version FROM schema_version").fetchone()[0] == migrations.SCHEMA_VERSION


async def _database_with_a_session(path: Path) -> None:
    """A migrated database holding one chat session (chat 42), closed again."""
    db = Database(_url(path))
    await migrate(db)
    async with db.write() as tx:
        tx.add(ChatSession(source=SessionSource.CHAT, chat_id=42))
    await db.close()


async def test_version_1_learns_which_answers_were_delivered_and_counts_old_ones_as_shown(
    tmp_path: Path,
) -> None:
    await _database_with_a_session(tmp_path / "a.db")
    raw = sqlite3.connect(tmp_path / "a.db")  # a release-1 database: no delivered_at yet
    raw.execute("ALTER TABLE chat_history DROP COLUMN delivered_at")
    raw.execute(
        "INSERT INTO chat_history (session_id, role, content, is_synthetic, status, metadata, input_tokens,"
        " output_tokens, created_at) VALUES (1, 'assistant', 'old answer', 0, 'ok', '{}', 0, 0,"
        " '2026-01-01 10:00:00'), (1, 'user', 'old question', 0, 'ok', '{}', 0, 0, '2026-01-01 09:59:00')"
    )
    raw.execute("DROP TABLE alembic_version")  # made before Alembic
    raw.execute("UPDATE schema_version SET version = 1")
    raw.commit()
    raw.close()

    db = Database(_url(tmp_path / "a.db"))
    assert await migrate(db) == migrations.SCHEMA_VERSION
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    rows = raw.execute("SELECT role, delivered_at FROM chat_history ORDER BY id").fetchall()
    assert rows == [("assistant", "2026-01-01 10:00:00"), ("user", None)]


async def test_durable_write_lands_even_when_the_caller_is_cancelled(database_url: str) -> None:
    db = Database(database_url)
    await migrate(db)
    started = asyncio.Event()

    async def slow_write() -> None:
        started.set()
        await asyncio.sleep(0.2)
        async with db.write() as tx:
            tx.add(KeyValue(key="k", value="landed"))

    task = asyncio.create_task(durable(slow_write()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with db.read() as tx:
        row = await tx.get(KeyValue, "k")
    assert row is not None and row.value == "landed"
    await db.close()


async def test_durable_write_lands_when_the_caller_is_cancelled_again_and_again(database_url: str) -> None:
    """Regression: a second cancel used to abandon the write (only the first was waited out)."""
    db = Database(database_url)
    await migrate(db)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_write() -> None:
        started.set()
        await release.wait()
        async with db.write() as tx:
            tx.add(KeyValue(key="k", value="landed"))

    task = asyncio.create_task(durable(slow_write()))
    await started.wait()
    for _ in range(4):  # /stop, /stop again, shutdown…: each while the write still runs
        task.cancel()
        await asyncio.sleep(0)
        assert not task.done(), "the caller waits for its write"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with db.read() as tx:
        row = await tx.get(KeyValue, "k")
    assert row is not None and row.value == "landed"
    await db.close()


# --- write_sync: one write transaction as one blocking call on a worker thread -----------------


def _put(key: str, value: str) -> Callable[[Connection], None]:
    def work(conn: Connection) -> None:
        conn.execute(insert(KeyValue).values(key=key, value=value, updated_at=utcnow()))

    return work


async def _value(db: Database, key: str) -> str | None:
    async with db.read() as tx:
        row = await tx.get(KeyValue, key)
    return None if row is None else row.value


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    made = Database(_url(tmp_path / "a.db"))
    await migrate(made)
    yield made
    await made.close()


async def test_write_sync_commits_what_fn_wrote_and_returns_its_result(db: Database) -> None:
    def work(conn: Connection) -> int:
        _put("k", "v")(conn)
        return threading.get_ident()

    thread = await db.write_sync(work)
    assert thread != threading.get_ident(), "the transaction ran on a worker thread"
    assert await _value(db, "k") == "v"


async def test_write_sync_rolls_back_everything_when_fn_raises(db: Database) -> None:
    def work(conn: Connection) -> None:
        _put("k", "v")(conn)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await db.write_sync(work)
    assert await _value(db, "k") is None
    await db.write_sync(_put("k", "after"))  # the connection is usable again
    assert await _value(db, "k") == "after"


async def test_a_sync_write_waits_for_a_running_async_write(db: Database) -> None:
    async_in, release = asyncio.Event(), asyncio.Event()
    sync_in = threading.Event()

    async def async_writer() -> None:
        async with db.write() as tx:
            async_in.set()
            await release.wait()  # nothing executed yet: only the in-process lock keeps the other out
            tx.add(KeyValue(key="async", value="1"))

    def sync_work(conn: Connection) -> None:
        sync_in.set()
        _put("sync", "1")(conn)

    first = asyncio.create_task(async_writer())
    await async_in.wait()
    second = asyncio.create_task(db.write_sync(sync_work))
    assert not await asyncio.to_thread(sync_in.wait, 0.3), "the sync write started during the async one"
    release.set()
    await asyncio.gather(first, second)
    assert sync_in.is_set()
    assert (await _value(db, "async"), await _value(db, "sync")) == ("1", "1")


async def test_an_async_write_waits_for_a_running_sync_write(db: Database) -> None:
    sync_in, release = threading.Event(), threading.Event()
    async_in = asyncio.Event()

    def sync_work(conn: Connection) -> None:
        sync_in.set()
        release.wait(10)
        _put("sync", "1")(conn)

    async def async_writer() -> None:
        async with db.write() as tx:
            async_in.set()
            tx.add(KeyValue(key="async", value="1"))

    first = asyncio.create_task(db.write_sync(sync_work))
    assert await asyncio.to_thread(sync_in.wait, 10)
    second = asyncio.create_task(async_writer())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(async_in.wait(), 0.3)
    release.set()
    await asyncio.gather(first, second)
    assert (await _value(db, "async"), await _value(db, "sync")) == ("1", "1")


async def test_a_cancelled_sync_write_still_commits_and_keeps_the_lock_until_it_has(db: Database) -> None:
    sync_in, release = threading.Event(), threading.Event()
    async_in = asyncio.Event()

    def sync_work(conn: Connection) -> None:
        sync_in.set()
        release.wait(10)
        _put("sync", "landed")(conn)

    async def async_writer() -> None:
        async with db.write():
            async_in.set()

    writer = asyncio.create_task(db.write_sync(sync_work))
    assert await asyncio.to_thread(sync_in.wait, 10)
    writer.cancel()
    other = asyncio.create_task(async_writer())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(async_in.wait(), 0.3)
    assert not writer.done(), "the cancelled caller waits for its thread"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await writer
    await other
    assert await _value(db, "sync") == "landed"


def _gated(key: str, started: threading.Event, release: threading.Event) -> Callable[[Connection], None]:
    def work(conn: Connection) -> None:
        started.set()
        release.wait(10)
        _put(key, "1")(conn)

    return work


async def test_queued_sync_writes_run_one_after_another_without_the_event_loop(db: Database) -> None:
    """The writer thread takes the next queued transaction as soon as one commits: a busy event
    loop (here blocked outright) holds up no write queued behind another (issue 31)."""
    first_in, release = threading.Event(), threading.Event()
    second_done = threading.Event()

    def second(conn: Connection) -> None:
        _put("second", "1")(conn)
        second_done.set()

    first = asyncio.create_task(db.write_sync(_gated("first", first_in, release)))
    assert await asyncio.to_thread(first_in.wait, 10)
    queued = asyncio.create_task(db.write_sync(second))
    await asyncio.sleep(0)  # queued on the writer thread
    release.set()
    assert second_done.wait(10), "the second write waited for the blocked event loop"  # the loop is blocked
    await asyncio.gather(first, queued)
    assert (await _value(db, "first"), await _value(db, "second")) == ("1", "1")


async def test_a_sync_write_cancelled_while_it_waits_its_turn_never_runs(db: Database) -> None:
    first_in, release = threading.Event(), threading.Event()
    first = asyncio.create_task(db.write_sync(_gated("first", first_in, release)))
    assert await asyncio.to_thread(first_in.wait, 10)
    queued = asyncio.create_task(db.write_sync(_put("dropped", "1")))
    await asyncio.sleep(0)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    release.set()
    await first
    await db.write_sync(_put("after", "1"))
    assert (await _value(db, "dropped"), await _value(db, "after")) == (None, "1")


async def test_sync_writes_run_their_after_commit_hooks_in_commit_order_before_the_callers_resume(
    db: Database,
) -> None:
    seen: list[str] = []

    def write(key: str) -> Callable[[Connection], str]:
        def work(conn: Connection) -> str:
            _put(key, "1")(conn)
            after_commit(conn, lambda: seen.append(key))
            return key

        return work

    async def caller(key: str) -> None:
        assert await db.write_sync(write(key)) == key
        assert key in seen, "the caller resumed before its hook ran"

    await asyncio.gather(*(caller(f"k{i}") for i in range(20)))
    assert seen == [f"k{i}" for i in range(20)]


PRAGMAS = ("journal_mode", "busy_timeout", "synchronous", "foreign_keys")


@pytest.mark.parametrize(("synchronous", "expected"), [("NORMAL", 1), ("FULL", 2)])
async def test_the_sync_connection_has_the_same_pragmas_as_the_async_ones(
    tmp_path: Path, synchronous: Synchronous, expected: int
) -> None:
    db = Database(_url(tmp_path / "a.db"), synchronous=synchronous)
    await migrate(db)

    def read_sync(conn: Connection) -> list[object]:
        return [conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in PRAGMAS]

    sync_values = await db.write_sync(read_sync)
    async with db.read() as tx:
        conn = await tx.connection()
        async_values = [(await conn.exec_driver_sql(f"PRAGMA {name}")).scalar() for name in PRAGMAS]
    await db.close()
    assert sync_values == async_values == ["wal", 30000, expected, 1]


async def test_the_writer_and_the_readers_have_page_caches_of_their_own_sizes(tmp_path: Path) -> None:
    """The writer caches ``WRITER_CACHE_KIB``, the readers (the sync pool's and the async
    engine's) ``READER_CACHE_KIB`` each; an in-memory database keeps SQLite's default."""
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)

    def cache_size(conn: Connection) -> object:
        return conn.exec_driver_sql("PRAGMA cache_size").scalar()

    writer = await db.write_sync(cache_size)
    reader = await db.read_sync(lambda session: cache_size(session.connection()))
    async with db.read() as tx:
        conn = await tx.connection()
        async_reader = (await conn.exec_driver_sql("PRAGMA cache_size")).scalar()
    await db.close()
    assert (writer, reader, async_reader) == (-WRITER_CACHE_KIB, -READER_CACHE_KIB, -READER_CACHE_KIB)
    memory = Database("sqlite+aiosqlite:///:memory:")
    await migrate(memory)
    assert await memory.write_sync(cache_size) == -2000
    await memory.close()


def sqlite_heap() -> int:
    """SQLite's own heap in this process, in bytes (the library the sqlite3 module uses)."""
    import _sqlite3  # type: ignore[import-not-found]
    import ctypes

    used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    used.restype = ctypes.c_int64
    return int(used())


async def test_a_reader_back_in_its_pool_keeps_no_pages(tmp_path: Path) -> None:
    """A read fills its connection's page cache; once the connection is back in the pool (the sync
    readers' and the async engine's) the pages are released, so pooled connections do not each hold
    a full cache as the file grows (``db.release_pages_on_checkin``)."""
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    fill = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
    await db.write_sync(lambda tx: tx.exec_driver_sql("CREATE TABLE big (x TEXT)"))
    await db.write_sync(
        lambda tx: tx.exec_driver_sql(f"{fill}INSERT INTO big SELECT hex(randomblob(100)) FROM n")
    )
    await db.read_sync(lambda session: session.connection().exec_driver_sql("SELECT 1").all())
    async with db.read() as tx:
        await (await tx.connection()).exec_driver_sql("SELECT 1")
    idle = sqlite_heap()  # every connection open, none holding pages of ``big``

    def scan(session: Session) -> int:
        session.connection().exec_driver_sql("SELECT sum(length(x)) FROM big").all()
        return sqlite_heap()

    during_sync = await db.read_sync(scan)
    after_sync = sqlite_heap()
    async with db.read() as tx:
        await (await tx.connection()).exec_driver_sql("SELECT sum(length(x)) FROM big")
        during_async = sqlite_heap()
    after_async = sqlite_heap()
    await db.close()
    cache = READER_CACHE_KIB * 1024
    assert during_sync > idle + cache // 2 and during_async > idle + cache // 2, (
        idle,
        during_sync,
        during_async,
    )
    assert after_sync < idle + cache // 4 and after_async < idle + cache // 4, (idle, after_sync, after_async)


async def test_write_sync_on_an_in_memory_database_runs_on_the_async_connection() -> None:
    db = Database("sqlite+aiosqlite:///:memory:")
    await migrate(db)
    await db.write_sync(_put("k", "v"))
    assert await _value(db, "k") == "v"
    with pytest.raises(ValueError, match="boom"):
        await db.write_sync(lambda conn: (_put("x", "y")(conn), _raise(ValueError("boom"))))
    assert await _value(db, "x") is None
    await db.close()


def _raise(exc: Exception) -> None:
    raise exc


async def test_read_sync_runs_off_the_loop_and_sees_committed_writes(tmp_path: Path) -> None:
    import threading

    from sqlmodel import select

    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    async with db.write() as tx:
        tx.add(KeyValue(key="k", value="v"))
    loop_thread = threading.get_ident()

    def read(session: Session) -> tuple[str, int]:
        row = session.exec(select(KeyValue).where(KeyValue.key == "k")).one()
        return row.value, threading.get_ident()

    value, thread = await db.read_sync(read)
    assert value == "v" and thread != loop_thread
    await db.close()


async def test_read_sync_falls_back_for_in_memory_databases() -> None:
    from sqlmodel import select

    db = Database("sqlite+aiosqlite://")
    await migrate(db)
    async with db.write() as tx:
        tx.add(KeyValue(key="m", value="mem"))

    def read(session: Session) -> str:
        return session.exec(select(KeyValue.value).where(KeyValue.key == "m")).one()

    assert await db.read_sync(read) == "mem"
    await db.close()


@pytest.mark.parametrize("where", ["file", "memory"])
async def test_after_commit_hooks_run_after_a_commit_and_never_after_a_rollback(
    tmp_path: Path, where: str
) -> None:
    """Both write paths: a SQLite file (a worker thread) and in-memory SQLite (``run_sync``, as
    PostgreSQL would run)."""
    db = Database(_url(tmp_path / "a.db") if where == "file" else "sqlite+aiosqlite://")
    await migrate(db)
    try:
        ran: list[str] = []

        def commits(conn: Connection) -> None:
            _put("k", "v")(conn)
            after_commit(conn, lambda: ran.append("committed"))

        def rolls_back(conn: Connection) -> None:
            after_commit(conn, lambda: ran.append("rolled back"))
            raise ValueError("no")

        with pytest.raises(ValueError):
            await db.write_sync(rolls_back)
        assert ran == [], "a rolled-back transaction's hook never runs"
        await db.write_sync(commits)
        assert ran == ["committed"], "and it does not leak into the next transaction"
        assert await _value(db, "k") == "v"
    finally:
        await db.close()


def test_an_in_list_is_padded_to_a_power_of_two_with_its_last_value() -> None:
    """Lists of 1 to 200 values make 9 lengths, so 9 statements where an ``IN`` of each length
    would be one more statement prepared and cached by every connection (``rows.padded``)."""
    lengths = set()
    for n in range(1, 201):
        values = list(range(n))
        shown = padded(values)
        assert shown[:n] == values and set(shown) == set(values)
        assert len(shown) & (len(shown) - 1) == 0 and len(shown) < 2 * n
        lengths.add(len(shown))
    assert lengths == {1, 2, 4, 8, 16, 32, 64, 128, 256}
    assert padded([]) == []
