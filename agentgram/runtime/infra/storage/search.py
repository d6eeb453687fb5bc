"""Search what was said: full-text search over a chat's past conversations.

The seam is :class:`HistorySearch`: ``search`` finds the messages of one
chat's conversations (every session of it, ended ones too) that match some
words, ``exchange`` gives back the whole exchange a hit belongs to (the
user's message and the answer to it). :class:`SqliteHistorySearch` does it
with SQLite FTS5, :class:`PostgresHistorySearch` with PostgreSQL's own
full-text search (a GIN index over ``to_tsvector``), chosen by
:func:`history_search`; any other database gets :class:`LikeHistorySearch`,
slower and unranked but right.

The FTS5 index is an *external-content* table over ``chat_history``: it
stores only the index, the text stays in ``chat_history``, and three
triggers keep it in step with every insert, update and delete — in the same
transaction, so the index can never disagree with the history.
:func:`create_search_index` creates it and fills it from the rows already
there (schema step 4 for a database from before Alembic; the baseline
revision makes the same index for a new one).

What the user typed is never FTS5 syntax: each word becomes a quoted
prefix term (``"word"*``, all of them required), so ``don't`` or ``a-b``
cannot be a syntax error and a word finds its inflected forms
(``remind`` → ``reminder``), which matters for Russian. Only interactive
conversations are searched (tic and cron runs are not "what was said").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Session

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    INTERACTIVE_SOURCES,
    ChatSession,
    HistoryRow,
    Role,
    SessionSource,
)
from agentgram.runtime.infra.storage.rows import table_of

INDEX = "chat_history_fts"
MARK_START = "\x02"
MARK_END = "\x03"
"""Around each matched word in a :attr:`SearchHit.snippet` (see :meth:`SearchHit.marked`)."""
SNIPPET_TOKENS = 16
MAX_LIMIT = 50
_WORD = re.compile(r"\w+", re.UNICODE)

_ROWS = table_of(HistoryRow)
_SESSIONS = table_of(ChatSession)


def _hit_columns() -> tuple[sa.ColumnClause[Any], ...]:
    """The columns of a search hit's row, alike on both backends."""
    return (
        sa.column("id", sa.Integer),
        sa.column("session_id", sa.Integer),
        sa.column("role", sa.String),
        _ROWS.c.created_at,
        sa.column("snippet", sa.String),
    )


_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {INDEX} USING fts5("
    "content, content='chat_history', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER IF NOT EXISTS {INDEX}_insert AFTER INSERT ON chat_history BEGIN "
    f"INSERT INTO {INDEX}(rowid, content) VALUES (new.id, new.content); END",
    f"CREATE TRIGGER IF NOT EXISTS {INDEX}_delete AFTER DELETE ON chat_history BEGIN "
    f"INSERT INTO {INDEX}({INDEX}, rowid, content) VALUES ('delete', old.id, old.content); END",
    f"CREATE TRIGGER IF NOT EXISTS {INDEX}_update AFTER UPDATE OF content ON chat_history BEGIN "
    f"INSERT INTO {INDEX}({INDEX}, rowid, content) VALUES ('delete', old.id, old.content); "
    f"INSERT INTO {INDEX}(rowid, content) VALUES (new.id, new.content); END",
)


@dataclass(slots=True, frozen=True)
class SearchHit:
    """One message that matched: where it is, when it was said, a short piece of it."""

    row_id: int
    session_id: int
    role: str  # "user" or "assistant"
    said_at: datetime
    snippet: str
    """The matched words between :data:`MARK_START` and :data:`MARK_END`."""

    def marked(self, start: str, end: str) -> str:
        """The snippet with the matches between ``start`` and ``end`` (``**`` and ``**``, ``<b>``…)."""
        return self.snippet.replace(MARK_START, start).replace(MARK_END, end)

    @property
    def plain(self) -> str:
        return self.marked("", "")


@dataclass(slots=True, frozen=True)
class Exchange:
    """A user's message and the answer to it (``""`` when none was given)."""

    session_id: int
    asked_at: datetime
    question: str
    answer: str


class HistorySearch(Protocol):
    """Full-text search over one chat's conversations (the seam for PostgreSQL full-text search)."""

    async def search(self, chat_id: int, query: str, limit: int = 10) -> list[SearchHit]: ...

    async def exchange(self, chat_id: int, row_id: int) -> Exchange | None: ...


def create_search_index(conn: Connection) -> None:
    """The FTS5 index and its triggers, filled from the rows already stored (SQLite only)."""
    if conn.dialect.name != "sqlite":
        return
    for statement in _DDL:
        conn.execute(sa.text(statement))
    conn.execute(sa.text(f"INSERT INTO {INDEX}({INDEX}) VALUES ('rebuild')"))


def match_expression(query: str) -> str | None:
    """The user's words as an FTS5 query every word of which must match (``None``: no words)."""
    words = _WORD.findall(query)
    if not words:
        return None
    return " ".join('"' + word.replace('"', '""') + '"*' for word in words)


def _chat_rows(chat_id: int) -> Any:
    """The condition: a row of one of this chat's interactive conversations (a sub-agent's rows,
    in frames of their own, are not what was said in the chat)."""
    sessions = sa.select(_SESSIONS.c.id).where(
        _SESSIONS.c.chat_id == chat_id, _SESSIONS.c.source.in_(sorted(INTERACTIVE_SOURCES))
    )
    return sa.and_(_ROWS.c.session_id.in_(sessions), _ROWS.c.stack_id.is_(None))


class _Exchanges:
    """The exchange around a row, which every database finds the same way."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def exchange(self, chat_id: int, row_id: int) -> Exchange | None:
        return await self._db.read_sync(lambda tx: _exchange(tx, chat_id, row_id))


def _exchange(tx: Session, chat_id: int, row_id: int) -> Exchange | None:
    session_id = tx.execute(
        sa.select(_ROWS.c.session_id).where(_ROWS.c.id == row_id, _chat_rows(chat_id))
    ).scalar()
    if session_id is None:
        return None
    in_session = sa.and_(_ROWS.c.session_id == session_id, _ROWS.c.stack_id.is_(None))
    is_user = _ROWS.c.role == Role.USER.value
    question = tx.execute(
        sa.select(_ROWS.c.id, _ROWS.c.content, _ROWS.c.created_at)
        .where(in_session, is_user, _ROWS.c.id <= row_id)
        .order_by(_ROWS.c.id.desc())
        .limit(1)
    ).first()
    start = question.id if question is not None else 0
    next_question = tx.execute(
        sa.select(sa.func.min(_ROWS.c.id)).where(in_session, is_user, _ROWS.c.id > start)
    ).scalar()
    answers = sa.select(_ROWS.c.content, _ROWS.c.created_at).where(
        in_session, _ROWS.c.role == Role.ASSISTANT.value, _ROWS.c.id > start, _ROWS.c.content != ""
    )
    if next_question is not None:
        answers = answers.where(_ROWS.c.id < next_question)
    answer = tx.execute(answers.order_by(_ROWS.c.id.desc()).limit(1)).first()
    if question is None and answer is None:
        return None
    asked_at = question.created_at if question is not None else answer.created_at  # type: ignore[union-attr]
    return Exchange(
        session_id=session_id,
        asked_at=asked_at,
        question=question.content if question is not None else "",
        answer=answer.content if answer is not None else "",
    )


class SqliteHistorySearch(_Exchanges):
    """FTS5: ranked by bm25, newest first among equals, a snippet around the matches."""

    async def search(self, chat_id: int, query: str, limit: int = 10) -> list[SearchHit]:
        expression = match_expression(query)
        if expression is None:
            return []
        limit = max(1, min(limit, MAX_LIMIT))
        statement = sa.text(
            f"SELECT h.id, h.session_id, h.role, h.created_at,"
            f" snippet({INDEX}, 0, :start, :end, '…', :tokens) AS snippet"
            f" FROM {INDEX} JOIN chat_history AS h ON h.id = {INDEX}.rowid"
            f" JOIN sessions AS s ON s.id = h.session_id"
            f" WHERE {INDEX} MATCH :match AND s.chat_id = :chat AND s.source IN (:source, :terminal)"
            " AND h.stack_id IS NULL"
            f" ORDER BY bm25({INDEX}), h.id DESC LIMIT :limit"
        ).columns(*_hit_columns())
        params = {
            "start": MARK_START,
            "end": MARK_END,
            "tokens": SNIPPET_TOKENS,
            "match": expression,
            "chat": chat_id,
            "source": SessionSource.CHAT.value,  # the user's chats on the platform and in the terminal
            "terminal": SessionSource.TERMINAL.value,
            "limit": limit,
        }

        def read(tx: Session) -> list[SearchHit]:
            rows = tx.execute(statement, params).all()
            return [SearchHit(r.id, r.session_id, str(r.role), r.created_at, r.snippet) for r in rows]

        return await self._db.read_sync(read)


class LikeHistorySearch(_Exchanges):
    """Any other database until its own full-text search exists: every word as a substring."""

    async def search(self, chat_id: int, query: str, limit: int = 10) -> list[SearchHit]:
        words = _WORD.findall(query)
        if not words:
            return []
        conditions = [_ROWS.c.content.ilike(f"%{word}%") for word in words]
        statement = (
            sa.select(_ROWS.c.id, _ROWS.c.session_id, _ROWS.c.role, _ROWS.c.created_at, _ROWS.c.content)
            .where(_chat_rows(chat_id), *conditions)
            .order_by(_ROWS.c.id.desc())
            .limit(max(1, min(limit, MAX_LIMIT)))
        )

        def read(tx: Session) -> list[SearchHit]:
            return [
                SearchHit(r.id, r.session_id, str(r.role), r.created_at, excerpt(r.content, words))
                for r in tx.execute(statement).all()
            ]

        return await self._db.read_sync(read)


PG_INDEX = "ix_chat_history_search"
"""PostgreSQL's GIN index over ``to_tsvector('simple', content)`` (revision 0006)."""
PG_VECTOR = "to_tsvector('simple', h.content)"
"""The indexed expression, exactly as the index has it (else the index is not used)."""


def prefix_query(query: str) -> str | None:
    """The user's words as a PostgreSQL ``tsquery`` every word of which must match as a prefix
    (``None``: no words). ``websearch_to_tsquery`` has no prefixes, and without stemming (the
    ``simple`` configuration, for every language) a Russian word would miss its other forms;
    only ``\\w`` characters reach the query, so no input is a syntax error."""
    words = _WORD.findall(query.lower())
    if not words:
        return None
    return " & ".join(f"{word}:*" for word in words)


class PostgresHistorySearch(_Exchanges):
    """PostgreSQL full-text search: ranked by ``ts_rank``, newest first among equals, a
    ``ts_headline`` snippet with the same marks as FTS5's."""

    async def search(self, chat_id: int, query: str, limit: int = 10) -> list[SearchHit]:
        terms = prefix_query(query)
        if terms is None:
            return []
        statement = sa.text(
            f"SELECT h.id, h.session_id, h.role, h.created_at,"
            f" ts_headline('simple', h.content, q.query, :options) AS snippet"
            f" FROM chat_history AS h JOIN sessions AS s ON s.id = h.session_id,"
            f" to_tsquery('simple', :terms) AS q(query)"
            f" WHERE {PG_VECTOR} @@ q.query AND s.chat_id = :chat AND s.source IN (:source, :terminal)"
            " AND h.stack_id IS NULL"
            f" ORDER BY ts_rank({PG_VECTOR}, q.query) DESC, h.id DESC LIMIT :limit"
        ).columns(*_hit_columns())
        params = {
            "options": f"StartSel={MARK_START}, StopSel={MARK_END}, MaxWords={SNIPPET_TOKENS}, MinWords=5",
            "terms": terms,
            "chat": chat_id,
            "source": SessionSource.CHAT.value,
            "terminal": SessionSource.TERMINAL.value,
            "limit": max(1, min(limit, MAX_LIMIT)),
        }

        def read(tx: Session) -> list[SearchHit]:
            rows = tx.execute(statement, params).all()
            return [SearchHit(r.id, r.session_id, str(r.role), r.created_at, r.snippet) for r in rows]

        return await self._db.read_sync(read)


def excerpt(content: str, words: list[str], width: int = 120) -> str:
    """About ``width`` characters around the first word found, the words marked."""
    lowered = content.lower()
    at = min((i for i in (lowered.find(w.lower()) for w in words) if i >= 0), default=0)
    start = max(0, at - width // 3)
    piece = content[start : start + width]
    for word in words:
        piece = re.sub(f"({re.escape(word)})", MARK_START + r"\1" + MARK_END, piece, flags=re.IGNORECASE)
    return ("…" if start else "") + piece + ("…" if start + width < len(content) else "")


def history_search(db: Database) -> HistorySearch:
    """The search the database can do best."""
    if db.engine.dialect.name == "sqlite":
        return SqliteHistorySearch(db)
    if db.engine.dialect.name == "postgresql":
        return PostgresHistorySearch(db)
    return LikeHistorySearch(db)


__all__ = [
    "MARK_END",
    "MARK_START",
    "Exchange",
    "HistorySearch",
    "LikeHistorySearch",
    "PostgresHistorySearch",
    "SearchHit",
    "SqliteHistorySearch",
    "create_search_index",
    "history_search",
    "match_expression",
]
