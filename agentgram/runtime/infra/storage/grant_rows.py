"""Which lazy MCP servers each agent of a session activated (``activate_tools``).

A grant is a row of ``mcp_grants``: a session, the frame that asked (``0``
for the root agent, a sub-agent's ``stack_frames`` id otherwise, so a
sub-agent starts with none and keeps its own: docs/architecture/subagents.md),
and the server. Rows outlive a restart; ``/new`` opens a new
session, which has none, and :meth:`GrantStore.forget` drops the old one's.
Importing this module registers the table; migrations create it on every
database. Only this process writes it, so a bounded cache answers each
round's question without a read after the first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Field, SQLModel, col, select

from agentgram.runtime.infra.storage.concurrency import insert_ignoring
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.rows import table_of

ROOT_FRAME = 0
"""The frame of a session's root agent (sub-agent frames are ``stack_frames`` ids, from 1)."""

FRAMES_KEPT = 1024
"""Frames whose grants the cache keeps (the least recently asked leaves first)."""


class McpGrantRow(SQLModel, table=True):
    __tablename__ = "mcp_grants"

    session_id: int = Field(primary_key=True)
    frame: int = Field(default=ROOT_FRAME, primary_key=True)
    server: str = Field(primary_key=True)
    granted_at: datetime = Field(default_factory=utcnow)


_GRANTS = table_of(McpGrantRow)
Frame = tuple[int, int]  # (session id, frame)


class GrantStore:
    def __init__(self, db: Database, *, kept: int = FRAMES_KEPT) -> None:
        self._db = db
        self._kept = kept
        self._cache: OrderedDict[Frame, frozenset[str]] = OrderedDict()

    async def granted(self, session_id: int, frame: int = ROOT_FRAME) -> frozenset[str]:
        """The servers this agent of the session activated."""
        key = (session_id, frame)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(McpGrantRow.server).where(
                    col(McpGrantRow.session_id) == session_id, col(McpGrantRow.frame) == frame
                )
            )
            servers = frozenset(rows.all())
        self._remember(key, servers)
        return servers

    async def grant(self, session_id: int, frame: int, servers: Iterable[str]) -> frozenset[str]:
        """Add ``servers`` to the agent's grants (durably, before its next round asks); the
        grants as they now stand."""
        before = await self.granted(session_id, frame)
        new = sorted(set(servers) - before)
        if new:

            def write(tx: Connection) -> None:
                rows = [
                    {"session_id": session_id, "frame": frame, "server": s, "granted_at": utcnow()}
                    for s in new
                ]
                # a concurrent grant of the same server may have landed meanwhile: it stands
                insert_ignoring(tx, _GRANTS, rows, keys=["session_id", "frame", "server"])

            await self._db.write_sync(write)
        after = before | set(new)
        self._remember((session_id, frame), after)
        return after

    async def forget(self, session_id: int) -> None:
        """Drop every grant of the session (``/new`` leaves it behind)."""

        def write(tx: Connection) -> None:
            tx.execute(sa.delete(_GRANTS).where(_GRANTS.c.session_id == session_id))

        await self._db.write_sync(write)
        for key in [key for key in self._cache if key[0] == session_id]:
            del self._cache[key]

    def _remember(self, key: Frame, servers: frozenset[str]) -> None:
        self._cache[key] = servers
        self._cache.move_to_end(key)
        while len(self._cache) > self._kept:
            self._cache.popitem(last=False)
