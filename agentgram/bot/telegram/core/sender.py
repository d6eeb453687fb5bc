"""The one place that talks to Telegram's send/edit methods.

It applies Telegram's rules so nobody else has to: HTML parse mode with a
plain-text retry when Telegram still rejects the entities, "message is not
modified" treated as success, and a message group that keeps a long text
split into ≤ 4096-character pieces (streaming, final text, notices and
reports all use the same path).

**Order and retries** are the chat queue's (:mod:`.chat_queue`): each function
here holds its chat's turn for as long as it runs, pieces and retries included,
so nothing sent to the chat later overtakes it, and retries each call as its
:class:`~.chat_queue.Retry` policy says (:data:`ONCE`, :data:`BRIEF`,
:data:`PERSISTENT`, re-exported here).

**Drafts** (:func:`send_draft`, ``sendMessageDraft``) are previews: tried once,
a transient failure skipped, a refusal reported so the caller streams by edits.

**Outcome unknown.** A request that hangs and ends in a timeout or a 504 may
or may not have been delivered; Telegram gives no way to ask. agentgram sends
it again: a message may then appear twice, but it is never lost
(at-least-once). Edits are idempotent, so for them the question never arises.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from agentgram.bot.telegram.core.chat_queue import (
    BRIEF,
    ONCE,
    PERSISTENT,
    Retry,
    chat_turn,
    retry_after_seconds,
    with_retry,
)
from agentgram.bot.telegram.core.port import (
    HTML,
    BadRequest,
    BotApi,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    Keyboard,
    RetryAfter,
    Sent,
    TelegramError,
    Text,
    TopicGone,
)
from agentgram.bot.telegram.views.render import html_to_text
from agentgram.bot.telegram.views.split import split_html
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.send")


def _is_not_modified(error: BadRequest) -> bool:
    return "message is not modified" in error.message.lower()


def is_entity_error(error: BadRequest) -> bool:
    """Telegram could not parse our HTML: the same text goes again as plain text."""
    return "can't parse entities" in error.message.lower()


def _status(error: TelegramError) -> int | None:
    """The HTTP status behind an error (the port keeps only the class): for the log line."""
    for kind, status in ((Forbidden, 403), (InvalidToken, 401), (Conflict, 409), (RetryAfter, 429)):
        if isinstance(error, kind):
            return status
    return 400 if isinstance(error, BadRequest | ChatMigrated) else None


def _refused(what: str, error: TelegramError) -> None:
    kind, status = type(error).__name__, _status(error)
    fields = {"error_class": kind, "status": status}
    if isinstance(error, Forbidden):
        log.warning(
            "%s dropped: %s status=%s: %s (the user blocked the bot or left the chat)",
            what,
            kind,
            status,
            error.message,
            extra=fields,
        )
    else:
        log.warning("%s failed: %s status=%s: %s", what, kind, status, error, extra=fields)


async def send_html(
    bot: BotApi,
    chat_id: int,
    html: str,
    *,
    reply_markup: Keyboard | None = None,
    silent: bool = False,
    reply_to: int | None = None,
    retry: Retry = BRIEF,
) -> Sent | None:
    """Send ``html`` as one message, or several when it is longer than Telegram allows.

    The first piece replies to ``reply_to``, the last carries the keyboard.
    The last message sent, or ``None`` (logged) when Telegram refused a piece
    or retries ran out — later pieces are then not sent, so none stands
    before a missing one.
    """
    parts = split_html(html) if html.strip() else [html]
    sent: Sent | None = None
    async with chat_turn(bot, chat_id):  # no other sender's message between the pieces
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            sent = await _send_one(
                bot,
                chat_id,
                part,
                reply_markup=reply_markup if last else None,
                silent=silent,
                reply_to=reply_to if index == 0 else None,
                retry=retry,
            )
            if sent is None:
                return None
    return sent


async def _send_one(
    bot: BotApi,
    chat_id: int,
    html: str,
    *,
    reply_markup: Keyboard | None,
    silent: bool,
    reply_to: int | None,
    retry: Retry,
) -> Sent | None:
    what = f"send to chat {chat_id}"
    message = Text(
        html,
        parse_mode=HTML,
        reply_markup=reply_markup,
        disable_notification=silent,
        reply_to_message_id=reply_to,  # a deleted original does not cost the message (BotApi)
    )
    try:
        return await with_retry(lambda: bot.send_message(chat_id, message), retry, what)
    except TopicGone:
        raise  # not a refusal of this message: the place is gone (the caller stops sending there)
    except BadRequest as error:
        if not is_entity_error(error):
            _refused(what, error)
            return None
        log.warning("Telegram rejected our HTML (%s); re-sending as plain text", error.message)
    except TelegramError as error:
        _refused(what, error)
        return None
    plain = replace(message, text=html_to_text(html) or "…", parse_mode=None)
    try:
        return await with_retry(lambda: bot.send_message(chat_id, plain), retry, what)
    except TelegramError as error:
        _refused(f"plain {what}", error)
        return None


class Edit(enum.StrEnum):
    DONE = "done"  # the message shows the text (or already did)
    GONE = "gone"  # Telegram refuses to edit this message (deleted, too old): send the text anew
    FAILED = "failed"  # not now (retries ran out, blocked): the message keeps its old text


async def edit_html(
    bot: BotApi,
    chat_id: int,
    message_id: int,
    html: str,
    *,
    reply_markup: Keyboard | None = None,
    retry: Retry = BRIEF,
) -> Edit:
    what = f"edit in chat {chat_id}"

    async def edit(text: str, parse_mode: str | None) -> Edit:
        await with_retry(
            lambda: bot.edit_message_text(
                chat_id, message_id, Text(text, parse_mode=parse_mode, reply_markup=reply_markup)
            ),
            retry,
            what,
        )
        return Edit.DONE

    try:
        async with chat_turn(bot, chat_id):
            try:
                return await edit(html, HTML)
            except BadRequest as error:
                if not is_entity_error(error):
                    raise
            return await edit(html_to_text(html) or "…", None)
    except BadRequest as error:
        if _is_not_modified(error):
            return Edit.DONE
        _refused(what, error)
        return Edit.GONE
    except TelegramError as error:
        _refused(what, error)
        return Edit.FAILED


class Draft(enum.StrEnum):
    SHOWN = "shown"  # the chat shows the draft
    SKIPPED = (
        "skipped"  # not this time (5xx, timeout, 429, blocked): a later draft or the final text shows it
    )
    REFUSED = "refused"  # this server or chat has no drafts (400, 404): stream by edits instead


DRAFT_TIMEOUT = 2.0
"""Seconds a draft may take: it holds up the chat's outbox, and a newer draft or the final text
makes up for one that took longer."""


@dataclass(slots=True, frozen=True)
class DraftSent:
    outcome: Draft
    wait: float = 0.0
    """Seconds a 429 asks to wait before the chat's next draft."""


async def send_draft(bot: BotApi, chat_id: int, draft_id: int, html: str) -> DraftSent:
    """Show ``html`` (≤ 4096 characters) as the chat's draft ``draft_id``: one try, never a retry.

    A draft is a preview that the next one replaces, so a transient failure is
    skipped rather than retried. Refused HTML entities are sent again as plain
    text, as for messages. A 400 other than that, or a 404 (the port's
    ``InvalidToken``: an older Bot API server without the method), is a refusal.
    """

    async def draft(text: str, parse_mode: str | None) -> None:
        await bot.send_message_draft(
            chat_id, draft_id, text, parse_mode=parse_mode, read_timeout=DRAFT_TIMEOUT
        )

    try:
        try:
            await draft(html, HTML)
        except BadRequest as error:
            if not is_entity_error(error):
                raise
            await draft(html_to_text(html) or "…", None)
    except (BadRequest, InvalidToken) as error:
        log.info("chat %s refused a draft (%s): streaming by edits", chat_id, error.message)
        return DraftSent(Draft.REFUSED)
    except RetryAfter as error:
        return DraftSent(Draft.SKIPPED, retry_after_seconds(error))
    except TelegramError as error:
        log.debug("draft to chat %s skipped: %s: %s", chat_id, type(error).__name__, error)
        return DraftSent(Draft.SKIPPED)
    return DraftSent(Draft.SHOWN)


@dataclass(slots=True)
class _Piece:
    message_id: int
    html: str


@dataclass(slots=True)
class MessageGroup:
    """A text shown as one or more consecutive messages, updated in place."""

    chat_id: int
    silent: bool = False
    pieces: list[_Piece] = field(default_factory=list)

    async def show(self, bot: BotApi, html: str, *, retry: Retry = ONCE) -> bool:
        """Make the chat show ``html``: edit changed pieces, send new ones, skip the same.

        A piece remembers only text the chat really shows, so after a failed
        edit the next ``show`` tries again. A piece Telegram will not edit any
        more is sent anew. ``False`` if some piece does not show its text.
        The chat's turn is held throughout, so no other message lands between the pieces.
        """
        async with chat_turn(bot, self.chat_id):
            return await self._show(bot, html, retry)

    async def _show(self, bot: BotApi, html: str, retry: Retry) -> bool:
        parts = split_html(html) if html.strip() else []
        shown = True
        for index, part in enumerate(parts):
            if index < len(self.pieces):
                shown = await self._update(bot, self.pieces[index], part, retry) and shown
                continue
            sent = await send_html(bot, self.chat_id, part, silent=self.silent, retry=retry)
            if sent is None:
                shown = False
                break  # a later piece must not stand before a missing one
            self.pieces.append(_Piece(sent.message_id, part))
        for extra in self.pieces[len(parts) :]:
            try:
                await bot.delete_message(self.chat_id, extra.message_id)
            except TelegramError:
                pass
        del self.pieces[len(parts) :]
        return shown

    async def _update(self, bot: BotApi, piece: _Piece, part: str, retry: Retry) -> bool:
        if piece.html == part:
            return True
        result = await edit_html(bot, self.chat_id, piece.message_id, part, retry=retry)
        if result == Edit.GONE:
            sent = await send_html(bot, self.chat_id, part, silent=self.silent, retry=retry)
            if sent is None:
                return False
            piece.message_id = sent.message_id
        elif result == Edit.FAILED:
            return False
        piece.html = part
        return True


__all__ = [
    "BRIEF",
    "ONCE",
    "PERSISTENT",
    "Draft",
    "DraftSent",
    "Edit",
    "MessageGroup",
    "Retry",
    "edit_html",
    "is_entity_error",
    "retry_after_seconds",
    "send_draft",
    "send_html",
    "with_retry",
]
