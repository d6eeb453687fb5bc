"""Alembic migrations on both backends: an empty database and a version-1 one both reach the
head with no drift from the models, an empty SQLite database gets from the snapshot exactly what
the revisions build, a database newer than the release is refused in one line,
``storage.migrate: never`` changes nothing, and concurrent starts on PostgreSQL upgrade once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, DateTime, inspect, text
from sqlmodel import select

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.storage import fresh_schema, fresh_schema_sqlite, migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import SchemaBehind, SchemaTooNew, migrate, revision_of
from agentgram.runtime.infra.storage.models import ChatSession, HistoryRow, SessionSource
from tests.backends import pg_database


def _drift(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(
        conn, opts={"include_name": migrations.include_name, "compare_type": migrations.compare_type}
    )
    return list(compare_metadata(context, migrations.target_metadata()))


async def drift(db: Database) -> list[Any]:
    """What ``alembic check`` would find between the database and the models."""
    async with db.engine.connect() as conn:
        return await conn.run_sync(_drift)


async def _tables(db: Database) -> set[str]:
    async with db.engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


@pytest.mark.parametrize("from_revisions", [False, True], ids=["as-started", "from-revisions"])
async def test_an_empty_database_reaches_the_head_with_no_drift(
    database_url: str, from_revisions: bool
) -> None:
    """As a start builds it (on SQLite from the snapshot) and by running every revision."""
    db = Database(database_url)
    try:
        done = await migrations.upgrade(db, from_revisions=from_revisions)
        assert done == migrations.Upgrade(None, migrations.HEAD_REVISION)
        assert int(done.after) == migrations.SCHEMA_VERSION == 17
        assert await revision_of(db) == migrations.head() == "0017"
        assert await drift(db) == []
        assert "alembic_version" in await _tables(db)
        assert await migrate(db) == migrations.SCHEMA_VERSION  # idempotent
    finally:
        await db.close()


Built = tuple[list[Any], dict[str, list[Any]], tuple[str, ...]]


def _schema_and_rows(conn: Connection) -> Built:
    """All of a SQLite database but its pages: ``sqlite_master`` in creation order (each table's
    SQL as altered since), every table's rows (the FTS5 index's shadow tables too), its snapshot."""
    master = [
        tuple(r)
        for r in conn.execute(text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"))
    ]
    tables = [name for kind, name, _, _ in master if kind == "table"]
    rows = {name: [tuple(r) for r in conn.execute(text(f'SELECT * FROM "{name}"'))] for name in tables}
    return master, rows, fresh_schema.snapshot(conn)


async def _built(url: str, *, from_revisions: bool) -> Built:
    db = Database(url)
    try:
        await migrations.upgrade(db, from_revisions=from_revisions)
        async with db.engine.connect() as conn:
            return await conn.run_sync(_schema_and_rows)
    finally:
        await db.close()


async def test_an_empty_sqlite_database_gets_from_the_snapshot_exactly_what_the_revisions_build(
    tmp_path: Path,
) -> None:
    """The snapshot is what the revisions build now, and running it gives the same ``sqlite_master``
    (every table's SQL: columns, their order and defaults, keys; indexes, triggers, the FTS5 index)
    and the same rows (``alembic_version``, ``schema_version``, the FTS5 index's records)."""
    by_revisions = await _built(f"sqlite+aiosqlite:///{tmp_path / 'revisions.db'}", from_revisions=True)
    regenerate = "the revisions build another schema: python -m agentgram.runtime.infra.storage.fresh_schema"
    assert fresh_schema_sqlite.REVISION == migrations.head(), regenerate
    assert by_revisions[2] == fresh_schema_sqlite.STATEMENTS, regenerate
    assert (
        await _built(f"sqlite+aiosqlite:///{tmp_path / 'snapshot.db'}", from_revisions=False) == by_revisions
    )


def _as_version_1(conn: Connection) -> None:
    """Turn a head database into what the first release made: no version table at all, no
    ``delivered_at`` or ``wrappers``, no search index, no ``background_calls``, naive
    PostgreSQL datetimes, ``telegram`` sessions; then one chat with an old answer."""
    conn.execute(text("DROP TABLE alembic_version"))
    conn.execute(text("DROP TABLE schema_version"))
    conn.execute(text("DROP TABLE background_calls"))
    if conn.dialect.name == "sqlite":
        for trigger in ("insert", "delete", "update"):
            conn.execute(text(f"DROP TRIGGER chat_history_fts_{trigger}"))
        conn.execute(text("DROP TABLE chat_history_fts"))
    conn.execute(text("ALTER TABLE chat_history DROP COLUMN delivered_at"))
    conn.execute(text("ALTER TABLE tool_calls DROP COLUMN wrappers"))
    if conn.dialect.name == "postgresql":
        for table in inspect(conn).get_table_names():
            for column in inspect(conn).get_columns(table):
                if isinstance(column["type"], DateTime):
                    name = column["name"]
                    conn.execute(text(f'ALTER TABLE "{table}" ALTER COLUMN "{name}" TYPE TIMESTAMP'))
    conn.execute(
        text(
            "INSERT INTO sessions (source, chat_id, agent_id, is_interactive, is_ephemeral,"
            " auto_deny_approvals, active, mail_cursor, created_at)"
            " VALUES ('telegram', 42, 'main', true, false, false, true, 0, '2026-01-01 10:00:00')"
        )
    )
    conn.execute(
        text(
            "INSERT INTO chat_history (session_id, role, content, is_synthetic, status, metadata,"
            " input_tokens, output_tokens, created_at) SELECT id, 'assistant', 'old answer', false,"
            " 'ok', '{}', 0, 0, '2026-01-01 10:00:00' FROM sessions"
        )
    )


async def test_a_version_1_database_runs_the_old_steps_once_then_alembic_with_no_drift(
    database_url: str,
) -> None:
    db = Database(database_url)
    try:
        await migrate(db)
        async with db.write() as tx:
            await (await tx.connection()).run_sync(_as_version_1)
        assert await revision_of(db) == "legacy-1"
        assert await migrate(db) == migrations.SCHEMA_VERSION
        assert await revision_of(db) == migrations.head()
        assert await drift(db) == []
        async with db.read() as tx:
            session = (await tx.exec(select(ChatSession))).one()
            row = (await tx.exec(select(HistoryRow))).one()
        assert session.source == SessionSource.CHAT  # v3 ran
        assert row.delivered_at == row.created_at and row.created_at.tzinfo is not None  # v2, v3 ran
        assert "background_calls" in await _tables(db)  # the baseline added what create_all used to
        async with db.read() as tx:
            stamped = (await tx.exec(text("SELECT version FROM schema_version"))).one()  # type: ignore[call-overload]
        assert stamped[0] == migrations.SCHEMA_VERSION  # an older release reads a version it knows
    finally:
        await db.close()


NEXT_REVISION = """
import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("nickname", sa.String(), nullable=True))
"""


def _next_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Ship :data:`NEXT_REVISION` after the head (a folder of revisions besides the package's)."""
    versions = tmp_path / "versions"
    versions.mkdir()
    next_version = migrations.SCHEMA_VERSION + 1
    (versions / f"v{next_version:04d}_nickname.py").write_text(
        NEXT_REVISION.format(revision=f"{next_version:04d}", down=migrations.head())
    )
    monkeypatch.setattr(migrations, "EXTRA_VERSION_LOCATIONS", [versions])
    return next_version


async def test_an_empty_database_behind_a_next_revision_is_built_then_upgraded(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose snapshot is behind its head (on SQLite) still starts on an empty database:
    the snapshot builds its own revision, then Alembic runs the next one."""
    next_version = _next_revision(tmp_path, monkeypatch)
    db = Database(database_url)
    try:
        assert await migrations.upgrade(db) == migrations.Upgrade(None, f"{next_version:04d}")
        assert await revision_of(db) == f"{next_version:04d}"
        async with db.read() as tx:
            rows = (await tx.exec(text("SELECT nickname FROM sessions"))).all()  # type: ignore[call-overload]
            stamped = (await tx.exec(text("SELECT version FROM schema_version"))).one()  # type: ignore[call-overload]
        assert rows == [] and stamped[0] == next_version
    finally:
        await db.close()


async def test_a_next_revision_upgrades_in_place_keeping_data(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(database_url)
    try:
        await migrate(db)
        async with db.write() as tx:
            tx.add(ChatSession(source=SessionSource.CHAT, chat_id=42))
        next_version = _next_revision(tmp_path, monkeypatch)
        assert await migrate(db) == next_version
        assert await migrate(db) == next_version  # idempotent
        async with db.read() as tx:
            rows = (await tx.exec(text("SELECT chat_id, nickname FROM sessions"))).all()  # type: ignore[call-overload]
            stamped = (await tx.exec(text("SELECT version FROM schema_version"))).one()  # type: ignore[call-overload]
        assert [tuple(r) for r in rows] == [(42, None)]
        assert stamped[0] == next_version
    finally:
        await db.close()


async def test_a_database_from_a_newer_release_is_refused_in_one_line(database_url: str) -> None:
    db = Database(database_url)
    try:
        await migrate(db)
        async with db.write() as tx:
            await tx.exec(text("UPDATE alembic_version SET version_num = '0999'"))  # type: ignore[call-overload]
        with pytest.raises(SchemaTooNew, match="newer than this release") as refused:
            await migrate(db)
        assert isinstance(refused.value, ConfigError) and "\n" not in str(refused.value)
        assert "0999" in str(refused.value)
    finally:
        await db.close()


async def test_a_database_from_a_newer_release_before_alembic_is_refused(database_url: str) -> None:
    db = Database(database_url)
    try:
        await migrate(db)
        async with db.write() as tx:
            await tx.exec(text("DROP TABLE alembic_version"))  # type: ignore[call-overload]
            await tx.exec(text("UPDATE schema_version SET version = 999"))  # type: ignore[call-overload]
        with pytest.raises(SchemaTooNew, match="newer than this release"):
            await migrate(db)
    finally:
        await db.close()


async def test_migrate_never_upgrades_nothing_and_says_what_to_run(database_url: str) -> None:
    db = Database(database_url)
    try:
        with pytest.raises(SchemaBehind, match="agentgram db upgrade"):
            await migrate(db, "never")
        assert await revision_of(db) is None
        assert "sessions" not in await _tables(db)
        await migrate(db)
        assert await migrate(db, "never") == migrations.SCHEMA_VERSION  # at head: it starts
    finally:
        await db.close()


async def test_concurrent_starts_on_postgresql_upgrade_once() -> None:
    """Eight processes' worth of engines start at once on one empty database: the advisory lock
    lets one build the schema, the others wait and find it at head."""
    async with pg_database() as url:
        dbs = [Database(url) for _ in range(8)]
        try:
            done = await asyncio.gather(*(migrations.upgrade(db) for db in dbs))
            assert sorted(d.before or "new" for d in done) == [migrations.head()] * 7 + ["new"]
            assert {d.after for d in done} == {migrations.head()}
            assert await drift(dbs[0]) == []
        finally:
            for db in dbs:
                await db.close()
