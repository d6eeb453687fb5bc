"""PostgreSQL's full-text index over what was said (SQLite's FTS5 index is the baseline's).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

A GIN index on ``to_tsvector('simple', content)``: the ``simple`` configuration lowercases and
splits on non-letters in every language (Russian as English) without stemming, which the search
makes up for with prefix terms (:class:`~runtime.infra.storage.search.PostgresHistorySearch`).
The expression must stay the search's, word for word, or the index is not used.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

INDEX = "ix_chat_history_search"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON chat_history USING GIN (to_tsvector('simple', content))"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {INDEX}")
