"""A fake OpenAI chat-completions server for driving the real ``openai`` SDK.

:class:`FakeOpenAI` listens on 127.0.0.1 (random port) and answers
``POST /v1/chat/completions`` (streamed SSE or one JSON object) and
``GET /v1/models``. It validates requests as strictly as OpenAI does — an
unpaired tool call, a stray tool message or duplicate tool names is a 400
with an OpenAI-shaped ``{"error": {...}}`` body — so a context builder that
would break against the real API breaks here first.

Replies are scripted: :meth:`FakeOpenAI.script` queues :class:`Text`,
:class:`ToolCalls`, :class:`Error`, :class:`Hang` or :class:`Drop` values
consumed in order; :meth:`FakeOpenAI.on_model` queues replies for one model
only (fallback tests); :attr:`FakeOpenAI.handler` computes a reply from the
request body. With nothing queued the fake answers 500 "FakeOpenAI: no
scripted reply" so the test fails loudly.

Faults as real providers and the proxies in front of them produce them:
:class:`Error` (JSON, or with ``html=True`` nginx's page), :class:`GatewayTimeout`
(a hang, then 504), :class:`Cut` (a stream that stops after a few chunks, with
no finish chunk and no ``[DONE]``), :class:`BadChunk` (an SSE event that is not
JSON) and :class:`StreamError` (an ``{"error": ...}`` event mid-stream). Script
them like any reply, force them with :meth:`FakeOpenAI.fail_next` (taken before
the script, which they leave alone), or draw them at random with
:meth:`FakeOpenAI.chaos`; every forced or random fault lands in
:attr:`FakeOpenAI.injected`. What the ``openai`` SDK raises for each is in the
docstrings of the fault classes.

Images: a user message's content may be a list of ``text`` and ``image_url`` parts; an image must
be a ``data:`` URL of base64 PNG, JPEG, GIF or WebP bytes (the bytes are checked, as OpenAI
decodes them), only in user messages. :meth:`FakeOpenAI.images` gives a request's images back,
decoded.

Speech: ``POST /v1/audio/transcriptions`` takes the SDK's multipart upload (``file``, ``model``,
``language``, ``response_format`` …), refuses what OpenAI refuses (a file name without a supported
extension, bytes that are no audio container, over 25 MB, a bad language code) and answers the
next :meth:`FakeOpenAI.transcribe` reply: a :class:`Transcript`, an :class:`Error` or a
:class:`GatewayTimeout`. Every request lands in :attr:`FakeOpenAI.transcriptions`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import inspect
import json
import random
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http import HTTPStatus
from typing import Any, ClassVar

from aiohttp import BodyPartReader, web

from tests.fakes.loopback import LoopbackServer

# --- scripted replies --------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Text:
    """A plain answer, streamed ``chunk_size`` characters at a time."""

    text: str
    chunk_size: int = 8
    delay: float = 0.0
    reasoning: str | None = None
    usage: tuple[int, int] = (10, 5)


@dataclass(slots=True, frozen=True)
class Call:
    """One tool call; ``id`` defaults to ``call_<n>``."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(slots=True, frozen=True)
class ToolCalls:
    """Tool calls (arguments streamed in several fragments), optionally after text."""

    calls: list[tuple[str, dict[str, Any] | str]] | list[Call]
    text: str = ""
    delay: float = 0.0
    usage: tuple[int, int] = (10, 5)


@dataclass(slots=True, frozen=True)
class Error:
    """An HTTP error with an OpenAI-shaped body (429, 500, 400, 401, ...).

    With ``html`` the body is the HTML page nginx or a CDN sends instead (a 502 or 503 in front
    of the provider); the SDK still raises by status (``InternalServerError`` for 5xx), its
    ``body`` then being the page's text.
    """

    status: int
    message: str = "FakeOpenAI scripted error"
    retry_after: float | None = None
    html: bool = False


@dataclass(slots=True, frozen=True)
class GatewayTimeout:
    """Wait ``seconds`` with nothing sent, then answer ``status`` (504): a gateway giving up.

    The SDK raises ``InternalServerError`` (status 504), or ``APITimeoutError`` when its own
    timeout is shorter than ``seconds``.
    """

    seconds: float = 2.0
    status: int = 504
    html: bool = False


@dataclass(slots=True, frozen=True)
class Cut:
    """Stream ``text`` in ``chunk_size`` pieces but stop after ``after_chunks`` of them: no finish
    chunk, no usage, no ``[DONE]``.

    By default the connection is closed mid-body (the SDK's stream raises
    ``APIConnectionError``); with ``clean`` the HTTP response ends properly, so the SDK's stream
    just ends with no ``finish_reason`` ever seen: the client must notice. Non-streamed, the
    JSON body is cut off and the connection closed (``APIConnectionError``).
    """

    text: str = "a partial answer that never ends"
    after_chunks: int = 2
    chunk_size: int = 8
    clean: bool = False


@dataclass(slots=True, frozen=True)
class BadChunk:
    """Stream ``first_text``, then an SSE event whose data is ``raw`` (not JSON), then finish
    normally. The SDK's stream raises ``json.JSONDecodeError`` (not an ``openai`` error!).
    Non-streamed, the body is ``raw`` served as ``application/json``: the same error."""

    first_text: str = ""
    raw: str = '{"id": "chatcmpl-broken", "choices": [{"delta": {"content": "oo'


@dataclass(slots=True, frozen=True)
class StreamError:
    """Stream ``first_text``, then ``data: {"error": {...}}`` as OpenAI sends on a failure
    mid-stream, then close. The SDK's stream raises ``openai.APIError`` with ``message``.
    Non-streamed it is a JSON 500."""

    first_text: str = ""
    message: str = "The server had an error while processing your request. Sorry about that!"


@dataclass(slots=True, frozen=True)
class Hang:
    """Stream ``first_text`` then stall ``seconds`` (to prove /stop closes the stream)."""

    first_text: str = ""
    seconds: float = 60.0


@dataclass(slots=True, frozen=True)
class Drop:
    """Stream ``first_text`` then cut the connection (a stream failing mid-way)."""

    first_text: str = ""


@dataclass(slots=True, frozen=True)
class Transcript:
    """What ``/v1/audio/transcriptions`` heard."""

    text: str
    language: str = "english"  # verbose_json names the language in full, as Whisper does
    duration: float = 3.0


TranscriptionReply = Transcript | Error | GatewayTimeout


@dataclass(slots=True)
class TranscriptionRequest:
    """One request to ``/v1/audio/transcriptions``, as received (refused ones included)."""

    content: bytes
    filename: str | None
    content_type: str | None
    model: str | None
    language: str | None
    response_format: str | None
    prompt: str | None
    fields: dict[str, str]  # every form field but the file


@dataclass(slots=True, frozen=True)
class SeenImage:
    """An ``image_url`` part of a chat request, decoded."""

    message_index: int
    mime_type: str
    data: bytes
    detail: str | None


Reply = Text | ToolCalls | Error | Hang | Drop | GatewayTimeout | Cut | BadChunk | StreamError
FaultReply = Error | Hang | Drop | GatewayTimeout | Cut | BadChunk | StreamError
Handler = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]


class FaultKind(StrEnum):
    """What :meth:`FakeOpenAI.chaos` draws from (``kinds=("500", "cut")`` works too)."""

    SERVER_ERROR = "500"
    BAD_GATEWAY = "502"  # nginx's HTML page
    UNAVAILABLE = "503"
    HANG_504 = "hang504"
    CUT = "cut"  # connection closed mid-stream
    BAD_CHUNK = "bad_chunk"
    STREAM_ERROR = "stream_error"


@dataclass(slots=True)
class InjectedFault:
    """One fault forced by ``fail_next`` or drawn by ``chaos``, as answered."""

    source: str  # "fail_next" | "chaos"
    fault: FaultReply
    kind: FaultKind | None  # the chaos kind; None for fail_next
    model: str
    stream: bool
    time: float


@dataclass(slots=True)
class _Chaos:
    rate: float
    kinds: tuple[FaultKind, ...]
    rng: random.Random
    hang: float
    left: int


_STATUS_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ROLES = {"system", "developer", "user", "assistant", "tool"}
MB = 1024 * 1024
MAX_IMAGE_BYTES = 20 * MB
MAX_AUDIO_BYTES = 25 * MB
_PART_TYPES = ("text", "image_url", "input_audio", "refusal", "audio", "file")
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]*);base64,(?P<data>.*)$", re.DOTALL)
_EXAMPLE_DATA_URL = "'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='"
_AUDIO_FORMATS = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")
_RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


class BadRequest(Exception):
    """A request OpenAI would refuse with 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class TooLarge(Exception):
    """A request body OpenAI refuses with 413."""


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind, code = _STATUS_TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# --- validation ----------------------------------------------------------------


def validate_chat_request(body: Any) -> None:
    """Raise :class:`BadRequest` for anything OpenAI's API would reject."""
    if not isinstance(body, dict):
        raise BadRequest("We could not parse the JSON body of your request.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("you must provide a model parameter", "model")
    messages = body.get("messages")
    if messages is None:
        raise BadRequest("Missing required parameter: 'messages'.", "messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(
            "Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages"
        )
    for i, message in enumerate(messages):
        _validate_message(i, message)
    _validate_pairing(messages)
    if "tools" in body:
        _validate_tools(body["tools"])
    if body.get("stream_options") is not None and not body.get("stream"):
        raise BadRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options"
        )


def _validate_message(i: int, message: Any) -> None:
    where = f"messages[{i}]"
    if not isinstance(message, dict) or message.get("role") not in _ROLES:
        raise BadRequest(f"Invalid value for '{where}.role'.", f"{where}.role")
    role = message["role"]
    content = message.get("content")
    if role == "assistant":
        if content is None and not message.get("tool_calls"):
            raise BadRequest(
                f"Invalid value for '{where}.content': expected a string, got null.", f"{where}.content"
            )
        for j, call in enumerate(message.get("tool_calls") or []):
            _validate_call(f"{where}.tool_calls[{j}]", call)
    elif content is None:
        raise BadRequest(f"Missing required parameter: '{where}.content'.", f"{where}.content")
    if content is not None and not isinstance(content, str | list):
        raise BadRequest(f"Invalid type for '{where}.content'.", f"{where}.content")
    if isinstance(content, list):
        _validate_parts(where, role, content)
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise BadRequest(f"Missing required parameter: '{where}.tool_call_id'.", f"{where}.tool_call_id")


def _validate_parts(where: str, role: str, parts: list[Any]) -> None:
    if not parts:
        raise BadRequest(
            f"Invalid '{where}.content': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            f"{where}.content",
        )
    for j, part in enumerate(parts):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _PART_TYPES:
            raise BadRequest(
                f"Invalid value: '{kind}'. Supported values are: 'text', 'image_url', 'input_audio', "
                "'refusal', 'audio', and 'file'.",
                f"{at}.type",
            )
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise BadRequest(f"Missing required parameter: '{at}.text'.", f"{at}.text")
        elif kind == "image_url":
            if role != "user":
                raise BadRequest(
                    f"Invalid '{where}'. Image URLs are only allowed for messages with role 'user', "
                    f"but this message with role '{role}' contains an image URL.",
                    where,
                )
            decode_image_part(at, part.get("image_url"))
        else:
            raise BadRequest(f"FakeOpenAI: content parts of type '{kind}' are not modelled", f"{at}.type")


def decode_image_part(at: str, image_url: Any) -> tuple[str, bytes, str | None]:
    """``(mime, bytes, detail)`` of an ``image_url`` part, or the 400 OpenAI answers for it."""
    url = image_url.get("url") if isinstance(image_url, dict) else None
    if not isinstance(url, str):
        raise BadRequest(f"Missing required parameter: '{at}.image_url.url'.", f"{at}.image_url.url")
    detail = image_url.get("detail")
    if detail not in (None, "auto", "low", "high"):
        raise BadRequest(
            f"Invalid value: '{detail}'. Supported values are: 'auto', 'low', and 'high'.",
            f"{at}.image_url.detail",
        )
    match = _DATA_URL.match(url)
    if match is None:
        if url.startswith(("http://", "https://")):
            raise BadRequest("FakeOpenAI: image URLs are not fetched (no network in tests); send a data: URL")
        raise BadRequest(
            f"Invalid '{at}.image_url.url'. Expected a valid URL, but got a value with an invalid format.",
            f"{at}.image_url.url",
        )
    expected = f"Invalid '{at}.image_url.url'. Expected a base64-encoded data URL with an image MIME type (e.g. {_EXAMPLE_DATA_URL})"
    if match["mime"] not in _IMAGE_MIMES:
        raise BadRequest(
            f"{expected}, but got unsupported MIME type '{match['mime']}'.", f"{at}.image_url.url"
        )
    try:
        data = base64.b64decode(match["data"], validate=True)
    except binascii.Error:
        raise BadRequest(f"{expected}, but got an invalid base64 encoding.", f"{at}.image_url.url") from None
    if _image_format(data) is None or len(data) > MAX_IMAGE_BYTES:
        raise BadRequest(
            "You uploaded an unsupported image. Please make sure your image is below 20 MB in size and "
            "is of one the following formats: ['png', 'jpeg', 'gif', 'webp']."
        )
    return match["mime"], data, detail


def _image_format(data: bytes) -> str | None:
    """The format OpenAI would find in ``data`` (it decodes the image, whatever the MIME type says)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def _is_audio(data: bytes) -> bool:
    """Bytes in a container Whisper decodes: Ogg, MP3, WAV, FLAC, MP4/M4A, WebM."""
    mp3_frame = len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0
    return (
        data.startswith((b"OggS", b"ID3", b"fLaC", b"\x1a\x45\xdf\xa3"))
        or mp3_frame
        or (data[:4] == b"RIFF" and data[8:12] == b"WAVE")
        or data[4:8] == b"ftyp"
    )


def validate_transcription_request(req: TranscriptionRequest) -> None:
    """Raise :class:`BadRequest` (or :class:`TooLarge`) for what OpenAI's transcription API refuses."""
    if req.filename is None:
        raise BadRequest("Missing required parameter: 'file'.", "file")
    if not req.model:
        raise BadRequest("you must provide a model parameter", "model")
    if len(req.content) > MAX_AUDIO_BYTES:
        raise TooLarge(
            f"Maximum content size limit ({MAX_AUDIO_BYTES}) exceeded ({len(req.content)} bytes read)"
        )
    extension = req.filename.rsplit(".", 1)[-1].lower() if "." in req.filename else ""
    if extension not in _AUDIO_FORMATS:
        raise BadRequest(f"Invalid file format. Supported formats: {list(_AUDIO_FORMATS)}", "file")
    if not _is_audio(req.content):
        raise BadRequest("Audio file might be corrupted or unsupported", "file")
    if req.response_format is not None and req.response_format not in _RESPONSE_FORMATS:
        raise BadRequest(
            f"Invalid value: '{req.response_format}'. Supported values are: 'json', 'text', 'srt', "
            "'verbose_json', and 'vtt'.",
            "response_format",
        )
    if req.language is not None and not re.fullmatch(r"[a-z]{2}", req.language):
        raise BadRequest(
            f"Invalid language '{req.language}'. Language parameter must be specified in ISO-639-1 format.",
            "language",
        )


def _validate_call(where: str, call: Any) -> None:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        raise BadRequest(f"Missing required parameter: '{where}.id'.", f"{where}.id")
    if call.get("type") != "function":
        raise BadRequest(f"Missing required parameter: '{where}.type'.", f"{where}.type")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise BadRequest(f"Missing required parameter: '{where}.function.name'.", f"{where}.function")
    if not isinstance(function.get("arguments"), str):
        raise BadRequest(
            f"Invalid type for '{where}.function.arguments': expected a string.", f"{where}.function"
        )


def _validate_pairing(messages: list[dict[str, Any]]) -> None:
    """Every tool call answered once, before the next non-tool message."""
    pending: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            if call_id not in pending or call_id in answered:
                raise BadRequest(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    "messages.[].role",
                )
            answered.add(call_id)
            continue
        _check_all_answered(pending, answered)
        pending = {call["id"] for call in message.get("tool_calls") or []}
        answered = set()
    _check_all_answered(pending, answered)


def _check_all_answered(pending: set[str], answered: set[str]) -> None:
    missing = sorted(pending - answered)
    if missing:
        raise BadRequest(
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(missing),
            "messages",
        )


def _validate_tools(tools: Any) -> None:
    if not isinstance(tools, list) or not tools:
        raise BadRequest("Invalid 'tools': empty array. Expected an array with minimum length 1.", "tools")
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise BadRequest(f"Missing required parameter: 'tools[{i}].function'.", f"tools[{i}]")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise BadRequest(
                f"Invalid 'tools[{i}].function.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"tools[{i}].function.name",
            )
        if name in seen:
            raise BadRequest(f"Duplicate tool names are not allowed: '{name}'.", "tools")
        seen.add(name)
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise BadRequest(f"Invalid type for 'tools[{i}].function.parameters'.", f"tools[{i}]")


# --- the server ------------------------------------------------------------------


class FakeOpenAI(LoopbackServer):
    """An OpenAI-compatible endpoint on loopback, scripted by the test."""

    runner_options: ClassVar[Mapping[str, Any]] = {"handler_cancellation": True}

    def __init__(self, *, models: tuple[str, ...] = ("gpt-test",), api_key: str | None = None) -> None:
        self.models = models
        self.api_key = api_key  # when set, requests must carry ``Authorization: Bearer <key>``
        self.requests: list[dict[str, Any]] = []
        self.model_requests = 0
        self.closed_streams = 0
        self.handler: Handler | None = None
        self._queue: deque[Reply] = deque()
        self._by_model: dict[str, deque[Reply]] = {}
        self._changed = asyncio.Condition()
        self._call_counter = 0
        self.injected: list[InjectedFault] = []
        self._forced: deque[_Forced] = deque()
        self._chaos: _Chaos | None = None
        self._stopping = asyncio.Event()  # cuts a GatewayTimeout's wait short on stop
        self.transcriptions: list[TranscriptionRequest] = []  # every /audio/transcriptions request
        self.transcription_handler: Callable[[TranscriptionRequest], TranscriptionReply] | None = None
        self._transcripts: deque[TranscriptionReply] = deque()

    # lifecycle

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * MB)  # images and audio: OpenAI takes tens of MB
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcription)
        return app

    async def start(self) -> None:
        self._stopping.clear()
        await super().start()

    async def stop(self) -> None:
        self._stopping.set()
        await super().stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def calls(self) -> int:
        return len(self.requests)

    # scripting

    def script(self, *replies: Reply) -> None:
        """Queue replies consumed in order by requests naming any model."""
        self._queue.extend(replies)

    def transcribe(self, *replies: TranscriptionReply | str) -> None:
        """Queue what the next transcription requests get (a ``str`` is a :class:`Transcript`);
        with none queued, :attr:`transcription_handler` answers, else a 500."""
        self._transcripts.extend(Transcript(r) if isinstance(r, str) else r for r in replies)

    def images(self, index: int = -1) -> list[bytes]:
        """The decoded bytes of every image in chat request ``index``, in message order."""
        return [seen.data for seen in self.seen_images(index)]

    def seen_images(self, index: int = -1) -> list[SeenImage]:
        body = self.requests[index]
        seen = []
        for i, message in enumerate(body.get("messages") or []):
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    mime, data, detail = decode_image_part(f"messages[{i}]", part.get("image_url"))
                    seen.append(SeenImage(i, mime, data, detail))
        return seen

    def on_model(self, model: str, *replies: Reply) -> None:
        """Queue replies only for requests naming ``model`` (tried before :meth:`script`'s)."""
        self._by_model.setdefault(model, deque()).extend(replies)

    def fail_next(self, fault: FaultReply, *, times: int = 1, model: str | None = None) -> None:
        """The next ``times`` chat requests (naming ``model``, or any) get ``fault``, before and
        without consuming the script or asking :attr:`handler`: the provider failed, the reply
        the test scripted is still what the retry gets."""
        self._forced.append(_Forced(fault, times, model))

    def chaos(
        self,
        rate: float = 0.3,
        *,
        kinds: Sequence[str] = tuple(FaultKind),
        seed: int = 0,
        hang: float = 2.0,
        max_faults: int = 10,
    ) -> None:
        """Random faults: each chat request fails with probability ``rate``, the fault drawn from
        ``kinds`` (``hang`` is the wait of ``hang504``), like :meth:`fail_next` (before and
        without consuming the script). ``random.Random(seed)`` draws: the same requests in the
        same order get the same faults. After ``max_faults`` faults chaos stops, so a retrying
        client gets through. ``fail_next`` faults come first; calling again replaces it."""
        chosen = tuple(FaultKind(kind) for kind in kinds)
        if not 0.0 <= rate <= 1.0 or not chosen or max_faults < 0:
            raise ValueError("chaos needs 0 <= rate <= 1, at least one kind and max_faults >= 0")
        self._chaos = _Chaos(rate, chosen, random.Random(seed), hang, max_faults)

    def chaos_off(self) -> None:
        self._chaos = None

    def assert_complete(self) -> None:
        left = list(self._queue) + [r for q in self._by_model.values() for r in q]
        assert not left, f"FakeOpenAI: {len(left)} scripted replies never requested: {left!r}"

    # ``timeout`` parameters are the fake's agreed test API, hence the ASYNC109 waivers.
    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> None:
        await self._wait(lambda: len(self.requests) >= n, timeout, f"{n} requests")

    async def wait_for_transcriptions(self, n: int, timeout: float = 5.0) -> None:
        await self._wait(lambda: len(self.transcriptions) >= n, timeout, f"{n} transcription requests")

    async def wait_stream_closed(self, timeout: float = 5.0, count: int = 1) -> None:
        await self._wait(lambda: self.closed_streams >= count, timeout, f"{count} closed streams")

    async def _wait(self, predicate: Callable[[], bool], limit: float, what: str) -> None:
        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        try:
            await asyncio.wait_for(until(), limit)
        except TimeoutError:
            raise AssertionError(f"FakeOpenAI: timed out after {limit}s waiting for {what}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # handlers

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        if self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return web.json_response(error_body(401, "Incorrect API key provided."), status=401)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.model_requests += 1
        if denied := self._unauthorized(request):
            return denied
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        self.requests.append(body if isinstance(body, dict) else {"_invalid": True})
        await self._notify()
        if denied := self._unauthorized(request):
            return denied
        try:
            validate_chat_request(body)
        except BadRequest as exc:
            return web.json_response(error_body(400, exc.message, exc.param), status=400)
        reply = self._take_fault(body) or await self._next_reply(body)
        if reply is None:
            return web.json_response(error_body(500, "FakeOpenAI: no scripted reply"), status=500)
        if isinstance(reply, Error):
            return _error_response(reply)
        if isinstance(reply, GatewayTimeout):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), reply.seconds)
            return _error_response(Error(reply.status, HTTPStatus(reply.status).phrase, html=reply.html))
        if body.get("stream"):
            return await self._stream(request, body, reply)
        if isinstance(reply, Hang | Drop):
            return web.json_response(error_body(500, "FakeOpenAI: Hang/Drop need stream=true"), status=500)
        if isinstance(reply, Cut):
            return await self._cut_body(request, body, reply)
        if isinstance(reply, BadChunk):
            return web.Response(text=reply.raw, content_type="application/json")
        if isinstance(reply, StreamError):
            return web.json_response(error_body(500, reply.message), status=500)
        return web.json_response(self._completion(body, reply))

    async def _transcription(self, request: web.Request) -> web.StreamResponse:
        if not request.content_type.startswith("multipart/form-data"):
            return web.json_response(
                error_body(
                    400,
                    f"Invalid Content-Type header ({request.content_type}), expected multipart/form-data.",
                ),
                status=400,
            )
        received = await _read_transcription(request)
        self.transcriptions.append(received)
        await self._notify()
        if denied := self._unauthorized(request):
            return denied
        try:
            validate_transcription_request(received)
        except BadRequest as exc:
            return web.json_response(error_body(400, exc.message, exc.param), status=400)
        except TooLarge as exc:
            return web.json_response(error_body(413, str(exc)), status=413)
        reply = self._next_transcript(received)
        if reply is None:
            return web.json_response(error_body(500, "FakeOpenAI: no scripted transcript"), status=500)
        if isinstance(reply, Error):
            return _error_response(reply)
        if isinstance(reply, GatewayTimeout):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), reply.seconds)
            return _error_response(Error(reply.status, HTTPStatus(reply.status).phrase, html=reply.html))
        return _transcript_response(reply, received.response_format or "json")

    def _next_transcript(self, received: TranscriptionRequest) -> TranscriptionReply | None:
        if self._transcripts:
            return self._transcripts.popleft()
        if self.transcription_handler is not None:
            return self.transcription_handler(received)
        return None

    def _take_fault(self, body: dict[str, Any]) -> FaultReply | None:
        """A forced fault for this request, else chaos's draw; recorded in :attr:`injected`."""
        kind: FaultKind | None = None
        fault: FaultReply | None = None
        for forced in self._forced:
            if forced.model is None or forced.model == body["model"]:
                fault = forced.fault
                forced.times -= 1
                if forced.times <= 0:
                    self._forced.remove(forced)
                break
        chaos = self._chaos
        if fault is None and chaos is not None and chaos.left > 0 and chaos.rng.random() < chaos.rate:
            kind = chaos.rng.choice(chaos.kinds)
            fault = _chaos_fault(kind, chaos.hang)
            chaos.left -= 1
        if fault is not None:
            source = "fail_next" if kind is None else "chaos"
            stream = bool(body.get("stream"))
            self.injected.append(InjectedFault(source, fault, kind, body["model"], stream, time.time()))
        return fault

    async def _cut_body(self, request: web.Request, body: dict[str, Any], reply: Cut) -> web.StreamResponse:
        """Half of a completion's JSON, announced in full, then the connection closed."""
        full = json.dumps(self._completion(body, Text(reply.text))).encode()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(full)
        await response.prepare(request)
        await response.write(full[: len(full) // 2])
        if request.transport is not None:
            request.transport.close()
        return response

    async def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        queue = self._by_model.get(body["model"])
        if queue:
            return queue.popleft()
        if self._queue:
            return self._queue.popleft()
        if self.handler is not None:
            result = self.handler(body)
            return await result if inspect.isawaitable(result) else result
        return None

    def _call_id(self) -> str:
        self._call_counter += 1
        return f"call_{self._call_counter}"

    def _calls(self, reply: ToolCalls) -> list[tuple[str, str, str]]:
        """``(id, name, arguments-json)`` for every call of the reply."""
        out = []
        for item in reply.calls:
            call = item if isinstance(item, Call) else Call(item[0], item[1])
            args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            out.append((call.id or self._call_id(), call.name, args))
        return out

    # non-streamed

    def _completion(self, body: dict[str, Any], reply: Text | ToolCalls) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        finish = "stop"
        if isinstance(reply, ToolCalls):
            finish = "tool_calls"
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in self._calls(reply)
            ]
        elif reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        return {
            "id": f"chatcmpl-fake{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": _usage(reply.usage),
        }

    # streamed

    async def _stream(self, request: web.Request, body: dict[str, Any], reply: Reply) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)  # a client gone since it was heard refuses the headers
            await self._play(_ChunkWriter(request, response, body), reply)
        except ConnectionResetError:
            await self._client_closed()  # noticed while writing or stalling
        except asyncio.CancelledError:
            await self._client_closed()  # aiohttp cancels the handler on disconnect
            raise
        return response

    async def _client_closed(self) -> None:
        self.closed_streams += 1
        await self._notify()

    async def _play(self, out: _ChunkWriter, reply: Reply) -> None:
        await out.delta({"role": "assistant", "content": ""})
        if isinstance(reply, Text):
            for piece in _pieces(reply.reasoning or "", reply.chunk_size):
                await out.delta({"reasoning_content": piece}, reply.delay)
            for piece in _pieces(reply.text, reply.chunk_size):
                await out.delta({"content": piece}, reply.delay)
            await out.finish("stop", reply.usage)
        elif isinstance(reply, ToolCalls):
            if reply.text:
                await out.delta({"content": reply.text}, reply.delay)
            for index, (call_id, name, args) in enumerate(self._calls(reply)):
                head = {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                await out.delta({"tool_calls": [head]}, reply.delay)
                for piece in _pieces(args, max(1, len(args) // 3 + 1)):
                    await out.delta(
                        {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, reply.delay
                    )
            await out.finish("tool_calls", reply.usage)
        elif isinstance(reply, Hang):
            if reply.first_text:
                await out.delta({"content": reply.first_text})
            await out.stall(reply.seconds)
            await out.finish("stop", (10, 5))
        elif isinstance(reply, Drop):
            if reply.first_text:
                await out.delta({"content": reply.first_text})
            out.drop()
        elif isinstance(reply, Cut):
            for piece in _pieces(reply.text, reply.chunk_size)[: reply.after_chunks]:
                await out.delta({"content": piece})
            if not reply.clean:
                out.drop()
        elif isinstance(reply, BadChunk):
            if reply.first_text:
                await out.delta({"content": reply.first_text})
            await out.raw(reply.raw)
            await out.finish("stop", (10, 5))
        elif isinstance(reply, StreamError):
            if reply.first_text:
                await out.delta({"content": reply.first_text})
            await out.raw(json.dumps(error_body(500, reply.message)))


class _ChunkWriter:
    """Writes ``chat.completion.chunk`` SSE events for one streamed request."""

    def __init__(self, request: web.Request, response: web.StreamResponse, body: dict[str, Any]) -> None:
        self.request = request
        self.response = response
        self.model = body["model"]
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.id = f"chatcmpl-fake{id(self):x}"
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    async def _send(self, data: str) -> None:
        if self._gone():
            raise ConnectionResetError("client closed the stream")
        await self.response.write(f"data: {data}\n\n".encode())

    def _gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()

    async def raw(self, data: str) -> None:
        """One SSE event carrying ``data`` as it is."""
        await self._send(data)

    async def delta(self, delta: dict[str, Any], delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        await self._send(json.dumps(self._chunk([choice])))

    async def finish(self, reason: str, usage: tuple[int, int]) -> None:
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}
        await self._send(json.dumps(self._chunk([choice])))
        if self.include_usage:
            final = self._chunk([])
            final["usage"] = _usage(usage)
            await self._send(json.dumps(final))
        await self._send("[DONE]")

    async def stall(self, seconds: float) -> None:
        """Sleep, noticing promptly when the client closes the connection."""
        deadline = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < deadline:
            if self._gone():
                raise ConnectionResetError("client closed the stream")
            await asyncio.sleep(0.01)

    def drop(self) -> None:
        if self.request.transport is not None:
            self.request.transport.close()


async def _read_transcription(request: web.Request) -> TranscriptionRequest:
    fields: dict[str, str] = {}
    content, filename, content_type = b"", None, None
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader) or part.name is None:
            continue
        if part.name == "file":
            content, filename = bytes(await part.read()), part.filename or ""
            content_type = part.headers.get("Content-Type")
        else:
            fields[part.name] = await part.text()
    return TranscriptionRequest(
        content, filename, content_type, fields.get("model"), fields.get("language"),
        fields.get("response_format"), fields.get("prompt"), fields,
    )  # fmt: skip


def _transcript_response(reply: Transcript, response_format: str) -> web.Response:
    usage = {"type": "duration", "seconds": max(1, round(reply.duration))}
    if response_format == "json":
        return web.json_response({"text": reply.text, "usage": usage})
    if response_format == "verbose_json":
        segment = {
            "id": 0, "seek": 0, "start": 0.0, "end": reply.duration, "text": reply.text, "tokens": [],
            "temperature": 0.0, "avg_logprob": -0.2, "compression_ratio": 1.0, "no_speech_prob": 0.01,
        }  # fmt: skip
        return web.json_response({
            "task": "transcribe", "language": reply.language, "duration": reply.duration,
            "text": reply.text, "segments": [segment] if reply.text else [], "usage": usage,
        })  # fmt: skip
    end = f"00:00:{min(59, round(reply.duration)):02d}"
    if response_format == "srt":
        return web.Response(
            text=f"1\n00:00:00,000 --> {end},000\n{reply.text}\n\n", content_type="text/plain"
        )
    if response_format == "vtt":
        body = f"WEBVTT\n\n00:00:00.000 --> {end}.000\n{reply.text}\n\n"
        return web.Response(text=body, content_type="text/vtt")
    return web.Response(text=f"{reply.text}\n", content_type="text/plain")


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(usage: tuple[int, int]) -> dict[str, int]:
    prompt, completion = usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _error_response(reply: Error) -> web.Response:
    headers = {}
    if reply.retry_after is not None:
        headers["retry-after-ms"] = str(int(reply.retry_after * 1000))
        headers["retry-after"] = str(max(0, round(reply.retry_after)))
    if reply.html:
        title = f"{reply.status} {HTTPStatus(reply.status).phrase}"
        page = f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        return web.Response(status=reply.status, text=page, content_type="text/html", headers=headers)
    return web.json_response(error_body(reply.status, reply.message), status=reply.status, headers=headers)


@dataclass(slots=True)
class _Forced:
    fault: FaultReply
    times: int
    model: str | None


def _chaos_fault(kind: FaultKind, hang: float) -> FaultReply:
    faults: dict[FaultKind, FaultReply] = {
        FaultKind.SERVER_ERROR: Error(
            500, "The server had an error while processing your request. Sorry about that!"
        ),
        FaultKind.BAD_GATEWAY: Error(502, "Bad Gateway", html=True),
        FaultKind.UNAVAILABLE: Error(503, "The engine is currently overloaded, please try again later."),
        FaultKind.HANG_504: GatewayTimeout(hang),
        FaultKind.CUT: Cut(),
        FaultKind.BAD_CHUNK: BadChunk(),
        FaultKind.STREAM_ERROR: StreamError(),
    }
    return faults[kind]
