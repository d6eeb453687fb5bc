"""Envelopes: what a piece of mail is (docs/architecture/mailbox.md).

An envelope's ``id`` is its idempotency key (a chat adapter derives it from
its platform's update id), ``seq`` is assigned on accept and orders a session's mail
totally. Bodies are a pydantic discriminated union on ``kind`` so mail is
stored as JSON and parsed back into types at the edge.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentgram.runtime.infra.storage.models import MailKind, Priority, SenderKind, Steer, utcnow

EXEMPT_FROM_BOUND = frozenset(
    {MailKind.CONTROL, MailKind.TOOL_CALL_FINISHED, MailKind.APPROVAL_DECISION, MailKind.QUESTION_ANSWER}
)
"""Mail the unread bound never refuses: stopping and results must always get through."""


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Attachment(_Body):
    """A file that came with a message, as the chat adapter saw it (``runtime.attachments``).

    ``path`` is where the runtime saves it in the workspace, assigned when the mail is accepted
    (adapters leave it unset); ``skipped`` is the adapter's reason not to fetch it at all (too large);
    ``transcript`` one the platform already made (a voice note)."""

    kind: str  # photo | document | voice | audio | video_note | video | sticker | animation
    file_id: str | None = None
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    unique_id: str | None = None
    width: int | None = None
    height: int | None = None
    duration: int | None = None
    transcript: str | None = None
    skipped: str | None = None
    path: str | None = None


class UserMessageBody(_Body):
    kind: Literal[MailKind.USER_MESSAGE] = MailKind.USER_MESSAGE
    text: str
    attachments: list[Attachment] = Field(default_factory=list)
    chat_message_id: int | None = None
    is_synthetic: bool = False
    media_group_id: str | None = None  # an album: its items arrive as separate mail with one id


class AgentMessageBody(_Body):
    """Mail from another session (``send_message``, ``spawn_session``: :mod:`runtime.core.peers`)."""

    kind: Literal[MailKind.AGENT_MESSAGE] = MailKind.AGENT_MESSAGE
    text: str
    in_reply_to: str | None = None
    expects_reply: bool = False
    relation: Literal["parent", "child", "peer"] = "peer"
    """How the sender stands to the recipient (its parent, its child, another): what the
    recipient's ``wake_on`` is read against."""
    task: bool = False
    """A spawned session's task (its first mail, from its parent): it starts a turn whatever the
    recipient's ``wake_on`` says."""


class ToolCallFinishedBody(_Body):
    """A detached call ended (:mod:`runtime.turn.background`): folded in as ``[mail …]`` text."""

    kind: Literal[MailKind.TOOL_CALL_FINISHED] = MailKind.TOOL_CALL_FINISHED
    call_id: str
    status: str
    result: str
    name: str = ""
    wakes: bool = True
    """It starts a turn in an idle session; ``False`` (stopped by the user) waits for the next mail that does."""


class ControlAction(enum.StrEnum):
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL_CALLS = "cancel_calls"
    COMPACT = "compact"
    MODEL = "model"
    STEER = "steer"


class ControlBody(_Body):
    """A control action for the session (``runtime.core.sessions.control`` acts on it)."""

    kind: Literal[MailKind.CONTROL] = MailKind.CONTROL
    action: ControlAction
    call_ids: list[str] = Field(default_factory=list)  # cancel calls: the runs' ids
    quiet: bool = False  # a stop that is part of another command (/new): no "Stopped" reply
    stops_work: bool = False  # a stop that also stops running tool calls or fetches: it stopped something
    model: str | None = None  # /model: the configured name chosen (``None``: the default)
    steer: Steer | None = None  # steer: the choice for the queued message ``target_seq``
    target_seq: int | None = None


class ApprovalDecisionBody(_Body):
    kind: Literal[MailKind.APPROVAL_DECISION] = MailKind.APPROVAL_DECISION
    request_id: str
    approved: bool
    reason: str | None = None
    how: str = "button"  # how it was decided, for the log (``DecidedBy``)
    trust_scope: str | None = None  # "trust for a while": the scope trusted before this applies


class QuestionAnswerBody(_Body):
    """The user's answer to a clarifying question: a tapped option or the text sent while it was
    pending. Applied when accepted (like a decision); the turn reads it as the tool's result."""

    kind: Literal[MailKind.QUESTION_ANSWER] = MailKind.QUESTION_ANSWER
    question_id: str
    answer: str


class ScheduledTurnBody(_Body):
    kind: Literal[MailKind.SCHEDULED_TURN] = MailKind.SCHEDULED_TURN
    job: Literal["tic", "cron"]
    job_id: int | None = None
    text: str


MailBody = Annotated[
    UserMessageBody
    | AgentMessageBody
    | ToolCallFinishedBody
    | ControlBody
    | ApprovalDecisionBody
    | QuestionAnswerBody
    | ScheduledTurnBody,
    Field(discriminator="kind"),
]
BODY_ADAPTER: TypeAdapter[MailBody] = TypeAdapter(MailBody)


class Sender(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: SenderKind
    ref: str | None = None


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    session_id: int
    sender: Sender
    body: MailBody
    priority: Priority = Priority.NORMAL
    hops: int = 0
    seq: int = 0
    sent_at: datetime = Field(default_factory=utcnow)
    steer: Steer | None = None
    """The user's choice for it when it was queued behind a running turn (issue 30): ``after``
    holds it out of that turn, ``cancel`` drops it unread, ``now`` stopped that turn for it."""

    @property
    def kind(self) -> MailKind:
        return MailKind(self.body.kind)


class Receipt(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    seq: int
    duplicate: bool = False
    checkpoint_stored: bool = False
    """The :class:`Checkpoint` given with the envelope was committed with it (also for a
    duplicate: a redelivery is confirmed again). An in-memory mailbox stores none."""


@dataclass(slots=True, frozen=True)
class Checkpoint:
    """A source's own read position, committed in the same transaction as the mail it delivered.

    A chat adapter's update offset, for one: stored with the message, so
    storing a message and confirming its update to the platform cannot come apart,
    and the message costs one transaction, not two. The :class:`Receipt` tells
    the source whether the mailbox wrote it (an in-memory mailbox does not; the
    source then stores it itself).
    """

    key: str
    value: str
