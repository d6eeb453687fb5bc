"""A Telegram message's files as the runtime's :class:`Attachment` values, parsed at the edge.

One message carries at most one file (an album's items arrive as separate messages sharing a
``media_group_id``). A photo comes as several sizes: the largest is the one worth fetching. A
video is kept as a document (saved for the agent, not watched); a GIF is an ``animation``. A file
over ``telegram.max_download_mb`` is marked skipped here, with the reason, so the runtime never
asks Telegram for it. Fields are read from each object's ``to_dict()``: the wire form, with plain
seconds for durations and Telegram Premium's ``transcript`` kept when a voice note has one.
"""

from __future__ import annotations

from typing import Any

from telegram import Message, TelegramObject

from agentgram.bot.telegram.files import limit_reason, over_download_limit
from agentgram.runtime.app import Attachment

PHOTO_MIME = "image/jpeg"
"""Telegram re-encodes every photo it stores as a JPEG."""


def attachment_of(message: Message, limit_mb: int) -> Attachment | None:
    """The file ``message`` carries, or ``None`` (text, a sticker, a location, …)."""
    found = _media(message)
    if found is None:
        return None
    kind, media = found
    attachment = _parse(kind, media.to_dict())
    if over_download_limit(attachment.size, limit_mb):
        return attachment.model_copy(update={"skipped": limit_reason(limit_mb)})
    return attachment


def _media(message: Message) -> tuple[str, TelegramObject] | None:
    """The kind and object of the message's file; an animation before the document Telegram
    also sends with it."""
    if message.photo:
        return "photo", max(message.photo, key=lambda size: size.width * size.height)
    candidates: tuple[tuple[str, TelegramObject | None], ...] = (
        ("voice", message.voice),
        ("audio", message.audio),
        ("video_note", message.video_note),
        ("animation", message.animation),
        ("video", message.video),
        ("document", message.document),
    )
    return next(((kind, media) for kind, media in candidates if media is not None), None)


def _parse(kind: str, raw: dict[str, Any]) -> Attachment:
    return Attachment(
        kind=kind,
        file_id=_text(raw, "file_id"),
        unique_id=_text(raw, "file_unique_id"),
        name=_text(raw, "file_name"),
        mime_type=_text(raw, "mime_type") or (PHOTO_MIME if kind == "photo" else None),
        size=_number(raw, "file_size"),
        width=_number(raw, "width"),
        height=_number(raw, "height"),
        duration=_number(raw, "duration"),
        transcript=_text(raw, "transcript"),
    )


def _text(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return (value.strip() or None) if isinstance(value, str) else None


def _number(raw: dict[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
