"""What every chat adapter shows alike, whatever it renders with (Telegram HTML, Rich in a terminal).

A rule a second adapter would otherwise copy lives here once: the mark of a tool
call's phase, which events of a tic or cron run or of a spawned session reach a chat, how a message that
does not start a turn is acknowledged, how an approval of a read is worded, the
locale key of an approval's decision, and the state a cron job is shown in. It knows no chat
platform (an import-linter contract keeps it so).
"""

from __future__ import annotations

import enum

from agentgram.runtime.app import ApprovalStatus, PostResult, SessionSource, is_headless
from agentgram.runtime.infra.events import (
    ApprovalDetails,
    ApprovalRequested,
    ApprovalResolved,
    FileOutput,
    Notice,
    OutcomeKind,
    QuestionAsked,
    QuestionResolved,
    Report,
    RoundEnded,
    RuntimeEvent,
    ToolPhase,
    TurnFinished,
)
from agentgram.runtime.scheduler.values import Job

PHASE_MARK = {
    ToolPhase.STARTED: "…",
    ToolPhase.RUNNING: "…",
    ToolPhase.DONE: "✓",
    ToolPhase.FAILED: "✗",
    ToolPhase.REJECTED: "🚫",
    ToolPhase.CANCELLED: "⏹",
    ToolPhase.DETACHED: "⏳",  # runs on in the background: its own line follows it
}
"""A tool call's status line ends with the mark of its phase."""

_HEADLESS_SPEAKS = (ApprovalRequested, ApprovalResolved, Report, FileOutput)
_SPAWNED_SPEAKS = (*_HEADLESS_SPEAKS, QuestionAsked, QuestionResolved, Notice)
_UNWELL = frozenset({OutcomeKind.FAILED, OutcomeKind.EXHAUSTED})
"""The ends of a spawned session's turn the chat is told of (it would otherwise just go quiet)."""


def reaches_chat(event: RuntimeEvent) -> bool:
    """Whether a chat shows ``event``: a tic or cron run shows only its approvals, its report and
    the files it sends, never its streamed text or tool lines (which runs are headless is the
    runtime's one rule, :func:`~runtime.app.is_headless`); a session another spawned (issue 29),
    working beside the chat's own, shows only each turn's final answer (a round that calls no
    tool), a turn that failed or ran out of rounds, its approvals and questions, its notices and
    files: never its streamed text, tool lines or typing."""
    to = getattr(event, "to", None)
    if to is None:
        return True
    if to.source == SessionSource.AGENT:
        final = isinstance(event, RoundEnded) and not event.has_tool_calls
        failed = isinstance(event, TurnFinished) and event.outcome in _UNWELL
        return final or failed or isinstance(event, _SPAWNED_SPEAKS)
    return not is_headless(to.source) or isinstance(event, _HEADLESS_SPEAKS)


_ACKS = {
    PostResult.QUEUED: "noted-busy",
    PostResult.QUEUED_AFTER: "noted-busy-after",
    PostResult.WAITING_APPROVAL: "noted-busy",  # when the decision came meanwhile
    PostResult.PAUSED: "paused",
    PostResult.FULL: "mailbox-full",
}


STEERABLE = frozenset({PostResult.QUEUED, PostResult.QUEUED_AFTER})
"""A message queued behind a running turn: its acknowledgement offers ⚡ Now, ⏭ After, 🗑 Cancel
(issue 30)."""


def ack_key(result: PostResult) -> str | None:
    """The locale key a message is acknowledged with when it does not start a turn at once
    (``None``: it starts one, the reply says enough)."""
    return _ACKS.get(result)


_READ_KEYS = {
    "read_file": "approval-read-file",
    "list_dir": "approval-list-dir",
    "send_file": "approval-send-file",
}


def read_wording(details: ApprovalDetails) -> tuple[str, dict[str, str]] | None:
    """The header of an approval for a read (:attr:`ApprovalDetails.read_path`) as a locale key and
    its parameters, unescaped (``path``, ``tool``, and ``outside``: ``yes`` or ``no``); ``None`` for
    any other call. A reading tool without words of its own gets the generic ``approval-read``."""
    if details.read_path is None:
        return None
    key = _READ_KEYS.get(details.tool_name, "approval-read")
    outside = "yes" if details.outside else "no"
    return key, {"path": details.read_path, "tool": details.tool_name, "outside": outside}


_DECISION_KEYS = {
    ApprovalStatus.APPROVED: "approval-approved",
    ApprovalStatus.REJECTED: "approval-rejected",
    ApprovalStatus.EXPIRED: "approval-expired",
    ApprovalStatus.CANCELLED: "approval-cancelled",
}


def decision_key(status: str, reason: str | None) -> str:
    """The locale key of a decided approval (``approval-rejected-reason`` takes ``reason``)."""
    if status == ApprovalStatus.REJECTED and reason:
        return "approval-rejected-reason"
    try:
        return _DECISION_KEYS.get(ApprovalStatus(status), "approval-cancelled")
    except ValueError:
        return "approval-cancelled"


class JobState(enum.StrEnum):
    """What a cron job is shown as; :func:`job_state` is the one rule."""

    RUNNING = "⏳"
    ACTIVE = "⏰"
    PAUSED = "⏸"
    DONE = "✅"


def job_state(job: Job) -> JobState:
    if job.running:
        return JobState.RUNNING
    if job.finished:  # a one-shot that ran: done, not paused
        return JobState.DONE
    return JobState.ACTIVE if job.enabled else JobState.PAUSED
