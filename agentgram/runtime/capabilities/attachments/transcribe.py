"""Speech to text through an OpenAI-compatible ``POST {base_url}/audio/transcriptions``.

Owns the one call that turns a voice note, an audio file or a video note into words:
:class:`OpenAITranscriber`, the inbox's :class:`~runtime.attachments.inbox.Transcriber`, on the
``openai`` SDK's ``audio.transcriptions.create`` with a client of its own (its endpoint, key and
timeout are the ``transcription`` section's, each defaulting to the ``llm`` one). Every failure
(an HTTP error, a timeout, no connection, an unreadable file, nothing heard) becomes one
:class:`~runtime.errors.TranscriptionFailed` whose text the user and the model read; the audio
stays in the workspace whatever happens, so nothing is lost.

The SDK retries a connection error, a 408/409/429 or a 5xx once (``MAX_RETRIES``): a voice note is
one request the user is waiting for, and a second try is what any client would make.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from pathlib import Path, PurePath

import openai
from openai import AsyncOpenAI, omit

from agentgram.runtime.infra.config import LLMSettings, TranscriptionSettings
from agentgram.runtime.infra.errors import TranscriptionFailed
from agentgram.runtime.infra.log import get_logger, register_secret

log = get_logger("attachments")

MAX_RETRIES = 1
FORMATS = frozenset({"flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"})
"""The file extensions OpenAI's transcription endpoint accepts; it goes by the file name."""
_EXTENSION_FOR_MIME = {
    "audio/ogg": "ogg", "audio/opus": "ogg", "audio/x-opus+ogg": "ogg", "audio/mpeg": "mp3",
    "audio/mp3": "mp3", "audio/mp4": "m4a", "audio/x-m4a": "m4a", "audio/m4a": "m4a",
    "audio/aac": "m4a", "video/mp4": "mp4", "audio/wav": "wav", "audio/x-wav": "wav",
    "audio/wave": "wav", "audio/flac": "flac", "audio/x-flac": "flac", "audio/webm": "webm",
    "video/webm": "webm",
}  # fmt: skip


class OpenAITranscriber:
    """Transcribes audio files with ``transcription.model``; ``language`` is a hint when set."""

    def __init__(self, settings: TranscriptionSettings, llm: LLMSettings) -> None:
        self._settings = settings
        self._base_url = settings.base_url or llm.base_url
        self._key = (settings.api_key or llm.api_key).get_secret_value()
        register_secret(self._key)
        self._client: AsyncOpenAI | None = None  # made on the first voice note: a bot without any needs none

    @property
    def client(self) -> AsyncOpenAI:
        if self._client is None:
            self._client = AsyncOpenAI(
                base_url=self._base_url,
                api_key=self._key or "not-needed",
                timeout=self._settings.timeout,
                max_retries=MAX_RETRIES,
            )
        return self._client

    async def transcribe(self, path: Path, *, mime_type: str | None) -> str:
        """The words spoken in ``path``, stripped; :class:`TranscriptionFailed` saying why not."""
        try:
            content = await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            raise TranscriptionFailed(f"the recording could not be read ({exc.strerror or exc})") from exc
        try:
            result = await self.client.audio.transcriptions.create(
                file=(upload_name(path, mime_type), content, mime_type or "application/octet-stream"),
                model=self._settings.model,
                language=self._settings.language or omit,
                response_format="json",
            )
        except openai.APIError as exc:
            reason = _reason(exc, self._settings.timeout)
            log.warning("transcription of %s failed: %s", path.name, reason)
            raise TranscriptionFailed(reason) from exc
        text = result.text.strip()
        if not text:
            raise TranscriptionFailed("no speech was recognised in the recording")
        return text

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


def upload_name(path: PurePath, mime_type: str | None) -> str:
    """The file name to upload: the endpoint tells formats by extension, and a chat's voice note
    may be saved as ``.oga`` or an audio file as ``.opus``, so an unknown extension is replaced by
    the one the MIME type implies (kept when there is none: the service then says it is refused)."""
    extension = path.suffix.lstrip(".").lower()
    if extension in FORMATS:
        return path.name
    implied = _EXTENSION_FOR_MIME.get((mime_type or "").split(";")[0].strip().lower())
    return f"{path.stem}.{implied}" if implied else path.name


def _reason(exc: openai.APIError, timeout: float) -> str:
    """What went wrong, in words for the user; the service's own message when it gave one."""
    if isinstance(exc, openai.APITimeoutError):
        return f"the transcription service did not answer within {timeout:g} s"
    if isinstance(exc, openai.APIConnectionError):
        return "the transcription service could not be reached"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body  # the error object of an OpenAI-shaped answer; a proxy's page is text
        message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(message, str) or not message:
            message = _phrase(exc.status_code)
        return f"the transcription service answered {exc.status_code}: {message}"[:300]
    return f"the transcription service's answer could not be read ({type(exc).__name__})"


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"
