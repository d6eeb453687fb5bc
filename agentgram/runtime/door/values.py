"""The values that cross the door: what an adapter passes in and gets back.

Each is a frozen dataclass or a StrEnum made for the adapter, never an ORM row
(``tests/test_layers.py`` checks the door's Protocols for rows). The runtime's own value types
an adapter also sees (``Rule``, ``Bypass``, ``ApprovalStatus``…) stay where they are defined;
:mod:`runtime.app` re-exports all of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from agentgram.runtime.core.approvals.bypass import Bypass
from agentgram.runtime.core.approvals.manager import DecisionResult
from agentgram.runtime.core.approvals.rules import Rule
from agentgram.runtime.core.mailbox import Steered
from agentgram.runtime.infra.events import QuestionStatus
from agentgram.runtime.infra.storage.models import ApprovalStatus, ChatSession, SessionSource, ToolCallStatus


class PostResult(enum.StrEnum):
    STARTED = "started"  # the session was idle: a turn starts with this message
    QUEUED = "queued"  # a turn is running: it reads this at its next step
    QUEUED_AFTER = "queued_after"  # a turn is running: this waits for it to end (agent.queued_default)
    WAITING_APPROVAL = "waiting_approval"  # as QUEUED, but the next step waits for a decision
    PAUSED = "paused"  # the session's turn is paused: kept until /resume
    DUPLICATE = "duplicate"  # already accepted (redelivered update)
    FULL = "full"  # too many unread messages


@dataclass(slots=True, frozen=True)
class StopResult:
    was_running: bool


@dataclass(slots=True, frozen=True)
class Decision:
    """What a button press or reply on an approval achieved: ``applied`` once; else where the
    request stands. ``request_id`` is ``None`` when no such request exists (the storage's
    :class:`~runtime.core.approvals.manager.DecisionResult` carries its row; this carries its id)."""

    applied: bool
    status: ApprovalStatus
    request_id: str | None

    @classmethod
    def of(cls, result: DecisionResult) -> Decision:
        request = result.request
        return cls(result.applied, result.status, request.id if request is not None else None)


@dataclass(slots=True, frozen=True)
class AwaitedApproval:
    """The decision a session's turn waits for, as the chat can point at it."""

    request_id: str
    tool: str
    message_id: int | None  # the prompt in the chat; None until its send returned


@dataclass(slots=True, frozen=True)
class CallRun:
    """A tracked call's run: ``status`` is running, completed, failed, cancelled or orphaned."""

    run_id: int
    name: str
    summary: str
    status: str
    runs_command: bool
    started_at: datetime
    finished_at: datetime | None


@dataclass(slots=True, frozen=True)
class CallState:
    """A tool call as a status line shows it, as it stands in the database."""

    id: int
    name: str
    summary: str
    status: ToolCallStatus
    runs_command: bool = False  # the tool runs shell commands (``Tool.runs_commands``)


@dataclass(slots=True, frozen=True)
class SessionRef:
    """A chat's session as an adapter holds it: which one, whose chat, its user's language, its
    source (a platform's chat, or the terminal) and its forum topic (0: none)."""

    id: int
    chat_id: int | None
    user_id: int | None
    language_code: str | None
    source: SessionSource = SessionSource.CHAT
    thread_id: int = 0

    @classmethod
    def of(cls, row: ChatSession) -> SessionRef:
        assert row.id is not None
        return cls(
            row.id, row.chat_id, row.user_id, row.language_code, SessionSource(row.source), row.thread_id
        )


@dataclass(slots=True, frozen=True)
class PastExchange:
    """A user's message and the answer it got, as a chat shows it again after a restart;
    ``answer_row_id`` is the answer's stored row (``RoundEnded.row_id``), ``None`` if unanswered."""

    question: str
    answer: str
    answer_row_id: int | None


@dataclass(slots=True, frozen=True)
class Posted:
    """A user's message as the mailbox took it, and whether the source's checkpoint was stored
    with it (then the source need not store it again); ``seq``: its place in the session's mail,
    what a choice for it (:meth:`~runtime.door.chat.Chat.steer`) names."""

    result: PostResult
    checkpoint_stored: bool
    seq: int | None = None


@dataclass(slots=True, frozen=True)
class SteerResult:
    """What became of the user's choice for a queued message (issue 30): ``step``, when it was
    read already, is the step of the turn that read it (1: the turn started with it)."""

    outcome: Steered
    step: int | None = None


@dataclass(slots=True, frozen=True)
class PromptedApproval:
    """The approval request a chat message (its prompt) asks about, as it stands."""

    request_id: str
    status: ApprovalStatus


@dataclass(slots=True, frozen=True)
class PendingApproval:
    """A request still waiting for its decision: its prompt in the chat and the call it is about."""

    request_id: str
    message_id: int | None  # None until the prompt's send returned
    tool: str  # "?" when the call is gone
    summary: str


@dataclass(slots=True, frozen=True)
class AnswerResult:
    """What an answer to a clarifying question achieved: ``applied`` once; else where it stands."""

    applied: bool
    status: QuestionStatus
    answer: str | None


@dataclass(slots=True, frozen=True)
class TrustOverview:
    """What a session does not ask about: its live bypasses and the user's saved allow rules."""

    bypasses: tuple[Bypass, ...]
    rules: tuple[Rule, ...]


@dataclass(slots=True, frozen=True)
class PlaceSession:
    """A chat's active session as ``/sessions`` lists it: which one, its forum topic (0: none),
    the place's name as the adapter last told it (a group's, with its topic's; ``None``: not
    known) and when its newest message was written (``None``: none yet)."""

    id: int
    thread_id: int
    title: str | None
    last_active: datetime | None


@dataclass(slots=True, frozen=True)
class SpawnedSession:
    """A session another session spawned (issue 29), as the chat it reports to shows it: its ref
    (the user's mail to it goes there), the name its messages carry (its own, else its agent's),
    the chat session at the top of its tree, and whether it has finished (reads no more mail)."""

    ref: SessionRef
    name: str
    agent: str
    root_id: int
    finished: bool
    answers_call: bool = False
    """It works on a sub-agent's task (``execute_task``): its answer is that call's result, shown
    as the sub-agent's end, not as a message of its own."""
