"""The newest entries of each recently active session's history, in memory.

:class:`HistoryTails` is the history's in-memory view (rules in
:mod:`runtime.storage.views`); :class:`~runtime.storage.history.HistoryStore`
updates it after each of its commits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgram.runtime.infra.storage.models import HistoryRow, Role, ToolCallRow
from agentgram.runtime.infra.storage.views import SessionViews


@dataclass(slots=True)
class HistoryEntry:
    row: HistoryRow
    calls: list[ToolCallRow]


@dataclass(slots=True)
class Tail:
    """The newest non-failed entries of a session; ``complete`` when they are all of them."""

    entries: list[HistoryEntry]
    complete: bool
    calls: dict[int, ToolCallRow] = field(default_factory=dict)

    def serves(self, limit: int) -> bool:
        return self.complete or len(self.entries) >= limit

    def append(self, entry: HistoryEntry, keep: int) -> None:
        if self.entries and (entry.row.id or 0) <= (self.entries[-1].row.id or 0):
            return  # already shown (filled from a read that saw this commit)
        self.entries.append(entry)
        for call in entry.calls:
            self.calls[call.id or 0] = call
        if len(self.entries) > keep:
            for dropped in self.entries[: len(self.entries) - keep]:
                for call in dropped.calls:
                    self.calls.pop(call.id or 0, None)
            del self.entries[: len(self.entries) - keep]
            self.complete = False


class HistoryTails(SessionViews[Tail]):
    """Tails of the recently active sessions; at most ``capacity`` sessions × ``keep`` entries."""

    def __init__(self, capacity: int = 256, keep: int = 1000) -> None:
        super().__init__(capacity)
        self.keep = keep

    def appended(self, session_id: int, entry: HistoryEntry) -> None:
        tail = self.changed(session_id)
        if tail is not None:
            tail.append(entry, self.keep)

    def row_changed(self, session_id: int, row_id: int, values: dict[str, Any]) -> None:
        tail = self.changed(session_id)
        row = next((e.row for e in reversed(tail.entries) if e.row.id == row_id), None) if tail else None
        if row is not None:
            for name, value in values.items():
                setattr(row, name, value)

    def call_changed(self, session_id: int, call_id: int, values: dict[str, Any]) -> None:
        tail = self.changed(session_id)
        call = tail.calls.get(call_id) if tail is not None else None
        if call is not None:
            for name, value in values.items():
                setattr(call, name, value)


def without_orphans(entries: list[HistoryEntry]) -> list[HistoryEntry]:
    """``entries`` as :meth:`HistoryStore.mark_orphans_failed` leaves them: no trailing user rows."""
    end = len(entries)
    while end and entries[end - 1].row.role == Role.USER:
        end -= 1
    return entries[:end]
