"""Sessions that talk to each other: spawned sessions and watches.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

A session may spawn another (issue 29, ``spawn_session``): the child keeps its parent and the
chat session at the top of its tree (mail scopes and the chat it reports to are read from them)
and the name the chat shows it by. A watch forwards another session's events as mail until it
expires; it is stored so that it survives a restart. Nullable columns and a new table: an older
release ignores them. Frozen: plain SQLAlchemy types, never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    columns = {column["name"] for column in inspector.get_columns("sessions")}
    # a database rebuilt by hand from the models has them already
    if "parent_session_id" not in columns:
        op.add_column("sessions", sa.Column("parent_session_id", sa.Integer(), nullable=True))
        op.create_index("ix_sessions_parent_session_id", "sessions", ["parent_session_id"])
    if "root_session_id" not in columns:
        op.add_column("sessions", sa.Column("root_session_id", sa.Integer(), nullable=True))
        op.create_index("ix_sessions_root_session_id", "sessions", ["root_session_id"])
    if "name" not in columns:
        op.add_column("sessions", sa.Column("name", sa.String(), nullable=True))
    if "session_watches" not in inspector.get_table_names():
        op.create_table(
            "session_watches",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("watcher_session_id", sa.Integer(), nullable=False),
            sa.Column("watched_session_id", sa.Integer(), nullable=False),
            sa.Column("events", sa.JSON(), nullable=False),
            sa.Column("tool", sa.String(), nullable=True),
            sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        )
        op.create_index("ix_session_watches_watcher_session_id", "session_watches", ["watcher_session_id"])
        op.create_index("ix_session_watches_watched_session_id", "session_watches", ["watched_session_id"])


def downgrade() -> None:
    op.drop_table("session_watches")
    op.drop_index("ix_sessions_root_session_id", table_name="sessions")
    op.drop_index("ix_sessions_parent_session_id", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("name")
        batch.drop_column("root_session_id")
        batch.drop_column("parent_session_id")
