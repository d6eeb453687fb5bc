"""Reports kept before they reach the chat: the outbox and the quiet-hours hold round-trip them.

A report is stored (outbox) before it is emitted, and a held cron result waits
in the key-value table until quiet hours end; both keep the structured content
exactly. What an older release stored in the worded shape is dropped, not
shown half-understood.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from agentgram.runtime.infra.events import (
    Address,
    CronResult,
    Digest,
    LocaleText,
    ModelText,
    Notice,
    Report,
    TicResult,
)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import OutboxRow
from agentgram.runtime.infra.storage.outbox import OutboxStore
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.scheduler.held import KEY, HeldReports
from agentgram.runtime.scheduler.plan import HeldReport

TO = Address(session_id=3, source="cron", chat_id=42, language="ru")
INBOX = CronResult(title="Inbox", body=ModelText(text="2 new mails."))
FAILED = CronResult(title="Backup", body=LocaleText(key="turn-exhausted", params={"rounds": 20, "tool": "x"}))
YESTERDAY = datetime.now(UTC) - timedelta(days=1)


async def test_every_report_shape_round_trips_through_the_outbox(db: Database) -> None:
    outbox = OutboxStore(db)
    sent = [
        Report(to=TO, content=INBOX, silent=True),
        Report(to=TO, content=TicResult(body=ModelText(text="The backup did not run."))),
        Report(to=TO, content=Digest(items=(INBOX, FAILED))),
        Notice(to=TO, key="stopped"),
    ]
    recorded = [await outbox.record(event) for event in sent]
    assert all(event.outbox_id is not None for event in recorded)
    assert await outbox.unshown(since=YESTERDAY) == recorded


async def test_a_report_stored_in_the_old_worded_shape_is_dropped(db: Database) -> None:
    outbox = OutboxStore(db)
    table = OutboxRow.__table__  # type: ignore[attr-defined]
    old = {"text": "2 new mails.", "title": "⏰ Inbox", "silent": False}
    await db.write_sync(
        lambda tx: tx.execute(
            sa.insert(table).values(
                session_id=3,
                source="cron",
                chat_id=42,
                kind="report",
                payload=old,
                created_at=datetime.now(UTC),
            )
        )
    )
    kept = await outbox.record(Report(to=TO, content=INBOX))
    assert await outbox.unshown(since=YESTERDAY) == [kept]


async def test_held_results_keep_their_content_across_a_restart(db: Database) -> None:
    held = [HeldReport(chat_id=42, result=INBOX, language="ru"), HeldReport(chat_id=7, result=FAILED)]
    for report in held:
        await HeldReports(SessionStore(db)).add(report)
    again = HeldReports(SessionStore(db))  # a new process reads what the last one held
    assert await again.take() == held
    assert await again.all() == []


async def test_held_results_of_the_old_worded_shape_are_dropped(db: Database) -> None:
    sessions = SessionStore(db)
    old = '[{"chat_id": 42, "title": "⏰ Inbox", "text": "2 new mails.", "language": null}]'
    await sessions.set_value(KEY, old)
    held = HeldReports(sessions)
    assert await held.all() == []
    await held.add(HeldReport(chat_id=42, result=INBOX))
    assert await held.all() == [HeldReport(chat_id=42, result=INBOX)]
