"""The send budget: one token bucket and one pause per key, shared by a cluster's instances.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04

``send_budget`` holds, per key (``global``, ``chat:<id>``), a token bucket kept as its theoretical
arrival time and the time a rate-limit pause ends, in the database's clock as seconds since the
epoch (:mod:`runtime.infra.send_budget`, :mod:`runtime.infra.storage.budget_rows`). One new table,
nothing else touched: an older release ignores it. Created only if it is missing, as the baseline
does (a database rebuilt by hand from the models has it already). Frozen: plain SQLAlchemy types,
never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "send_budget" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "send_budget",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("tat", sa.Double(), nullable=False),
        sa.Column("due", sa.Double(), nullable=False),
        sa.Column("paused_until", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("send_budget")
