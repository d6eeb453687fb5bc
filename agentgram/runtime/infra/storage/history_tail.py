"""The newest entries of each recently active session's history, in memory.

:class:`HistoryTails` is the history's in-memory view (rules in
:mod:`runtime.storage.views`); :class:`~runtime.storage.history.HistoryStore`
updates it after each of its commits.

Memory is bounded three times: a tail keeps no more entries than a round reads
(``keep``, set by the composition from the context settings), only the
``capacity`` most recently read sessions have one, and all tails together weigh at most
``budget`` bytes (:data:`BUDGET`, estimated by :func:`cost_of`), the least recently read going
first. Without the last bound the tails of 256 sessions could hold 51,200 entries of any size: a
tool's long results, or the slow growth over 10,000 turns that ``bench.chat_memory`` measured
(``bench/README.md``, session 20). A session missing from the tails is read from the database.

A tail holds thousands of entries, so an entry is one small object: of its row, only what a
reader of the history uses (:class:`HistoryEntry`), and of the row's ``meta`` only the
attachments. The row as written is a :class:`HistoryRecord`. Entries without tool calls share one
empty tuple of calls, and entries without attachments one empty ``meta``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Dialect, Text, TypeDecorator

from agentgram.runtime.infra.storage.models import HistoryRow, Role, RowStatus, ToolCallRow, utcnow
from agentgram.runtime.infra.storage.rows import columns_of, insert_values, table_of
from agentgram.runtime.infra.storage.views import SessionViews, Ticket

KEEP = 200
"""Entries a tail keeps unless told otherwise: ``llm.max_history_messages``' default."""
BUDGET = 1024 * 1024
"""Bytes all tails together may weigh (:func:`cost_of`): at ≈ 1 KiB an entry, 5 sessions' full
200 entries; at a chat's ≈ 280 bytes, 3,700 entries."""
ENTRY_COST = 160
"""An entry's bytes beside its text: the object (104), its place in the list and the text's own
header beyond what ``sys.getsizeof`` counts."""
CALL_COST = 1024
"""A tool call's bytes beside its arguments and result: an ORM row with its instance state."""
NO_CALLS: tuple[ToolCallRow, ...] = ()
NO_META: dict[str, Any] = {}
"""The ``meta`` of every tail entry without attachments: one dict, shared, never written."""


@dataclass(slots=True)
class HistoryRecord:
    """One history row's columns, as a plain object: what a turn's writes build and insert.

    A :class:`HistoryRow` carries SQLAlchemy's instance state and pydantic's set of
    fields: ≈ 2.9 KiB built for an insert, against ≈ 0.4 KiB for this with a short text.
    What the history keeps of it after the commit is a :class:`HistoryEntry`.
    """

    session_id: int
    role: Role
    id: int | None = None
    stack_id: int | None = None
    turn_id: int | None = None
    content: str = ""
    reasoning: str | None = None
    is_synthetic: bool = False
    status: RowStatus = RowStatus.OK
    meta: dict[str, Any] = field(default_factory=dict)
    mail_seq: int | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    created_at: datetime = field(default_factory=utcnow)
    delivered_at: datetime | None = None

    def insert(self, tx: Connection) -> int:
        """Insert this record as a new row (its ``id`` unset) and set the id it got: a turn's
        hot writes build no ORM row (building one cost more than the insert)."""
        values = {column: getattr(self, name) for name, column in _COLUMNS}
        self.id = insert_values(tx, _HISTORY, values)
        return self.id


_HISTORY = table_of(HistoryRow)
_COLUMNS = tuple((name, column) for name, column in columns_of(HistoryRow) if name != "id")
"""(field, column) pairs: ``meta`` is stored as ``metadata``."""


@dataclass(slots=True)
class HistoryEntry:
    """One history row as its readers see it, with its tool calls in order.

    The row's columns that the context and the door read, and of its ``meta`` only the
    attachments (:meth:`of`): not its session, model, reasoning (a reasoning model's thoughts are
    never sent back, and can be longer than the answer), output tokens, mail sequence, or when it
    was written or shown (compaction, the one reader of the time, reads it from the database:
    :meth:`~runtime.storage.history.HistoryStore.written`). One object of 104 bytes where a
    :class:`HistoryRecord`, its time and a pair holding it with its calls took ≈ 260: most of
    what a tail's entry costs beside its text (``bench/README.md``, session 18). ``id`` is
    ``None`` only for a provisional entry that was never stored (:mod:`runtime.turn.prefetch`).
    """

    id: int | None
    role: Role
    content: str
    turn_id: int | None = None
    is_synthetic: bool = False
    status: RowStatus = RowStatus.OK
    meta: dict[str, Any] = field(default_factory=lambda: NO_META)
    input_tokens: int = 0
    calls: Sequence[ToolCallRow] = NO_CALLS

    @classmethod
    def of(cls, row: HistoryRecord | HistoryRow, calls: Sequence[ToolCallRow] = NO_CALLS) -> HistoryEntry:
        """``row`` as an entry: of its ``meta`` only the attachments."""
        return cls(
            row.id, row.role, row.content, row.turn_id, row.is_synthetic, row.status,
            attachments_only(row.meta), row.input_tokens, calls,
        )  # fmt: skip


ENTRY_FIELDS = tuple(name for name in HistoryEntry.__dataclass_fields__ if name != "calls")
"""The row's columns an entry keeps, in the order of its fields: a read selects only these, and
builds an entry from each row by position."""


def cost_of(entry: HistoryEntry) -> int:
    """What ``entry`` weighs against :data:`BUDGET`, in bytes, estimated."""
    cost = ENTRY_COST + sys.getsizeof(entry.content)
    for call in entry.calls:
        cost += call_cost(call)
    return cost


def call_cost(call: ToolCallRow) -> int:
    return CALL_COST + len(call.arguments) + len(call.result or "")


class StoredMeta(TypeDecorator[dict[str, Any]]):
    """A row's ``meta`` as an entry keeps it (:func:`attachments_only`), read as a column type.

    Most rows' ``meta`` is ``{}``: its JSON is decoded only when it names attachments. SQLite
    hands over the text; asyncpg decodes JSON itself (SQLAlchemy sets its codec), so a dict comes
    from PostgreSQL.
    """

    impl = Text
    cache_ok = True

    def process_result_value(self, value: Any, dialect: Dialect) -> dict[str, Any]:
        if isinstance(value, str):
            if '"attachments"' not in value:
                return NO_META
            value = json.loads(value)
        return attachments_only(value or NO_META)


def attachments_only(meta: dict[str, Any]) -> dict[str, Any]:
    """Of a row's ``meta``, what a reader uses: its attachments (:data:`NO_META` without any)."""
    if "attachments" not in meta:
        return NO_META
    return meta if len(meta) == 1 else {"attachments": meta["attachments"]}


@dataclass(slots=True)
class Tail:
    """The newest non-failed entries of a session; ``complete`` when they are all of them."""

    entries: list[HistoryEntry]
    complete: bool
    calls: dict[int, ToolCallRow] = field(default_factory=dict)
    size: int = 0
    """What its entries weigh (:func:`cost_of`)."""

    @classmethod
    def of(cls, entries: list[HistoryEntry], complete: bool) -> Tail:
        calls = {call.id or 0: call for entry in entries for call in entry.calls}
        return cls(entries, complete, calls, sum(map(cost_of, entries)))

    def serves(self, limit: int) -> bool:
        return self.complete or len(self.entries) >= limit

    def newest(self, keep: int) -> Tail:
        """This tail cut to its ``keep`` newest entries."""
        if len(self.entries) <= keep:
            return self
        return Tail.of(self.entries[len(self.entries) - keep :], complete=False)

    def append(self, entry: HistoryEntry, keep: int) -> int:
        """Add ``entry`` (unless already shown), keeping the ``keep`` newest: the change in size."""
        last = self.entries[-1] if self.entries else None
        if last is not None and (entry.id or 0) <= (last.id or 0):
            return 0  # already shown (filled from a read that saw this commit)
        if last is not None and entry.turn_id == last.turn_id:
            entry.turn_id = last.turn_id  # one int object for the rows of a turn
        self.entries.append(entry)
        delta = cost_of(entry)
        for call in entry.calls:
            self.calls[call.id or 0] = call
        if len(self.entries) > keep:
            for dropped in self.entries[: len(self.entries) - keep]:
                delta -= cost_of(dropped)
                for call in dropped.calls:
                    self.calls.pop(call.id or 0, None)
            del self.entries[: len(self.entries) - keep]
            self.complete = False
        self.size += delta
        return delta

    def call_changed(self, call_id: int, values: dict[str, Any]) -> int:
        """Set ``values`` on the call ``call_id`` if this tail holds it: the change in size."""
        call = self.calls.get(call_id)
        if call is None:
            return 0
        before = call_cost(call)
        for name, value in values.items():
            setattr(call, name, value)
        delta = call_cost(call) - before
        self.size += delta
        return delta


class HistoryTails(SessionViews[Tail]):
    """Tails of the recently active sessions: at most ``capacity`` sessions × ``keep`` entries,
    weighing at most ``budget`` bytes together."""

    def __init__(self, capacity: int = 256, keep: int = KEEP, budget: int = BUDGET) -> None:
        super().__init__(capacity, budget)
        self.keep = keep

    def weigh(self, view: Tail) -> int:
        return view.size

    def fill(self, session_id: int, view: Tail, ticket: Ticket) -> None:
        super().fill(session_id, view.newest(self.keep), ticket)

    def appended(self, session_id: int, entry: HistoryEntry) -> None:
        tail = self.changed(session_id)
        if tail is not None:
            self.resized(tail.append(entry, self.keep))

    def call_changed(self, session_id: int, call_id: int, values: dict[str, Any]) -> None:
        tail = self.changed(session_id)
        if tail is not None:
            self.resized(tail.call_changed(call_id, values))


def without_orphans(entries: list[HistoryEntry]) -> list[HistoryEntry]:
    """``entries`` as :meth:`HistoryStore.mark_orphans_failed` leaves them: no trailing user rows."""
    end = len(entries)
    while end and entries[end - 1].role == Role.USER:
        end -= 1
    return entries[:end]
