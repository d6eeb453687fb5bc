"""The statements that let the database settle concurrent writes.

On PostgreSQL writes run concurrently (:mod:`.db`), so a read followed by a write
that depends on it races. Each such pair is one of these instead:

- :func:`insert_ignoring` — ``INSERT … ON CONFLICT DO NOTHING``: "create unless it
  exists" (a chat's active session, a grant, prepared files), the winner decided by a
  unique key; the loser reads what won.
- :func:`upsert` — ``INSERT … ON CONFLICT DO UPDATE``: "set this value" (key-value facts).
- :func:`lock_rows` — ``SELECT … FOR NO KEY UPDATE`` in key order: a read-then-write that
  spans several statements (a mailbox batch's seqs) holds the rows it depends on until it
  commits. ``NO KEY`` so that inserts referencing the rows (foreign keys take ``KEY
  SHARE``) do not wait; key order so that two lockers never deadlock.

- :func:`advisory_lock` — ``pg_advisory_xact_lock``: a write that replaces a set of rows
  no single row stands for (the seeded approval rules) runs one at a time.

A compare-and-set (``UPDATE … WHERE status = 'pending' RETURNING``) needs no helper. SQLite and PostgreSQL spell ``ON CONFLICT`` alike but SQLAlchemy has one
construct per dialect: :func:`insert_for` picks by the connection's dialect. On SQLite
writes are serialized anyway, and :func:`lock_rows` does nothing there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql

Insert: TypeAlias = "postgresql.Insert | sqlite.Insert"


def insert_for(conn: Connection, table: sa.Table) -> Insert:
    """The dialect's ``INSERT`` (which has ``on_conflict_do_nothing`` / ``on_conflict_do_update``)."""
    if conn.dialect.name == "postgresql":  # loaded here: a bot on SQLite never loads it (issue 31)
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"no INSERT … ON CONFLICT for {conn.dialect.name}")


def insert_ignoring(
    conn: Connection,
    table: sa.Table,
    values: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    where: sa.ColumnElement[bool] | None = None,
) -> None:
    """Insert the row(s) whose ``keys`` (a unique index, partial with ``where``) are not taken."""
    statement = insert_for(conn, table).on_conflict_do_nothing(index_elements=keys, index_where=where)
    if isinstance(values, Mapping):
        conn.execute(statement.values(values))
    elif values:
        conn.execute(statement, list(values))


def upsert(
    conn: Connection, table: sa.Table, values: Mapping[str, Any], keys: Sequence[str], update: Iterable[str]
) -> None:
    """Insert the row, or set ``update``'s columns of the one with the same ``keys``."""
    statement = insert_for(conn, table).values(values)
    changes = {name: statement.excluded[name] for name in update}
    conn.execute(statement.on_conflict_do_update(index_elements=keys, set_=changes))


def lock_rows(conn: Connection, table: sa.Table, ids: Iterable[Any], key: str = "id") -> None:
    """Hold the rows ``ids`` (``FOR NO KEY UPDATE``, taken in key order) until the transaction
    ends; PostgreSQL only (SQLite's one writer holds the whole database already)."""
    wanted = sorted(set(ids))
    if conn.dialect.name != "postgresql" or not wanted:
        return
    column = table.c[key]
    conn.execute(sa.select(column).where(column.in_(wanted)).order_by(column).with_for_update(key_share=True))


RETRYABLE = frozenset({"40001", "40P01"})
"""PostgreSQL's serialization failure and deadlock: the transaction rolled back and may run again."""


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transaction the database rolled back to break a conflict (retry it)."""
    orig = getattr(exc, "orig", None)
    return (getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)) in RETRYABLE


def advisory_lock(conn: Connection, key: int) -> None:
    """Wait for PostgreSQL's transaction-scoped advisory lock ``key`` (none on SQLite)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


__all__ = ["advisory_lock", "insert_for", "insert_ignoring", "lock_rows", "retryable", "upsert"]
