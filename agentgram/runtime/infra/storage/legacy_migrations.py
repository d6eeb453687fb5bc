"""The schema steps from before Alembic: versions 1 to 5 of the ``schema_version`` table.

A database made by a release before Alembic carries ``schema_version`` (or, the very first
release, no version at all: version 1). :func:`upgrade_legacy` runs each step above its version
once, in order, in the caller's transaction; :mod:`runtime.infra.storage.migrations` then hands
the database to Alembic at the baseline revision ``0005``, which is version 5. These steps are
frozen: a new schema change is an Alembic revision, never a step here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Connection, DateTime, inspect, text

from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.search import create_search_index

log = get_logger("storage")

Step = Callable[[Connection], None]


def _answers_remember_delivery(conn: Connection) -> None:
    """v2: ``chat_history.delivered_at``; every answer stored before it counts as delivered."""
    kind = "TIMESTAMP" if conn.dialect.name == "postgresql" else "DATETIME"  # step 3 adds PG's zone
    conn.execute(text(f"ALTER TABLE chat_history ADD COLUMN delivered_at {kind}"))
    conn.execute(text("UPDATE chat_history SET delivered_at = created_at WHERE role = 'assistant'"))


SOURCE_COLUMNS = (("sessions", "source"), ("outbox", "source"), ("approval_rules", "source"))
"""Where a session source is stored: what v3 renames ``telegram`` to ``chat`` in."""

SQLITE_DATETIME = "%Y-%m-%d %H:%M:%S.%f"
"""How SQLAlchemy writes a datetime into SQLite: UTC, no offset, always the microseconds."""

_SQLITE_DATETIME_GLOB = "????-??-?? ??:??:??.??????"


def _chat_is_a_source_and_datetimes_are_utc(conn: Connection) -> None:
    """v3: the interactive source is ``chat``, not ``telegram``; every datetime is stored as UTC.

    Every datetime column now reads back aware UTC (:data:`~runtime.storage.types.UTCDateTime`).
    """
    tables = set(inspect(conn).get_table_names())
    for table, column in SOURCE_COLUMNS:
        if table in tables:
            conn.execute(text(f"UPDATE {table} SET {column} = 'chat' WHERE {column} = 'telegram'"))
    for table in sorted(tables):
        for column in _datetime_columns(conn, table):
            if conn.dialect.name == "sqlite":
                _rewrite_sqlite_datetimes(conn, table, column)
            elif conn.dialect.name == "postgresql":
                conn.execute(
                    text(
                        f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE TIMESTAMP WITH TIME ZONE'
                        f" USING \"{column}\" AT TIME ZONE 'UTC'"
                    )
                )


def _datetime_columns(conn: Connection, table: str) -> list[str]:
    """The table's datetime columns as the database has them (a PostgreSQL one only if naive)."""
    return [
        str(c["name"])
        for c in inspect(conn).get_columns(table)
        if isinstance(c["type"], DateTime) and not (conn.dialect.name == "postgresql" and c["type"].timezone)
    ]


def _rewrite_sqlite_datetimes(conn: Connection, table: str, column: str) -> None:
    """Rewrite a value written with an offset (or a ``T``) as the same instant in :data:`SQLITE_DATETIME`.

    Such values read back right, but SQL compares them as text with the rest;
    a value without an offset was written as UTC and is kept as it is.
    """
    odd = conn.execute(
        text(f'SELECT rowid, "{column}" FROM "{table}" WHERE "{column}" NOT GLOB :canonical'),
        {"canonical": _SQLITE_DATETIME_GLOB},
    ).all()
    for rowid, value in odd:
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            log.warning("%s.%s of row %s is not a datetime (%r): left as it is", table, column, rowid, value)
            continue
        if moment.utcoffset() is None and "T" not in str(value):
            continue
        utc = moment.replace(tzinfo=UTC) if moment.utcoffset() is None else moment.astimezone(UTC)
        conn.execute(
            text(f'UPDATE "{table}" SET "{column}" = :value WHERE rowid = :rowid'),
            {"value": utc.strftime(SQLITE_DATETIME), "rowid": rowid},
        )


def _history_is_searchable(conn: Connection) -> None:
    """v4: the FTS5 index over ``chat_history`` and its triggers, filled from the stored rows
    (:mod:`runtime.storage.search`; a fresh database gets them when ``chat_history`` is created)."""
    create_search_index(conn)


def _calls_record_their_wrappers(conn: Connection) -> None:
    """v5: ``tool_calls.wrappers``, the chain a call ran under (``background_calls`` is a new
    table, created after the steps)."""
    if "wrappers" not in {c["name"] for c in inspect(conn).get_columns("tool_calls")}:
        conn.execute(text("ALTER TABLE tool_calls ADD COLUMN wrappers TEXT"))


STEPS: dict[int, Step] = {
    2: _answers_remember_delivery,
    3: _chat_is_a_source_and_datetimes_are_utc,
    4: _history_is_searchable,
    5: _calls_record_their_wrappers,
}
"""Upgrade steps by the version they produce; version 1 is the first release."""

LEGACY_VERSION = 5
"""The last ``schema_version`` the steps produce: the Alembic baseline revision's number."""


def create_version_table(conn: Connection) -> None:
    conn.execute(text("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"))


def stamped_version(conn: Connection) -> int | None:
    """The ``schema_version`` stamp; ``None`` when the table or its row is missing."""
    if not inspect(conn).has_table("schema_version"):
        return None
    row = conn.execute(text("SELECT version FROM schema_version")).first()
    return None if row is None else int(row[0])


def stamp(conn: Connection, version: int) -> None:
    """Write ``version`` into ``schema_version`` (created if missing).

    Alembic's ``alembic_version`` is the truth; this number is kept in step so that a release
    from before Alembic, opening a newer database, refuses it ("newer than this release")
    instead of taking it for version 1.
    """
    create_version_table(conn)
    conn.execute(text("DELETE FROM schema_version"))
    conn.execute(text("INSERT INTO schema_version (version) VALUES (:v)"), {"v": version})


def upgrade_legacy(conn: Connection, version: int) -> None:
    """Run every step above ``version`` up to :data:`LEGACY_VERSION` (the tables the old
    ``create_all`` added come from the baseline revision, which creates what is missing)."""
    for step in range(version + 1, LEGACY_VERSION + 1):
        STEPS[step](conn)
        stamp(conn, step)
