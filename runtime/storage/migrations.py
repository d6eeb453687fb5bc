"""Versioned schema migrations, run on start.

A fresh database gets every table from the models and is stamped with
:data:`SCHEMA_VERSION`. An older database runs each step above its stamped
version in order, inside one transaction per step, so a database made by an
older release upgrades in place. A new release that changes the schema adds a
step to :data:`STEPS` and bumps :data:`SCHEMA_VERSION`; the models always
describe the newest shape.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, inspect, text
from sqlmodel import SQLModel

import agentgram.runtime.scheduler.models
import agentgram.runtime.storage.models  # noqa: F401  (registers the tables)
from agentgram.runtime.log import get_logger
from agentgram.runtime.storage.db import Database

log = get_logger("storage")

Step = Callable[[Connection], None]


def _answers_remember_delivery(conn: Connection) -> None:
    """v2: ``chat_history.delivered_at``; every answer stored before it counts as delivered."""
    conn.execute(text("ALTER TABLE chat_history ADD COLUMN delivered_at DATETIME"))
    conn.execute(text("UPDATE chat_history SET delivered_at = created_at WHERE role = 'assistant'"))


STEPS: dict[int, Step] = {2: _answers_remember_delivery}
"""Upgrade steps by the version they produce; version 1 is the first release."""

SCHEMA_VERSION = 2


def _create_version_table(conn: Connection) -> None:
    conn.execute(text("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"))


def _stamped_version(conn: Connection) -> int | None:
    row = conn.execute(text("SELECT version FROM schema_version")).first()
    return None if row is None else int(row[0])


def _stamp(conn: Connection, version: int) -> None:
    conn.execute(text("DELETE FROM schema_version"))
    conn.execute(text("INSERT INTO schema_version (version) VALUES (:v)"), {"v": version})


def _migrate(conn: Connection) -> tuple[int | None, int]:
    _create_version_table(conn)
    current = _stamped_version(conn)
    if current is None:
        has_tables = inspect(conn).has_table("sessions")
        if has_tables:  # a pre-versioning database is version 1
            current = 1
        else:
            SQLModel.metadata.create_all(conn)
            _stamp(conn, SCHEMA_VERSION)
            return None, SCHEMA_VERSION
    if current > SCHEMA_VERSION:
        raise RuntimeError(f"database schema version {current} is newer than this release ({SCHEMA_VERSION})")
    for version in range(current + 1, SCHEMA_VERSION + 1):
        STEPS[version](conn)
        _stamp(conn, version)
    # tables added by later releases that a step did not create explicitly
    SQLModel.metadata.create_all(conn)
    return current, SCHEMA_VERSION


async def migrate(db: Database) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return the resulting version."""
    async with db.write() as session:
        conn = await session.connection()
        before, after = await conn.run_sync(_migrate)
    if before != after:
        log.info("database schema %s -> %s", before if before is not None else "new", after)
    return after
