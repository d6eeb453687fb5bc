"""The narrow seams a turn and its session's worker run on: what :class:`~runtime.turn.deps.TurnDeps`
holds of the stores, the mailbox, the approval service and the event bus.

Each Protocol lists exactly what the turn's steps (``runtime/core/turn``) and the session worker
(``runtime/core/sessions``) call, nothing more; the runtime's concrete parts (``SessionStore``,
``HistoryStore``, ``FrameStore``, ``SqlMailbox``, ``ApprovalManager``, ``EventBus``, ``Database``)
satisfy them structurally, which mypy checks where ``runtime/app.py`` builds the ``TurnDeps``.
A method a step starts to use is added here first: the seam stays the list of what the turn needs,
so another store (PostgreSQL, another process's mailbox, a test double) knows what to provide.

The tool registry is not a seam here: :class:`~runtime.tools.base.ToolRegistry` is the value the
model is offered (narrowed per agent and per level, extended by MCP), not a service the turn calls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection

from agentgram.runtime.core.approvals.rules import Action, CallFacts
from agentgram.runtime.core.mailbox import Envelope, Receipt
from agentgram.runtime.infra.events import RuntimeEvent
from agentgram.runtime.infra.llm.types import LLMRound
from agentgram.runtime.infra.storage.frames import ChildFrame
from agentgram.runtime.infra.storage.history_tail import HistoryEntry, HistoryRecord
from agentgram.runtime.infra.storage.models import (
    ApprovalRequestRow,
    ChatSession,
    RowStatus,
    ToolCallRow,
    ToolCallStatus,
    Turn,
    TurnStatus,
)

T = TypeVar("T")


class Transactions(Protocol):
    """One write transaction around steps that must commit together (open a turn, fold in mail)."""

    async def write_sync(self, fn: Callable[[Connection], T]) -> T: ...


class TurnSessions(Protocol):
    """A session's row and its turns' rows."""

    async def get(self, session_id: int) -> ChatSession | None: ...

    def open_turn(self, tx: Connection, session_id: int) -> int:
        """A new running turn, inside the caller's transaction."""
        ...

    async def turn(self, turn_id: int) -> Turn | None: ...

    async def latest_turn(self, session_id: int) -> Turn | None: ...

    async def set_turn_status(self, turn_id: int, status: TurnStatus) -> None: ...

    async def finish_turn(self, turn_id: int, status: TurnStatus, error: str | None = None) -> None: ...


class TurnHistory(Protocol):
    """The conversation's rows and their tool calls, per session and stack frame."""

    async def entries(
        self, session_id: int, limit: int = 1000, *, stack_id: int | None = None
    ) -> list[HistoryEntry]: ...

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
        """Inside the caller's transaction."""
        ...

    def may_end_unanswered(self, session_id: int) -> bool:
        """Whether :meth:`mark_orphans_failed` may find anything (``False``: memory says not)."""
        ...

    def mark_orphans_failed(self, tx: Connection, session_id: int) -> int:
        """Inside the caller's transaction: trailing user rows no turn answered fail."""
        ...

    async def record_round(
        self,
        *,
        session_id: int,
        turn_id: int,
        result: LLMRound,
        status: RowStatus = RowStatus.OK,
        closes_turn: bool = False,
        stack_id: int | None = None,
    ) -> HistoryEntry: ...

    async def call(self, call_row_id: int) -> ToolCallRow | None: ...

    async def open_calls(self, session_id: int, stack_id: int | None = None) -> list[ToolCallRow]: ...

    async def set_call_status(
        self,
        call_row_id: int,
        status: ToolCallStatus,
        result: str | None = None,
        *,
        wrappers: str | None = None,
    ) -> None: ...

    async def close_open_calls(
        self, session_id: int, status: ToolCallStatus, note: str
    ) -> list[ToolCallRow]: ...

    def known_empty(self, session_id: int) -> None:
        """The session was created just now: its (empty) history needs no read."""
        ...

    def forget(self, session_id: int) -> None:
        """The session went idle: drop what memory holds of it."""
        ...


class Frames(Protocol):
    """A session's call stack: the sub-agents' frames (``runtime.storage.frames``)."""

    async def open_child(
        self, *, session_id: int, turn_id: int, parent_call_id: int, depth: int, agent: str, task: str
    ) -> ChildFrame: ...

    async def active_children(self, session_id: int) -> list[ChildFrame]: ...

    async def open_calls_of(self, history_ids: list[int]) -> list[ToolCallRow]: ...

    async def fail_open_calls_in(self, frame_ids: list[int], note: str) -> None: ...

    async def close(self, frame_ids: list[int]) -> None: ...

    async def close_children_of(self, call_id: int) -> None: ...

    async def close_all_children(self, session_id: int) -> None: ...


class TurnMail(Protocol):
    """A session's mail: stored (control mail the worker posts), read at a round boundary,
    consumed with its effect."""

    async def accept(self, envelope: Envelope) -> Receipt: ...

    async def unread(self, session_id: int, after: int | None = None) -> list[Envelope]: ...

    def advance(self, tx: Connection, session_id: int, upto: int) -> None:
        """Consume up to ``upto`` inside the caller's transaction."""
        ...

    async def consume(self, session_id: int, upto: int) -> None:
        """Consume up to ``upto`` in a transaction of its own (mail settled with no effect)."""
        ...

    def subscribe(self, listener: Callable[[Envelope], None]) -> None: ...

    def known_empty(self, session_id: int) -> None: ...

    def forget(self, session_id: int) -> None: ...


class Bypasses(Protocol):
    def clear(self, session_id: int) -> None:
        """A /stop ends the session's "trust for a while"."""
        ...


class Gate(Protocol):
    """The approval service as a turn sees it: the rules' answer, the requests, the wait."""

    @property
    def bypasses(self) -> Bypasses: ...

    def check(self, session_id: int, facts: CallFacts, now: datetime | None = None) -> Action: ...

    async def request_for_call(
        self, session_id: int, tool_call_id: int, chat_id: int | None
    ) -> tuple[ApprovalRequestRow, bool]:
        """The call's request, opened if none exists; ``True`` when newly opened."""
        ...

    async def wait(self, request_id: str) -> ApprovalRequestRow:
        """Until the request is decided, cancelled or expired."""
        ...

    async def pending(self, session_id: int | None = None) -> list[ApprovalRequestRow]: ...

    async def cancel_session(self, session_id: int) -> list[ApprovalRequestRow]: ...


class Events(Protocol):
    """Where the turn tells the adapters what happens (``runtime.events``)."""

    def emit(self, event: RuntimeEvent) -> None: ...


__all__ = ["Bypasses", "Events", "Frames", "Gate", "Transactions", "TurnHistory", "TurnMail", "TurnSessions"]
