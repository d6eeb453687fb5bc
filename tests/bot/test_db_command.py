"""``agentgram db upgrade | current | history`` on both backends: the schema by hand, one line
per answer, exit 2 for a database newer than the release."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from agentgram.bot.cli import main
from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["db", *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


async def _in_thread(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command runs its own event loop (asyncio.run), so not on the test's."""
    return await asyncio.to_thread(_run, capsys, *argv)


async def test_upgrade_current_and_history(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    head = migrations.head()
    assert await _in_thread(capsys, "current", "--url", database_url) == (
        0,
        f"empty (head is {head}: run agentgram db upgrade)",
        "",
    )
    assert await _in_thread(capsys, "upgrade", "--url", database_url) == (
        0,
        f"schema upgraded from an empty database to {head} (head)",
        "",
    )
    assert await _in_thread(capsys, "upgrade", "--url", database_url) == (
        0,
        f"schema at {head} (head): nothing to do",
        "",
    )
    assert await _in_thread(capsys, "current", "--url", database_url) == (0, f"{head} (head)", "")
    code, out, _ = await _in_thread(capsys, "history")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"{head} (head)  ") and lines[-1].startswith("0005  Baseline")


async def test_a_database_newer_than_the_release_is_one_line_and_exit_2(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = Database(database_url)
    await migrations.migrate(db)
    async with db.write() as tx:
        await tx.exec(text("UPDATE alembic_version SET version_num = '0999'"))  # type: ignore[call-overload]
    await db.close()
    code, out, err = await _in_thread(capsys, "upgrade", "--url", database_url)
    assert (code, out) == (2, "")
    assert err.startswith("config error: storage.url:") and "0999" in err and "\n" not in err
    code, out, _ = await _in_thread(capsys, "current", "--url", database_url)
    assert (code, out) == (0, f"0999 (newer than this release, whose head is {migrations.head()})")
