"""Streaming a reply through Telegram drafts (``sendMessageDraft``), and which chats get them.

In a private chat a round's text streams as a *draft*: a preview Telegram
shows while the text is written, with no message posted. The first draft goes
out as soon as the first visible text arrives (no ``telegram.stream_first_delay``
wait: a draft costs no message and leaves nothing to edit), later ones at most
one per ``telegram.draft_interval`` per chat, each carrying the whole text so
far. A draft is best effort: a transient failure (5xx, timeout, 429 — whose
``retry_after`` then spaces the next draft) skips it and streaming goes on.
Drafts are not counted against the message budget
(:mod:`bot.telegram.ratelimit`).

When the round ends, its text is sent as real messages, split as any text
(:class:`~bot.telegram.sender.MessageGroup`), which takes the draft's place.
That holds for every round: a round that ends with tool calls sends its text
as a message first, as before, and then its tool status line; the next round
streams into a new draft. A stopped turn sends no text of the round it cut
short: its draft is never sent, the "⏹ Stopped." notice follows, and Telegram
drops the preview (what streamed is kept in the history). A text whose stream was reset
(a retry, a fallback model) keeps its last draft until newer text or the next
message replaces it: an empty draft would be refused by servers before Bot
API 10.0. Past 4096 characters the draft shows the piece being written.

A chat that refuses drafts — a group or channel (never tried: their ids are
negative), a server or chat without them (a 400, or the 404 of an older Bot API
server) — streams by editing a message instead
(:class:`~.stream.StreamView`), from the refused draft on; the
refusal is remembered per chat in memory (:class:`DraftChats`, the newest
:data:`REFUSALS_KEPT`), so later turns go straight to edits until a restart
tries drafts again.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass

from agentgram.bot.telegram.core.port import BotApi
from agentgram.bot.telegram.core.sender import Draft, send_draft
from agentgram.bot.telegram.views.split import split_html

REFUSALS_KEPT = 10_000
"""Chats whose refusal is remembered; an older one forgotten tries one draft again."""


@dataclass(slots=True)
class DraftStream:
    """One round's text, previewed as draft ``draft_id`` of its chat."""

    chat_id: int
    draft_id: int
    shown: str = ""
    next_at: float = 0.0
    """``time.monotonic()`` before which the next draft waits (``draft_interval``, a 429's wait)."""

    def due(self) -> bool:
        return time.monotonic() >= self.next_at

    async def show(self, bot: BotApi, html: str, interval: float) -> Draft:
        """Make the draft show ``html`` (its last piece past 4096 characters), or say why not."""
        parts = split_html(html) if html.strip() else []
        if not parts or parts[-1] == self.shown:
            return Draft.SHOWN
        sent = await send_draft(bot, self.chat_id, self.draft_id, parts[-1])
        # counted from the answer, so Telegram never sees two drafts closer than the interval
        self.next_at = time.monotonic() + max(interval, sent.wait)
        if sent.outcome is Draft.SHOWN:
            self.shown = parts[-1]
        return sent.outcome


class DraftChats:
    """Which chats stream through drafts: all private ones while ``enabled``, but those that refused."""

    def __init__(self, *, enabled: bool, interval: float) -> None:
        self.enabled = enabled
        self.interval = interval
        self._refused: OrderedDict[int, None] = OrderedDict()
        self._ids = itertools.count(1)  # a new id per round: Telegram animates updates of one id

    def offered(self, chat_id: int) -> bool:
        """A user's private chat has a positive id; groups, supergroups and channels negative ones."""
        return self.enabled and chat_id > 0 and chat_id not in self._refused

    def refused(self, chat_id: int) -> None:
        self._refused[chat_id] = None
        self._refused.move_to_end(chat_id)
        while len(self._refused) > REFUSALS_KEPT:
            self._refused.popitem(last=False)

    def open(self, chat_id: int) -> DraftStream:
        return DraftStream(chat_id, next(self._ids))


__all__ = ["REFUSALS_KEPT", "DraftChats", "DraftStream"]
