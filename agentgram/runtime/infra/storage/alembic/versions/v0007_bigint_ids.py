"""Chat, user and message ids are BIGINT (a chat platform's exceed 32 bits).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

A supergroup's chat id is ``-100`` followed by ten or more digits, and user ids pass 2³¹; on
PostgreSQL an ``integer`` column refuses them ("value out of range for type integer"). Every
column holding a chat platform's id becomes ``bigint`` (PostgreSQL rewrites each table and its
indexes once, inside the upgrade's transaction).

SQLite is left alone, on purpose: its ``INTEGER`` and ``BIGINT`` are one affinity and store any
64-bit integer already, so nothing overflows there, while rebuilding these tables in batch mode
(``sessions`` is what every other table references, with foreign keys on) would risk data for a
type name. :func:`~runtime.infra.storage.migrations.compare_type` counts the two as one type on
SQLite, so the models and a SQLite database do not drift.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

COLUMNS = (
    ("sessions", "chat_id", True),
    ("sessions", "user_id", True),
    ("approval_requests", "chat_id", True),
    ("approval_requests", "message_id", True),
    ("outbox", "chat_id", False),
    ("scheduled_jobs", "chat_id", False),
    ("questions", "chat_id", True),
    ("questions", "message_id", True),
)
"""Table, column, nullable: every column that holds a chat platform's id."""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column, nullable in COLUMNS:
            op.alter_column(
                table, column, type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=nullable
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column, nullable in COLUMNS:
            op.alter_column(
                table, column, type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=nullable
            )
