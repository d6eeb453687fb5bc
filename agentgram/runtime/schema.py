"""The database as the command line handles it: the schema (``agentgram db upgrade | current |
history``), a copy into another database (``agentgram db copy``), and the first touch at start
(:func:`take_instance_lock`).

The adapters never import storage (their import contract); this module is the command line's door
to it, and only strings, numbers and the instance lock cross it.

**The copy** (:func:`copy_database`) moves a whole database, typically a SQLite file to
PostgreSQL. It never writes to its source: a source not at this release's head is refused (run
``agentgram db upgrade`` on it first), and so is a target that already holds a row in any table.
The target is upgraded to head (the same Alembic revisions as ``run``), then every table is
copied in foreign-key order (``sorted_tables``) in batches of :data:`COPY_BATCH`, all in one write
transaction of the target, so a failed copy leaves no half-copied data; the source is read in one
snapshot (``REPEATABLE READ`` on PostgreSQL, one read transaction on SQLite's WAL), so a copy
taken while the old process still runs is consistent — but what that process writes afterwards
is not in it: stop it first. Rows go through the models' column types, so SQLite's naive
timestamps land as PostgreSQL ``timestamptz`` and enum strings stay strings. PostgreSQL's id
sequences are then moved past the copied ids, and the row counts of both sides compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.lock import InstanceLock
from agentgram.runtime.infra.storage.reach import START_BACKOFF, is_server, reach, refusal

EXIT_FAILED = 1
EXIT_CONFIG = 2
COPY_BATCH = 1000
"""Rows read and inserted at a time by :func:`copy_database`."""
T = TypeVar("T")


async def run_schema_command(url: str, name: str) -> tuple[int, str]:
    """``upgrade`` or ``current`` on the database at ``url``: the exit code and the line to print
    (on standard output when the code is 0, else on standard error)."""
    command: Callable[[Database], Awaitable[str]] = upgrade if name == "upgrade" else current
    db = Database(url)
    try:
        return 0, await command(db)
    except Exception as error:
        return _failure(error)
    finally:
        await db.close()


def _failure(error: Exception) -> tuple[int, str]:
    """A command's error as its exit code and one line: a refusal the config must fix is exit 2,
    anything else exit 1 with what the driver says (its first line: the diagnosis)."""
    config = refusal(error)
    if config is not None:
        return EXIT_CONFIG, str(config)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return EXIT_FAILED, f"database: {type(error).__name__}: {first}"


async def upgrade(db: Database) -> str:
    done = await migrations.upgrade(db)
    if done.before == done.after:
        return f"schema at {done.after} (head): nothing to do"
    return f"schema upgraded from {done.before or 'an empty database'} to {done.after} (head)"


async def current(db: Database) -> str:
    revision = await migrations.revision_of(db)
    head = migrations.head()
    if revision == head:
        return f"{revision} (head)"
    if revision is None:
        return f"empty (head is {head}: run agentgram db upgrade)"
    if not revision.startswith("legacy-") and not migrations.is_known(revision):
        return f"{revision} (newer than this release, whose head is {head})"
    return f"{revision} (head is {head}: run agentgram db upgrade)"


def history() -> str:
    """Every revision this release carries, newest first: ``<id>  <first line of its docstring>``."""
    head = migrations.head()
    lines = []
    for script in migrations.scripts().walk_revisions():
        mark = " (head)" if script.revision == head else ""
        lines.append(f"{script.revision}{mark}  {script.doc}")
    return "\n".join(lines)


# --- the first touch at start ----------------------------------------------------------------


async def take_instance_lock(
    url: str, token_fingerprint: str, *, shared: bool = False, backoff: Backoff = START_BACKOFF
) -> InstanceLock:
    """The instance lock of ``run`` and ``chat`` (:meth:`InstanceLock.acquire`), their first touch
    of the database: a server out of reach is waited out with a warning per attempt, refused
    credentials or a missing database are one :class:`ConfigError` naming ``storage.url``
    (:mod:`runtime.infra.storage.reach`). Raises ``AlreadyRunning`` when another process holds it.
    ``shared``: a cluster's instance (taken beside the others, never beside a lone agentgram).
    """
    if not is_server(url):
        return InstanceLock.acquire(url, token_fingerprint)
    acquire = functools.partial(InstanceLock.acquire, url, token_fingerprint, shared=shared)
    return await reach(url, lambda: _on_own_thread(acquire), backoff=backoff)


async def _on_own_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a daemon thread of its own, awaited: a signal during a connect attempt ends
    the wait at once (the loop's default executor would hold the shutdown for the connect timeout)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the waiter was cancelled: what the thread got dies with the process
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as caught:
            result, error = None, caught
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="agentgram-database-reach", daemon=True).start()
    return await future


# --- db copy ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Copied:
    """One table of a copy: its rows in the source's snapshot and in the target after the copy."""

    table: str
    source_rows: int
    target_rows: int


def shown(url: str) -> str:
    """A database URL as the copy prints it: never the password."""
    return make_url(url).render_as_string(hide_password=True)


async def run_copy_command(source: str, target: str, say: Callable[[str], None]) -> tuple[int, str]:
    """``agentgram db copy``: each table's count through ``say`` as it is copied, then the exit code
    and the last line (on standard output when the code is 0, else on standard error)."""
    try:
        copied = await copy_database(source, target, say)
    except Exception as error:
        return _failure(error)
    rows = sum(c.target_rows for c in copied)
    return (
        0,
        f"copied {rows} rows in {len(copied)} tables from {shown(source)} to {shown(target)}; every count matches",
    )


async def copy_database(
    source: str, target: str, say: Callable[[str], None] = lambda line: None
) -> list[Copied]:
    """Copy every table of the database at ``source`` into the empty one at ``target`` (see the
    module docstring). Raises :class:`ConfigError` for a refusal (a source not at head, a target not
    empty, credentials), ``RuntimeError`` when the counts differ after the copy."""
    _check_source_file(source)
    src, dst = Database(source), Database(target)
    try:
        await _probe(src, "--from")
        await _probe(dst, "--to")
        await _check_source(src)
        await _check_empty(dst)
        await migrations.upgrade(dst)
        tables = migrations.target_metadata().sorted_tables
        async with src.engine.connect() as reading:
            if not src.is_sqlite:
                reading = await reading.execution_options(isolation_level="REPEATABLE READ")
            async with reading.begin():
                source_rows = await _copy_tables(reading, dst, tables, say)
        target_rows = await _counts(dst, tables)
    finally:
        await src.close()
        await dst.close()
    copied = [Copied(t.name, source_rows[t.name], target_rows[t.name]) for t in tables]
    differ = [c for c in copied if c.source_rows != c.target_rows]
    if differ:
        raise RuntimeError(
            "the counts differ: " + ", ".join(f"{c.table} {c.source_rows} → {c.target_rows}" for c in differ)
        )
    return copied


def _check_source_file(url: str) -> None:
    """A SQLite source must exist (opening it would create an empty one)."""
    database = make_url(url).database
    if not is_server(url) and database not in (None, "", ":memory:"):
        if not Path(database or "").expanduser().is_file():
            raise ConfigError("--from", f"no such database file: {database}")


async def _probe(db: Database, key: str) -> None:
    """Connect once, so that refused credentials name the side they belong to."""
    try:
        async with db.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
    except Exception as error:
        config = refusal(error)
        if config is None:
            raise
        raise ConfigError(key, config.problem) from None


async def _check_source(db: Database) -> None:
    revision, head = await migrations.revision_of(db), migrations.head()
    if revision == head:
        return
    if revision is None:
        raise ConfigError("--from", "the database is empty: nothing to copy")
    if revision.startswith("legacy-") or migrations.is_known(revision):
        raise ConfigError(
            "--from",
            f"the database is at revision {revision}, this release copies {head}:"
            f" run agentgram db upgrade --url {shown(db.url)} first",
        )
    raise ConfigError(
        "--from", f"the database (revision {revision}) is newer than this release (up to {head})"
    )


async def _check_empty(db: Database) -> None:
    """Refuse a target that holds a row in any table the models describe."""

    def counts(conn: sa.Connection) -> dict[str, int]:
        existing = set(sa.inspect(conn).get_table_names())
        return {
            table.name: n
            for table in migrations.target_metadata().sorted_tables
            if table.name in existing
            and (n := int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())) > 0
        }

    async with db.engine.connect() as conn:
        found = await conn.run_sync(counts)
    if found:
        held = ", ".join(f"{name} {n}" for name, n in found.items())
        raise ConfigError(
            "--to", f"the database is not empty (rows in {held}): copy into a new, empty database"
        )


async def _copy_tables(
    reading: AsyncConnection, dst: Database, tables: list[sa.Table], say: Callable[[str], None]
) -> dict[str, int]:
    """Copy ``tables`` in one write transaction of ``dst``; the source's count of each."""
    counts: dict[str, int] = {}
    async with dst.write() as session:
        writing = await session.connection()
        for table in tables:
            copied = await _copy_table(reading, writing, table)
            counts[table.name] = int(
                (await reading.execute(sa.select(sa.func.count()).select_from(table))).scalar_one()
            )
            say(f"{table.name}: {copied} rows")
        if not dst.is_sqlite:
            await _move_sequences(writing, tables)
    return counts


async def _copy_table(reading: AsyncConnection, writing: AsyncConnection, table: sa.Table) -> int:
    columns = list(table.columns)
    result = await reading.stream(sa.select(*columns).order_by(*table.primary_key.columns))
    copied = 0
    async for rows in result.partitions(COPY_BATCH):
        await writing.execute(
            sa.insert(table), [{c.key: v for c, v in zip(columns, row, strict=True)} for row in rows]
        )
        copied += len(rows)
    return copied


async def _move_sequences(writing: AsyncConnection, tables: list[sa.Table]) -> None:
    """Each PostgreSQL id sequence past the copied ids (rows were inserted with their ids)."""
    quote = writing.dialect.identifier_preparer.quote
    for table in tables:
        column = table.autoincrement_column
        if column is None:
            continue
        await writing.execute(
            sa.text(
                f"SELECT setval(pg_get_serial_sequence(:table, :column),"
                f" COALESCE(MAX({quote(column.name)}), 0) + 1, false) FROM {quote(table.name)}"
            ),
            {"table": quote(table.name), "column": column.name},
        )


async def _counts(db: Database, tables: list[sa.Table]) -> dict[str, int]:
    async with db.engine.connect() as conn:
        return {
            t.name: int((await conn.execute(sa.select(sa.func.count()).select_from(t))).scalar_one())
            for t in tables
        }
