"""A Telegram message's files as the runtime's :class:`Attachment` values, parsed at the edge.

One message carries at most one file (an album's items arrive as separate messages sharing a
``media_group_id``). A photo comes as several sizes: the largest is the one worth fetching. A
video is kept as a document (saved for the agent, not watched); a GIF is an ``animation``. A file
over ``telegram.max_download_mb`` is marked skipped here, with the reason, so the runtime never
asks Telegram for it. Telegram Premium's ``transcript`` is kept when a voice note has one.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.files import limit_reason, over_download_limit
from agentgram.bot.telegram.core.incoming import FileRef, Message
from agentgram.runtime.app import Attachment

PHOTO_MIME = "image/jpeg"
"""Telegram re-encodes every photo it stores as a JPEG."""


def attachment_of(message: Message, limit_mb: int) -> Attachment | None:
    """The file ``message`` carries, or ``None`` (text, a sticker, a location, …)."""
    found = _media(message)
    if found is None:
        return None
    kind, media = found
    attachment = Attachment(
        kind=kind,
        file_id=media.file_id,
        unique_id=media.file_unique_id or None,
        name=_text(media.file_name),
        mime_type=_text(media.mime_type) or (PHOTO_MIME if kind == "photo" else None),
        size=media.file_size,
        width=media.width,
        height=media.height,
        duration=media.duration,
        transcript=_text(media.transcript),
    )
    if over_download_limit(attachment.size, limit_mb):
        return attachment.model_copy(update={"skipped": limit_reason(limit_mb)})
    return attachment


def _media(message: Message) -> tuple[str, FileRef] | None:
    """The kind and file of the message's attachment; an animation before the document Telegram
    also sends with it."""
    if message.photo:
        return "photo", max(message.photo, key=lambda size: (size.width or 0) * (size.height or 0))
    candidates: tuple[tuple[str, FileRef | None], ...] = (
        ("voice", message.voice),
        ("audio", message.audio),
        ("video_note", message.video_note),
        ("animation", message.animation),
        ("video", message.video),
        ("document", message.document),
    )
    return next(((kind, media) for kind, media in candidates if media is not None), None)


def _text(value: object) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else None
