"""Output that must reach the user, recorded before it is emitted.

Notices ("⏹ Stopped.", "🔄 Restarted…"), reports (tic and cron results) and
files the agent sends (``send_file``) are stored here first, then published on the event bus with their
``outbox_id``. The adapter reports each one shown once its chat shows it (or
once the platform refused it for good); whatever a crash or a long outage kept
from the chat is published again on start, once, if it is under a day old.
Final answers have the same guarantee through ``chat_history.delivered_at``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy import Connection
from sqlmodel import Session, col, select

from agentgram.runtime.infra.events import REPORT_CONTENT, Address, DurableOutput, FileOutput, Notice, Report
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import HEADLESS_SOURCES, OutboxRow, utcnow

log = get_logger("storage")

_ROWS = OutboxRow.__table__  # type: ignore[attr-defined]


def _payload(event: DurableOutput) -> dict[str, object]:
    fields = dataclasses.asdict(event)
    for name in ("to", "kind", "outbox_id"):
        fields.pop(name)
    return fields


def _event(row: OutboxRow) -> DurableOutput | None:
    """The stored event; ``None`` for a report stored in the shape before structured content
    (rendered title and text): it is dropped, logged, rather than shown half-understood."""
    to = Address(
        session_id=row.session_id,
        source=row.source,
        chat_id=row.chat_id,
        language=row.language,
        thread_id=row.thread_id,
    )
    if row.kind == "report":
        return _report(to, row)
    if row.kind == "file":
        return FileOutput(to=to, outbox_id=row.id, **row.payload)  # type: ignore[arg-type]
    return Notice(to=to, outbox_id=row.id, **row.payload)  # type: ignore[arg-type]


def _report(to: Address, row: OutboxRow) -> Report | None:
    try:
        content = REPORT_CONTENT.validate_python(row.payload["content"])
    except (KeyError, TypeError, ValidationError):
        log.warning("dropping the stored report %s: its shape is from an older release", row.id)
        return None
    return Report(to=to, content=content, silent=bool(row.payload.get("silent")), outbox_id=row.id)


class OutboxStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, event: DurableOutput) -> DurableOutput:
        """Store ``event``; the same event, carrying its record's id. Chatless output is not kept."""
        if event.to.chat_id is None:
            return event
        to = event.to
        values = {
            "session_id": to.session_id,
            "source": to.source,
            "chat_id": to.chat_id,
            "thread_id": to.thread_id,
            "language": to.language,
            "kind": event.kind,
            "payload": _payload(event),
            "created_at": utcnow(),
        }

        def insert(tx: Connection) -> int:
            return int(tx.execute(sa.insert(_ROWS).values(values).returning(_ROWS.c.id)).scalar_one())

        return dataclasses.replace(event, outbox_id=await self._db.write_sync(insert))

    async def shown(self, outbox_id: int) -> None:
        await self._db.write_sync(
            lambda tx: tx.execute(
                sa.update(_ROWS).where(_ROWS.c.id == outbox_id).values(delivered_at=utcnow())
            )
        )

    async def unshown(
        self, since: datetime, chat_id: int | None = None, *, headless: bool | None = None
    ) -> list[DurableOutput]:
        """What no chat showed yet, oldest first, recorded since ``since``; of one chat
        (``chat_id``); only the headless runs' reports, or only the chats' own sessions' output
        (``headless`` ``True``/``False``: in a cluster the leader sends the former, a chat's owner
        the latter)."""

        def read(tx: Session) -> list[OutboxRow]:
            query = select(OutboxRow).where(
                col(OutboxRow.delivered_at).is_(None), col(OutboxRow.created_at) >= since
            )
            if chat_id is not None:
                query = query.where(OutboxRow.chat_id == chat_id)
            if headless is not None:
                runs = col(OutboxRow.source).in_(list(HEADLESS_SOURCES))
                query = query.where(runs if headless else ~runs)
            return list(tx.exec(query.order_by(col(OutboxRow.id))))

        events = (_event(row) for row in await self._db.read_sync(read))
        return [event for event in events if event is not None]
