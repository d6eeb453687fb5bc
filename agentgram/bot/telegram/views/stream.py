"""A round's streamed reply as the chat sees it: a draft, or a message edited in place.

In a private chat the text streams as a draft (:mod:`.drafts`: the first text after
:data:`FIRST_DRAFT_WAIT`, none while a complete round is being stored; the round's end sends it
as messages). Elsewhere, or where drafts are
off or refused, it is a message edited in place, no more often than the chat's
:class:`EditPace` allows; such a reply's first text waits ``telegram.stream_first_delay``, so a
quick reply is sent once, complete, instead of as a message and an edit right after it.

Each chat has one :class:`StreamView`; each round gets a fresh :class:`Reply` (its text, whether
the chat shows it, and where it shows), replaced whole when the round or the turn ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.sender import Draft, MessageGroup, Retry
from agentgram.bot.telegram.views.drafts import DraftChats, DraftStream
from agentgram.bot.telegram.views.render import markdown_to_html

FIRST_DRAFT_WAIT = 0.03
"""Seconds a round's first draft waits for more: a reply complete by then is sent as one message
with no draft before it (a Bot API request less a turn for a fast model; the first words still
show well within 150 ms of the first token)."""

ROUND_END_WAIT = 2.0
"""Seconds a round's complete text that no draft shows yet waits for the round's end (only its
store away) before a draft shows it anyway: a busy database or event loop must not turn a complete
answer into a draft and a message."""


@dataclass(slots=True)
class EditPace:
    """When a chat's next edit may go: its streamed text and its status line share one
    ``interval`` (``telegram.stream_edit_interval``)."""

    interval: float
    last: float = 0.0
    """``time.monotonic()`` of the last edit (or as if, to delay the first)."""

    def due_at(self) -> float:
        return self.last + self.interval

    def ready(self) -> bool:
        return time.monotonic() >= self.due_at()

    def edited(self) -> None:
        self.last = time.monotonic()

    def first_in(self, delay: float) -> None:
        """The next edit is due in ``delay`` seconds."""
        self.last = time.monotonic() + delay - self.interval


@dataclass(slots=True)
class Reply:
    """One round's streamed text and where it shows (``messages`` or ``draft``, or nowhere yet)."""

    text: str = ""
    dirty: bool = False
    """The chat does not show ``text`` yet."""
    messages: MessageGroup | None = None
    draft: DraftStream | None = None


@dataclass(slots=True, eq=False)
class StreamView:
    """One chat's streamed reply."""

    _bot: BotApi
    _chat_id: int
    _drafts: DraftChats
    _pace: EditPace
    _first_delay: float
    reply: Reply = field(default_factory=Reply)

    def busy(self) -> bool:
        """The reply shows somewhere (its round has not ended)."""
        return self.reply.messages is not None or self.reply.draft is not None

    def showing(self) -> bool:
        """The chat shows this round's text as it grows: a draft shown, or a message sent."""
        reply = self.reply
        drafted = reply.draft is not None and bool(reply.draft.shown)
        return drafted or (reply.messages is not None and bool(reply.messages.pieces))

    def edit_pending(self) -> bool:
        return self.reply.dirty and self.reply.messages is not None

    def draft_due_at(self) -> float | None:
        draft = self.reply.draft
        return draft.next_at if draft is not None and self.reply.dirty else None

    def add(self, text: str) -> bool:
        """Append streamed text; ``True`` when it is the first visible text, nowhere shown yet
        (the caller flushes what is pending, then :meth:`open`)."""
        reply = self.reply
        reply.text += text
        reply.dirty = True
        return not self.busy() and bool(reply.text.strip())

    def restart(self) -> None:
        """The stream was reset (a retry, a fallback model): the partial text goes."""
        self.reply.text, self.reply.dirty = "", True

    async def open(self) -> bool:
        """Start showing the reply, as a draft where the chat takes drafts, else by edits;
        ``True`` when an edit is due at once."""
        if self._drafts.offered(self._chat_id):
            self.reply.draft = draft = self._drafts.open(self._chat_id)
            # the first draft waits a moment: an answer complete by then (a fast model, a short
            # reply) is one message and no draft, a Bot API request less (issue 31, CPU per turn)
            draft.next_at = time.monotonic() + FIRST_DRAFT_WAIT
            return False
        return self._start_edits()

    async def show_draft(self) -> bool:
        """Show the text as the round's draft once one is due; a refused draft turns the chat to
        edits, this round from now on and later ones from their start (``True``: an edit is due
        at once)."""
        reply, draft = self.reply, self.reply.draft
        if draft is None or not reply.dirty or not draft.due():
            return False
        reply.dirty = False
        outcome = await draft.show(self._bot, markdown_to_html(reply.text), self._drafts.interval)
        reply.dirty = outcome is Draft.SKIPPED  # tried again when the next one is due
        if outcome is not Draft.REFUSED:
            return False
        self._drafts.refused(self._chat_id)
        reply.draft = None
        return self._start_edits()

    def _start_edits(self) -> bool:
        self.reply.messages = MessageGroup(self._chat_id)
        self.reply.dirty = True
        self._pace.first_in(self._first_delay)  # the round's end shows it sooner
        return self._first_delay <= 0

    async def flush(self, retry: Retry) -> bool:
        """Edit the messages to the latest text; ``False`` if it could not be shown."""
        reply = self.reply
        if not reply.dirty or reply.messages is None:
            return True
        reply.dirty = False
        shown = await reply.messages.show(self._bot, markdown_to_html(reply.text), retry=retry)
        reply.dirty = not shown
        return shown

    def complete(self) -> None:
        """The model wrote the round's whole text and called no tool: its end follows once the round
        is stored and sends the text as messages, so a draft not shown yet waits for that (at
        most :data:`ROUND_END_WAIT`)."""
        draft = self.reply.draft
        if draft is not None and not draft.shown:
            draft.next_at = max(draft.next_at, time.monotonic() + ROUND_END_WAIT)

    def round_text(self, text: str) -> None:
        """The round ended with ``text``: shown whole, as messages that replace its draft."""
        reply = self.reply
        reply.draft = None
        if text.strip():
            reply.messages = reply.messages or MessageGroup(self._chat_id)
            reply.text, reply.dirty = text, True

    def end(self) -> None:
        """The round (or the turn) is over: the next text starts a reply of its own."""
        self.reply = Reply()


__all__ = ["FIRST_DRAFT_WAIT", "ROUND_END_WAIT", "EditPace", "Reply", "StreamView"]
