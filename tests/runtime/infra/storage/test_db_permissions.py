"""The database holds the whole chat history: its file, WAL and SHM are 0600 and a directory made
for it 0700, after real writes and whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


async def write_something(db: Database) -> None:
    await migrate(db)
    await SessionStore(db).find_or_open(1001, user_id=1001, language="en")
    await db.write_sync(lambda conn: conn.exec_driver_sql("PRAGMA user_version = 1"))  # the sync writer too


async def test_a_new_database_and_its_wal_files_are_private(tmp_path: Path, umask: int) -> None:
    file = tmp_path / "data" / "deep" / "agentgram.db"
    db = Database(f"sqlite+aiosqlite:///{file}")
    try:
        await write_something(db)
        wal, shm = Path(f"{file}-wal"), Path(f"{file}-shm")  # there while it is open (WAL mode)
        assert (mode(file), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
        assert mode(file.parent) == 0o700
        assert db.file == file.resolve()
    finally:
        await db.close()
    assert mode(file) == 0o600


async def test_an_existing_directory_is_left_as_it_is(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    db = Database(f"sqlite+aiosqlite:///{shared / 'agentgram.db'}")
    try:
        await write_something(db)
    finally:
        await db.close()
    assert mode(shared) == 0o755
    assert mode(shared / "agentgram.db") == 0o600


async def test_a_database_an_older_version_left_world_readable_is_narrowed(tmp_path: Path) -> None:
    file = tmp_path / "agentgram.db"
    first = Database(f"sqlite+aiosqlite:///{file}")
    await write_something(first)
    await first.close()
    for path in (file, Path(f"{file}-wal"), Path(f"{file}-shm")):
        if path.exists():
            os.chmod(path, 0o644)
    again = Database(f"sqlite+aiosqlite:///{file}")
    try:
        await write_something(again)
        for path in (file, Path(f"{file}-wal"), Path(f"{file}-shm")):
            assert mode(path) == 0o600, path
    finally:
        await again.close()


async def test_an_in_memory_database_has_no_file(tmp_path: Path) -> None:
    db = Database("sqlite+aiosqlite:///:memory:")
    try:
        assert db.file is None
    finally:
        await db.close()
