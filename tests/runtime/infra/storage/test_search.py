"""Search what was said: FTS5 (and PostgreSQL's full-text search) over a chat's conversations,
ended sessions included."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Connection, text

from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import HistoryRow, Role
from agentgram.runtime.infra.storage.rows import insert_row
from agentgram.runtime.infra.storage.search import (
    MARK_END,
    MARK_START,
    PG_VECTOR,
    LikeHistorySearch,
    PostgresHistorySearch,
    SqliteHistorySearch,
    history_search,
    match_expression,
)
from agentgram.runtime.infra.storage.sessions import SessionStore
from tests.backends import pg_database

CHAT, OTHER = 42, 43


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def _say(db: Database, session_id: int, role: Role, content: str) -> int:
    def write(tx: Connection) -> int:
        return insert_row(tx, HistoryRow(session_id=session_id, role=role, content=content))

    return await db.write_sync(write)


async def _conversations(db: Database) -> tuple[int, int]:
    """An ended session of CHAT with a question and its answer, a fresh one, another chat's."""
    sessions = SessionStore(db)
    old, _ = await sessions.find_or_open(CHAT, user_id=CHAT, language="en")
    assert old.id is not None
    asked = await _say(db, old.id, Role.USER, "Which port does the staging Postgres listen on?")
    await _say(db, old.id, Role.ASSISTANT, "")  # a round that only called tools
    await _say(db, old.id, Role.ASSISTANT, "The staging Postgres listens on port 6543.")
    await _say(db, old.id, Role.USER, "thanks, and the weather?")
    fresh = await sessions.open_new(CHAT, user_id=CHAT, language="en")  # /new ends the old one
    assert fresh.id is not None
    await _say(db, fresh.id, Role.USER, "hello again")
    other, _ = await sessions.find_or_open(OTHER, user_id=OTHER, language="en")
    assert other.id is not None
    await _say(db, other.id, Role.USER, "my Postgres password is hunter2")
    return old.id, asked


async def test_search_finds_a_message_from_an_ended_session_and_opens_its_exchange(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    old_session, asked = await _conversations(db)
    search = history_search(db)
    assert isinstance(search, SqliteHistorySearch)

    hits = await search.search(CHAT, "staging postgres")
    assert {hit.session_id for hit in hits} == {old_session}, "ended sessions count, other chats do not"
    assert len(hits) == 2
    assert all(f"{MARK_START}Postgres{MARK_END}" in hit.snippet for hit in hits)
    assert all(hit.said_at.tzinfo is not None for hit in hits)
    assert "hunter2" not in " ".join(hit.plain for hit in hits)

    exchange = await search.exchange(CHAT, asked)
    assert exchange is not None
    assert exchange.question == "Which port does the staging Postgres listen on?"
    assert exchange.answer == "The staging Postgres listens on port 6543."
    answer_hit = next(hit for hit in hits if hit.role == "assistant")
    assert await search.exchange(CHAT, answer_hit.row_id) == exchange, "from the answer too"
    assert await search.exchange(OTHER, asked) is None, "another chat's row is not shown"
    await db.close()


async def test_words_match_by_prefix_and_any_punctuation_is_safe(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    await _conversations(db)
    search = history_search(db)
    assert {hit.role for hit in await search.search(CHAT, "listen")} == {"user", "assistant"}  # listens
    for query in ('port" OR *', "AND", "(staging", "-", "NEAR(x y)", ""):
        await search.search(CHAT, query)  # never an FTS5 syntax error
    assert await search.search(CHAT, "...") == []
    assert match_expression('say "hi"') == '"say"* "hi"*'
    await db.close()


async def test_the_index_follows_edits_and_deletes(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    _, asked = await _conversations(db)
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    raw.execute("UPDATE chat_history SET content = 'which kettle is best' WHERE id = ?", (asked,))
    raw.execute("DELETE FROM chat_history WHERE content LIKE 'The staging%'")
    raw.commit()
    raw.close()
    db = Database(_url(tmp_path / "a.db"))
    search = history_search(db)
    assert await search.search(CHAT, "staging") == []
    [hit] = await search.search(CHAT, "kettle")
    assert hit.row_id == asked
    await db.close()


async def test_an_older_database_gets_its_history_indexed_by_the_migration(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    await _conversations(db)
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")  # as a version-3 database was: no index, no triggers
    for trigger in ("insert", "delete", "update"):
        raw.execute(f"DROP TRIGGER chat_history_fts_{trigger}")
    raw.execute("DROP TABLE chat_history_fts")
    raw.execute("DROP TABLE alembic_version")  # made before Alembic
    raw.execute("UPDATE schema_version SET version = 3")
    raw.commit()
    raw.close()

    db = Database(_url(tmp_path / "a.db"))
    assert await migrate(db) == migrations.SCHEMA_VERSION
    assert len(await history_search(db).search(CHAT, "postgres")) == 2
    await db.close()


async def test_the_fallback_for_other_databases_finds_the_same_messages(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    await _conversations(db)
    hits = await LikeHistorySearch(db).search(CHAT, "staging postgres")
    assert len(hits) == 2
    assert all(MARK_START in hit.snippet for hit in hits)
    await db.close()


async def test_postgresql_searches_with_its_own_full_text_index_russian_too() -> None:
    async with pg_database() as url:
        db = Database(url)
        try:
            await migrate(db)
            old_session, asked = await _conversations(db)
            search = history_search(db)
            assert isinstance(search, PostgresHistorySearch)
            hits = await search.search(CHAT, "staging postgres")
            assert {hit.session_id for hit in hits} == {old_session} and len(hits) == 2
            assert all(f"{MARK_START}Postgres{MARK_END}" in hit.snippet for hit in hits)
            assert all(hit.said_at.tzinfo is not None for hit in hits)
            assert "hunter2" not in " ".join(hit.plain for hit in hits)
            assert {hit.role for hit in await search.search(CHAT, "listen")} == {"user", "assistant"}
            for query in ('port" OR *', "AND", "(staging", "-", "NEAR(x y)", "", "a & !b | c:*"):
                await search.search(CHAT, query)  # never a tsquery syntax error
            assert await search.search(CHAT, "...") == []
            exchange = await search.exchange(CHAT, asked)
            assert exchange is not None and exchange.answer == "The staging Postgres listens on port 6543."

            fresh = await SessionStore(db).find_or_open(CHAT, user_id=CHAT, language="ru")
            assert fresh[0].id is not None
            said = await _say(db, fresh[0].id, Role.USER, "Напомни мне про встречу с Анной в пятницу")
            [hit] = await search.search(CHAT, "встреч анн")  # prefixes find the other forms
            assert hit.row_id == said and f"{MARK_START}встречу{MARK_END}" in hit.snippet
            louder = await _say(db, fresh[0].id, Role.USER, "postgres, postgres and postgres again")
            [ranked, *rest] = await search.search(CHAT, "postgres")
            assert ranked.row_id == louder and len(rest) == 2  # ts_rank: the most mentions first
            async with db.read() as tx:  # the search's expression is the index's: the index is used
                await tx.exec(text("SET enable_seqscan = off"))  # type: ignore[call-overload]
                explain = f"EXPLAIN SELECT h.id FROM chat_history AS h WHERE {PG_VECTOR} @@ to_tsquery('simple', 'x:*')"
                plan = " ".join(str(r[0]) for r in (await tx.exec(text(explain))).all())  # type: ignore[call-overload]
            assert "ix_chat_history_search" in plan
        finally:
            await db.close()
