"""A session's working notes: the scratchpad and the todo list, their store and their tools.

``update_scratchpad {key, value|null}`` keeps short notes the agent wants in
front of it on every round (a path, a decision, a URL); they are injected as
their own system message right after the static one and before the history
(:func:`runtime.turn.context.build_messages`), so changing a note leaves the
large cached prefix — the static system message — byte-identical. The
message (:func:`notes_text`) is::

    <scratchpad>
    <entry key="db_url">postgres://localhost/mydb</entry>
    </scratchpad>

keys in sorted order, keys and values XML-escaped; it is left out while the
session has no notes and no todos.

``write_todos {items}`` replaces the session's todo list (each item ``pending``,
``in_progress`` or ``done``). The chat shows the list whenever it changes
(:class:`~runtime.events.TodosChanged`); the model also reads it in the same
system message, as ``<todos>`` lines — after a long conversation, its own
``write_todos`` calls may be far back. Siblings of one parallel batch share the
session's notes: the last write of a key wins.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import sqlalchemy as sa
from pydantic import Field
from sqlalchemy import Connection
from sqlmodel import Session, col, select

from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolScope
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import EventBus, TodoItem, TodosChanged, TodoStatus
from agentgram.runtime.infra.storage.concurrency import upsert
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import utcnow
from agentgram.runtime.infra.storage.notes_rows import ScratchpadRow, TodoListRow

_SCRATCHPAD: sa.Table = ScratchpadRow.__table__  # type: ignore[attr-defined]
_TODOS: sa.Table = TodoListRow.__table__  # type: ignore[attr-defined]

MAX_KEYS = 50
MAX_VALUE_CHARS = 2000
MAX_TODOS = 50
_MARK = {TodoStatus.PENDING: "[ ]", TodoStatus.IN_PROGRESS: "[~]", TodoStatus.DONE: "[x]"}


NOTES_KEPT = 1024
"""Sessions whose notes message is kept in memory, least recently used out (the rest are read again)."""


class NoteStore:
    """The scratchpad and todo tables, read and written per session.

    Every round (and a turn's prefetched request) sends the notes message, so it is kept in memory
    per session instead of read twice a round. Only the process that runs a session's turns writes
    its notes, through this store, and each write drops the session's copy; when the process stops
    running the session (its worker idles out, or another instance of a cluster owns it) the hub
    tells :meth:`forget`, so a copy never outlives the ownership it was read under.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._texts: OrderedDict[int, str | None] = OrderedDict()
        self._writes = 0  # a read that overlapped a write keeps no copy (it may predate the commit)

    def known_empty(self, session_id: int) -> None:
        """The session was created just now: it has no notes to read (its first write drops this)."""
        self._keep(session_id, None)

    def forget(self, session_id: int) -> None:
        """The session's worker went (idle, or another instance runs it): its copy goes too."""
        self._texts.pop(session_id, None)

    def _keep(self, session_id: int, text: str | None) -> None:
        self._texts[session_id] = text
        while len(self._texts) > NOTES_KEPT:
            self._texts.popitem(last=False)

    def _changed(self, session_id: int) -> None:
        self._writes += 1
        self._texts.pop(session_id, None)

    async def scratchpad(self, session_id: int) -> dict[str, str]:
        return await self._db.read_sync(lambda tx: _scratchpad(tx, session_id))

    async def set_note(self, session_id: int, key: str, value: str | None) -> int:
        """Set (or, with ``None``, remove) one note; the number of notes afterwards. One statement
        each (an upsert, a delete), so parallel calls of a round never race on the key."""
        table = _SCRATCHPAD

        def write(conn: Connection) -> int:
            mine = table.c.session_id == session_id
            if value is None:
                conn.execute(sa.delete(table).where(mine, table.c.key == key))
            else:
                row = {"session_id": session_id, "key": key, "value": value, "updated_at": utcnow()}
                upsert(conn, table, row, keys=("session_id", "key"), update=("value", "updated_at"))
            return int(conn.execute(sa.select(sa.func.count()).select_from(table).where(mine)).scalar_one())

        try:
            return await self._db.write_sync(write)
        finally:  # after the commit: a read that overlapped it keeps no copy
            self._changed(session_id)

    async def todos(self, session_id: int) -> tuple[TodoItem, ...]:
        return await self._db.read_sync(lambda tx: _todos(tx, session_id))

    async def set_todos(self, session_id: int, items: Sequence[TodoItem]) -> bool:
        """Replace the list; ``False`` when it was exactly this already (nothing to show)."""
        stored = [{"text": item.text, "status": str(item.status)} for item in items]
        table = _TODOS

        def write(conn: Connection) -> bool:
            current = conn.execute(
                sa.select(table.c["items"]).where(table.c.session_id == session_id)
            ).first()
            if current is not None and current[0] == stored:
                return False
            row = {"session_id": session_id, "items": stored, "updated_at": utcnow()}
            upsert(conn, table, row, keys=("session_id",), update=("items", "updated_at"))
            return True

        try:
            return await self._db.write_sync(write)
        finally:  # after the commit: a read that overlapped it keeps no copy
            self._changed(session_id)

    async def context_text(self, session_id: int) -> str | None:
        """The notes system message for this session, or ``None`` while it has none."""
        if session_id in self._texts:
            self._texts.move_to_end(session_id)
            return self._texts[session_id]
        writes = self._writes
        # both tables in one read on a thread: a chat's first message waits for this read
        text = await self._db.read_sync(
            lambda tx: notes_text(_scratchpad(tx, session_id), _todos(tx, session_id))
        )
        if writes == self._writes:
            self._keep(session_id, text)
        return text


def _scratchpad(tx: Session, session_id: int) -> dict[str, str]:
    mine = select(ScratchpadRow).where(ScratchpadRow.session_id == session_id)
    return {row.key: row.value for row in tx.exec(mine.order_by(col(ScratchpadRow.key)))}


def _todos(tx: Session, session_id: int) -> tuple[TodoItem, ...]:
    row = tx.get(TodoListRow, session_id)
    return parse_todos(row.items) if row is not None else ()


def parse_todos(raw: object) -> tuple[TodoItem, ...]:
    """Stored JSON → items; anything malformed is left out (fail closed, never crash a round)."""
    items = []
    for entry in raw if isinstance(raw, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            try:
                items.append(TodoItem(text=entry["text"], status=TodoStatus(entry.get("status", "pending"))))
            except ValueError:
                continue
    return tuple(items)


def notes_text(scratchpad: Mapping[str, str], todos: Sequence[TodoItem]) -> str | None:
    """The one rendering of the notes the model reads (see the module docstring)."""
    parts = []
    if scratchpad:
        entries = "".join(
            f'<entry key="{escape(key)}">{escape(scratchpad[key], quote=False)}</entry>\n'
            for key in sorted(scratchpad)
        )
        parts.append(f"<scratchpad>\n{entries}</scratchpad>")
    if todos:
        lines = "".join(f"{_MARK[item.status]} {escape(item.text, quote=False)}\n" for item in todos)
        parts.append(f"<todos>\n{lines}</todos>")
    return "\n".join(parts) if parts else None


class ScratchpadArgs(ToolArgs):
    key: str = Field(min_length=1, max_length=100, description="The note's name, e.g. 'db_url'.")
    value: str | None = Field(
        max_length=MAX_VALUE_CHARS, description="The note's text; null removes the note."
    )


class UpdateScratchpad(Tool[ScratchpadArgs]):
    name = "update_scratchpad"
    description = (
        "Keep a short note for the rest of this conversation (a path, a decision, an id): it is shown "
        "to you on every step in <scratchpad>. Setting a key again replaces its note; value null removes it."
    )
    Args = ScratchpadArgs

    def __init__(self, store: NoteStore) -> None:
        self.store = store

    async def execute(self, args: ScratchpadArgs, ctx: ToolContext) -> str:
        notes = await self.store.scratchpad(ctx.session_id) if args.value is not None else {}
        if args.value is not None and args.key not in notes and len(notes) >= MAX_KEYS:
            raise ToolError(f"the scratchpad holds at most {MAX_KEYS} notes; remove one first (value null)")
        count = await self.store.set_note(ctx.session_id, args.key, args.value)
        done = "removed" if args.value is None else "saved"
        return f"note {args.key!r} {done}; the scratchpad holds {count} note(s)"


class TodoArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=300)
    status: TodoStatus = TodoStatus.PENDING


class WriteTodosArgs(ToolArgs):
    items: list[TodoArgs] = Field(
        max_length=MAX_TODOS, description="The whole todo list, in order; it replaces the previous one."
    )


class WriteTodos(Tool[WriteTodosArgs]):
    name = "write_todos"
    scope = ToolScope.ROOT_ONLY  # the one list the chat shows is the root agent's plan
    description = (
        "Keep a visible todo list for a task of several steps: send the whole list each time, each item "
        "'pending', 'in_progress' or 'done'. The user sees the list in the chat as it changes."
    )
    Args = WriteTodosArgs

    def __init__(self, store: NoteStore, bus: EventBus) -> None:
        self.store = store
        self.bus = bus

    async def execute(self, args: WriteTodosArgs, ctx: ToolContext) -> str:
        items = tuple(TodoItem(text=" ".join(item.text.split()), status=item.status) for item in args.items)
        if await self.store.set_todos(ctx.session_id, items):
            self.bus.emit(TodosChanged(to=ctx.address, items=items))
        done = sum(1 for item in items if item.status is TodoStatus.DONE)
        return f"todo list saved: {len(items)} item(s), {done} done"


def note_tools(store: NoteStore, bus: EventBus) -> list[Tool[Any]]:
    return [UpdateScratchpad(store), WriteTodos(store, bus)]


__all__ = [
    "NoteStore",
    "UpdateScratchpad",
    "WriteTodos",
    "note_tools",
    "notes_text",
    "parse_todos",
]
