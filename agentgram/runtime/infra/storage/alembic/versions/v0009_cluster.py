"""Instances and leases: several agentgram processes on one database.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

``instances`` holds one row per process start, with a heartbeat in the database's time;
``leases`` says which instance holds a session, the poller or the scheduler, with the epoch that
fences a former holder's writes (:mod:`runtime.infra.cluster`,
:mod:`runtime.infra.storage.cluster_rows`). Two new tables, nothing else touched: a database at
0008 keeps working for an older release that does not know them.

Ids are ``BIGINT`` on PostgreSQL (``bigserial``) and SQLite's ``INTEGER PRIMARY KEY`` (the rowid,
the only column SQLite numbers by itself). Each table is created only if it is missing, as the
baseline does (a database rebuilt by hand from the models has them already). Frozen: plain SQLAlchemy types, as the models map
them, never the models themselves.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
NOW = sa.text("CURRENT_TIMESTAMP")


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    if "instances" not in existing:
        _create_instances()
    if "leases" not in existing:
        _create_leases()


def _create_instances() -> None:
    op.create_table(
        "instances",
        sa.Column("id", ROW_ID, nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )


def _create_leases() -> None:
    op.create_table(
        "leases",
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("key", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("instance_id", ROW_ID, nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.ForeignKeyConstraint(["instance_id"], ["instances.id"]),
        sa.PrimaryKeyConstraint("kind", "key"),
    )
    op.create_index("ix_leases_instance", "leases", ["instance_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_leases_instance", table_name="leases")
    op.drop_table("leases")
    op.drop_table("instances")
