"""Chat history rows and their tool calls.

Pairing is structural: a tool call is a row of ``tool_calls`` that belongs
to its assistant row and *is* its own result slot. The context builder emits
exactly one tool message per call, derived from the call's status, so the
stored history can never hold an unanswered call or a stray result — a call
cut short by a crash reads as "interrupted", one stopped by the user as
"Cancelled by user." (round-builder spec: placeholders, never gaps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from runtime.llm.types import LLMRound
from runtime.storage.db import Database
from runtime.storage.models import HistoryRow, Role, RowStatus, ToolCallRow, ToolCallStatus, Turn, utcnow


@dataclass(slots=True)
class HistoryEntry:
    row: HistoryRow
    calls: list[ToolCallRow]


class HistoryStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    @staticmethod
    def add_user_row(
        tx: Any,
        *,
        session_id: int,
        turn_id: int | None,
        content: str,
        is_synthetic: bool = False,
        mail_seq: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> HistoryRow:
        row = HistoryRow(
            session_id=session_id,
            turn_id=turn_id,
            role=Role.USER,
            content=content,
            is_synthetic=is_synthetic,
            mail_seq=mail_seq,
            meta=meta or {},
        )
        tx.add(row)
        return row

    @staticmethod
    def mark_orphans_failed(tx: Session, session_id: int) -> int:
        """Trailing user rows with no answer after them: the turn died before replying.

        A reply cut short by /stop (a ``cancelled`` assistant row) is an answer.
        """
        rows = tx.exec(
            select(HistoryRow)
            .where(HistoryRow.session_id == session_id, HistoryRow.status != RowStatus.FAILED)
            .order_by(col(HistoryRow.id).desc())
            .limit(50)
        ).all()
        failed = 0
        for row in rows:
            if row.role != Role.USER:
                break
            row.status = RowStatus.FAILED
            tx.add(row)
            failed += 1
        return failed

    async def record_round(
        self, *, session_id: int, turn_id: int, result: LLMRound, status: RowStatus = RowStatus.OK
    ) -> HistoryEntry:
        """Persist one completed round: the assistant row and its calls as ``pending``."""

        def record(tx: Session) -> HistoryEntry:
            row = HistoryRow(
                session_id=session_id,
                turn_id=turn_id,
                role=Role.ASSISTANT,
                content=result.text,
                reasoning=result.reasoning or None,
                status=status,
                model=result.model or None,
                input_tokens=result.usage.input_tokens,
                output_tokens=result.usage.output_tokens,
            )
            tx.add(row)
            tx.flush()
            assert row.id is not None
            calls = [
                ToolCallRow(
                    session_id=session_id,
                    history_id=row.id,
                    position=index,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                )
                for index, call in enumerate(result.tool_calls)
            ]
            tx.add_all(calls)
            tx.exec(update(Turn).where(col(Turn.id) == turn_id).values(rounds=Turn.rounds + 1))
            tx.flush()
            return HistoryEntry(row=row, calls=calls)

        return await self._db.write_orm(record)

    async def append_assistant(
        self, *, session_id: int, content: str, is_synthetic: bool = False, meta: dict[str, Any] | None = None
    ) -> HistoryRow:
        async with self._db.write() as tx:
            row = HistoryRow(
                session_id=session_id,
                role=Role.ASSISTANT,
                content=content,
                is_synthetic=is_synthetic,
                meta=meta or {},
            )
            tx.add(row)
            return row

    async def set_call_status(
        self, call_row_id: int, status: ToolCallStatus, result: str | None = None
    ) -> None:
        def mark(tx: Session) -> None:
            call = tx.get(ToolCallRow, call_row_id)
            if call is None:
                return
            call.status = status
            if status == ToolCallStatus.RUNNING:
                call.started_at = utcnow()
            if status.terminal:
                call.result = result
                call.finished_at = utcnow()
            tx.add(call)

        await self._db.write_orm(mark)

    async def call(self, call_row_id: int) -> ToolCallRow | None:
        async with self._db.read() as tx:
            return await tx.get(ToolCallRow, call_row_id)

    async def open_calls(self, session_id: int) -> list[ToolCallRow]:
        """Calls left ``pending``/``running`` (interrupted), in declared order."""
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(ToolCallRow)
                .where(
                    ToolCallRow.session_id == session_id,
                    col(ToolCallRow.status).in_([ToolCallStatus.PENDING, ToolCallStatus.RUNNING]),
                )
                .order_by(col(ToolCallRow.history_id), col(ToolCallRow.position))
            )
            return list(rows.all())

    async def close_open_calls(self, session_id: int, status: ToolCallStatus, note: str) -> list[ToolCallRow]:
        """Give every unfinished call a terminal status (``/stop``): no gaps, ever."""
        async with self._db.write() as tx:
            rows = (
                await tx.exec(
                    select(ToolCallRow).where(
                        ToolCallRow.session_id == session_id,
                        col(ToolCallRow.status).in_([ToolCallStatus.PENDING, ToolCallStatus.RUNNING]),
                    )
                )
            ).all()
            for call in rows:
                call.status = status
                call.result = note
                call.finished_at = utcnow()
                tx.add(call)
            return list(rows)

    async def entries(self, session_id: int, limit: int = 1000) -> list[HistoryEntry]:
        """The session's non-failed rows, oldest first, each with its calls in order."""

        def read(tx: Session) -> list[HistoryEntry]:
            rows = list(
                tx.exec(
                    select(HistoryRow)
                    .where(HistoryRow.session_id == session_id, HistoryRow.status != RowStatus.FAILED)
                    .order_by(col(HistoryRow.id).desc())
                    .limit(limit)
                ).all()
            )
            rows.reverse()
            ids = [r.id for r in rows if r.role == Role.ASSISTANT]
            calls: dict[int, list[ToolCallRow]] = {}
            if ids:
                found = tx.exec(
                    select(ToolCallRow)
                    .where(col(ToolCallRow.history_id).in_(ids))
                    .order_by(col(ToolCallRow.history_id), col(ToolCallRow.position))
                )
                for call in found.all():
                    calls.setdefault(call.history_id, []).append(call)
            return [HistoryEntry(row=row, calls=calls.get(row.id or 0, [])) for row in rows]

        return await self._db.read_sync(read)

    async def all_rows(self, session_id: int) -> list[HistoryRow]:
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(HistoryRow).where(HistoryRow.session_id == session_id).order_by(col(HistoryRow.id))
            )
            return list(rows.all())
