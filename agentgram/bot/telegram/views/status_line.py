"""A turn's tool status line: one silent message (or several, when long) listing the turn's tool
calls, each with the mark of its phase, edited in place as the calls go on.

Each chat has one :class:`StatusView`; each turn that calls a tool gets a fresh
:class:`TurnLine` (its calls, its messages, whether they show the latest marks, its record),
dropped when the turn ends — nothing is reset field by field. What a later process must still
edit is recorded (:mod:`..core.records`): the line, until its turn ends with it showing its final
marks. One a restart cut short is closed on start (:func:`close_left_line`), each call marked with
its stored final status or "⚠️ interrupted".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentgram.bot.shown import PHASE_MARK
from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.records import ChatRecords, StatusLine
from agentgram.bot.telegram.core.sender import BRIEF, PERSISTENT, Edit, MessageGroup, Retry, edit_html
from agentgram.bot.telegram.views.render import escape
from agentgram.bot.telegram.views.split import split_html
from agentgram.runtime.app import ToolCallStatus
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra.events import ToolActivity, ToolPhase
from agentgram.runtime.infra.i18n import Translator

_CLOSED_PHASE = {
    ToolCallStatus.DONE: ToolPhase.DONE,
    ToolCallStatus.FAILED: ToolPhase.FAILED,
    ToolCallStatus.REJECTED: ToolPhase.REJECTED,
    ToolCallStatus.CANCELLED: ToolPhase.CANCELLED,
    ToolCallStatus.DETACHED: ToolPhase.DETACHED,
}
"""A stored call's final status as its status line marks it; any other status was interrupted."""


@dataclass(slots=True)
class ToolLine:
    name: str
    summary: str
    phase: ToolPhase
    runs_command: bool = False

    def html(self, mark: str | None = None) -> str:
        icon = "⚙️" if self.runs_command else "🔧"
        summary = f" · <code>{escape(self.summary)}</code>" if self.summary else ""
        return f"{icon} {escape(self.name)}{summary} {mark or PHASE_MARK[self.phase]}"


@dataclass(slots=True)
class TurnLine:
    """One turn's status line."""

    turn_id: int
    messages: MessageGroup
    calls: dict[int, ToolLine] = field(default_factory=dict)
    dirty: bool = True
    """The chat does not show the latest marks yet."""
    recorded: StatusLine | None = None
    """The line as last recorded."""


def min_retry(retry: Retry) -> Retry:
    """Tool status lines are worth a few tries at most, never an outage's wait."""
    return BRIEF if retry is PERSISTENT else retry


@dataclass(slots=True, eq=False)
class StatusView:
    """One chat's status line: the current turn's :class:`TurnLine`, while it has one."""

    _bot: BotApi
    _chat_id: int
    _records: ChatRecords
    line: TurnLine | None = None

    def pending(self) -> bool:
        """The line has marks the chat does not show yet."""
        return self.line is not None and self.line.dirty

    def tool(self, event: ToolActivity) -> bool:
        """Note a call's phase; ``True`` when the call opens the turn's line (show it at once)."""
        opens = self.line is None
        if self.line is None:
            self.line = TurnLine(event.turn_id, MessageGroup(self._chat_id, silent=True))
        line = self.line.calls.get(event.tool_call_id)
        if line is None:
            self.line.calls[event.tool_call_id] = ToolLine(
                event.name, event.summary, event.phase, event.runs_command
            )
        else:
            line.phase = event.phase
        self.line.dirty = True
        return opens

    async def flush(self, retry: Retry, language: str | None) -> None:
        """Show the latest marks (a few tries at most), and record where they show."""
        line = self.line
        if line is None or not line.dirty:
            return
        line.dirty = False
        rows = "\n".join(call.html() for call in line.calls.values())
        line.dirty = not await line.messages.show(self._bot, rows, retry=min_retry(retry))
        await self._record(line, language)

    async def finish(self) -> None:
        """The turn ended: a line showing its final marks is no longer recorded (else the next
        start closes it), and the next turn starts a line of its own."""
        line, self.line = self.line, None
        if line is not None and line.recorded is not None and not line.dirty:
            await self._records.drop_line(line.recorded)

    async def _record(self, line: TurnLine, language: str | None) -> None:
        """Keep the line's messages and calls durable whenever they change (a restart closes it)."""
        if not line.messages.pieces:
            return
        messages = tuple(piece.message_id for piece in line.messages.pieces)
        calls = tuple(line.calls)
        known = line.recorded
        if known is not None and (known.message_ids, known.call_ids) == (messages, calls):
            return
        key = known.key if known is not None else self._records.line_key(self._chat_id, messages[0])
        line.recorded = StatusLine(self._chat_id, line.turn_id, messages, calls, language, key)
        await self._records.save_line(line.recorded)


async def close_left_line(
    bot: BotApi, t: Translator, runtime: Door, records: ChatRecords, line: StatusLine
) -> None:
    """Close a line a previous process left: each call with its final mark or "interrupted"."""
    interrupted = t.t(line.language, "tool-interrupted")
    rows = []
    for call in await runtime.calls.call_states(line.call_ids):
        phase = _CLOSED_PHASE.get(call.status)
        shown = ToolLine(call.name, call.summary, phase or ToolPhase.RUNNING, call.runs_command)
        rows.append(shown.html(None if phase else interrupted))
    parts = split_html("\n".join(rows)) if rows else []
    edits = [  # a line grown past its messages (a longer mark) keeps its tail unshown
        await edit_html(bot, line.chat_id, message_id, part, retry=BRIEF)
        for message_id, part in zip(line.message_ids, parts, strict=False)
    ]
    if Edit.FAILED not in edits:  # shown (or the message is gone): else the next start tries again
        await records.drop_line(line)


__all__ = ["StatusView", "ToolLine", "TurnLine", "close_left_line", "min_retry"]
