"""Steering a queued message: the user's choice stored with it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03

A message sent while a turn runs is acknowledged with ⚡ Now, ⏭ After and 🗑 Cancel (issue 30).
The choice is stored on the message itself (``session_mail.steer``), in the transaction that
applies it, so a restart between the press and its effect keeps it. A nullable column: an older
release ignores it. Frozen: plain SQLAlchemy types, never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    columns = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("session_mail")}
    if "steer" not in columns:  # a database rebuilt by hand from the models has it already
        op.add_column("session_mail", sa.Column("steer", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_mail") as batch:
        batch.drop_column("steer")
