"""A session's title: the name of the chat it belongs to, when the chat has one.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

A group chat's session is the group's (issue 28): the system prompt names the group, so the
model knows several people write there, and the web view shows the name. The adapter gives the
title when it opens the session; a private chat's session has none. One nullable column, nothing
else touched: an older release ignores it. Frozen: plain SQLAlchemy types, never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    columns = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("sessions")}
    if "title" not in columns:  # a database rebuilt by hand from the models has it already
        op.add_column("sessions", sa.Column("title", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "title")
