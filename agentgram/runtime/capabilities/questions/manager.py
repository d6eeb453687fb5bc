"""Pending clarifying questions: asked, waited on, answered once.

Modelled on the approval service (:mod:`runtime.approvals.manager`): a
question is a database row bound to the tool call that asked it; settling it
(``pending`` → answered or cancelled) happens once — one compare-and-set
statement, so of concurrent answers (a button and a text, two processes)
exactly one applies — and wakes the call waiting on it. A call re-run after a restart
finds its own row — still pending (still answerable: its buttons keep
working, and the next text the user sends is its answer) or answered
meanwhile — so nothing is asked twice.

A session has at most one pending question: asking a new one supersedes the
older ones (parallel sub-agents may ask at once; the user answers the newest).
Asking locks the session's row first, so concurrent asks in one session take
turns, and supersedes with one compare-and-set statement (an answer that lands
first stands); the memory learns of it after the commit, in commit order, so the
last to commit is the one pending.
Which question a session's text would answer is kept in memory
(:meth:`QuestionManager.pending_in`), filled from the database on start and
kept as questions are asked and settled, so an ordinary message costs no read.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass

import sqlalchemy as sa
from sqlmodel import Session, col, select

from agentgram.runtime.infra.events import QuestionStatus
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.concurrency import lock_rows
from agentgram.runtime.infra.storage.db import Database, after_commit
from agentgram.runtime.infra.storage.models import ChatSession, utcnow
from agentgram.runtime.infra.storage.question_rows import QuestionRow
from agentgram.runtime.infra.storage.rows import table_of

log = get_logger("questions")
_QUESTIONS = table_of(QuestionRow)
_SESSIONS = table_of(ChatSession)


@dataclass(slots=True, frozen=True)
class Asked:
    """A call's question as it stands, and whether it was opened just now (or never shown)."""

    row: QuestionRow
    show: bool
    superseded: tuple[QuestionRow, ...] = ()


@dataclass(slots=True, frozen=True)
class Settled:
    """What an answer (or a stop) achieved: ``applied`` is ``False`` when the question was settled already."""

    applied: bool
    row: QuestionRow | None


class QuestionManager:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._waiters: dict[str, asyncio.Event] = {}
        self._pending: dict[int, str] = {}  # session id → its pending question's id

    async def load(self) -> None:
        """Learn the pending questions a previous process left (on start)."""
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(QuestionRow)
                .where(QuestionRow.status == QuestionStatus.PENDING)
                .order_by(col(QuestionRow.created_at))
            )
            self._pending = {row.session_id: row.id for row in rows.all()}

    def pending_in(self, session_id: int) -> str | None:
        """The question the session's next text answers, if one is pending (in memory)."""
        return self._pending.get(session_id)

    async def ask(
        self, session_id: int, tool_call_id: int, chat_id: int | None, question: str, options: list[str]
    ) -> Asked:
        """The call's question, opened if it has none; opening supersedes the session's others."""

        def open_question(tx: Session) -> Asked:
            lock_rows(tx.connection(), _SESSIONS, [session_id])  # one ask of the session at a time
            existing = tx.exec(select(QuestionRow).where(QuestionRow.tool_call_id == tool_call_id)).first()
            if existing is not None:
                show = existing.status == QuestionStatus.PENDING and existing.message_id is None
                return Asked(existing, show=show)
            supersede = (
                sa.update(_QUESTIONS)
                .where(_QUESTIONS.c.session_id == session_id, _QUESTIONS.c.status == QuestionStatus.PENDING)
                .values(status=QuestionStatus.SUPERSEDED, settled_at=utcnow())
                .returning(*_QUESTIONS.c)
            )
            older = tuple(QuestionRow(**found._mapping) for found in tx.connection().execute(supersede))
            row = QuestionRow(
                id=secrets.token_hex(6),
                session_id=session_id,
                tool_call_id=tool_call_id,
                chat_id=chat_id,
                question=question,
                options=options,
            )
            tx.add(row)
            after_commit(tx.connection(), lambda: self._opened(row, older))  # in commit order
            return Asked(row, show=True, superseded=older)

        return await self._db.write_orm(open_question)

    def _opened(self, row: QuestionRow, superseded: tuple[QuestionRow, ...]) -> None:
        for old in superseded:
            self._wake(old.id)
        self._pending[row.session_id] = row.id

    async def get(self, question_id: str) -> QuestionRow | None:
        async with self._db.read() as tx:
            return await tx.get(QuestionRow, question_id)

    async def attach_message(self, question_id: str, chat_id: int, message_id: int) -> None:
        attach = (
            sa.update(_QUESTIONS)
            .where(_QUESTIONS.c.id == question_id)
            .values(chat_id=chat_id, message_id=message_id)
        )
        await self._db.write_sync(lambda tx: tx.execute(attach))

    async def answer(self, question_id: str, answer: str) -> Settled:
        return await self._settle(question_id, QuestionStatus.ANSWERED, answer)

    async def cancel_session(self, session_id: int) -> list[QuestionRow]:
        """Cancel the session's pending questions (``/stop``); returns those cancelled."""
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(QuestionRow.id).where(
                    QuestionRow.session_id == session_id, QuestionRow.status == QuestionStatus.PENDING
                )
            )
            ids = list(rows.all())
        cancelled = []
        for question_id in ids:
            settled = await self._settle(question_id, QuestionStatus.CANCELLED, None)
            if settled.applied and settled.row is not None:
                cancelled.append(settled.row)
        return cancelled

    async def _settle(self, question_id: str, status: QuestionStatus, answer: str | None) -> Settled:
        """``pending`` → ``status`` in one compare-and-set statement (of concurrent settles one applies)."""
        settle = (
            sa.update(_QUESTIONS)
            .where(_QUESTIONS.c.id == question_id, _QUESTIONS.c.status == QuestionStatus.PENDING)
            .values(status=status, answer=answer, settled_at=utcnow())
            .returning(*_QUESTIONS.c)
        )
        current = sa.select(_QUESTIONS).where(_QUESTIONS.c.id == question_id)

        def write(tx: sa.Connection) -> tuple[QuestionRow | None, bool]:
            settled = tx.execute(settle).first()
            found = settled or tx.execute(current).first()
            return (None if found is None else QuestionRow(**found._mapping)), settled is not None

        row, applied = await self._db.write_sync(write)
        if row is None or not applied:
            return Settled(applied=False, row=row)
        log.info(
            "question %s %s session=%s",
            question_id,
            status,
            row.session_id,
            extra={"question": question_id, "status": str(status), "session": row.session_id},
        )
        if self._pending.get(row.session_id) == question_id:
            del self._pending[row.session_id]
        self._wake(question_id)
        return Settled(applied=True, row=row)

    async def wait(self, question_id: str) -> QuestionRow:
        """Block until the question is settled. The wake-up is registered before the row is read,
        so an answer landing during the read is never missed."""
        while True:
            woken = self._waiters.setdefault(question_id, asyncio.Event())
            try:
                row = await self.get(question_id)
                if row is None:
                    raise LookupError(question_id)
                if row.status != QuestionStatus.PENDING:
                    return row
                await woken.wait()
            finally:
                if self._waiters.get(question_id) is woken and not woken.is_set():
                    del self._waiters[question_id]  # cancelled while it waited: nobody waits now

    def awaited(self, session_id: int) -> bool:
        """A call of this session waits for the user's answer right now (in memory)."""
        question_id = self._pending.get(session_id)
        return question_id is not None and question_id in self._waiters

    def _wake(self, question_id: str) -> None:
        woken = self._waiters.pop(question_id, None)
        if woken is not None:
            woken.set()


__all__ = ["Asked", "QuestionManager", "Settled"]
