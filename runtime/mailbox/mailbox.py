"""Mailbox implementations: durable (SQL) and in memory, one interface.

Transactional means three things (session-mailbox spec §1):

1. **Accept is atomic and idempotent.** One insert assigns ``seq``; re-sending an
   envelope id returns the first receipt marked ``duplicate``.
2. **Reading does not consume.** ``unread`` is a peek from a cursor.
3. **Consumption commits with its effect.** ``advance`` moves the session's
   ``mail_cursor`` inside the caller's write transaction — the same one that
   appends the user row — so a crash in between redelivers, never loses.

Subscribers registered with :meth:`subscribe` are told after every fresh
accept; the session hub uses this to wake a session's consumer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from sqlalchemy import func, update
from sqlmodel import col, select

from runtime.errors import MailboxFull
from runtime.mailbox.envelope import BODY_ADAPTER, EXEMPT_FROM_BOUND, Envelope, MailKind, Receipt, Sender
from runtime.storage.db import Database
from runtime.storage.models import ChatSession, MailRow

AcceptListener = Callable[[Envelope], None]


class Mailbox(Protocol):
    async def accept(self, envelope: Envelope) -> Receipt: ...

    async def unread(self, session_id: int, after: int | None = None) -> list[Envelope]: ...

    async def cursor(self, session_id: int) -> int: ...

    async def advance(self, tx: Any, session_id: int, upto: int) -> None: ...

    def subscribe(self, listener: AcceptListener) -> None: ...


class _Listeners:
    def __init__(self) -> None:
        self._listeners: list[AcceptListener] = []

    def subscribe(self, listener: AcceptListener) -> None:
        self._listeners.append(listener)

    def _notify(self, envelope: Envelope) -> None:
        for listener in self._listeners:
            listener(envelope)


def _counts_against_bound(kind: str) -> bool:
    return MailKind(kind) not in EXEMPT_FROM_BOUND


class SqlMailbox(_Listeners):
    """The durable mailbox on the ``session_mail`` table."""

    def __init__(self, db: Database, max_unread: int = 256) -> None:
        super().__init__()
        self._db = db
        self._max_unread = max_unread

    async def accept(self, envelope: Envelope) -> Receipt:
        async with self._db.write() as tx:
            existing = (await tx.exec(select(MailRow).where(MailRow.envelope_id == envelope.id))).first()
            if existing is not None:
                return Receipt(id=envelope.id, seq=existing.seq, duplicate=True)
            cursor = await self._cursor_in(tx, envelope.session_id)
            if _counts_against_bound(envelope.body.kind):
                unread = (
                    await tx.exec(
                        select(func.count())
                        .select_from(MailRow)
                        .where(
                            MailRow.session_id == envelope.session_id,
                            MailRow.seq > cursor,
                            col(MailRow.kind).not_in([k.value for k in EXEMPT_FROM_BOUND]),
                        )
                    )
                ).one()
                if unread >= self._max_unread:
                    raise MailboxFull(f"session {envelope.session_id} has {unread} unread envelopes")
            last = (
                await tx.exec(select(func.max(MailRow.seq)).where(MailRow.session_id == envelope.session_id))
            ).one()
            seq = max(last or 0, cursor) + 1
            tx.add(_to_row(envelope, seq))
        accepted = envelope.model_copy(update={"seq": seq})
        self._notify(accepted)
        return Receipt(id=envelope.id, seq=seq)

    async def unread(self, session_id: int, after: int | None = None) -> list[Envelope]:
        async with self._db.read() as tx:
            start = await self._cursor_in(tx, session_id) if after is None else after
            rows = (
                await tx.exec(
                    select(MailRow)
                    .where(MailRow.session_id == session_id, MailRow.seq > start)
                    .order_by(col(MailRow.seq))
                )
            ).all()
        return [_from_row(row) for row in rows]

    async def cursor(self, session_id: int) -> int:
        async with self._db.read() as tx:
            return await self._cursor_in(tx, session_id)

    async def advance(self, tx: Any, session_id: int, upto: int) -> None:
        await tx.exec(
            update(ChatSession)
            .where(col(ChatSession.id) == session_id, col(ChatSession.mail_cursor) < upto)
            .values(mail_cursor=upto)
        )

    @staticmethod
    async def _cursor_in(tx: Any, session_id: int) -> int:
        value = (await tx.exec(select(ChatSession.mail_cursor).where(ChatSession.id == session_id))).first()
        return int(value or 0)


class MemoryMailbox(_Listeners):
    """The same contract in memory, for sub-agents and fast tests."""

    def __init__(self, max_unread: int = 256) -> None:
        super().__init__()
        self._mail: dict[int, list[Envelope]] = defaultdict(list)
        self._ids: dict[str, Envelope] = {}
        self._cursors: dict[int, int] = defaultdict(int)
        self._max_unread = max_unread

    async def accept(self, envelope: Envelope) -> Receipt:
        if envelope.id in self._ids:
            return Receipt(id=envelope.id, seq=self._ids[envelope.id].seq, duplicate=True)
        box = self._mail[envelope.session_id]
        cursor = self._cursors[envelope.session_id]
        if _counts_against_bound(envelope.body.kind):
            unread = sum(1 for e in box if e.seq > cursor and _counts_against_bound(e.body.kind))
            if unread >= self._max_unread:
                raise MailboxFull(f"session {envelope.session_id} has {unread} unread envelopes")
        seq = max(box[-1].seq if box else 0, cursor) + 1
        accepted = envelope.model_copy(update={"seq": seq})
        box.append(accepted)
        self._ids[envelope.id] = accepted
        self._notify(accepted)
        return Receipt(id=envelope.id, seq=seq)

    async def unread(self, session_id: int, after: int | None = None) -> list[Envelope]:
        start = self._cursors[session_id] if after is None else after
        return [e for e in self._mail[session_id] if e.seq > start]

    async def cursor(self, session_id: int) -> int:
        return self._cursors[session_id]

    async def advance(self, tx: Any, session_id: int, upto: int) -> None:
        self._cursors[session_id] = max(self._cursors[session_id], upto)


def _to_row(envelope: Envelope, seq: int) -> MailRow:
    return MailRow(
        envelope_id=envelope.id,
        session_id=envelope.session_id,
        seq=seq,
        sender_kind=envelope.sender.kind,
        sender_ref=envelope.sender.ref,
        priority=envelope.priority,
        hops=envelope.hops,
        kind=envelope.body.kind,
        body=envelope.body.model_dump(mode="json"),
        sent_at=envelope.sent_at,
    )


def _from_row(row: MailRow) -> Envelope:
    return Envelope(
        id=row.envelope_id,
        session_id=row.session_id,
        seq=row.seq,
        sender=Sender(kind=row.sender_kind, ref=row.sender_ref),  # type: ignore[arg-type]
        priority=row.priority,  # type: ignore[arg-type]
        hops=row.hops,
        sent_at=row.sent_at,
        body=BODY_ADAPTER.validate_python(row.body),
    )


def last_seq(envelopes: Iterable[Envelope]) -> int:
    return max((e.seq for e in envelopes), default=0)
