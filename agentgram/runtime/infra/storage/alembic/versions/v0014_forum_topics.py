"""Forum topics: a session per topic, and what a topic's session adds to its prompt.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

In a forum supergroup each topic (``message_thread_id``) is its own session (issue 28), so the
one-active-session rule becomes one per ``(source, chat_id, thread_id)``: ``ux_sessions_active_chat``
is rebuilt with the thread. ``thread_id`` is 0, not NULL, for a chat without topics (and a forum's
General topic): NULLs are distinct in a unique index, which would let a chat open two sessions.
The outbox keeps the thread of what it must still show, a scheduled job the topic it reports to; a
session keeps the instructions its topic adds to the prompt. Existing rows get 0 and no instructions, which is what they were. Frozen: plain
SQLAlchemy types, never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

INDEX = "ux_sessions_active_chat"


def _columns(table: str) -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns(table)}


def upgrade() -> None:
    # a database rebuilt by hand from the models has the columns already
    sessions, outbox, jobs = _columns("sessions"), _columns("outbox"), _columns("scheduled_jobs")
    if "thread_id" not in sessions:
        op.add_column("sessions", sa.Column("thread_id", sa.BigInteger(), nullable=False, server_default="0"))
    if "instructions" not in sessions:
        op.add_column("sessions", sa.Column("instructions", sa.String(), nullable=True))
    if "thread_id" not in outbox:
        op.add_column("outbox", sa.Column("thread_id", sa.BigInteger(), nullable=False, server_default="0"))
    if "thread_id" not in jobs:
        op.add_column(
            "scheduled_jobs", sa.Column("thread_id", sa.BigInteger(), nullable=False, server_default="0")
        )
    op.drop_index(INDEX, table_name="sessions", if_exists=True)
    op.create_index(
        INDEX,
        "sessions",
        ["source", "chat_id", "thread_id"],
        unique=True,
        sqlite_where=sa.text("active"),
        postgresql_where=sa.text("active"),
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="sessions")
    op.create_index(
        INDEX,
        "sessions",
        ["source", "chat_id"],
        unique=True,
        sqlite_where=sa.text("active"),
        postgresql_where=sa.text("active"),
    )
    with op.batch_alter_table("scheduled_jobs") as batch:
        batch.drop_column("thread_id")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("thread_id")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("instructions")
        batch.drop_column("thread_id")
