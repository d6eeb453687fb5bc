"""Schema v3: a database written by v2 code reads back typed — ``telegram`` sessions are ``chat``
sessions, every datetime is the same instant, aware UTC, and statuses are enums."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import select

from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import (
    ApprovalRuleRow,
    ChatSession,
    OutboxKind,
    OutboxRow,
    SessionSource,
    Turn,
    TurnStatus,
)
from agentgram.runtime.infra.storage.scheduler_rows import JobApprovals, ScheduledJob, ScheduleKind
from agentgram.runtime.infra.storage.sessions import SessionStore

TEN_UTC = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def _v2_database(path: Path) -> None:
    """The tables as v2 made them, with rows in the shapes v2 code wrote (raw SQL, no ORM)."""
    db = Database(_url(path))
    await migrate(db)  # v3 made no DDL change: the tables are v2's
    await db.close()
    raw = sqlite3.connect(path)
    raw.executescript(
        """
        DROP TABLE alembic_version;  -- made before Alembic
        UPDATE schema_version SET version = 2;
        INSERT INTO sessions (source, chat_id, agent_id, is_interactive, is_ephemeral,
            auto_deny_approvals, active, mail_cursor, created_at, closed_at)
        VALUES ('telegram', 42, 'main', 1, 0, 0, 1, 0, '2026-01-01 10:00:00.000000', NULL),
               ('cron', 42, 'main', 0, 1, 1, 0, 0, '2026-01-01 10:00:00', '2026-01-01T12:00:00+02:00');
        INSERT INTO turns (session_id, status, rounds, started_at, ended_at)
        VALUES (1, 'final', 1, '2026-01-01 10:00:00.000000', '2026-01-01 10:00:00+00:00');
        INSERT INTO outbox (session_id, source, chat_id, kind, payload, created_at)
        VALUES (1, 'telegram', 42, 'notice', '{}', '2026-01-01T10:00:00');
        INSERT INTO approval_rules (tool, action, priority, source, origin, created_at)
        VALUES ('execute_cmd', 'deny', 100, 'telegram', 'user', '2026-01-01 10:00:00.000000');
        INSERT INTO scheduled_jobs (title, schedule, kind, timezone, prompt, chat_id, enabled, approvals,
            anchor_at, next_run_at, created_at, updated_at)
        VALUES ('t', 'every 2h', 'interval', 'UTC', 'p', 42, 1, 'ask', '2026-01-01 05:00:00-05:00',
            NULL, '2026-01-01 10:00:00.000000', '2026-01-01 10:00:00.000000');
        """
    )
    raw.commit()
    raw.close()


async def test_a_v2_database_reads_back_chat_sources_aware_datetimes_and_enums(tmp_path: Path) -> None:
    await _v2_database(tmp_path / "a.db")
    db = Database(_url(tmp_path / "a.db"))
    assert await migrate(db) == migrations.SCHEMA_VERSION == 17  # v3, v4 (the search index), v5, 0006 to 0017

    async with db.read() as tx:
        chat, cron = (await tx.exec(select(ChatSession).order_by(ChatSession.id))).all()  # type: ignore[arg-type]
        turn = (await tx.exec(select(Turn))).one()
        outbox = (await tx.exec(select(OutboxRow))).one()
        rule = (await tx.exec(select(ApprovalRuleRow))).one()
        job = (await tx.exec(select(ScheduledJob))).one()
    assert (type(chat.source), chat.source, cron.source) == (SessionSource, "chat", SessionSource.CRON)
    assert (outbox.source, outbox.kind, rule.source) == (SessionSource.CHAT, OutboxKind.NOTICE, "chat")
    assert type(turn.status) is TurnStatus and turn.status == TurnStatus.FINAL
    assert (job.kind, job.approvals) == (ScheduleKind.INTERVAL, JobApprovals.ASK)
    moments = [
        chat.created_at,
        cron.created_at,
        cron.closed_at,
        turn.started_at,
        turn.ended_at,
        outbox.created_at,
        job.anchor_at,
    ]
    assert moments == [TEN_UTC] * len(moments)
    assert all(moment is not None and moment.tzinfo == UTC for moment in moments)

    session, created = await SessionStore(db).find_or_open(42, user_id=None, language=None)
    assert (session.id, created) == (1, False), "the chat keeps its session across the rename"
    await db.close()


async def test_values_with_an_offset_are_rewritten_as_utc_and_the_rest_kept_as_written(
    tmp_path: Path,
) -> None:
    await _v2_database(tmp_path / "a.db")
    db = Database(_url(tmp_path / "a.db"))
    await migrate(db)
    assert await migrate(db) == migrations.SCHEMA_VERSION  # idempotent
    await db.close()
    raw = sqlite3.connect(tmp_path / "a.db")
    assert raw.execute("SELECT created_at, closed_at FROM sessions ORDER BY id").fetchall() == [
        ("2026-01-01 10:00:00.000000", None),
        ("2026-01-01 10:00:00", "2026-01-01 10:00:00.000000"),
    ]
    assert raw.execute("SELECT ended_at FROM turns").fetchone() == ("2026-01-01 10:00:00.000000",)
    assert raw.execute("SELECT created_at FROM outbox").fetchone() == ("2026-01-01 10:00:00.000000",)
    assert raw.execute("SELECT anchor_at FROM scheduled_jobs").fetchone() == ("2026-01-01 10:00:00.000000",)
    assert raw.execute("SELECT DISTINCT source FROM sessions ORDER BY source").fetchall() == [
        ("chat",),
        ("cron",),
    ]
