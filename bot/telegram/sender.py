"""The one place that talks to Telegram's send/edit methods.

It applies Telegram's rules so nobody else has to: HTML parse mode with a
plain-text retry when Telegram still rejects the entities, "message is not
modified" treated as success, and a message group that keeps a long text
split into ≤ 4096-character pieces (streaming and final text use the same
path). Rate limits are python-telegram-bot's ``AIORateLimiter`` (429
``retry_after`` honoured, retries configured); order per chat is kept by the
caller's per-chat queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from telegram import InlineKeyboardMarkup, Message
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from bot.telegram.render import html_to_text
from bot.telegram.split import split_html
from runtime.log import get_logger

log = get_logger("telegram.send")


def _is_not_modified(error: BadRequest) -> bool:
    return "message is not modified" in error.message.lower()


def _is_entity_error(error: BadRequest) -> bool:
    return "can't parse entities" in error.message.lower()


async def send_html(
    bot,  # type: ignore[no-untyped-def]
    chat_id: int,
    html: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
    silent: bool = False,
    reply_to: int | None = None,
) -> Message | None:
    """The sent message, or ``None`` (logged) when Telegram refused it or could not be reached."""
    kwargs: dict[str, Any] = {"reply_markup": reply_markup, "disable_notification": silent}
    if reply_to is not None:
        kwargs["reply_to_message_id"] = reply_to
    try:
        return await bot.send_message(chat_id, html, parse_mode=ParseMode.HTML, **kwargs)
    except BadRequest as error:
        if not _is_entity_error(error):
            log.warning("send to chat %s failed: %s", chat_id, error.message)
            return None
        log.warning("Telegram rejected our HTML (%s); re-sending as plain text", error.message)
    except TelegramError as error:  # blocked, network, retries used up
        log.warning("send to chat %s failed: %s", chat_id, error)
        return None
    try:
        return await bot.send_message(chat_id, html_to_text(html) or "…", **kwargs)
    except TelegramError as error:
        log.warning("plain send to chat %s failed: %s", chat_id, error)
        return None
    except Exception:
        log.exception("send to chat %s failed", chat_id)
        return None


async def edit_html(
    bot,  # type: ignore[no-untyped-def]
    chat_id: int,
    message_id: int,
    html: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
) -> bool:
    try:
        await bot.edit_message_text(
            html, chat_id=chat_id, message_id=message_id, parse_mode=ParseMode.HTML, reply_markup=reply_markup
        )
        return True
    except BadRequest as error:
        if _is_not_modified(error):
            return True
        if not _is_entity_error(error):
            log.warning("edit in chat %s failed: %s", chat_id, error.message)
            return False
    try:
        await bot.edit_message_text(
            html_to_text(html) or "…", chat_id=chat_id, message_id=message_id, reply_markup=reply_markup
        )
        return True
    except BadRequest as error:
        return _is_not_modified(error)
    except TelegramError as error:
        log.warning("plain edit in chat %s failed: %s", chat_id, error)
        return False


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

    async def show(self, bot, html: str) -> bool:  # type: ignore[no-untyped-def]
        """Make the chat show ``html``: edit changed pieces, send new ones, skip the same.

        ``False`` if a piece could not be sent or edited (Telegram refused it).
        """
        parts = split_html(html) if html.strip() else []
        shown = True
        for index, part in enumerate(parts):
            if index < len(self.pieces):
                if self.pieces[index].html != part:
                    shown = await edit_html(bot, self.chat_id, self.pieces[index].message_id, part) and shown
                    self.pieces[index].html = part
                continue
            sent = await send_html(bot, self.chat_id, part, silent=self.silent)
            if sent is not None:
                self.pieces.append(_Piece(sent.message_id, part))
            else:
                shown = False
        for extra in self.pieces[len(parts) :]:
            try:
                await bot.delete_message(self.chat_id, extra.message_id)
            except TelegramError:
                pass
        del self.pieces[len(parts) :]
        return shown
