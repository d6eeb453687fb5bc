"""An instance's relay address: where the others reach its webhook listener.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

In webhook mode every instance of a cluster serves the chat platform's POSTs; a standby relays each update
to the leader's listener at the address the leader registered (``instances.relay_url``,
:mod:`runtime.infra.lead`). One nullable column, nothing else touched: an older release ignores
it. Frozen: plain SQLAlchemy types, never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    columns = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("instances")}
    if "relay_url" not in columns:  # a database rebuilt by hand from the models has it already
        op.add_column("instances", sa.Column("relay_url", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("instances", "relay_url")
