"""Typed events the runtime publishes for chat adapters.

The runtime never calls an adapter; it emits these through an
:class:`EventBus`. Subscribers must not block: they enqueue and return (a chat
adapter puts them on a per-chat delivery queue), which keeps the turn loop's
speed independent of the chat platform's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field as PydanticField
from pydantic import TypeAdapter

from agentgram.runtime.infra.errors import Failure
from agentgram.runtime.infra.log import get_logger

log = get_logger("events")


class SessionLike(Protocol):
    """What an :class:`Address` is made of: a stored session, or an adapter's reference to one."""

    @property
    def id(self) -> int | None: ...

    @property
    def source(self) -> str: ...

    @property
    def chat_id(self) -> int | None: ...

    @property
    def thread_id(self) -> int: ...

    @property
    def language_code(self) -> str | None: ...


@dataclass(slots=True, frozen=True, kw_only=True)
class Address:
    """Where a session's output goes: a source and, for chats, the chat id and the forum topic
    (``thread_id``, 0 for none: a private chat, a plain group, a forum's General topic).

    :meth:`of` is the one rule from a session to its address; the other constructions read an
    address back from where it was stored (the outbox) or address what has no session of its own
    (a cron digest, ``session_id`` 0).
    """

    session_id: int
    source: str
    chat_id: int | None
    language: str | None = None
    thread_id: int = 0

    @classmethod
    def of(cls, session: SessionLike) -> Address:
        """The address of a saved ``session`` (its id is set)."""
        assert session.id is not None
        return cls(
            session_id=session.id,
            source=session.source,
            chat_id=session.chat_id,
            language=session.language_code,
            thread_id=session.thread_id,
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class TurnStarted:
    to: Address
    turn_id: int
    resumed: bool = False
    kind: Literal["turn_started"] = "turn_started"


@dataclass(slots=True, frozen=True, kw_only=True)
class TextDelta:
    to: Address
    turn_id: int
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(slots=True, frozen=True, kw_only=True)
class Thinking:
    """Reasoning the provider streamed (``reasoning_content``); adapters may show or ignore it."""

    to: Address
    turn_id: int
    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(slots=True, frozen=True, kw_only=True)
class StreamReset:
    """Text streamed so far in this round is void (the client fell back to another model)."""

    to: Address
    turn_id: int
    kind: Literal["stream_reset"] = "stream_reset"


@dataclass(slots=True, frozen=True, kw_only=True)
class StreamEnded:
    """The model's completion for this round is whole (it called no tool when ``has_tool_calls`` is
    false); its :class:`RoundEnded` follows once the round is stored. A chat that shows nothing of
    the round yet can wait for that instead of showing a draft first."""

    to: Address
    turn_id: int
    has_tool_calls: bool
    kind: Literal["stream_ended"] = "stream_ended"


@dataclass(slots=True, frozen=True, kw_only=True)
class RoundEnded:
    """The model finished one completion; ``text`` is all it wrote in it."""

    to: Address
    turn_id: int
    text: str
    has_tool_calls: bool
    row_id: int | None = None  # the stored row: the chat reports a final answer shown (answer_shown)
    kind: Literal["round_ended"] = "round_ended"


class ToolPhase(enum.StrEnum):
    STARTED = "started"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    DETACHED = "detached"  # still running in the background; its own status line follows it (CallDetached)


@dataclass(slots=True, frozen=True, kw_only=True)
class ToolActivity:
    """A tool call changed phase; ``summary`` is a short human hint (path, command)."""

    to: Address
    turn_id: int
    tool_call_id: int
    name: str
    summary: str
    phase: ToolPhase
    runs_command: bool = False  # the tool runs shell commands (``Tool.runs_commands``)
    kind: Literal["tool_activity"] = "tool_activity"


@dataclass(slots=True, frozen=True, kw_only=True)
class SubAgentStarted:
    """An agent handed a task to a sub-agent (``execute_task``): ``parent`` → ``agent``."""

    to: Address
    turn_id: int
    tool_call_id: int
    parent: str
    agent: str
    depth: int
    kind: Literal["subagent_started"] = "subagent_started"


@dataclass(slots=True, frozen=True, kw_only=True)
class SubAgentFinished:
    """A sub-agent's turn ended; ``preview`` is the start of its answer (or of why it failed)."""

    to: Address
    turn_id: int
    tool_call_id: int
    agent: str
    ok: bool
    preview: str
    kind: Literal["subagent_finished"] = "subagent_finished"


@dataclass(slots=True, frozen=True, kw_only=True)
class ApprovalDetails:
    """What the user is asked to approve, prepared for display."""

    tool_name: str
    arguments: dict[str, Any]
    command: str | None = None
    workdir: str | None = None
    path: str | None = None
    diff: str | None = None
    new_file: bool = False
    can_always: bool = True  # a saved rule can express this call: "🔁 Always" is offered
    mcp_server: str | None = None  # an MCP tool's server (``tool_name`` is ``mcp__<server>__<tool>``)
    mcp_tool: str | None = None  # an MCP tool's own name on its server
    read_path: str | None = None
    """What a call that only reads names (``read_file``, ``list_dir``, ``send_file``): shown in words
    ("Read a file outside the workdir: /etc/hostname"), not as raw arguments."""
    outside: bool = False  # ``read_path`` lies beyond the workdir (``@fs_read_outside``)


@dataclass(slots=True, frozen=True, kw_only=True)
class ApprovalRequested:
    to: Address
    request_id: str
    tool_call_id: int
    details: ApprovalDetails
    reissued_from_message: int | None = None
    kind: Literal["approval_requested"] = "approval_requested"


@dataclass(slots=True, frozen=True, kw_only=True)
class ApprovalResolved:
    to: Address
    request_id: str
    status: str
    reason: str | None
    message_id: int | None
    kind: Literal["approval_resolved"] = "approval_resolved"


class QuestionStatus(enum.StrEnum):
    """Where a clarifying question stands (``ask_user_clarification``)."""

    PENDING = "pending"
    ANSWERED = "answered"
    SUPERSEDED = "superseded"  # a newer question of the session replaced it unanswered
    CANCELLED = "cancelled"  # /stop (or /new) ended its turn


@dataclass(slots=True, frozen=True, kw_only=True)
class QuestionAsked:
    """The agent asks the user: one button per suggested option; a text reply answers too."""

    to: Address
    question_id: str
    question: str
    options: tuple[str, ...] = ()
    kind: Literal["question_asked"] = "question_asked"


@dataclass(slots=True, frozen=True, kw_only=True)
class QuestionResolved:
    """A question is settled: answered, superseded or cancelled; ``message_id`` is where it shows."""

    to: Address
    question_id: str
    question: str
    status: QuestionStatus
    answer: str | None
    message_id: int | None
    kind: Literal["question_resolved"] = "question_resolved"


@dataclass(slots=True, frozen=True, kw_only=True)
class CallDetached:
    """A tracked call outlived its attach window: it runs on in the background (its own live status
    line, with a button that cancels it); ``run_id`` names it to :meth:`Runtime.cancel_call`."""

    to: Address
    run_id: int
    name: str
    summary: str
    runs_command: bool
    started_at: datetime
    kind: Literal["call_detached"] = "call_detached"


@dataclass(slots=True, frozen=True, kw_only=True)
class CallFinished:
    """A detached call ended: ``status`` is completed, failed, cancelled or orphaned."""

    to: Address
    run_id: int
    name: str
    summary: str
    runs_command: bool
    status: str
    started_at: datetime
    finished_at: datetime
    kind: Literal["call_finished"] = "call_finished"


class TodoStatus(enum.StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"


@dataclass(slots=True, frozen=True, kw_only=True)
class TodoItem:
    text: str
    status: TodoStatus = TodoStatus.PENDING


@dataclass(slots=True, frozen=True, kw_only=True)
class TodosChanged:
    """The session's todo list changed (``write_todos``): the chat shows the whole list again."""

    to: Address
    items: tuple[TodoItem, ...]
    kind: Literal["todos_changed"] = "todos_changed"


class OutcomeKind(enum.StrEnum):
    FINAL = "final"
    CANCELLED = "cancelled"
    EXHAUSTED = "exhausted"
    FAILED = "failed"
    PAUSED = "paused"


@dataclass(slots=True, frozen=True, kw_only=True)
class TurnFinished:
    to: Address
    turn_id: int
    outcome: OutcomeKind
    text: str = ""
    failure: Failure | None = None  # set when ``outcome`` is failed: what to tell the user
    kind: Literal["turn_finished"] = "turn_finished"


@dataclass(slots=True, frozen=True, kw_only=True)
class MessagesRead:
    """Messages the user sent while the turn ran were folded into it at ``step`` (its round
    number, 1 for the first): the adapter may update what it acknowledged them with (issue 30)."""

    to: Address
    turn_id: int
    seqs: tuple[int, ...]  # their places in the session's mail
    step: int
    kind: Literal["messages_read"] = "messages_read"


@dataclass(slots=True, frozen=True, kw_only=True)
class Notice:
    """A localized one-liner for the user; ``key`` names the locale message."""

    to: Address
    key: str
    params: dict[str, str | int] = field(default_factory=dict)
    silent: bool = False
    outbox_id: int | None = None  # its durable record; the adapter reports it shown (output_shown)
    refers_to_message: int | None = None  # a chat message it is about (a waiting prompt): sent as a reply
    kind: Literal["notice"] = "notice"


class Notify(Protocol):
    """How runtime parts send a :class:`Notice` (``Runtime.notice``): recorded, then emitted."""

    async def __call__(
        self,
        address: Address,
        key: str,
        params: dict[str, str | int],
        *,
        refers_to_message: int | None = None,
    ) -> None: ...


@dataclass(slots=True, frozen=True, kw_only=True)
class ModelText:
    """What the model wrote (Markdown), shown as it is."""

    text: str
    kind: Literal["model_text"] = "model_text"


@dataclass(slots=True, frozen=True, kw_only=True)
class LocaleText:
    """A locale message the adapter words in the user's language (no output, a failed run)."""

    key: str
    params: dict[str, str | int] = field(default_factory=dict)
    kind: Literal["locale_text"] = "locale_text"


ReportBody = Annotated[ModelText | LocaleText, PydanticField(discriminator="kind")]


@dataclass(slots=True, frozen=True, kw_only=True)
class CronResult:
    """One cron run's result, titled with the job's title."""

    title: str
    body: ReportBody
    kind: Literal["cron_result"] = "cron_result"


@dataclass(slots=True, frozen=True, kw_only=True)
class TicResult:
    """What a tic found worth telling the user."""

    body: ReportBody
    kind: Literal["tic_result"] = "tic_result"


@dataclass(slots=True, frozen=True, kw_only=True)
class Digest:
    """Cron results held during quiet hours, oldest first, sent as one message when they end."""

    items: tuple[CronResult, ...]
    kind: Literal["digest"] = "digest"


ReportContent = Annotated[CronResult | TicResult | Digest, PydanticField(discriminator="kind")]
REPORT_CONTENT: TypeAdapter[CronResult | TicResult | Digest] = TypeAdapter(ReportContent)
"""Report content to and from JSON (the outbox, the held results): one codec for both."""


@dataclass(slots=True, frozen=True, kw_only=True)
class Report:
    """What the agent sends on its own (a tic's report, a cron result, the quiet-hours digest).

    The runtime says what it is; the adapter words and renders it.
    """

    to: Address
    content: ReportContent
    silent: bool = False
    outbox_id: int | None = None  # as for Notice
    kind: Literal["report"] = "report"


@dataclass(slots=True, frozen=True, kw_only=True)
class FileOutput:
    """A workspace file the agent sends to the chat (``send_file``): recorded before it is emitted,
    uploaded by the adapter (a photo when ``as_photo``), re-sent after a restart until shown."""

    to: Address
    path: str  # absolute
    caption: str | None = None
    as_photo: bool = False
    outbox_id: int | None = None
    kind: Literal["file"] = "file"


class AttachmentAction(enum.StrEnum):
    FETCHING = "fetching"
    TRANSCRIBING = "transcribing"
    IDLE = "idle"


@dataclass(slots=True, frozen=True, kw_only=True)
class AttachmentActivity:
    """The runtime is fetching or transcribing a message's files (the adapter shows a chat action)."""

    to: Address
    action: AttachmentAction
    kind: Literal["attachment_activity"] = "attachment_activity"


DurableOutput = Notice | Report | FileOutput
"""Output that must reach the user: recorded before it is emitted, re-sent on start until shown."""

RuntimeEvent = (
    TurnStarted
    | TextDelta
    | Thinking
    | StreamReset
    | StreamEnded
    | RoundEnded
    | ToolActivity
    | SubAgentStarted
    | SubAgentFinished
    | ApprovalRequested
    | ApprovalResolved
    | QuestionAsked
    | QuestionResolved
    | TodosChanged
    | CallDetached
    | CallFinished
    | TurnFinished
    | MessagesRead
    | Notice
    | Report
    | FileOutput
    | AttachmentActivity
)
Subscriber = Callable[[RuntimeEvent], None]


class EventBus:
    """Fan-out of runtime events to non-blocking subscribers."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def emit(self, event: RuntimeEvent) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # a broken adapter must not break the turn
                log.exception("event subscriber failed on %s", event.kind)
