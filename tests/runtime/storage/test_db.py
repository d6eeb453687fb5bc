"""Storage: WAL on, versioned migrations upgrade in place, writes survive cancellation."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from runtime.storage import migrations
from runtime.storage.db import Database, durable
from runtime.storage.migrations import migrate
from runtime.storage.models import ChatSession, KeyValue


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def test_fresh_database_is_created_in_wal_mode_and_stamped(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    assert await migrate(db) == migrations.SCHEMA_VERSION
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("SELECT version FROM schema_version").fetchone()[0] == migrations.SCHEMA_VERSION


async def test_older_database_upgrades_in_place_keeping_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    async with db.write() as tx:
        tx.add(ChatSession(chat_id=42))
    await db.close()

    def add_column(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE sessions ADD COLUMN nickname VARCHAR"))

    next_version = migrations.SCHEMA_VERSION + 1
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", next_version)
    monkeypatch.setitem(migrations.STEPS, next_version, add_column)
    db = Database(_url(tmp_path / "a.db"))
    assert await migrate(db) == next_version
    assert await migrate(db) == next_version  # idempotent
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    assert raw.execute("SELECT chat_id, nickname FROM sessions").fetchall() == [(42, None)]
    assert raw.execute("SELECT version FROM schema_version").fetchone()[0] == next_version


async def test_database_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    async with db.write() as tx:
        await tx.exec(text("UPDATE schema_version SET version = 999"))  # type: ignore[call-overload]
    with pytest.raises(RuntimeError, match="newer than this release"):
        await migrate(db)
    await db.close()


async def test_durable_write_lands_even_when_the_caller_is_cancelled(tmp_path: Path) -> None:
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    started = asyncio.Event()

    async def slow_write() -> None:
        started.set()
        await asyncio.sleep(0.2)
        async with db.write() as tx:
            tx.add(KeyValue(key="k", value="landed"))

    task = asyncio.create_task(durable(slow_write()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with db.read() as tx:
        row = await tx.get(KeyValue, "k")
    assert row is not None and row.value == "landed"
    await db.close()
