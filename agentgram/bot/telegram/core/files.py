"""Files through the Bot API: downloads for the runtime's attachments, uploads for ``send_file``.

A download is ``getFile`` (which names the file's path on Telegram's side), then a GET of
``{api_base_url}/file/bot{token}/{file_path}``: the driver builds that URL from
``telegram.api_base_url`` (:meth:`~.port.BotApi.download`), so a local Bot API server works the
same. Transient failures (5xx, timeouts, 429) are retried a few times; what still fails
becomes :class:`~runtime.errors.FetchFailed`, whose text the user and the model read; it passes
:func:`~runtime.log.redact` first, as a download URL holds the bot token.

Files over the download limit are never asked for: the handlers mark them skipped
(:func:`over_download_limit`) before the mail is stored, so no failing ``getFile`` is made.

An upload (:func:`upload`) is a photo when the agent asked for one and Telegram takes it
(a JPEG, PNG or WebP of at most 10 MB; one ``sendPhoto`` refuses, for its dimensions say, goes
again as a document), else a document. Its caption is Telegram HTML, sent as plain text when
Telegram rejects the entities, like a message's (:mod:`bot.telegram.sender`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentgram.bot.telegram.core.port import HTML, BadRequest, BotApi, FileUpload, Sent, TelegramError
from agentgram.bot.telegram.core.sender import Retry, is_entity_error, with_retry
from agentgram.bot.telegram.views.render import html_to_text
from agentgram.runtime.infra.errors import FetchFailed
from agentgram.runtime.infra.log import get_logger, redact

log = get_logger("telegram.files")

MB = 1024 * 1024
PHOTO_UPLOAD_LIMIT = 10 * MB
"""The largest file ``sendPhoto`` takes; a bigger image is sent as a document."""
PHOTO_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp"})
MAX_CAPTION = 1024
"""Characters (UTF-16 code units) a caption may show; a longer one is sent as a message after."""
DOWNLOAD_RETRY = Retry(attempts=4, first_delay=1.0, max_delay=8.0, max_wait=30.0)
DOWNLOAD_TIMEOUT = 120.0
"""Seconds a download may wait for the next bytes (a large file on a slow link)."""
UPLOAD_TIMEOUT = 300.0
"""Seconds an upload may take to write (the libraries' 20 s would cut a large file on a slow link, and a
cut upload is sent again)."""


def over_download_limit(size: int | None, limit_mb: int) -> bool:
    """A file Telegram says is bigger than the bot may download (unknown size: try it)."""
    return size is not None and size > limit_mb * MB


def limit_reason(limit_mb: int) -> str:
    """Why a file was not fetched, as the model reads it in the attachment's line."""
    return f"over the {limit_mb} MB download limit"


@dataclass(slots=True, frozen=True)
class TelegramFiles:
    """The runtime's file source (``Runtime.set_file_source``): attachments by their file id."""

    bot: BotApi
    retry: Retry = DOWNLOAD_RETRY

    async def fetch(self, file_id: str, dest: Path) -> None:
        """Download ``file_id`` to ``dest``; :class:`FetchFailed` saying why it could not."""
        try:
            await with_retry(
                lambda: self.bot.download(file_id, dest, read_timeout=DOWNLOAD_TIMEOUT),
                self.retry,
                "file download",
            )
        except TelegramError as error:
            log.warning("could not download a file: %s: %s", type(error).__name__, error)
            # redacted: the model, the user and the web view read it, and a library's text may quote the URL
            raise FetchFailed(f"Telegram did not hand the file over ({redact(error.message)})") from error
        except OSError as error:
            raise FetchFailed(f"the file could not be saved ({error.strerror or error})") from error


class UploadRefused(Exception):
    """Telegram refused the file for good (too large, empty, blocked); the message says why."""


def fits_caption(html: str) -> bool:
    return len(html_to_text(html).encode("utf-16-le")) // 2 <= MAX_CAPTION


def sent_as_photo(name: str, size: int, *, as_photo: bool) -> bool:
    return as_photo and Path(name).suffix.lower() in PHOTO_SUFFIXES and size <= PHOTO_UPLOAD_LIMIT


@dataclass(slots=True, frozen=True)
class Upload:
    """A file to send: its bytes as they are now, the name the chat shows, its caption (HTML)."""

    content: bytes
    name: str
    caption: str | None
    as_photo: bool
    limit_mb: int


async def upload(bot: BotApi, chat_id: int, file: Upload, retry: Retry) -> Sent:
    """Send a photo or a document; :class:`UploadRefused` saying why Telegram would not take it
    (or retries ran out)."""
    if len(file.content) > file.limit_mb * MB:
        raise UploadRefused(f"it is over the {file.limit_mb} MB a bot may send")
    content, name, caption = file.content, file.name, file.caption
    photo = sent_as_photo(name, len(content), as_photo=file.as_photo)
    try:
        try:
            return await _send(bot, chat_id, content, name, caption, photo=photo, retry=retry)
        except BadRequest as error:
            if not photo:
                raise
            log.info("sendPhoto refused %s (%s); sending it as a document", name, error.message)
            return await _send(bot, chat_id, content, name, caption, photo=False, retry=retry)
    except TelegramError as error:
        log.warning("upload to chat %s failed: %s: %s", chat_id, type(error).__name__, error)
        raise UploadRefused(error.message) from error


async def _send(
    bot: BotApi, chat_id: int, content: bytes, name: str, caption: str | None, *, photo: bool, retry: Retry
) -> Sent:
    """One file, its caption as HTML — or as plain text when Telegram rejects the entities."""
    field = "photo" if photo else "document"

    async def send(text: str | None, parse_mode: str | None) -> Sent:
        upload = FileUpload(
            content, name, as_photo=photo, caption=text, parse_mode=parse_mode, write_timeout=UPLOAD_TIMEOUT
        )
        return await with_retry(lambda: bot.send_file(chat_id, upload), retry, f"{field} to chat {chat_id}")

    try:
        return await send(caption, HTML if caption else None)
    except BadRequest as error:
        if caption is None or not is_entity_error(error):
            raise
        return await send(html_to_text(caption) or None, None)
