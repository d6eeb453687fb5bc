"""Context compaction: older history summarised by one model call, so long chats keep going.

docs/architecture/context.md, "Cutting the history". With
``llm.compaction.threshold_tokens`` set, a turn's first round looks at how
big its request is — between turns, so a turn never folds away the request
it is working on: the input tokens the provider reported for the newest request
made since the last summary, plus ~characters ÷ 4 of what came after it —
or, when there is no such measurement (the provider reports none, or the
summary is newer than every request), characters ÷ 4 of the whole context.
Past the threshold, the history the summary in force does not cover is
split (:func:`split_point`): the newest ``keep_recent`` messages stay
verbatim, everything before them — with the previous summary folded in — is
summarised by one model call into a new :class:`~runtime.storage.summary_rows.HistorySummary`
row that records the newest history row it covers. From then on the context
is the static prompt, the scratchpad, the summary as its own system message,
then only the uncovered rows, whole (``max_history_messages`` no longer
truncates: the compactor owns the budget).

What it never does:

- split a tool call from its result: the cut is between history entries, and
  an assistant row with its calls (and their results) is one entry; it lies
  where a user message starts whenever one allows it, so the kept
  conversation opens with the user;
- compact an ephemeral session (tic, cron): they are short and nobody reads
  them later;
- lose anything on a crash or a /stop: the summary and its coverage are one
  insert, made only once the model answered, so a crash or a stop during the
  call leaves the history exactly as it was (the rows themselves are never
  touched; /search still finds them).

A failed summary call (the endpoint down) is logged and the round goes on
with the full history; ``/compact`` says it failed. One call folds at most
:data:`TRANSCRIPT_CHARS` of history (the oldest part first): a history far
past the threshold is caught up over several rounds, each request of them
still bounded.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from agentgram.runtime.core.turn.context import Compacted, message_count
from agentgram.runtime.infra.config import CompactionSettings
from agentgram.runtime.infra.errors import LLMError
from agentgram.runtime.infra.llm.types import LLMClient, StreamEvent, SystemMessage, UserMessage
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.models import Role, utcnow
from agentgram.runtime.infra.storage.summary_rows import HistorySummary, Summary, SummaryStore

log = get_logger("turn")

READ_LIMIT = 1000
"""Uncovered history entries a compacted context reads at most (so what the in-memory tails keep, compaction on)."""
TRANSCRIPT_CHARS = 200_000
"""History one summary call folds at most (~50k tokens), oldest first."""
RESULT_CHARS = 1500
"""Of each tool result (and each call's arguments) the summary call reads."""
CHARS_PER_TOKEN = 4

SUMMARY_HEADER = (
    "Summary of the earlier part of this conversation (older messages were compacted into it; "
    "the messages after it follow in full):\n\n"
)

INSTRUCTIONS = (
    "You compact the earlier part of a conversation between a user and an AI assistant that uses "
    "tools, so the assistant can go on without losing the thread. Write compact notes that keep: "
    "the user's goals, requests, preferences and corrections; decisions and facts established; "
    "exact names, paths, numbers, commands and identifiers; what was done (files changed, commands "
    "run and what they showed) and what is still open or promised. Drop greetings and repetition. "
    "If a previous summary is given, fold it in: your notes replace it and must stand on their "
    "own. Write in the language of the conversation. Answer with the notes only."
)


class CompactionOutcome(enum.StrEnum):
    COMPACTED = "compacted"
    NOTHING_TO_COMPACT = "nothing"  # fewer messages than keep_recent past the summary
    FAILED = "failed"  # the summary call failed; the history is as it was
    BUSY = "busy"  # /compact while a turn runs: the turn compacts by itself when it must
    OFF = "off"  # llm.compaction.threshold_tokens is unset


@dataclass(slots=True, frozen=True)
class CompactionReport:
    outcome: CompactionOutcome
    folded_rows: int = 0
    summary: Summary | None = None


@dataclass(slots=True, frozen=True)
class ContextUsage:
    """What ``/context`` shows: the size of the next request against the threshold, and the
    summary's coverage."""

    tokens: int
    measured: bool  # the provider reported it (else characters ÷ 4)
    threshold: int | None  # None: compaction is off
    keep_recent: int
    messages: int  # history rows the next request sends verbatim
    summary: Summary | None


@dataclass(slots=True, frozen=True)
class HistoryView:
    """A session's context under compaction: the summary in force and the entries after it."""

    entries: list[HistoryEntry]
    summary: Summary | None

    @property
    def compacted(self) -> Compacted:
        return Compacted(summary_message(self.summary))

    @property
    def covers_through(self) -> int:
        return self.summary.covers_through if self.summary is not None else 0


def summary_message(summary: Summary | None) -> str:
    return SUMMARY_HEADER + summary.content if summary is not None and summary.content else ""


def split_point(entries: Sequence[HistoryEntry], keep_recent: int) -> int:
    """Index of the first entry kept verbatim (``0``: nothing to fold).

    At least ``keep_recent`` messages stay after it (an assistant row and its
    tool results count whole). The cut is always between entries, so a call is
    never separated from its result, and moves back to where a user message
    starts; only a history that is a single turn is cut between its rounds.
    """
    index, kept = len(entries), 0
    while index > 0 and kept < keep_recent:
        index -= 1
        kept += message_count(entries[index])
    cut = index
    while cut > 0 and entries[cut].role != Role.USER:
        cut -= 1
    return cut if cut > 0 else index


def entry_chars(entry: HistoryEntry) -> int:
    calls = sum(len(call.arguments or "") + len(call.result or "") + len(call.name) for call in entry.calls)
    return len(entry.content) + calls


def transcript(entries: Sequence[HistoryEntry], written: Mapping[int, datetime]) -> str:
    """The entries as the summary call reads them: when (``written``, by row id), who said what,
    each call with its result."""
    lines: list[str] = []
    for entry in entries:
        at = written.get(entry.id or 0)
        when = at.strftime("%Y-%m-%d %H:%M") if at is not None else "?"
        speaker = "User" if entry.role == Role.USER else "Assistant"
        if entry.content:
            lines.append(f"[{when}] {speaker}: {entry.content}")
        for call in entry.calls:
            arguments = _clip(call.arguments or "{}")
            result = _clip(call.result or f"(no result: {call.status})")
            lines.append(f"[{when}] Tool call {call.name}({arguments}) -> {result}")
    return "\n\n".join(lines)


def _clip(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + f"… [{len(text)} chars]"


def within_budget(entries: Sequence[HistoryEntry], budget: int = TRANSCRIPT_CHARS) -> int:
    """How many of the oldest ``entries`` one summary call can read (at least one)."""
    total = 0
    for count, entry in enumerate(entries):
        total += min(entry_chars(entry), 2 * RESULT_CHARS * (1 + len(entry.calls)))
        if total > budget:
            return max(count, 1)
    return len(entries)


class Compactor:
    """Decides when a session's history is compacted, and compacts it."""

    def __init__(
        self,
        settings: CompactionSettings,
        history: HistoryStore,
        summaries: SummaryStore,
    ) -> None:
        self.settings = settings
        self.history = history
        self.summaries = summaries

    def applies(self, *, ephemeral: bool) -> bool:
        """Compaction is on and the session is not ephemeral (a tic or a cron run)."""
        return self.settings.enabled and not ephemeral

    async def view(self, session_id: int) -> HistoryView:
        summary = await self.summaries.latest(session_id)
        covered = summary.covers_through if summary is not None else 0
        return HistoryView(await self.history.entries_after(session_id, covered, READ_LIMIT), summary)

    def tokens(self, view: HistoryView, static_chars: int = 0) -> int:
        """The request this view makes, in tokens: measured where the provider said, else estimated
        (``static_chars``: the static system prompt's size, part of every request)."""
        made_after = view.summary.made_after if view.summary is not None else 0
        for index in range(len(view.entries) - 1, -1, -1):
            entry = view.entries[index]
            if entry.input_tokens > 0 and (entry.id or 0) > made_after:
                return entry.input_tokens + self._estimate(view.entries[index:])
        return (static_chars + len(summary_message(view.summary))) // CHARS_PER_TOKEN + self._estimate(
            view.entries
        )

    @staticmethod
    def _estimate(entries: Sequence[HistoryEntry]) -> int:
        return sum(entry_chars(entry) for entry in entries) // CHARS_PER_TOKEN

    def measured(self, view: HistoryView) -> bool:
        made_after = view.summary.made_after if view.summary is not None else 0
        return any(e.input_tokens > 0 and (e.id or 0) > made_after for e in view.entries)

    def usage(self, view: HistoryView, static_chars: int = 0) -> ContextUsage:
        return ContextUsage(
            tokens=self.tokens(view, static_chars),
            measured=self.measured(view),
            threshold=self.settings.threshold_tokens,
            keep_recent=self.settings.keep_recent,
            messages=len(view.entries),
            summary=view.summary,
        )

    def due(self, view: HistoryView, static_chars: int = 0) -> bool:
        threshold = self.settings.threshold_tokens
        return threshold is not None and self.tokens(view, static_chars) > threshold

    async def prepared(self, session_id: int, llm: LLMClient, static_chars: int = 0) -> HistoryView:
        """A round's view of the history, compacted (by ``llm``, the session's model) when due."""
        view = await self.view(session_id)
        if not self.due(view, static_chars):
            return view
        report = await self.compact(session_id, llm, view)
        return await self.view(session_id) if report.outcome is CompactionOutcome.COMPACTED else view

    async def compact(
        self, session_id: int, llm: LLMClient, view: HistoryView | None = None
    ) -> CompactionReport:
        """Fold what lies before the kept messages into a new summary (``/compact`` forces it)."""
        view = view or await self.view(session_id)
        cut = split_point(view.entries, self.settings.keep_recent)
        if cut == 0:
            return CompactionReport(CompactionOutcome.NOTHING_TO_COMPACT)
        folded = view.entries[: within_budget(view.entries[:cut])]
        written = await self.history.written(session_id, folded[0].id or 0, folded[-1].id or 0)
        try:
            content, model, usage_in, usage_out = await _summarise(
                llm, view.summary, transcript(folded, written)
            )
        except LLMError as exc:
            log.warning("compaction of session %s failed: %s", session_id, exc, extra={"session": session_id})
            return CompactionReport(CompactionOutcome.FAILED)
        row = HistorySummary(
            session_id=session_id,
            covers_through=folded[-1].id or 0,
            made_after=view.entries[-1].id or 0,
            covered_rows=(view.summary.covered_rows if view.summary is not None else 0) + len(folded),
            covers_until=written.get(folded[-1].id or 0) or utcnow(),
            content=content,
            model=model,
            input_tokens=usage_in,
            output_tokens=usage_out,
        )
        summary = await self.summaries.save(row)
        log.info(
            "compacted session %s: %d rows folded, through row %s",
            session_id,
            len(folded),
            row.covers_through,
            extra={"session": session_id, "folded": len(folded), "covers_through": row.covers_through},
        )
        return CompactionReport(CompactionOutcome.COMPACTED, len(folded), summary)


async def _summarise(llm: LLMClient, previous: Summary | None, folded: str) -> tuple[str, str, int, int]:
    """The one model call: the previous summary and the folded entries' transcript in, the new
    summary out."""
    parts = []
    if previous is not None and previous.content:
        parts.append("Previous summary:\n" + previous.content)
    parts.append("Conversation to compact:\n" + folded)

    async def ignore(event: StreamEvent) -> None:
        return None

    result = await llm.stream_round(
        [SystemMessage(INSTRUCTIONS), UserMessage("\n\n".join(parts))], [], ignore
    )
    content = result.text.strip()
    if not content:  # a summary that says nothing would drop the history it covers
        raise LLMError("the model answered the summary request with no text")
    return content, result.model, result.usage.input_tokens, result.usage.output_tokens


__all__ = [
    "CompactionOutcome",
    "CompactionReport",
    "Compactor",
    "ContextUsage",
    "HistoryView",
    "split_point",
    "summary_message",
    "transcript",
]
