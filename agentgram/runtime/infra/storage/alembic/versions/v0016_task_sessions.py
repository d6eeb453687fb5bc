"""A sub-agent's task run as a session of its own: the call it answers.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03

An ``execute_task`` call of a chat's root agent runs its sub-agent as a spawned session (issue 29,
requirement 3), so that the call may detach and the parent may write to the child while it works.
The child keeps the tool call it answers (``tool_calls.id``): its prompt is a sub-agent's, its
answer is the call's result and not a message to the chat. A nullable column: an older release
ignores it. Frozen: plain SQLAlchemy types, never the models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    columns = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("sessions")}
    if "parent_call_id" not in columns:  # a database rebuilt by hand from the models has it already
        op.add_column("sessions", sa.Column("parent_call_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("parent_call_id")
