"""Chat history rows and their tool calls.

Pairing is structural: a tool call is a row of ``tool_calls`` that belongs
to its assistant row and *is* its own result slot. The context builder emits
exactly one tool message per call, derived from the call's status, so the
stored history can never hold an unanswered call or a stray result — a call
cut short by a crash reads as "interrupted", one stopped by the user as
"Cancelled by user." (placeholders, never gaps: docs/architecture/history.md).

Every round reads the session's history to build its context; the tail of
each recently active session is kept in memory (:mod:`runtime.storage.history_tail`,
the rules in :mod:`runtime.storage.views`), and every write below updates it
after its commit, so a round reads back what the previous one wrote without
asking the database. Writes are Core statements (:mod:`runtime.storage.rows`)
on the synchronous write path.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime
from itertools import takewhile
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import Session, col, select

from agentgram.runtime.infra.llm.types import LLMRound
from agentgram.runtime.infra.storage.db import Database, after_commit
from agentgram.runtime.infra.storage.group_commit import Batcher
from agentgram.runtime.infra.storage.history_tail import (
    ENTRY_FIELDS,
    NO_CALLS,
    HistoryEntry,
    HistoryRecord,
    HistoryTails,
    StoredMeta,
    Tail,
)
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    HistoryRow,
    Role,
    RowStatus,
    SessionSource,
    ToolCallRow,
    ToolCallStatus,
    Turn,
    TurnStatus,
    utcnow,
)
from agentgram.runtime.infra.storage.rows import columns_of, insert_row, padded, table_of

_ROWS = table_of(HistoryRow)
_CALLS = table_of(ToolCallRow)
_TURNS = table_of(Turn)
_OPEN = (ToolCallStatus.PENDING, ToolCallStatus.RUNNING)
_COLUMN_OF = dict(columns_of(HistoryRow))  # ``meta`` is stored as ``metadata``
_ENTRY = tuple(
    sa.type_coerce(_ROWS.c[_COLUMN_OF[name]], StoredMeta) if name == "meta" else _ROWS.c[_COLUMN_OF[name]]
    for name in ENTRY_FIELDS
)
"""The columns a :class:`HistoryEntry` keeps, in the order of its fields."""


def _entries_of(frame: Any) -> Any:
    """The newest ``limit`` non-failed rows of a session's ``frame``, newest first: built once."""
    return (
        sa.select(*_ENTRY)
        .where(_ROWS.c.session_id == sa.bindparam("session"), _ROWS.c.status != RowStatus.FAILED, frame)
        .order_by(_ROWS.c.id.desc())
        .limit(sa.bindparam("limit"))
    )


_ROOT_ENTRIES = _entries_of(_ROWS.c.stack_id.is_(None))
_FRAME_ENTRIES = _entries_of(_ROWS.c.stack_id == sa.bindparam("stack"))
_CALLS_OF = (
    select(ToolCallRow)
    .where(col(ToolCallRow.history_id).in_(sa.bindparam("rows", expanding=True)))
    .order_by(col(ToolCallRow.history_id), col(ToolCallRow.position))
)
"""The tool calls of some assistant rows, in order."""
_MARK_DELIVERED = (
    sa.update(_ROWS)
    .where(_ROWS.c.id.in_(sa.bindparam("rows", expanding=True)))
    .values(delivered_at=sa.bindparam("at"))
)
_COUNT_ROUND = sa.update(_TURNS).where(_TURNS.c.id == sa.bindparam("turn")).values(rounds=_TURNS.c.rounds + 1)
_CLOSE_ROUND = _COUNT_ROUND.values(status=TurnStatus.FINAL, ended_at=sa.bindparam("ended_at"))
"""A turn's round counted (and, for its final answer, the turn closed): built once, the values
as parameters (a statement built per round cost more than its execution)."""


class HistoryStore:
    def __init__(self, db: Database, tails: HistoryTails | None = None) -> None:
        self._db = db
        self.tails = tails or HistoryTails()
        self._delivered: Batcher[int, None] = Batcher(self._mark_delivered)

    async def close(self) -> None:
        """The "shown" marks under way land (the runtime closes the database after this)."""
        await self._delivered.drain()

    async def step_that_read(self, session_id: int, mail_seq: int) -> int | None:
        """The step (round, from 1) of the turn at which the message ``mail_seq`` was read: one
        more than the turn's rounds stored before its row; ``None`` if it was never stored."""

        def read(tx: Session) -> int | None:
            row = tx.exec(
                select(HistoryRow).where(
                    col(HistoryRow.session_id) == session_id, col(HistoryRow.mail_seq) == mail_seq
                )
            ).first()
            if row is None or row.turn_id is None:
                return None
            before = tx.exec(
                select(sa.func.count(col(HistoryRow.id))).where(
                    col(HistoryRow.session_id) == session_id,
                    col(HistoryRow.turn_id) == row.turn_id,
                    col(HistoryRow.role) == Role.ASSISTANT,
                    col(HistoryRow.stack_id).is_(None),
                    col(HistoryRow.id) < row.id,
                )
            ).one()
            return int(before) + 1

        return await self._db.read_sync(read)

    def known_empty(self, session_id: int) -> None:
        """The session was created just now: its (empty) history needs no read."""
        self.tails.fill(session_id, Tail([], complete=True), self.tails.ticket(session_id))

    def forget(self, session_id: int) -> None:
        """The session went idle (its worker was evicted): its tail leaves memory, the next read refills it."""
        self.tails.forget(session_id)

    # --- writes inside the caller's transaction -------------------------------------------------

    def add_user_row(
        self,
        tx: Connection,
        *,
        session_id: int,
        turn_id: int | None,
        content: str,
        is_synthetic: bool = False,
        mail_seq: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> HistoryRecord:
        row = HistoryRecord(
            session_id=session_id,
            turn_id=turn_id,
            role=Role.USER,
            content=content,
            is_synthetic=is_synthetic,
            mail_seq=mail_seq,
            meta=meta or {},
        )
        row.insert(tx)
        after_commit(tx, lambda: self.tails.appended(session_id, HistoryEntry.of(row)))
        return row

    def may_end_unanswered(self, session_id: int) -> bool:
        """Whether :meth:`mark_orphans_failed` may find anything: not when the session's tail in
        memory ends in an answer (or is the whole, empty history). Asked on the event loop,
        where the tail follows every commit; a session's worker is the only one adding to its
        history, so nothing changes that between this and the worker's next transaction."""
        tail = self.tails.get(session_id)
        if tail is None:
            return True
        if not tail.entries:
            return not tail.complete
        return tail.entries[-1].role == Role.USER

    def mark_orphans_failed(self, tx: Connection, session_id: int) -> int:
        """Trailing user rows with no answer after them: the turn died before replying.

        A reply cut short by /stop (a ``cancelled`` assistant row) is an answer.
        """
        newest = tx.execute(
            sa.select(_ROWS.c.id, _ROWS.c.role)
            .where(
                _ROWS.c.session_id == session_id,
                _ROWS.c.status != RowStatus.FAILED,
                _ROWS.c.stack_id.is_(None),  # a sub-agent's task is answered by its own frame
            )
            .order_by(_ROWS.c.id.desc())
            .limit(50)
        ).all()
        orphans = [row_id for row_id, _ in takewhile(lambda r: r.role == Role.USER, newest)]
        if orphans:
            tx.execute(sa.update(_ROWS).where(_ROWS.c.id.in_(orphans)).values(status=RowStatus.FAILED))
            after_commit(tx, lambda: self.tails.forget(session_id))
        return len(orphans)

    # --- writes in their own transaction ----------------------------------------------------------

    async def record_round(
        self,
        *,
        session_id: int,
        turn_id: int,
        result: LLMRound,
        status: RowStatus = RowStatus.OK,
        closes_turn: bool = False,
        stack_id: int | None = None,
    ) -> HistoryEntry:
        """Persist one completed round: the assistant row and its calls as ``pending``.

        ``closes_turn``: the round is the turn's final answer, and the turn ends
        ``final`` in the same transaction (no window where the answer is stored
        but the turn still reads as running). ``stack_id``: a sub-agent's round,
        in its own frame — it counts against neither the turn's rounds nor the
        root's in-memory tail.
        """
        turn_values = {"turn": turn_id, "ended_at": utcnow()} if closes_turn else {"turn": turn_id}

        def record(tx: Connection) -> HistoryEntry:
            row = HistoryRecord(
                session_id=session_id,
                stack_id=stack_id,
                turn_id=turn_id,
                role=Role.ASSISTANT,
                content=result.text,
                reasoning=result.reasoning or None,
                status=status,
                model=result.model or None,
                input_tokens=result.usage.input_tokens,
                output_tokens=result.usage.output_tokens,
            )
            row_id = row.insert(tx)
            calls = [
                ToolCallRow(
                    session_id=session_id,
                    history_id=row_id,
                    position=index,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                )
                for index, call in enumerate(result.tool_calls)
            ]
            for call in calls:
                insert_row(tx, call)
            entry = HistoryEntry.of(row, calls or NO_CALLS)
            if stack_id is None:
                tx.execute(_CLOSE_ROUND if closes_turn else _COUNT_ROUND, turn_values)
                after_commit(tx, lambda: self.tails.appended(session_id, entry))
            return entry

        return await self._db.write_sync(record)

    async def append_assistant(
        self, *, session_id: int, content: str, is_synthetic: bool = False, meta: dict[str, Any] | None = None
    ) -> HistoryRecord:
        """A text the chat already showed (a tic's report), added to the conversation."""

        def append(tx: Connection) -> HistoryRecord:
            row = HistoryRecord(
                session_id=session_id,
                role=Role.ASSISTANT,
                content=content,
                is_synthetic=is_synthetic,
                meta=meta or {},
                delivered_at=utcnow(),
            )
            row.insert(tx)
            after_commit(tx, lambda: self.tails.appended(session_id, HistoryEntry.of(row)))
            return row

        return await self._db.write_sync(append)

    async def mark_delivered(self, row_id: int) -> None:
        """The chat shows this final answer (see :meth:`undelivered_answers`).

        Group-committed: the marks of the chats that showed an answer meanwhile share one
        transaction (a lone mark is written at once), so the last write of a turn is not one
        more transaction behind the database's one writer.
        """
        await self._delivered.submit(row_id)

    async def _mark_delivered(self, row_ids: list[int]) -> list[None]:
        """The tails are not told: an entry does not keep its delivery time."""
        values = {"rows": padded(row_ids), "at": utcnow()}
        await self._db.write_sync(lambda tx: tx.execute(_MARK_DELIVERED, values))
        return [None] * len(row_ids)

    async def set_call_status(
        self,
        call_row_id: int,
        status: ToolCallStatus,
        result: str | None = None,
        *,
        wrappers: str | None = None,
    ) -> None:
        await self._db.write_sync(
            lambda tx: self.mark_call(tx, call_row_id, status, result, wrappers=wrappers)
        )

    def mark_call(
        self,
        tx: Connection,
        call_row_id: int,
        status: ToolCallStatus,
        result: str | None = None,
        *,
        wrappers: str | None = None,
    ) -> None:
        """:meth:`set_call_status` inside the caller's transaction (a detached call's placeholder
        commits with its run's row)."""
        values: dict[str, Any] = {"status": status}
        if status == ToolCallStatus.RUNNING:
            values["started_at"] = utcnow()
        if status.terminal:
            values["result"] = result
            values["finished_at"] = utcnow()
        if wrappers is not None:
            values["wrappers"] = wrappers
        session_id = tx.execute(
            sa.update(_CALLS).where(_CALLS.c.id == call_row_id).values(values).returning(_CALLS.c.session_id)
        ).scalar()
        if session_id is not None:
            after_commit(tx, lambda: self.tails.call_changed(session_id, call_row_id, values))

    async def close_open_calls(self, session_id: int, status: ToolCallStatus, note: str) -> list[ToolCallRow]:
        """Give every unfinished call a terminal status (``/stop``): no gaps, ever."""

        def close(tx: Connection) -> list[ToolCallRow]:
            found = tx.execute(
                sa.select(_CALLS)
                .where(_CALLS.c.session_id == session_id, _CALLS.c.status.in_(_OPEN))
                .order_by(_CALLS.c.history_id, _CALLS.c.position)
            ).all()
            if not found:
                return []
            closed = {"status": status, "result": note, "finished_at": utcnow()}
            tx.execute(sa.update(_CALLS).where(_CALLS.c.id.in_([r.id for r in found])).values(closed))
            after_commit(tx, lambda: self.tails.forget(session_id))
            return [ToolCallRow(**{**r._asdict(), **closed}) for r in found]

        return await self._db.write_sync(close)

    # --- reads ----------------------------------------------------------------------------------------

    async def call(self, call_row_id: int) -> ToolCallRow | None:
        async with self._db.read() as tx:
            return await tx.get(ToolCallRow, call_row_id)

    async def call_by_model_id(self, session_id: int, call_id: str) -> ToolCallRow | None:
        """The session's newest call the model named ``call_id`` (ids are the model's: unique in
        practice, not by constraint)."""

        def read(tx: Session) -> ToolCallRow | None:
            query = (
                select(ToolCallRow)
                .where(ToolCallRow.session_id == session_id, ToolCallRow.call_id == call_id)
                .order_by(col(ToolCallRow.id).desc())
            )
            return tx.exec(query).first()

        return await self._db.read_sync(read)

    async def open_calls(self, session_id: int, stack_id: int | None = None) -> list[ToolCallRow]:
        """Calls of one frame (the root's by default) left ``pending``/``running`` (interrupted),
        in declared order."""
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(ToolCallRow)
                .join(HistoryRow, col(HistoryRow.id) == col(ToolCallRow.history_id))
                .where(
                    ToolCallRow.session_id == session_id,
                    col(ToolCallRow.status).in_(_OPEN),
                    _in_frame(stack_id),
                )
                .order_by(col(ToolCallRow.history_id), col(ToolCallRow.position))
            )
            return list(rows.all())

    async def entries(
        self, session_id: int, limit: int = 1000, *, stack_id: int | None = None
    ) -> list[HistoryEntry]:
        """The newest ``limit`` non-failed rows of one frame of the session (the root's by default),
        oldest first, each with its calls in order.

        Only the root frame's tail is kept in memory, as many entries as a round reads (the
        tails' ``keep``): a sub-agent's frame is short-lived, and an ask for more than the tail
        keeps is rare (``/sessions``' look back), so both are read from the database.
        """
        if stack_id is not None:
            return await self._db.read_sync(lambda tx: _read_entries(tx, session_id, stack_id, limit))
        tail = self.tails.get(session_id)
        if tail is None or not tail.serves(limit):
            tail = await self._read_tail(session_id, max(limit, self.tails.keep))
        return tail.entries[-limit:] if limit else []

    async def entries_after(self, session_id: int, after_id: int, limit: int = 1000) -> list[HistoryEntry]:
        """The root frame's non-failed rows newer than ``after_id`` (the newest ``limit`` of them),
        oldest first: what a compaction summary does not cover (:mod:`runtime.turn.compaction`).

        Served from the tail in memory once it reaches back past ``after_id``, so what it costs
        follows the rows newer than ``after_id``, not the length of the whole history.
        """
        tail = self.tails.get(session_id)
        if tail is None:
            tail = await self._read_tail(session_id, self.tails.keep)
        if not _reaches(tail, after_id, limit):  # a tail short of it holds ``keep``: a re-read would too
            tail = await self._read_tail(session_id, limit)
        entries = tail.entries[-limit:] if limit else []
        return entries[bisect_right(entries, after_id, key=lambda entry: entry.id or 0) :]

    async def _read_tail(self, session_id: int, limit: int) -> Tail:
        """The root frame's newest ``limit`` entries, read from the database; the tail in memory
        keeps the newest ``keep`` of them."""
        ticket = self.tails.ticket(session_id)
        entries = await self._db.read_sync(lambda tx: _read_entries(tx, session_id, None, limit))
        tail = Tail.of(entries, complete=len(entries) < limit)
        self.tails.fill(session_id, tail, ticket)
        return tail

    async def written(self, session_id: int, first_id: int, last_id: int) -> dict[int, datetime]:
        """When each of the session's rows from ``first_id`` to ``last_id`` was written, by id: an
        entry does not keep its time (:class:`HistoryEntry`), and compaction, which dates what it
        folds, reads it here once."""
        query = sa.select(_ROWS.c.id, _ROWS.c.created_at).where(
            _ROWS.c.session_id == session_id, _ROWS.c.id.between(first_id, last_id)
        )
        rows = await self._db.read_sync(lambda tx: tx.connection().execute(query).all())
        return {row_id: created_at for row_id, created_at in rows}

    async def undelivered_answers(self, since: datetime, chat_id: int | None = None) -> list[HistoryRow]:
        """Final answers of active chat sessions (and of open spawned ones, which report to their
        root's chat) stored since ``since`` that no chat showed.

        A process killed between storing a turn's answer and the chat showing
        it leaves one; the runtime sends it on start. Old ones are left alone.
        """

        def read(tx: Session) -> list[HistoryRow]:
            has_calls = select(ToolCallRow.id).where(ToolCallRow.history_id == HistoryRow.id).exists()
            query = (
                select(HistoryRow)
                .join(ChatSession, col(ChatSession.id) == col(HistoryRow.session_id))
                .join(Turn, col(Turn.id) == col(HistoryRow.turn_id))
                .where(
                    HistoryRow.role == Role.ASSISTANT,
                    HistoryRow.status == RowStatus.OK,
                    col(HistoryRow.stack_id).is_(None),  # a sub-agent answers its parent, not the chat
                    col(HistoryRow.delivered_at).is_(None),
                    HistoryRow.created_at >= since,
                    sa.or_(
                        sa.and_(col(ChatSession.active).is_(True), col(ChatSession.is_interactive).is_(True)),
                        # a spawned session's answers reach its root's chat until it is closed
                        sa.and_(
                            col(ChatSession.source) == SessionSource.AGENT,
                            col(ChatSession.closed_at).is_(None),
                        ),
                    ),
                    Turn.status == TurnStatus.FINAL,
                    ~has_calls,
                )
                .order_by(col(HistoryRow.id))
            )
            if chat_id is not None:
                query = query.where(ChatSession.chat_id == chat_id)
            return list(tx.exec(query).all())

        return await self._db.read_sync(read)

    async def all_rows(self, session_id: int) -> list[HistoryRow]:
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(HistoryRow).where(HistoryRow.session_id == session_id).order_by(col(HistoryRow.id))
            )
            return list(rows.all())


def _reaches(tail: Tail, after_id: int, limit: int) -> bool:
    """The tail holds every row newer than ``after_id``, or the ``limit`` newest of them."""
    if tail.complete or len(tail.entries) >= limit:
        return True
    return bool(tail.entries) and (tail.entries[0].id or 0) <= after_id


def _in_frame(stack_id: int | None) -> Any:
    """The rows of one frame; the root frame's rows carry no stack id."""
    return col(HistoryRow.stack_id).is_(None) if stack_id is None else col(HistoryRow.stack_id) == stack_id


def _read_entries(tx: Session, session_id: int, stack_id: int | None, limit: int) -> list[HistoryEntry]:
    """A frame's newest ``limit`` entries, oldest first: on a miss of the tail, the one read of a
    round, so built from prepared statements and positional rows (``bench/README.md``, session 21)."""
    query = _ROOT_ENTRIES if stack_id is None else _FRAME_ENTRIES
    rows = tx.connection().execute(query, {"session": session_id, "limit": limit, "stack": stack_id})
    entries = [HistoryEntry(*row) for row in rows]  # one row at a time: no list of rows beside the entries
    entries.reverse()
    answers = [entry.id for entry in entries if entry.role == Role.ASSISTANT]
    if answers:
        calls: dict[int, list[ToolCallRow]] = {}
        for call in tx.exec(_CALLS_OF, params={"rows": padded(answers)}).all():
            calls.setdefault(call.history_id, []).append(call)
        for entry in entries:
            if entry.role == Role.ASSISTANT:
                entry.calls = calls.get(entry.id or 0, NO_CALLS)
    return entries
