"""Which model each session runs on, and the tokens its rounds used.

The choice is a row of ``session_models`` (no row: the default). Importing
this module registers the table; migrations create it on every database, so
no versioned step is needed. Only this process writes it, so a bounded cache
answers the turn's question ("which client?") without a read after the first.

Usage is not stored twice: every round's row in ``chat_history`` already
keeps the wire model and its prompt and completion tokens
(:meth:`~runtime.storage.history.HistoryStore.record_round`); :meth:`UsageStore.usage`
sums them per model, sub-agents' rounds included (they are rows of the same session).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Field, Session, SQLModel, col, select

from agentgram.runtime.infra.llm.models import ModelRegistry, TokenUsage
from agentgram.runtime.infra.llm.types import LLMClient
from agentgram.runtime.infra.storage.concurrency import upsert
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import HistoryRow, Role, utcnow
from agentgram.runtime.infra.storage.rows import table_of

CHOICES_KEPT = 1024
"""Sessions whose choice the cache keeps (the least recently asked leaves first)."""


class SessionModelRow(SQLModel, table=True):
    __tablename__ = "session_models"

    session_id: int = Field(primary_key=True)
    name: str
    chosen_at: datetime = Field(default_factory=utcnow)


_CHOICES = table_of(SessionModelRow)


class UsageStore:
    def __init__(self, db: Database, *, kept: int = CHOICES_KEPT) -> None:
        self._db = db
        self._kept = kept
        self._cache: OrderedDict[int, str | None] = OrderedDict()

    async def chosen(self, session_id: int) -> str | None:
        """The model name the session chose; ``None`` for the default."""
        if session_id in self._cache:
            self._cache.move_to_end(session_id)
            return self._cache[session_id]
        async with self._db.read() as tx:
            row = await tx.get(SessionModelRow, session_id)
        name = None if row is None else row.name
        self._remember(session_id, name)
        return name

    async def choose(self, session_id: int, name: str | None) -> None:
        """Store the session's choice (``None``: back to the default)."""

        def write(tx: Connection) -> None:
            if name is None:
                tx.execute(sa.delete(_CHOICES).where(_CHOICES.c.session_id == session_id))
            else:  # one statement: concurrent choices never collide, the last to commit stands
                values = {"session_id": session_id, "name": name, "chosen_at": utcnow()}
                upsert(tx, _CHOICES, values, keys=["session_id"], update=["name", "chosen_at"])

        await self._db.write_sync(write)
        self._remember(session_id, name)

    def _remember(self, session_id: int, name: str | None) -> None:
        self._cache[session_id] = name
        self._cache.move_to_end(session_id)
        while len(self._cache) > self._kept:
            self._cache.popitem(last=False)

    async def usage(self, session_id: int) -> list[TokenUsage]:
        """The session's assistant rounds summed per wire model, the most used first."""

        def read(tx: Session) -> list[TokenUsage]:
            model = col(HistoryRow.model)
            query = (
                select(
                    model,
                    sa.func.count(),
                    sa.func.sum(col(HistoryRow.input_tokens)),
                    sa.func.sum(col(HistoryRow.output_tokens)),
                )
                .where(col(HistoryRow.session_id) == session_id, col(HistoryRow.role) == Role.ASSISTANT)
                .where(model.is_not(None))
                .group_by(model)
            )
            rows = [TokenUsage(str(m), int(n), int(i or 0), int(o or 0)) for m, n, i, o in tx.exec(query)]
            return sorted(rows, key=lambda u: (-(u.input_tokens + u.output_tokens), u.model))

        return await self._db.read_sync(read)


class SessionModels:
    """The turn's one question: which client answers this session (its choice, or the default)."""

    def __init__(self, registry: ModelRegistry, store: UsageStore) -> None:
        self.registry = registry
        self.store = store

    async def client_for(self, session_id: int) -> LLMClient:
        if not self.registry.several:  # only the default configured: nothing to look up
            return self.registry.client(None)
        return self.registry.client(await self.store.chosen(session_id))


__all__ = ["CHOICES_KEPT", "SessionModelRow", "SessionModels", "UsageStore"]
