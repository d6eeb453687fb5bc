"""Telegram's ids pass 32 bits (a supergroup's ``-100…`` chat id, user ids over 2³¹): every column
that holds one stores and reads them back on both backends (revision 0007 made them ``bigint`` on
PostgreSQL, where an ``integer`` refuses them)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alembic import command
from sqlalchemy import BigInteger, inspect, text
from sqlmodel import col, select

from agentgram.runtime.infra.events import QuestionStatus
from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import (
    ApprovalRequestRow,
    ChatSession,
    HistoryRow,
    OutboxKind,
    OutboxRow,
    Role,
    SessionSource,
    ToolCallRow,
)
from agentgram.runtime.infra.storage.question_rows import QuestionRow
from agentgram.runtime.infra.storage.scheduler_rows import ScheduledJob, ScheduleKind
from tests.backends import pg_database

SUPERGROUP = -1001234567890123
USER = 9_000_000_000
MESSAGE = 3_000_000_000


async def test_a_supergroups_chat_id_and_a_large_user_id_are_stored_and_read_back(database_url: str) -> None:
    db = Database(database_url)
    try:
        await migrate(db)
        async with db.write() as tx:
            session = ChatSession(source=SessionSource.CHAT, chat_id=SUPERGROUP, user_id=USER)
            tx.add(session)
            await tx.flush()
            assert session.id is not None
            history = HistoryRow(session_id=session.id, role=Role.ASSISTANT)
            tx.add(history)
            await tx.flush()
            assert history.id is not None
            call = ToolCallRow(session_id=session.id, history_id=history.id, call_id="c1", name="write_file")
            tx.add(call)
            await tx.flush()
            assert call.id is not None
            tx.add(
                ApprovalRequestRow(
                    id="r1",
                    session_id=session.id,
                    tool_call_id=call.id,
                    chat_id=SUPERGROUP,
                    message_id=MESSAGE,
                )
            )
            tx.add(
                OutboxRow(
                    session_id=session.id,
                    source=SessionSource.CHAT,
                    chat_id=SUPERGROUP,
                    kind=OutboxKind.NOTICE,
                )
            )
            tx.add(
                ScheduledJob(
                    title="t",
                    schedule="every 2h",
                    kind=ScheduleKind.INTERVAL,
                    timezone="UTC",
                    prompt="p",
                    chat_id=SUPERGROUP,
                )
            )
            tx.add(
                QuestionRow(
                    id="q1",
                    session_id=session.id,
                    tool_call_id=call.id,
                    question="?",
                    status=QuestionStatus.PENDING,
                    chat_id=SUPERGROUP,
                    message_id=MESSAGE,
                )
            )
        async with db.read() as tx:
            found = (await tx.exec(select(ChatSession).where(ChatSession.chat_id == SUPERGROUP))).one()
            approval = (await tx.exec(select(ApprovalRequestRow))).one()
            outbox = (await tx.exec(select(OutboxRow))).one()
            job = (await tx.exec(select(ScheduledJob))).one()
            question = (await tx.exec(select(QuestionRow))).one()
        assert (found.chat_id, found.user_id) == (SUPERGROUP, USER)
        assert (approval.chat_id, approval.message_id) == (SUPERGROUP, MESSAGE)
        assert (outbox.chat_id, job.chat_id) == (SUPERGROUP, SUPERGROUP)
        assert (question.chat_id, question.message_id) == (SUPERGROUP, MESSAGE)
    finally:
        await db.close()


async def test_revision_0007_widens_the_id_columns_of_a_postgresql_database_keeping_its_rows() -> None:
    """A database at 0006 (``integer`` ids, as every release before made them) with a chat in it:
    the upgrade keeps the row and the column then holds a supergroup's id."""
    async with pg_database() as url:
        db = Database(url)
        try:
            async with db.write() as tx:
                conn = await tx.connection()
                await conn.run_sync(lambda sync: command.upgrade(migrations.alembic_config(sync), "0006"))
                await tx.exec(  # type: ignore[call-overload]
                    text(
                        "INSERT INTO sessions (source, chat_id, user_id, agent_id, is_interactive, is_ephemeral,"
                        " auto_deny_approvals, active, mail_cursor, created_at)"
                        " VALUES ('chat', 42, 7, 'main', true, false, false, true, 0, :now)"
                    ).bindparams(now=datetime.now(UTC))
                )
            assert not isinstance(await _column_type(db, "sessions", "chat_id"), BigInteger)
            assert await migrate(db) == migrations.SCHEMA_VERSION
            for table, column, _ in _widened():
                assert isinstance(await _column_type(db, table, column), BigInteger), (table, column)
            async with db.write() as tx:
                tx.add(ChatSession(source=SessionSource.CHAT, chat_id=SUPERGROUP, user_id=USER))
            async with db.read() as tx:
                rows = (
                    await tx.exec(
                        select(ChatSession.chat_id, ChatSession.user_id).order_by(col(ChatSession.id))
                    )
                ).all()  # type: ignore[call-overload]
            assert [tuple(r) for r in rows] == [(42, 7), (SUPERGROUP, USER)]
        finally:
            await db.close()


def _widened() -> tuple[tuple[str, str, bool], ...]:
    from agentgram.runtime.infra.storage.alembic.versions import v0007_bigint_ids

    return v0007_bigint_ids.COLUMNS


async def _column_type(db: Database, table: str, column: str) -> Any:
    async with db.engine.connect() as conn:
        columns = await conn.run_sync(lambda sync: inspect(sync).get_columns(table))
    return next(c["type"] for c in columns if c["name"] == column)
