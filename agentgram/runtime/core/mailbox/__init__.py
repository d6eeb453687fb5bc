"""The session mailbox: every input to a session is accepted here as mail first."""

from agentgram.runtime.core.mailbox.envelope import (
    AgentMessageBody,
    ApprovalDecisionBody,
    Checkpoint,
    ControlAction,
    ControlBody,
    Envelope,
    MailBody,
    MailKind,
    Priority,
    Receipt,
    ScheduledTurnBody,
    Sender,
    SenderKind,
    Steer,
    ToolCallFinishedBody,
    UserMessageBody,
)
from agentgram.runtime.core.mailbox.mailbox import Mailbox, MemoryMailbox, SqlMailbox, Steered

__all__ = [
    "AgentMessageBody",
    "ApprovalDecisionBody",
    "Checkpoint",
    "ControlAction",
    "ControlBody",
    "Envelope",
    "MailBody",
    "MailKind",
    "Mailbox",
    "MemoryMailbox",
    "Priority",
    "Receipt",
    "ScheduledTurnBody",
    "Sender",
    "SenderKind",
    "SqlMailbox",
    "Steer",
    "Steered",
    "ToolCallFinishedBody",
    "UserMessageBody",
]
