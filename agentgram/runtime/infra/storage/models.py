"""SQLModel tables: the durable shape of sessions, history, tool calls, mail.

Stored formats carry :data:`SCHEMA_VERSION`; :mod:`runtime.storage.migrations`
upgrades older databases in place. Statuses and kinds are ``StrEnum`` columns
(:class:`~runtime.storage.types.StrEnumType`): plain strings in the database, so
it stays readable by hand, and enum members when read. Datetimes are UTC-aware
both ways (:data:`~runtime.storage.types.UTCDateTime`, every ``datetime`` field's
type). A chat platform's ids (chat, user, message) are ``BigInteger`` columns in every table:
a chat platform's exceed 32 bits (a supergroup's ``-100…``), PostgreSQL's ``integer`` does not hold them.
The mail vocabulary (sender, priority, kind) is defined here, under the
mailbox that uses it, because its table stores it.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, MetaData, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from agentgram.runtime.infra.storage.types import StrEnumType


def utcnow() -> datetime:
    return datetime.now(UTC)


class SessionSource(enum.StrEnum):
    CHAT = "chat"
    """An interactive chat on a chat platform (stored under the first platform's name before schema v3)."""
    TIC = "tic"
    CRON = "cron"
    SUBAGENT = "subagent"
    TERMINAL = "terminal"
    """An interactive chat in a terminal (``agentgram chat``): a chat in every way but whose
    output is its own (the chat platform's adapter ignores it, and it ignores the platform's)."""
    AGENT = "agent"
    """A session another session spawned (``spawn_session``, :mod:`runtime.core.peers`): it runs
    its agent on mail from other sessions, and reports to the chat its root session belongs to.
    Never *active* (a chat's one active session is the chat's own): ``closed_at`` ends it."""


HEADLESS_SOURCES = frozenset({SessionSource.TIC, SessionSource.CRON})
"""The sources of headless runs: nobody reads them live. Their sessions are ephemeral (never
compacted), offered no tool that waits for the user, their workers go as soon as the turn ends,
and a chat shows only what they report. :func:`is_headless` is the one test."""


def is_headless(source: str) -> bool:
    """Whether a session of ``source`` is a headless (tic or cron) run (see :data:`HEADLESS_SOURCES`)."""
    return source in HEADLESS_SOURCES


def session_ended(source: str, active: bool, closed_at: datetime | None) -> bool:
    """Whether a session is over: a spawned one once closed (``closed_at``), a chat's (or the
    terminal's) once no longer active (``/new`` closed it). Headless runs are never active."""
    return closed_at is not None or (source != SessionSource.AGENT and not active)


INTERACTIVE_SOURCES = frozenset({SessionSource.CHAT, SessionSource.TERMINAL})
"""The sources of interactive chats: each chat id has one active session per source, detaches
long calls, asks approvals and is searched as what was said to the user."""


class TurnStatus(enum.StrEnum):
    RUNNING = "running"
    FINAL = "final"
    CANCELLED = "cancelled"
    EXHAUSTED = "exhausted"
    FAILED = "failed"
    PAUSED = "paused"


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class RowStatus(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"  # orphaned user message; excluded from context
    CANCELLED = "cancelled"  # assistant text cut short by /stop


class ToolCallStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    DETACHED = "detached"
    """Still running in the background: the model read a placeholder, its result comes as mail
    (:mod:`runtime.turn.background`). Closed as far as the history goes: never re-run."""

    @property
    def terminal(self) -> bool:
        return self not in (ToolCallStatus.PENDING, ToolCallStatus.RUNNING)


class ApprovalStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class SenderKind(enum.StrEnum):
    USER = "user"
    SESSION = "session"
    TOOL_CALL = "tool_call"
    SYSTEM = "system"


class Priority(enum.StrEnum):
    NORMAL = "normal"
    INTERRUPT = "interrupt"


class Steer(enum.StrEnum):
    """What the user chose for a message sent while a turn ran (issue 30): ``now`` stops the turn
    and starts on it, ``after`` keeps it for the next turn, ``cancel`` drops it unread."""

    NOW = "now"
    AFTER = "after"
    CANCEL = "cancel"


class MailKind(enum.StrEnum):
    USER_MESSAGE = "user_message"
    AGENT_MESSAGE = "agent_message"
    TOOL_CALL_FINISHED = "tool_call_finished"
    CONTROL = "control"
    APPROVAL_DECISION = "approval_decision"
    SCHEDULED_TURN = "scheduled_turn"
    QUESTION_ANSWER = "question_answer"


class OutboxKind(enum.StrEnum):
    """Which durable output an outbox row holds (the event's ``kind``)."""

    NOTICE = "notice"
    REPORT = "report"
    FILE = "file"  # a file the agent sends (send_file)


class ChatSession(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = (
        # one active session per chat, or per forum topic: the database's rule (revisions 0008 and
        # 0014, runtime.infra.storage.sessions)
        Index(
            "ux_sessions_active_chat",
            "source",
            "chat_id",
            "thread_id",
            unique=True,
            sqlite_where=text("active"),  # PostgreSQL's too: partial_indexes_for_postgresql
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    source: SessionSource = Field(sa_type=StrEnumType(SessionSource))
    chat_id: int | None = Field(default=None, sa_type=BigInteger)
    thread_id: int = Field(default=0, sa_type=BigInteger)
    """The forum topic the session is (``message_thread_id``; revision 0014); 0 for a chat
    without topics, and for a forum's General topic."""
    user_id: int | None = Field(default=None, sa_type=BigInteger)
    agent_id: str = "main"
    is_interactive: bool = True  # stored for the debug view; False exactly when is_headless(source)
    is_ephemeral: bool = False  # stored for the debug view; the runtime asks is_headless(source)
    auto_deny_approvals: bool = False
    language_code: str | None = None
    title: str | None = None
    """The chat's name when it has one (a group's, with its topic's: revision 0013): the system
    prompt, the web view and ``/sessions`` name it."""
    parent_session_id: int | None = Field(default=None, index=True)
    """The session that spawned this one (``spawn_session``; revision 0015)."""
    root_session_id: int | None = Field(default=None, index=True)
    """The chat session at the top of this one's spawn tree (revision 0015); ``None`` for a root."""
    name: str | None = None
    """What a spawned session is called in the chat (its agent's name when ``None``)."""
    parent_call_id: int | None = None
    """The ``execute_task`` call (``tool_calls.id``) a spawned session answers (revision 0016):
    its prompt is a sub-agent's and its answer is that call's result, not a message to the chat."""
    instructions: str | None = None
    """What the adapter adds to the system prompt for this session (a forum topic's configured
    prompt; revision 0014)."""
    active: bool = True
    mail_cursor: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    closed_at: datetime | None = None


class SessionWatch(SQLModel, table=True):
    """A watch (``watch_session``, :mod:`runtime.core.peers`): matching events of the watched
    session reach the watcher as mail until ``expires_at`` or either session ends (revision 0015)."""

    __tablename__ = "session_watches"

    id: int | None = Field(default=None, primary_key=True)
    watcher_session_id: int = Field(index=True)
    watched_session_id: int = Field(index=True)
    events: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    tool: str | None = None  # a glob on the tool's name, for the tool events
    expires_at: datetime
    created_at: datetime = Field(default_factory=utcnow)


class StackFrame(SQLModel, table=True):
    """One agent level of a session; depth 0 is the root, sub-agents go deeper."""

    __tablename__ = "stack_frames"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    parent_tool_call_id: int | None = None
    depth: int = 0
    agent_id: str = "main"
    active: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class Turn(SQLModel, table=True):
    __tablename__ = "turns"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    status: TurnStatus = Field(default=TurnStatus.RUNNING, index=True, sa_type=StrEnumType(TurnStatus))
    rounds: int = 0
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    error: str | None = None


class HistoryRow(SQLModel, table=True):
    __tablename__ = "chat_history"
    __table_args__ = (Index("ix_history_session_id", "session_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id")
    stack_id: int | None = None
    turn_id: int | None = None
    role: Role = Field(sa_type=StrEnumType(Role))
    content: str = ""
    reasoning: str | None = None
    is_synthetic: bool = False
    status: RowStatus = Field(default=RowStatus.OK, sa_type=StrEnumType(RowStatus))
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column("metadata", JSON, nullable=False))
    mail_seq: int | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None
    """When the chat showed this final answer; ``None`` if a crash kept it from the chat."""


class ToolCallRow(SQLModel, table=True):
    __tablename__ = "tool_calls"
    __table_args__ = (Index("ix_tool_calls_history", "history_id", "position"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    history_id: int = Field(foreign_key="chat_history.id")
    position: int = 0
    call_id: str
    name: str
    arguments: str = "{}"
    status: ToolCallStatus = Field(
        default=ToolCallStatus.PENDING, index=True, sa_type=StrEnumType(ToolCallStatus)
    )
    result: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    wrappers: str | None = None
    """The wrapper chain it ran under (``tools.wrappers``), outermost first, as a JSON list."""


class MailRow(SQLModel, table=True):
    __tablename__ = "session_mail"
    __table_args__ = (UniqueConstraint("session_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True)
    envelope_id: str = Field(unique=True)
    session_id: int = Field(foreign_key="sessions.id")
    seq: int
    sender_kind: SenderKind = Field(sa_type=StrEnumType(SenderKind))
    sender_ref: str | None = None
    priority: Priority = Field(default=Priority.NORMAL, sa_type=StrEnumType(Priority))
    hops: int = 0
    kind: MailKind = Field(sa_type=StrEnumType(MailKind))
    body: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    sent_at: datetime = Field(default_factory=utcnow)
    accepted_at: datetime = Field(default_factory=utcnow)
    steer: Steer | None = Field(default=None, sa_type=StrEnumType(Steer))
    """The user's choice for a message queued behind a running turn (revision 0017)."""


class ApprovalRequestRow(SQLModel, table=True):
    __tablename__ = "approval_requests"

    id: str = Field(primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    tool_call_id: int = Field(foreign_key="tool_calls.id", index=True)
    status: ApprovalStatus = Field(
        default=ApprovalStatus.PENDING, index=True, sa_type=StrEnumType(ApprovalStatus)
    )
    reason: str | None = None
    chat_id: int | None = Field(default=None, sa_type=BigInteger)
    message_id: int | None = Field(default=None, sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utcnow)
    decided_at: datetime | None = None
    expires_at: datetime | None = None


class ApprovalRuleRow(SQLModel, table=True):
    __tablename__ = "approval_rules"

    id: int | None = Field(default=None, primary_key=True)
    tool: str
    path: str | None = None
    action: str
    priority: int = 100
    source: str | None = None
    note: str | None = None
    origin: str = "user"  # seed | config | user
    created_at: datetime = Field(default_factory=utcnow)


class OutboxRow(SQLModel, table=True):
    """A notice or report that must reach a chat, stored before it is emitted (see
    :mod:`runtime.storage.outbox`); ``delivered_at`` is set once the adapter showed it."""

    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_undelivered", "delivered_at", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int
    source: SessionSource = Field(sa_type=StrEnumType(SessionSource))
    chat_id: int = Field(sa_type=BigInteger)
    thread_id: int = Field(default=0, sa_type=BigInteger)  # the session's forum topic (revision 0014)
    language: str | None = None
    kind: OutboxKind = Field(sa_type=StrEnumType(OutboxKind))
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None


class DeadLetter(SQLModel, table=True):
    """An input the adapter could not parse, kept raw so nothing is silently dropped."""

    __tablename__ = "dead_letters"

    id: int | None = Field(default=None, primary_key=True)
    source: str
    ref: str
    error: str
    payload: str
    created_at: datetime = Field(default_factory=utcnow)


class KeyValue(SQLModel, table=True):
    """Small durable facts, e.g. a chat adapter's update offset."""

    __tablename__ = "kv_state"

    key: str = Field(primary_key=True)
    value: str
    updated_at: datetime = Field(default_factory=utcnow)


def partial_indexes_for_postgresql(metadata: MetaData) -> MetaData:
    """``metadata`` with each partial index's ``WHERE`` (named for SQLite in the models) named for
    PostgreSQL too; idempotent.

    The models name it for SQLite alone because naming a dialect's option loads that dialect, and
    PostgreSQL's is 2.3 MiB of modules (its four drivers' adapters among them) that a bot on SQLite
    would carry from its start on (issue 31). The one reader of the PostgreSQL spelling, the
    comparison of the models with the revisions (:func:`.migrations.target_metadata`), calls this
    first; the revisions name both spellings themselves, and an ``ON CONFLICT`` names its index's
    ``WHERE`` itself (:mod:`.concurrency`).
    """
    for table in metadata.tables.values():
        for index in table.indexes:
            where = index.dialect_options["sqlite"]["where"]
            if where is not None:
                index.dialect_kwargs["postgresql_where"] = where
    return metadata
