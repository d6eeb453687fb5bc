"""One active session per chat, kept by the database: a partial unique index.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

On PostgreSQL writes run concurrently (no process lock), so "find the chat's active session,
else open one" must be settled by the database: ``ux_sessions_active_chat`` is unique on
``(source, chat_id) WHERE active``, and opening a session is ``INSERT … ON CONFLICT DO
NOTHING`` against it (:mod:`runtime.infra.storage.sessions`). It replaces
``ix_sessions_chat_active`` (``source, chat_id, active``), whose lookups it serves.

A database where a chat has several active sessions (a race of an older release) keeps the
newest one active and closes the others, as ``/new`` would, before the index is built. Both
index statements tolerate what is already there (a database rebuilt by hand from the models).
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

INDEX = "ux_sessions_active_chat"
OLD_INDEX = "ix_sessions_chat_active"

_SESSIONS = sa.table(
    "sessions",
    sa.column("id", sa.Integer()),
    sa.column("source", sa.String()),
    sa.column("chat_id", sa.BigInteger()),
    sa.column("active", sa.Boolean()),
    sa.column("closed_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    newest = (
        sa.select(sa.func.max(_SESSIONS.c.id))
        .where(_SESSIONS.c.active, _SESSIONS.c.chat_id.is_not(None))
        .group_by(_SESSIONS.c.source, _SESSIONS.c.chat_id)
    )
    op.execute(
        sa.update(_SESSIONS)
        .where(_SESSIONS.c.active, _SESSIONS.c.chat_id.is_not(None), _SESSIONS.c.id.not_in(newest))
        .values(active=False, closed_at=datetime.now(UTC))
    )
    op.drop_index(OLD_INDEX, table_name="sessions", if_exists=True)
    op.create_index(
        INDEX,
        "sessions",
        ["source", "chat_id"],
        unique=True,
        sqlite_where=sa.text("active"),
        postgresql_where=sa.text("active"),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="sessions")
    op.create_index(OLD_INDEX, "sessions", ["source", "chat_id", "active"], unique=False)
