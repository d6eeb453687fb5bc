"""Context building: stored history → the messages one LLM request sends.

Order (session-handler spec "Context Building"), optimised for provider
prefix caches:

1. a static system message — byte-identical across turns;
   then the session's scratchpad (and todo list) as its own system message, if
   it has any — so a note changed mid-turn never touches the static prefix;
   then the compaction summary of the older history, if there is one
   (:mod:`runtime.turn.compaction`);
2. the conversation: consecutive user rows coalesced into one user message,
   each assistant row followed by exactly one tool message per call, the
   content derived from the call's status;
3. a dynamic tail system message (time with IANA zone, OS, working dir).

Truncation to ``max_history_messages`` drops whole entries from the front, so
a tool call is never separated from its result; under compaction nothing is
truncated (the compactor owns the budget: dropping by count would lose what
should be summarised). Tool results from earlier
turns (by ``turn_id``: a message injected mid-turn does not start a new one)
longer than ``max_tool_result_chars`` are replaced by a note (the database
keeps them whole).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from zoneinfo import ZoneInfo

from agentgram.runtime.llm.types import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from agentgram.runtime.storage.history import HistoryEntry
from agentgram.runtime.storage.models import Role, RowStatus, ToolCallRow, ToolCallStatus
from agentgram.runtime.turn import texts


@dataclass(slots=True, frozen=True)
class ContextSettings:
    static_system: str
    workdir: Path
    timezone: ZoneInfo
    timezone_name: str
    max_history_messages: int = 200
    max_tool_result_chars: int | None = 4000


@dataclass(slots=True, frozen=True)
class Compacted:
    """The history is under compaction: the entries are those its summary does not cover, sent
    whole, after the summary's system message (``summary`` is ``""`` before the first one)."""

    summary: str = ""


def build_messages(
    entries: list[HistoryEntry],
    settings: ContextSettings,
    now: datetime,
    *,
    notes: str | None = None,
    compacted: Compacted | None = None,
) -> list[ChatMessage]:
    """``notes`` is the session's scratchpad message (:func:`runtime.tools.notes.notes_text`),
    sent on its own right after the static message, so a note changed mid-turn leaves the
    static prefix byte-identical."""
    kept = entries if compacted is not None else truncate(entries, settings.max_history_messages)
    boundary = current_turn_start(kept)
    conversation: list[ChatMessage] = []
    for index, entry in enumerate(kept):
        hide = settings.max_tool_result_chars if index < boundary else None
        conversation.extend(render_entry(entry, hide))
    return [
        SystemMessage(settings.static_system),
        *([SystemMessage(notes)] if notes else []),
        *([SystemMessage(compacted.summary)] if compacted is not None and compacted.summary else []),
        *coalesce_users(conversation),
        SystemMessage(dynamic_tail(settings, now)),
    ]


def message_count(entry: HistoryEntry) -> int:
    return 1 + len(entry.calls)


def truncate(entries: list[HistoryEntry], limit: int) -> list[HistoryEntry]:
    """Keep the newest entries totalling at most ``limit`` messages (whole entries only)."""
    total = 0
    start = len(entries)
    while start > 0 and total + message_count(entries[start - 1]) <= limit:
        start -= 1
        total += message_count(entries[start])
    if start == len(entries) and entries:  # one huge entry: still send it whole
        start -= 1
    kept = entries[start:]
    while kept and kept[0].row.role != Role.USER and len(kept) > 1:
        kept = kept[1:]  # never open the conversation with an assistant row
    return kept


def current_turn_start(entries: list[HistoryEntry]) -> int:
    """Index of the current turn's first entry: everything before it belongs to earlier turns.

    The current turn is the last user row's. Rows carry their ``turn_id``, so
    a message injected mid-turn (a second user row of the same turn) does not
    make that turn's own earlier tool results "earlier" — the model may not
    even have read them yet. Rows without a turn id fall back to the last user row.
    """
    last_user = next((i for i in range(len(entries) - 1, -1, -1) if entries[i].row.role == Role.USER), None)
    if last_user is None:
        return 0
    turn_id = entries[last_user].row.turn_id
    start = last_user
    while turn_id is not None and start > 0 and entries[start - 1].row.turn_id == turn_id:
        start -= 1
    return start


def render_entry(entry: HistoryEntry, hide_over: int | None) -> list[ChatMessage]:
    row = entry.row
    if row.role == Role.USER:
        return [UserMessage(row.content)]
    calls = tuple(ToolCallRequest(c.call_id, c.name, c.arguments) for c in entry.calls)
    content = row.content
    if row.status == RowStatus.CANCELLED and not calls:
        content = content + "\n\n[stopped by the user]" if content else "[stopped by the user]"
    messages: list[ChatMessage] = [AssistantMessage(content, calls)]
    for call in entry.calls:
        messages.append(ToolMessage(call.call_id, tool_result_text(call, hide_over)))
    return messages


def tool_result_text(call: ToolCallRow, hide_over: int | None) -> str:
    status = ToolCallStatus(call.status)
    if status in (ToolCallStatus.PENDING, ToolCallStatus.RUNNING):
        return texts.INTERRUPTED
    result = call.result or ""
    if status == ToolCallStatus.FAILED:
        result = texts.failed_result(result)
    if hide_over is not None and len(result) > hide_over:
        return texts.hidden_result(call.name, len(result), hide_over)
    return result


def coalesce_users(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Merge consecutive user messages (injected mid-turn rows read as one turn)."""
    merged: list[ChatMessage] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if isinstance(message, UserMessage) and isinstance(previous, UserMessage):
            merged[-1] = UserMessage(f"{previous.content}\n\n{message.content}")
        else:
            merged.append(message)
    return merged


def dynamic_tail(settings: ContextSettings, now: datetime) -> str:
    local = now.astimezone(settings.timezone)
    return (
        f"Current date and time: {local.isoformat(timespec='seconds')} ({settings.timezone_name})\n"
        f"Operating system: {os_description()}\n"
        f"Working directory: {settings.workdir}\n"
        "File tools and execute_cmd resolve relative paths against the working directory; no need to cd."
    )


@cache
def os_description() -> str:
    return f"{platform.system()} {platform.release()} [{platform.machine()}]"
