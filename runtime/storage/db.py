"""The database handle: one engine, serialized short write transactions.

SQLite rules (see platform notes): WAL is switched on explicitly, every
connection gets a busy timeout, and write transactions start with
``BEGIN IMMEDIATE`` so a read-then-write never fails with "database is
locked". Writes from this process go through one ``asyncio.Lock``, so only
one connection ever writes at a time (which also sidesteps SQLite's WAL-reset
bug in older versions). PostgreSQL needs none of this and gets plain
transactions.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool
from sqlmodel.ext.asyncio.session import AsyncSession

from runtime.log import get_logger

log = get_logger("storage")
T = TypeVar("T")

PERSIST_TIMEOUT = 10.0
"""How long a write that must survive cancellation may take (round-builder spec)."""


class Database:
    """Engine plus the transaction helpers every repository uses."""

    def __init__(self, url: str) -> None:
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            database = parsed.database or ""
            if database in ("", ":memory:"):
                kwargs["poolclass"] = StaticPool
            else:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": 30, "isolation_level": None}
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        self._write_lock = asyncio.Lock()
        if self.is_sqlite:
            self._install_sqlite_rules()

    def _install_sqlite_rules(self) -> None:
        sync_engine = self.engine.sync_engine

        @event.listens_for(sync_engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """One short write transaction, committed on exit, serialized in-process."""
        async with self._write_lock:
            async with self.engine.connect() as conn:
                conn.sync_connection.info["write"] = True  # type: ignore[union-attr]
                try:
                    async with AsyncSession(bind=conn, expire_on_commit=False) as session:
                        async with session.begin():
                            yield session
                finally:
                    conn.sync_connection.info.pop("write", None)  # type: ignore[union-attr]

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with AsyncSession(self.engine, expire_on_commit=False) as session:
            yield session

    async def close(self) -> None:
        await self.engine.dispose()

    @staticmethod
    def sqlite_version() -> str:
        return sqlite3.sqlite_version


async def durable(awaitable: Awaitable[T], timeout: float = PERSIST_TIMEOUT) -> T:
    """Finish a write even if the caller is cancelled, then re-raise the cancel.

    The write runs as its own task bounded by ``timeout``; a cancel of the
    caller waits for it to land before propagating (round-builder spec:
    a persist after cancel must still land).
    """
    task = asyncio.ensure_future(asyncio.wait_for(awaitable, timeout))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            try:
                await task
            except Exception:  # the write's own failure is logged; the cancel wins
                log.exception("write after cancellation failed")
        raise
