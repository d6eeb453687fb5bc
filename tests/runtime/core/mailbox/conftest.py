"""One mailbox contract, two implementations: every test here runs on SQLite, on PostgreSQL and
in memory."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentgram.runtime.core.mailbox import MemoryMailbox, SqlMailbox
from agentgram.runtime.core.mailbox.mailbox import Mailbox
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore
from tests.backends import database

MAX_UNREAD = 4


@dataclass
class Box:
    """A mailbox under test plus what the contract needs around it."""

    kind: str
    mailbox: Mailbox
    new_session: Callable[[], Awaitable[int]]
    db: Database | None = None


async def sql_box(path: Path, max_unread: int = MAX_UNREAD, *, url: str | None = None) -> Box:
    db = Database(url or f"sqlite+aiosqlite:///{path}")
    await migrate(db)
    sessions = SessionStore(db)
    chat_ids = itertools.count(1)

    async def new_session() -> int:
        session = await sessions.open_new(next(chat_ids), user_id=None, language=None)
        assert session.id is not None
        return session.id

    return Box("sql", SqlMailbox(db, max_unread), new_session, db)


def memory_box(max_unread: int = MAX_UNREAD) -> Box:
    ids = itertools.count(1)

    async def new_session() -> int:
        return next(ids)

    return Box("memory", MemoryMailbox(max_unread), new_session)


@pytest.fixture(params=["sql", "postgres", "memory"])
async def box(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Box]:
    if request.param == "memory":
        yield memory_box()
        return
    async with database("sqlite" if request.param == "sql" else "postgres", tmp_path, "mail.db") as url:
        made = await sql_box(tmp_path / "mail.db", url=url)
        try:
            yield made
        finally:
            assert made.db is not None
            await made.db.close()
