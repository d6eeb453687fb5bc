"""Compaction summaries: the table, and the store that reads and writes it.

A summary row stands for a session's history up to and including
``covers_through`` (a ``chat_history`` id): the context builder sends the
summary instead of those rows (:mod:`runtime.turn.compaction`). The coverage
is a column of the row itself, so the summary and what it covers commit in
one insert — a crash before it leaves the history exactly as it was, never a
summary without its coverage or the other way round. Rows are never updated:
each compaction adds one, and the newest of a session is the one in force
(it folds the previous one in), so the older ones are the compaction's audit
trail.

Importing this module registers the table; the migrations create it on a
fresh database and add it to an older one (no versioned step needed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Connection, Index
from sqlmodel import Field, Session, SQLModel, col, select

from agentgram.runtime.infra.storage.db import Database, after_commit
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.rows import insert_row
from agentgram.runtime.infra.storage.views import SessionViews


class HistorySummary(SQLModel, table=True):
    __tablename__ = "history_summaries"
    __table_args__ = (Index("ix_history_summaries_session", "session_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id")
    covers_through: int
    """The newest ``chat_history`` id the summary stands for (every older row of the session too)."""
    made_after: int
    """The newest ``chat_history`` id when it was made: a request measured after it saw it."""
    covered_rows: int = 0
    """How many history rows it stands for, all compactions of the session together (for /context)."""
    covers_until: datetime = Field(default_factory=utcnow)
    """When the newest row it covers was written (what /context shows of its coverage)."""
    content: str
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    created_at: datetime = Field(default_factory=utcnow)


@dataclass(slots=True, frozen=True)
class Summary:
    """The summary in force for a session, as the context builder and /context read it."""

    session_id: int
    covers_through: int
    made_after: int
    covered_rows: int
    covers_until: datetime
    content: str
    created_at: datetime


_NONE = Summary(0, 0, 0, 0, utcnow(), "", utcnow())
"""A session known to have no summary (cached, so such a session costs no read per round)."""


class SummaryStore:
    """The newest summary per session, cached for the recently active ones."""

    def __init__(self, db: Database, capacity: int = 256) -> None:
        self._db = db
        self._views: SessionViews[Summary] = SessionViews(capacity)

    async def latest(self, session_id: int) -> Summary | None:
        cached = self._views.get(session_id)
        if cached is None:
            ticket = self._views.ticket(session_id)
            cached = await self._db.read_sync(lambda tx: _read_latest(tx, session_id)) or _NONE
            self._views.fill(session_id, cached, ticket)
        return None if cached is _NONE else cached

    async def save(self, row: HistorySummary) -> Summary:
        """Insert ``row``: from its commit on it is the session's summary in force."""

        def write(tx: Connection) -> Summary:
            insert_row(tx, row)
            summary = _value(row)
            after_commit(tx, lambda: self._saved(summary))
            return summary

        return await self._db.write_sync(write)

    def _saved(self, summary: Summary) -> None:
        self._views.changed(summary.session_id)
        self._views.fill(summary.session_id, summary, self._views.ticket(summary.session_id))

    async def count(self, session_id: int) -> int:
        def read(tx: Session) -> int:
            query = sa.select(sa.func.count()).where(col(HistorySummary.session_id) == session_id)
            return int(tx.execute(query).scalar_one())

        return await self._db.read_sync(read)


def _read_latest(tx: Session, session_id: int) -> Summary | None:
    row = tx.exec(
        select(HistorySummary)
        .where(HistorySummary.session_id == session_id)
        .order_by(col(HistorySummary.id).desc())
        .limit(1)
    ).first()
    return None if row is None else _value(row)


def _value(row: HistorySummary) -> Summary:
    return Summary(
        session_id=row.session_id,
        covers_through=row.covers_through,
        made_after=row.made_after,
        covered_rows=row.covered_rows,
        covers_until=row.covers_until,
        content=row.content,
        created_at=row.created_at,
    )


__all__ = ["HistorySummary", "Summary", "SummaryStore"]
