"""What the runtime made of a message's files: one row per piece of mail (``runtime.attachments``).

Written once a message's attachments are fetched (and voice notes transcribed),
before anything is told about them: a process that restarts with the mail
still unread reuses it instead of fetching, transcribing and notifying again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import JSON, Column
from sqlmodel import Field, Session, SQLModel

from agentgram.runtime.infra.storage.concurrency import insert_ignoring
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.types import UTCDateTime


class PreparedMailRow(SQLModel, table=True):
    __tablename__ = "prepared_mail"

    envelope_id: str = Field(primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    attachments: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


_ROWS: sa.Table = PreparedMailRow.__table__  # type: ignore[attr-defined]


class PreparedStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, envelope_id: str) -> list[dict[str, Any]] | None:
        def read(tx: Session) -> list[dict[str, Any]] | None:
            row = tx.execute(sa.select(_ROWS.c.attachments).where(_ROWS.c.envelope_id == envelope_id)).first()
            return None if row is None else list(row[0])

        return await self._db.read_sync(read)

    async def put(self, envelope_id: str, session_id: int, attachments: list[dict[str, Any]]) -> None:
        values = {"envelope_id": envelope_id, "session_id": session_id, "attachments": attachments}

        def write(tx: sa.Connection) -> None:  # the first put of an envelope stands
            insert_ignoring(tx, _ROWS, {**values, "created_at": utcnow()}, keys=["envelope_id"])

        await self._db.write_sync(write)


__all__ = ["PreparedMailRow", "PreparedStore"]
