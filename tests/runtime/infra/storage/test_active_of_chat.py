"""``SessionStore.active_of_chat`` (``/sessions``): a chat's active sessions of one source — one per
forum topic, General first — each with when its newest message was written; closed sessions,
other sources and other chats are not among them. Run on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import HistoryRow, Role, SessionSource
from agentgram.runtime.infra.storage.rows import insert_row
from agentgram.runtime.infra.storage.sessions import About, SessionStore

FORUM = -1001234567890


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await migrate(database)
    try:
        yield database
    finally:
        await database.close()


async def _say(db: Database, session_id: int, at: datetime) -> None:
    row = HistoryRow(session_id=session_id, role=Role.USER, content="hi", created_at=at)
    await db.write_sync(lambda tx: insert_row(tx, row))


async def test_one_session_per_topic_general_first_each_with_its_newest_message(db: Database) -> None:
    store = SessionStore(db)

    async def place(thread_id: int, title: str | None) -> int:
        about = About(title=title) if title is not None else None
        session, _ = await store.find_or_open(
            FORUM, user_id=1, language="en", thread_id=thread_id, about=about
        )
        assert session.id is not None
        return session.id

    bugs = await place(9, "Team › Bugs")
    closed = await place(4, None)
    general = await place(0, "Team")
    reopened = await store.open_new(
        FORUM, user_id=1, language="en", thread_id=4, about=About(title="Team › Ideas")
    )
    ideas = reopened.id
    await store.find_or_open(FORUM, user_id=1, language="en", source=SessionSource.TERMINAL)
    await store.find_or_open(FORUM + 1, user_id=1, language="en")
    await store.create_headless(SessionSource.CRON, FORUM)
    early, late = datetime(2026, 3, 1, 9, 0, tzinfo=UTC), datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
    await _say(db, bugs, early)
    await _say(db, bugs, late)
    await _say(db, closed, late)

    found = await store.active_of_chat(FORUM)

    assert [(s.id, s.thread_id, s.title) for s, _ in found] == [
        (general, 0, "Team"),
        (ideas, 4, "Team › Ideas"),
        (bugs, 9, "Team › Bugs"),
    ]
    last = {s.id: when for s, when in found}
    assert last[general] is None and last[ideas] is None, (
        "a closed session's messages are not its successor's"
    )
    newest = last[bugs]
    assert newest is not None and newest.tzinfo is not None and newest == late
    (terminal,) = await store.active_of_chat(FORUM, SessionSource.TERMINAL)
    assert terminal[0].source == SessionSource.TERMINAL
    assert await store.active_of_chat(FORUM + 2) == []
