"""A new turn's first LLM request, sent while the turn is being opened.

Opening a turn is a durable write (the turn row, the user's message as a
history row, the mailbox cursor) — about a millisecond and a half on the hot
path. The first request does not need it to have landed: asking the model has
no effect anywhere, and nothing the model says is acted on (shown, stored,
executed) before the turn runs, after the write committed. So the turn's
first step (``prefetch`` in :mod:`runtime.turn.steps`) builds the first
round's context from the history in memory plus the mail about to be folded
in and sends that request at once; the session worker opens the turn as soon
as the endpoint has it (:meth:`Prefetch.under_way`), while the model thinks.

The turn's first round then builds its context from what was stored, as
always, and *adopts* the request only if the messages and the tools are exactly
those the request carried (it uses the request's clock reading for that); otherwise
it cancels the request and asks again. So a prefetched request can make a
turn faster, never different.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.core.turn.context import Compacted, ContextSettings, build_messages
from agentgram.runtime.core.turn.inject import mail_text
from agentgram.runtime.infra.llm.types import (
    ChatMessage,
    LLMClient,
    LLMRound,
    ModelFallback,
    StreamEvent,
    StreamRestart,
    StreamSink,
    StreamStarted,
    TextDelta,
    ToolSpec,
)
from agentgram.runtime.infra.storage.history_tail import HistoryEntry, without_orphans
from agentgram.runtime.infra.storage.models import Role
from agentgram.runtime.infra.tasks import TaskSet, cancel_and_wait

PROVISIONAL_TURN = -1
"""The turn id the not-yet-stored rows carry: a turn of its own, as the real id will be."""


class Prefetch:
    """One streamed request in flight, its events held until a round adopts it."""

    def __init__(
        self,
        llm: LLMClient,
        messages: list[ChatMessage],
        tools: Sequence[ToolSpec],
        now: datetime,
        *,
        tasks: TaskSet | None = None,
    ) -> None:
        """``tasks`` owns the request (the turn services' set, closed on shutdown); without it
        the request is a task of its own, for tests that build a prefetch by hand."""
        self.messages = messages
        self.tools = list(tools)
        self.now = now  # the clock reading the context was built with
        self._started = asyncio.Event()
        self._held: list[StreamEvent] = []
        self._sink: StreamSink | None = None
        request = llm.stream_round(messages, tools, self._forward)
        self._task: asyncio.Task[LLMRound] = (
            asyncio.get_running_loop().create_task(request, name="llm-prefetch")
            if tasks is None
            else tasks.spawn(request, name="llm-prefetch", report=False)  # the round reports it
        )

    async def _forward(self, event: StreamEvent) -> None:
        if isinstance(event, StreamStarted):
            self._started.set()
        if self._sink is None:
            self._held.append(event)
        else:
            await self._sink(event)

    async def under_way(self, patience: float) -> None:
        """Return once the endpoint has the request (or it ended, or ``patience`` ran out).

        The event loop and the database's worker thread share one interpreter
        lock, so the request goes out first and the turn opens while the model
        thinks, rather than both crawling side by side.
        """
        started = asyncio.ensure_future(self._started.wait())
        try:
            await asyncio.wait({started, self._task}, timeout=patience, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(started)

    def asked(self, messages: list[ChatMessage], tools: Sequence[ToolSpec]) -> bool:
        """Whether this request is exactly the one a round would send (its context and its tools).

        The round asks once, then adopts or cancels it; the prefetch's own copy of the context is
        let go here, so that a round waiting on the model holds one copy, not two
        (``bench/README.md``, session 22).
        """
        asked = self.messages == messages and self.tools == list(tools)
        self.messages = []
        return asked

    async def adopt(self, sink: StreamSink) -> LLMRound:
        """The round's result, its events (those so far first) going to ``sink``; a cancel closes it."""
        try:
            while self._held:
                await sink(self._held.pop(0))
            self._sink = sink
            return await self._task
        except asyncio.CancelledError:
            self.cancel()
            raise

    def held_text(self) -> str:
        """What the model wrote that no round adopted yet: a turn stopped before its first round
        read the request keeps it as its partial answer, as it would have after adopting it."""
        text = ""
        for event in self._held:
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, StreamRestart | ModelFallback):
                text = ""
        return text

    def cancel(self) -> None:
        self._task.cancel()
        self._task.add_done_callback(_settled)


def _settled(task: asyncio.Task[LLMRound]) -> None:
    """A request nobody adopted: its failure, if any, is nobody's to report."""
    if not task.cancelled():
        task.exception()


def provisional_messages(
    entries: list[HistoryEntry],
    mail: list[Envelope],
    settings: ContextSettings,
    now: datetime,
    *,
    notes: str | None = None,
    compacted: Compacted | None = None,
) -> list[ChatMessage]:
    """The context the turn's first round will build once ``mail`` is stored as user rows
    (and the opening has marked unanswered rows failed)."""
    rows = [
        HistoryEntry(None, Role.USER, text, turn_id=PROVISIONAL_TURN)
        for text in (mail_text(envelope) for envelope in mail)
        if text is not None
    ]
    return build_messages([*without_orphans(entries), *rows], settings, now, notes=notes, compacted=compacted)
