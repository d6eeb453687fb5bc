"""``agentgram db copy --from … --to …``: a SQLite database with rows in every table lands in an
empty PostgreSQL database whole (every row as it was, the counts printed and equal, the id
sequences past the copied ids), a second copy into it is refused in one line, and the copy goes
back from PostgreSQL into a new SQLite file the same way."""

from __future__ import annotations

import asyncio
import enum
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from agentgram.bot.cli import main
from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource
from agentgram.runtime.infra.storage.types import StrEnumType
from tests.backends import pg_database

ROWS = 2
"""Rows put in every table (ids 1 and 2; every foreign key points at id 1)."""
WHEN = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)


def _value(column: sa.Column[Any], n: int) -> Any:
    """The ``n``-th row's value of ``column``: unique where it must be, a parent's id 1 for a key."""
    kind = column.type
    if isinstance(kind, StrEnumType):
        members: list[enum.StrEnum] = list(kind.enum_class.__members__.values())
        return members[n % len(members)]
    if isinstance(kind, sa.types.TypeDecorator):  # UTCDateTime, AutoString: their database type
        kind = kind.impl_instance
    if isinstance(kind, sa.Boolean):
        return n % 2 == 0
    if isinstance(kind, sa.Integer):
        if column.primary_key:
            return n
        if column.foreign_keys:
            return 1
        return -1001234567890123 - n if isinstance(kind, sa.BigInteger) else 100 + n
    if isinstance(kind, sa.Float):
        return n + 0.5
    if isinstance(kind, sa.DateTime):
        return WHEN + timedelta(seconds=n)
    if isinstance(kind, sa.JSON):
        return {"n": n, "text": "привет"}
    return f"{column.name}-{n} ✓"


def _fill(conn: sa.Connection) -> None:
    for table in migrations.target_metadata().sorted_tables:
        rows = [{c.key: _value(c, n) for c in table.columns} for n in range(1, ROWS + 1)]
        conn.execute(sa.insert(table), rows)


def _contents(conn: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table.name: [tuple(r) for r in conn.execute(sa.select(table).order_by(*table.primary_key.columns))]
        for table in migrations.target_metadata().sorted_tables
    }


async def _filled_database(url: str) -> None:
    db = Database(url)
    try:
        await migrations.migrate(db)
        async with db.write() as tx:
            await (await tx.connection()).run_sync(_fill)
    finally:
        await db.close()


async def _read_all(url: str) -> dict[str, list[tuple[Any, ...]]]:
    db = Database(url)
    try:
        async with db.engine.connect() as conn:
            return await conn.run_sync(_contents)
    finally:
        await db.close()


def _copy(capsys: pytest.CaptureFixture[str], source: str, target: str) -> tuple[int, list[str], str]:
    code = main(["db", "copy", "--from", source, "--to", target])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.strip()


async def _copy_in_thread(
    capsys: pytest.CaptureFixture[str], source: str, target: str
) -> tuple[int, list[str], str]:
    """The command runs its own event loop (asyncio.run), so not on the test's."""
    return await asyncio.to_thread(_copy, capsys, source, target)


async def test_a_sqlite_database_is_copied_whole_into_postgresql_and_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await _filled_database(source)
    tables = migrations.target_metadata().sorted_tables
    async with pg_database() as target:
        code, out, err = await _copy_in_thread(capsys, source, target)
        assert (code, err) == (0, "")
        assert out[:-1] == [f"{t.name}: {ROWS} rows" for t in tables]  # foreign-key order, each counted
        shown_target = make_url(target).render_as_string(hide_password=True)
        assert out[-1] == (
            f"copied {ROWS * len(tables)} rows in {len(tables)} tables from {source} to {shown_target};"
            " every count matches"
        )
        original = await _read_all(source)
        assert await _read_all(target) == original  # every value, through the models' types

        code, out, err = await _copy_in_thread(capsys, source, target)
        assert (code, out) == (2, [])
        assert err.startswith("config error: --to: the database is not empty (rows in ") and "\n" not in err
        assert await _read_all(target) == original  # refused: nothing touched

        db = Database(target)  # the sequences moved past the copied ids: a new row gets the next one
        try:
            async with db.write() as tx:
                fresh = ChatSession(source=SessionSource.TERMINAL, chat_id=5)
                tx.add(fresh)
            assert fresh.id == ROWS + 1
        finally:
            await db.close()

        back = f"sqlite+aiosqlite:///{tmp_path / 'back.db'}"
        code, out, err = await _copy_in_thread(capsys, target, back)
        assert (code, err) == (0, "") and out[-1].startswith(f"copied {ROWS * len(tables) + 1} rows")
        assert await _read_all(back) == await _read_all(target)


async def test_a_source_behind_this_release_and_a_missing_file_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing.db"
    target = f"sqlite+aiosqlite:///{tmp_path / 'new.db'}"
    code, out, err = await _copy_in_thread(capsys, f"sqlite+aiosqlite:///{missing}", target)
    assert (code, out, err) == (2, [], f"config error: --from: no such database file: {missing}")
    assert not missing.exists()

    behind = tmp_path / "behind.db"
    await _filled_database(f"sqlite+aiosqlite:///{behind}")
    db = Database(f"sqlite+aiosqlite:///{behind}")
    async with db.write() as tx:
        await tx.exec(sa.text("UPDATE alembic_version SET version_num = '0005'"))  # type: ignore[call-overload]
    await db.close()
    code, out, err = await _copy_in_thread(capsys, f"sqlite+aiosqlite:///{behind}", target)
    assert (code, out) == (2, [])
    assert err.startswith("config error: --from: the database is at revision 0005") and "db upgrade" in err


async def test_credentials_the_target_refuses_are_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await _filled_database(source)
    async with pg_database() as target:
        wrong = make_url(target).set(username="nobody").render_as_string(hide_password=False)
        code, out, err = await _copy_in_thread(capsys, source, wrong)
    assert (code, out) == (2, [])
    assert err == 'config error: --to: PostgreSQL refused the credentials: role "nobody" does not exist'
