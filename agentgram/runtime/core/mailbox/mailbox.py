"""Mailbox implementations: durable (SQL) and in memory, one interface.

Transactional means three things (docs/architecture/mailbox.md):

1. **Accept is atomic and idempotent.** One insert assigns ``seq``; re-sending an
   envelope id returns the first receipt marked ``duplicate``.
2. **Reading does not consume.** ``unread`` is a peek from a cursor.
3. **Consumption commits with its effect.** ``advance`` moves the session's
   ``mail_cursor`` inside the caller's write transaction — the same one that
   appends the user row — so a crash in between redelivers, never loses.

Subscribers registered with :meth:`subscribe` are told after every fresh
accept; the session hub uses this to wake a session's consumer.

The SQL mailbox is fronted by an in-memory view of each recently read
session's unread mail (:class:`UnreadView`, rules in
:mod:`runtime.storage.views`): accepts and cursor moves update it after they
commit, so the consumer that was just woken reads its mail without a query.

The SQL mailbox group-commits: accepts that arrive while a write is under way
share the next transaction (``batch.py``), one query for what deciding them
needs and one insert, run as one synchronous call (``Database.write_sync``: on
SQLite a single hop to a worker thread, not several per statement); each
envelope is still decided on its own, in arrival order, so receipts, seqs and
refusals are those of one-at-a-time accepts.

Sequence numbers are settled by the database, gap-free per session in commit
order, whoever writes (several mailboxes, several processes on one PostgreSQL):
a batch's transaction first locks its sessions' rows (``SELECT … FOR NO KEY
UPDATE`` in id order, so two batches never deadlock; inserts referencing the
rows do not wait), then reads the highest seq, so the next batch into a session
reads after this one committed. The lock, not a per-session counter column,
because the rows are there already and a counter would be a second truth beside
``max(seq)``. On SQLite the one writer gives the same order and no lock is
taken. Envelopes go in with ``ON CONFLICT (envelope_id) DO NOTHING``: an id a
concurrent batch into another session committed meanwhile (the locks do not
order those) is not inserted, and the whole batch is decided again after it,
which then reports it as a duplicate — never an ``IntegrityError`` to a caller.
Rows go in sorted by envelope id, so two such batches wait on each other's ids
one way only; a deadlock the database breaks anyway is decided again too.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, col, select

from agentgram.runtime.core.mailbox.envelope import (
    BODY_ADAPTER,
    EXEMPT_FROM_BOUND,
    Checkpoint,
    Envelope,
    MailKind,
    Receipt,
    Sender,
)
from agentgram.runtime.core.mailbox.unread_view import UnreadView
from agentgram.runtime.infra.errors import MailboxFull, StorageError
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.concurrency import insert_for, lock_rows, retryable
from agentgram.runtime.infra.storage.db import Database, after_commit
from agentgram.runtime.infra.storage.group_commit import Batcher
from agentgram.runtime.infra.storage.models import ChatSession, MailRow, Steer, utcnow
from agentgram.runtime.infra.storage.rows import padded
from agentgram.runtime.infra.storage.sessions import upsert_value

log = get_logger("mailbox")
_MAIL: sa.Table = MailRow.__table__  # type: ignore[attr-defined]
_SESSIONS: sa.Table = ChatSession.__table__  # type: ignore[attr-defined]
_EXEMPT = sorted(kind.value for kind in EXEMPT_FROM_BOUND)

AcceptListener = Callable[[Envelope], None]


class Steered(enum.StrEnum):
    """What became of a choice for a queued message (:meth:`Mailbox.steer`)."""

    APPLIED = "applied"  # stored on the unread message (again, for a repeated choice)
    READ = "read"  # the message was read already: nothing changed
    CANCELLED = "cancelled"  # the message was dropped before: nothing changed
    UNKNOWN = "unknown"  # no such message in the session


class Mailbox(Protocol):
    async def accept(self, envelope: Envelope, checkpoint: Checkpoint | None = None) -> Receipt:
        """Store ``envelope`` (and the source's ``checkpoint``, when this mailbox can) durably."""
        ...

    async def unread(self, session_id: int, after: int | None = None) -> list[Envelope]: ...

    async def cursor(self, session_id: int) -> int: ...

    def advance(self, tx: Connection, session_id: int, upto: int) -> None:
        """Consume up to ``upto`` inside the caller's transaction (``Database.write_sync``)."""
        ...

    async def consume(self, session_id: int, upto: int) -> None:
        """Consume up to ``upto`` in a transaction of its own (mail settled with no effect)."""
        ...

    def known_empty(self, session_id: int) -> None:
        """The session was created just now: it has no mail to read back."""
        ...

    def forget(self, session_id: int) -> None:
        """The session went idle (its worker was evicted): drop what memory holds of it, keep the mail."""
        ...

    def subscribe(self, listener: AcceptListener) -> None: ...

    async def steer(self, session_id: int, seq: int, choice: Steer) -> Steered:
        """Store the user's ``choice`` on unread message ``seq`` (issue 30); a message already
        read or dropped keeps what it was."""
        ...


class Leases(Protocol):
    """The lease a task writes under, and its check inside a transaction (a cluster's fence)."""

    def current(self) -> object | None: ...
    def check(self, conn: Connection, lease: object) -> None: ...


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
    """The durable mailbox on the ``session_mail`` table.

    Accepts are group-committed (:class:`~runtime.infra.storage.group_commit.Batcher`):
    concurrent callers share one write transaction, decided envelope by
    envelope in arrival order exactly as one-at-a-time accepts would be, and
    subscribers hear of an envelope only after its transaction committed.
    """

    def __init__(self, db: Database, max_unread: int = 256) -> None:
        super().__init__()
        self._db = db
        self._max_unread = max_unread
        self._batcher: Batcher[_Accept, Receipt] = Batcher(self._store)
        self._view = UnreadView(capacity=1024)
        self.leases: Leases | None = None
        """A cluster's session leases (``runtime.infra.ownership``): the batch runs in a task of its
        own, so each submitter's lease is read at submit and checked inside the batch's transaction
        (a fenced-out worker's mail fails with its batch, as its other writes do)."""
        self.announce: Callable[[Connection, int, str], None] | None = None
        """Run inside the accept transaction for each envelope stored (session id, envelope id): a
        cluster tells the session's owner on another instance (``runtime.infra.ownership``)."""

    async def accept(self, envelope: Envelope, checkpoint: Checkpoint | None = None) -> Receipt:
        return await self._batcher.submit(_Accept(envelope, checkpoint, lease=self._lease()))

    async def accept_with(self, envelope: Envelope, effect: Effect) -> Receipt:
        """Accept ``envelope`` and run ``effect`` in the same transaction: neither lands without the
        other (on a duplicate the effect runs again, so it must be idempotent)."""
        return await self._batcher.submit(_Accept(envelope, None, effect, lease=self._lease()))

    def _lease(self) -> object | None:
        return self.leases.current() if self.leases is not None else None

    async def close(self) -> None:
        """The accepts under way land (the runtime closes the database after this)."""
        await self._batcher.drain()

    async def _store(self, batch: list[_Accept]) -> list[Receipt | Exception]:
        """Decide and insert a batch in one transaction; one outcome per envelope."""
        for _ in range(_ATTEMPTS):
            try:
                outcomes, fresh = await self._db.write_sync(lambda conn: self._store_in(conn, batch))
                break
            except _Raced:  # rolled back; deciding again finds the concurrent envelope
                continue
            except DBAPIError as exc:
                if not retryable(exc):  # a deadlock the database broke by rolling this batch back
                    raise
                log.warning("mailbox batch rolled back by the database (%s); deciding it again", exc.orig)
        else:
            raise StorageError(f"a batch of {len(batch)} envelopes kept racing concurrent accepts")
        for envelope in fresh:
            try:
                self._notify(envelope)
            except Exception:  # the envelope is committed: a listener's bug must not undo its receipt
                log.exception("mailbox listener failed for %s", envelope.id)
        return outcomes

    def _store_in(
        self, conn: Connection, batch: list[_Accept]
    ) -> tuple[list[Receipt | Exception], list[Envelope]]:
        """The batch's transaction (on SQLite, one blocking call on a worker thread):
        its outcomes and the envelopes it inserted."""
        envelopes = [item.envelope for item in batch]
        if self.leases is not None:
            for lease in {item.lease for item in batch if item.lease is not None}:
                self.leases.check(conn, lease)
        lock_rows(conn, _SESSIONS, (e.session_id for e in envelopes))  # seqs in commit order
        facts, seen = _facts(conn, envelopes)
        outcomes = [self._decide(envelope, facts, seen) for envelope in envelopes]
        fresh = [
            envelope.model_copy(update={"seq": outcome.seq})
            for envelope, outcome in zip(envelopes, outcomes, strict=True)
            if isinstance(outcome, Receipt) and not outcome.duplicate
        ]
        if fresh:
            _insert(conn, fresh)
            if self.announce is not None:
                for envelope in fresh:
                    self.announce(conn, envelope.session_id, envelope.id)
            after_commit(conn, lambda: self._view.accepted(fresh))
        return _store_checkpoints(conn, batch, outcomes), fresh

    def _decide(
        self, envelope: Envelope, facts: dict[int, _Facts], seen: dict[str, int]
    ) -> Receipt | Exception:
        """One accept against the facts so far; updates them as the accept would have."""
        if envelope.id in seen:
            return Receipt(id=envelope.id, seq=seen[envelope.id], duplicate=True)
        box = facts.get(envelope.session_id)
        if box is None:
            return StorageError(f"no session {envelope.session_id}")
        counts = _counts_against_bound(envelope.body.kind)
        if counts and box.unread >= self._max_unread:
            return MailboxFull(f"session {envelope.session_id} has {box.unread} unread envelopes")
        box.last += 1
        if counts:
            box.unread += 1
        seen[envelope.id] = box.last
        return Receipt(id=envelope.id, seq=box.last)

    async def unread(self, session_id: int, after: int | None = None) -> list[Envelope]:
        if after is None and (cached := self._view.get(session_id)) is not None:
            return list(cached)
        ticket = self._view.ticket(session_id)

        def read(tx: Session) -> list[MailRow]:
            start = _cursor_of(tx, session_id) if after is None else after
            query = select(MailRow).where(MailRow.session_id == session_id, MailRow.seq > start)
            return list(tx.exec(query.order_by(col(MailRow.seq))).all())

        unread = [_from_row(row) for row in await self._db.read_sync(read)]
        if after is None:
            self._view.fill(session_id, list(unread), ticket)
        return unread

    async def cursor(self, session_id: int) -> int:
        return await self._db.read_sync(lambda tx: _cursor_of(tx, session_id))

    def advance(self, tx: Connection, session_id: int, upto: int) -> None:
        tx.execute(_ADVANCE, {"session": session_id, "upto": upto})
        after_commit(tx, lambda: self._view.advanced(session_id, upto))

    async def consume(self, session_id: int, upto: int) -> None:
        await self._db.write_sync(lambda conn: self.advance(conn, session_id, upto))

    def known_empty(self, session_id: int) -> None:
        self._view.fill(session_id, [], self._view.ticket(session_id))

    async def steer(self, session_id: int, seq: int, choice: Steer) -> Steered:
        def write(conn: Connection) -> Steered:
            cursor = conn.execute(
                sa.select(_SESSIONS.c.mail_cursor).where(_SESSIONS.c.id == session_id)
            ).scalar_one_or_none()
            where = sa.and_(_MAIL.c.session_id == session_id, _MAIL.c.seq == seq)
            found = conn.execute(sa.select(_MAIL.c.steer).where(where)).first()
            outcome = _steered(found is not None, cursor or 0, seq, found[0] if found else None, choice)
            if outcome is Steered.APPLIED:
                conn.execute(sa.update(_MAIL).where(where).values(steer=choice))
                after_commit(conn, lambda: self._view.steered(session_id, seq, choice))
            return outcome

        return await self._db.write_sync(write)

    def forget(self, session_id: int) -> None:
        self._view.forget(session_id)


class MemoryMailbox(_Listeners):
    """The same contract in memory, for sub-agents and fast tests."""

    def __init__(self, max_unread: int = 256) -> None:
        super().__init__()
        self._mail: dict[int, list[Envelope]] = defaultdict(list)
        self._ids: dict[str, Envelope] = {}
        self._cursors: dict[int, int] = defaultdict(int)
        self._max_unread = max_unread

    async def accept(self, envelope: Envelope, checkpoint: Checkpoint | None = None) -> Receipt:
        """``checkpoint`` is left unstored: memory keeps no source positions."""
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

    def advance(self, tx: Any, session_id: int, upto: int) -> None:
        self._cursors[session_id] = max(self._cursors[session_id], upto)

    async def consume(self, session_id: int, upto: int) -> None:
        self.advance(None, session_id, upto)

    def known_empty(self, session_id: int) -> None:
        """Nothing to do: memory is always read directly."""

    async def steer(self, session_id: int, seq: int, choice: Steer) -> Steered:
        box = self._mail[session_id]
        found = next((i for i, e in enumerate(box) if e.seq == seq), None)
        before = box[found].steer if found is not None else None
        outcome = _steered(found is not None, self._cursors[session_id], seq, before, choice)
        if outcome is Steered.APPLIED and found is not None:
            box[found] = box[found].model_copy(update={"steer": choice})
            self._ids[box[found].id] = box[found]
        return outcome

    def forget(self, session_id: int) -> None:
        """Nothing to do: memory is the store itself."""


Effect = Callable[[Connection], None]
"""A write that must commit with an envelope (a detached call's final status with its result mail)."""


@dataclass(slots=True, frozen=True)
class _Accept:
    envelope: Envelope
    checkpoint: Checkpoint | None
    effect: Effect | None = None
    lease: object | None = None
    """The lease the submitting task writes under (:attr:`SqlMailbox.leases`), checked in the batch."""


_ATTEMPTS = 5
"""How often a batch is decided again after a concurrent accept took one of its envelope ids."""


class _Raced(Exception):
    """A concurrent transaction committed an envelope id of the batch (into another session)."""


def _insert(conn: Connection, fresh: list[Envelope]) -> None:
    """Insert the batch's new envelopes; :class:`_Raced` (the transaction rolls back) if a
    concurrent one committed one of their ids first."""
    now = utcnow()
    statement = (
        insert_for(conn, _MAIL).on_conflict_do_nothing(index_elements=["envelope_id"]).returning(_MAIL.c.id)
    )
    rows = sorted((_to_row(envelope, now) for envelope in fresh), key=lambda row: row["envelope_id"])
    inserted = conn.execute(statement, rows).all()  # in id order: two batches never wait crosswise
    if len(inserted) != len(fresh):
        raise _Raced


def _store_checkpoints(
    conn: Connection, batch: list[_Accept], outcomes: list[Receipt | Exception]
) -> list[Receipt | Exception]:
    """Run each accepted envelope's effect and write its checkpoint in the batch's transaction;
    the outcomes, their receipts saying so (they are handed out only once the transaction
    committed). A redelivery is confirmed too. A key's latest value in arrival order wins, and
    the keys are written in key order (two concurrent batches never wait on each other's keys
    crosswise)."""
    stored: list[Receipt | Exception] = []
    latest: dict[str, str] = {}
    for item, outcome in zip(batch, outcomes, strict=True):
        if item.effect is not None and isinstance(outcome, Receipt):
            item.effect(conn)
        if item.checkpoint is not None and isinstance(outcome, Receipt):
            latest[item.checkpoint.key] = item.checkpoint.value
            outcome = outcome.model_copy(update={"checkpoint_stored": True})
        stored.append(outcome)
    for key in sorted(latest):
        upsert_value(conn, key, latest[key])
    return stored


def _cursor_of(tx: Session, session_id: int) -> int:
    value = tx.exec(select(ChatSession.mail_cursor).where(ChatSession.id == session_id)).first()
    return int(value or 0)


_ADVANCE = (
    sa.update(_SESSIONS)
    .where(_SESSIONS.c.id == sa.bindparam("session"), _SESSIONS.c.mail_cursor < sa.bindparam("upto"))
    .values(mail_cursor=sa.bindparam("upto"))
)
"""The cursor only ever moves forward. Built once, its values as parameters (every turn moves one)."""


@dataclass(slots=True)
class _Facts:
    """What accepting into one session depends on: the highest seq used and the unread count."""

    last: int
    unread: int


def _facts_query() -> sa.CompoundSelect:
    """Per session: its cursor, highest seq and unread count (exempt kinds not counted); per
    envelope id accepted before: its seq. Two selects of one shape joined by ``UNION ALL``;
    session rows have no envelope id."""
    session, mail = _SESSIONS.c, _MAIL.c
    last = sa.select(sa.func.max(mail.seq)).where(mail.session_id == session.id).scalar_subquery()
    unread = (
        sa.select(sa.func.count())
        .where(mail.session_id == session.id, mail.seq > session.mail_cursor, mail.kind.not_in(_EXEMPT))
        .scalar_subquery()
    )
    no_str, no_int = sa.cast(sa.null(), sa.String), sa.cast(sa.null(), sa.Integer)
    per_session = sa.select(session.id, no_str, session.mail_cursor, last, unread).where(
        session.id.in_(sa.bindparam("session_ids", expanding=True))
    )
    per_envelope = sa.select(no_int, mail.envelope_id, mail.seq, no_int, no_int).where(
        mail.envelope_id.in_(sa.bindparam("envelope_ids", expanding=True))
    )
    return sa.union_all(per_session, per_envelope)


_FACTS = _facts_query()


def _facts(conn: Connection, batch: list[Envelope]) -> tuple[dict[int, _Facts], dict[str, int]]:
    """What deciding ``batch`` depends on, in one round trip: per session and already-seen id."""
    rows = conn.execute(
        _FACTS,
        {
            "session_ids": padded(list({e.session_id for e in batch})),
            "envelope_ids": padded([e.id for e in batch]),
        },
    )
    facts: dict[int, _Facts] = {}
    seen: dict[str, int] = {}
    for session_id, envelope_id, number, last_seq, count in rows:
        if envelope_id is None:  # number is the session's cursor
            facts[session_id] = _Facts(last=max(last_seq or 0, number), unread=count)
        else:  # number is the envelope's seq
            seen[envelope_id] = number
    return facts, seen


def _to_row(envelope: Envelope, accepted_at: datetime) -> dict[str, Any]:
    return {
        "envelope_id": envelope.id,
        "session_id": envelope.session_id,
        "seq": envelope.seq,
        "sender_kind": envelope.sender.kind,
        "sender_ref": envelope.sender.ref,
        "priority": envelope.priority,
        "hops": envelope.hops,
        "kind": envelope.body.kind,
        "body": envelope.body.model_dump(mode="json"),
        "sent_at": envelope.sent_at,
        "accepted_at": accepted_at,
        "steer": envelope.steer,
    }


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
        steer=row.steer,
    )


def _steered(exists: bool, cursor: int, seq: int, before: str | None, choice: Steer) -> Steered:
    """The one rule of :meth:`Mailbox.steer`: only an unread message that was not dropped
    takes a choice."""
    if not exists:
        return Steered.UNKNOWN
    if seq <= cursor:
        return Steered.READ
    if before == Steer.CANCEL and choice != Steer.CANCEL:
        return Steered.CANCELLED
    return Steered.APPLIED


def last_seq(envelopes: Iterable[Envelope]) -> int:
    return max((e.seq for e in envelopes), default=0)
