"""A chat's session: found or opened in one write, and the runtime's cache of them that, filled at
start, tells a new chat from a known one without reading."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlmodel import col, select

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource, StackFrame
from agentgram.runtime.infra.storage.sessions import ChatSessionCache, SessionStore


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A migrated database, once per backend."""
    database = Database(database_url)
    await migrate(database)
    try:
        yield database
    finally:
        await database.close()


async def _rows(db: Database, chat_id: int) -> tuple[list[ChatSession], list[StackFrame]]:
    def read(tx):  # type: ignore[no-untyped-def]
        sessions = list(tx.exec(select(ChatSession).where(ChatSession.chat_id == chat_id)).all())
        ids = [s.id for s in sessions]
        frames = list(tx.exec(select(StackFrame).where(col(StackFrame.session_id).in_(ids))).all())
        return sessions, frames

    rows: tuple[list[ChatSession], list[StackFrame]] = await db.read_sync(read)
    return rows


@pytest.mark.parametrize("look_first", [True, False])
async def test_a_new_chat_gets_one_session_with_its_root_frame(db: Database, look_first: bool) -> None:
    store = SessionStore(db)
    session, created = await store.find_or_open(7, user_id=70, language="de", look_first=look_first)
    again, created_again = await store.find_or_open(7, user_id=70, language="de", look_first=look_first)

    assert created and not created_again
    assert session.id is not None and again.id == session.id
    assert (again.source, again.chat_id, again.user_id, again.language_code, again.active) == (
        SessionSource.CHAT,
        7,
        70,
        "de",
        True,
    )
    assert again.created_at.tzinfo is not None
    sessions, frames = await _rows(db, 7)
    assert [s.id for s in sessions] == [session.id]
    assert [(f.session_id, f.depth, f.agent_id) for f in frames] == [(session.id, 0, "main")]


@pytest.mark.parametrize("look_first", [True, False])
async def test_a_changed_language_is_stored_and_none_keeps_it(db: Database, look_first: bool) -> None:
    store = SessionStore(db)
    opened, _ = await store.find_or_open(7, user_id=70, language="de", look_first=look_first)
    changed, created = await store.find_or_open(7, user_id=70, language="fr", look_first=look_first)
    kept, _ = await store.find_or_open(7, user_id=70, language=None, look_first=look_first)

    assert not created and changed.id == opened.id and changed.language_code == "fr"
    assert kept.language_code == "fr"
    stored = await store.get(opened.id or 0)
    assert stored is not None and stored.language_code == "fr"


async def test_the_newest_active_session_is_found_after_new(db: Database) -> None:
    store = SessionStore(db)
    await store.find_or_open(7, user_id=70, language=None)
    fresh = await store.open_new(7, user_id=70, language=None)
    found, created = await store.find_or_open(7, user_id=70, language=None, look_first=False)
    assert not created and found.id == fresh.id


async def test_active_chats_are_the_open_chat_sessions_newest_first(db: Database) -> None:
    store = SessionStore(db)
    first, _ = await store.find_or_open(1, user_id=None, language=None)
    second, _ = await store.find_or_open(2, user_id=None, language=None)
    reopened = await store.open_new(1, user_id=None, language=None)
    await store.create_headless(SessionSource.TIC, 1)

    assert [s.id for s in await store.active_chats(10)] == [reopened.id, second.id]
    assert [s.id for s in await store.active_chats(1)] == [reopened.id]
    assert first.id not in {s.id for s in await store.active_chats(10)}


def _session(chat_id: int, language: str | None = None) -> ChatSession:
    return ChatSession(id=chat_id * 10, source=SessionSource.CHAT, chat_id=chat_id, language_code=language)


def test_a_cache_filled_below_capacity_knows_every_chat() -> None:
    cache = ChatSessionCache(capacity=3)
    assert not cache.complete  # not filled: a miss must read first
    cache.fill([_session(2), _session(1)])
    assert cache.complete
    assert cache.get(1, None) is not None and cache.get(3, None) is None


def test_a_cache_filled_to_capacity_may_miss_chats() -> None:
    cache = ChatSessionCache(capacity=2)
    cache.fill([_session(2), _session(1)])  # as many as it holds: there may be more
    assert not cache.complete


def test_a_cache_that_drops_a_chat_no_longer_knows_them_all() -> None:
    cache = ChatSessionCache(capacity=2)
    cache.fill([_session(1)])
    cache.keep(_session(2))
    assert cache.complete
    cache.get(1, None)  # 1 used last: 2 goes first
    cache.keep(_session(3))
    assert not cache.complete
    assert cache.get(2, None) is None and cache.get(1, None) is not None


def test_fill_keeps_what_was_kept_before_it_and_puts_the_filled_behind() -> None:
    cache = ChatSessionCache(capacity=3)
    early = _session(9)
    cache.keep(early)
    cache.fill([_session(3), _session(2), _session(1)])  # newest first
    assert not cache.complete  # four chats, room for three
    assert cache.get(9, None) is early
    assert cache.get(1, None) is None  # the oldest went
    assert cache.get(3, None) is not None and cache.get(2, None) is not None


def test_a_changed_language_misses_the_cache() -> None:
    cache = ChatSessionCache(capacity=2)
    cache.keep(_session(1, "de"))
    assert cache.get(1, "de") is not None and cache.get(1, None) is not None
    assert cache.get(1, "fr") is None
