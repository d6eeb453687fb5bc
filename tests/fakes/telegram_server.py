"""A strict fake Telegram Bot API server, spoken to over real HTTP on 127.0.0.1.

Owns "what would Telegram answer?" for tests: the real python-telegram-bot (or any client) points
its base URL at ``f"{tg.root}/bot"`` and gets Telegram's responses, errors included, byte for byte
where we know them. Tests inject user activity (``send_text``, ``press_button`` …) as updates
queued for ``getUpdates`` and observe what the bot did (``messages``, ``callback_answers`` …).

Strictness is the point: every check here is one that real Telegram makes (HTML validity, 4096
UTF-16 units after entity parsing, 64-byte callback data, "message is not modified", unanswered
or reused callback queries, unknown chats, getUpdates offsets and the one-poller rule), so a bug
that would break in production breaks the test first. Where the real server is lenient but the
documentation says "must" (a bare ``&`` in HTML), we follow the documentation; see
``telegram_html``.

It also fails the way Telegram and the gateways in front of it fail, on demand (``fail_next``:
any error, a hang before a 504, an HTML body instead of JSON, a failure answered *after* the call
took effect) or at random, seeded and bounded (``chaos``); every such fault is kept in
``injected``. ``revoke_token`` makes every call 401. ``send_raw_update`` and the builders after it
queue updates a client may not be able to parse (a newer API's types, broken objects).

Webhooks as Telegram's server delivers them (tdlib/telegram-bot-api's ``WebhookActor``): after
``setWebhook`` every queued update is POSTed to the URL with the ``X-Telegram-Bot-Api-Secret-Token``
header, one queue per chat — a chat's next update only after the previous one got a 2xx, different
chats side by side up to ``max_connections`` — and a non-2xx answer (or no answer) is retried with
backoff (``webhook_first_retry`` doubling up to ``webhook_max_retry``, ``Retry-After`` honoured).
Every attempt is kept in ``webhook_deliveries``; the last failure is ``getWebhookInfo``'s
``last_error_message``. While a webhook is set, ``getUpdates`` answers 409.

Files as Telegram keeps them: a user's photo (in sizes, each its own file), voice note, audio,
video note, video, animation, document or sticker (``send_photo``, ``send_voice`` …, album items
sharing a ``media_group_id``), or any bytes (``add_file``); ``getFile`` refuses what is over the
20 MB download limit ("file is too big", going by the size Telegram claims, so a test needs no
real 25 MB), the file route ``/file/bot<token>/<file_path>`` serves the bytes, records each request
in ``downloads`` and hangs on demand (``hold_downloads``); uploads (``sendPhoto`` up to 10 MB,
``sendDocument`` up to 50 MB) keep the bytes, name and caption for ``files_sent``.

Groups and forum topics as the Bot API shows them: ``add_group`` makes a basic group or a
supergroup (a forum with ``forum=True``); ``send_text`` writes there as any member, addressed to
the bot by a ``mention`` (``@username``, or a ``text_mention`` carrying the bot's user) or by a
command ``/cmd@username``, or as a reply to the bot's message (whose ``from`` is the bot). Topics
(``add_topic``, ``createForumTopic``) are the thread of their creation service message, whose id
is the ``message_thread_id``; every message in a topic that replies to nothing else carries that
service message as ``reply_to_message`` (so in a topic the bot created, every message looks like a
reply to the bot). Sends honour ``message_thread_id`` and refuse a topic that is not there
("message thread not found", also for the General topic's id 1 except in ``sendChatAction``) or
closed ("TOPIC_CLOSED"); a reply without one lands in the topic of the message it replies to.
Drafts are private-only, ``flood_per_group`` plays the 20-a-minute group limit, and
``setMyCommands`` keeps each call's ``scope`` (``commands_for``).

Usage::

    async with FakeTelegram() as tg:
        bot = telegram.Bot(tg.token, base_url=f"{tg.root}/bot")
        tg.send_text(42, "/start")
        ...
        await tg.wait_for(lambda: tg.last_message(42) is not None)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http import HTTPStatus
from typing import Any, ClassVar

import aiohttp
from aiohttp import BodyPartReader, web
from aiohttp.web_request import FileField

from tests.fakes.loopback import LoopbackServer
from tests.fakes.telegram_html import HTMLEntity, TelegramHTMLError, parse_html_entities

__all__ = [
    "CallbackAnswer",
    "ChatActionCall",
    "CommandsCall",
    "Download",
    "DraftCall",
    "FakeTelegram",
    "Fault",
    "InjectedFault",
    "RecordedRequest",
    "SentMessage",
    "Topic",
    "UploadedFile",
    "WebhookDelivery",
]

MAX_TEXT = 4096
MAX_CAPTION = 1024
MB = 1024 * 1024
MAX_DOWNLOAD = 20 * MB  # getFile refuses bigger files ("file is too big")
MAX_PHOTO_UPLOAD = 10 * MB  # sendPhoto, multipart
MAX_UPLOAD = 50 * MB  # every other multipart upload
MAX_CALLBACK_ANSWER = 200
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
CHAT_ACTIONS = frozenset(
    {
        "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
        "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
    }
)  # fmt: skip
DEFAULT_ALLOWED_UPDATES = frozenset(
    {
        "message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
        "business_message", "edited_business_message", "deleted_business_messages", "inline_query",
        "chosen_inline_result", "callback_query", "shipping_query", "pre_checkout_query",
        "purchased_paid_media", "poll", "poll_answer", "my_chat_member", "chat_join_request",
        "chat_boost", "removed_chat_boost",
    }
)  # fmt: skip
KNOWN_UPDATE_TYPES = DEFAULT_ALLOWED_UPDATES | {"chat_member", "message_reaction", "message_reaction_count"}
_SUFFIXES = {"voice": ".oga", "video_notes": ".mp4", "photos": ".jpg", "stickers": ".webp"}
"""The extension Telegram's ``file_path`` has for files that come without a name."""
GROUP_TYPES = frozenset({"group", "supergroup"})
GENERAL_TOPIC = 1  # the General topic's thread id; sends must leave message_thread_id out for it
TOPIC_COLOR = 7322096  # createForumTopic's default icon_color (0x6FB9F0)
COMMAND_SCOPES = frozenset(
    {
        "default", "all_private_chats", "all_group_chats", "all_chat_administrators", "chat",
        "chat_administrators", "chat_member",
    }
)  # fmt: skip
_TOKEN_SHAPE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")
_BOT_COMMAND = re.compile(r"^/[A-Za-z0-9_]{1,32}(@[A-Za-z0-9_]+)?")
_FLOOD_METHODS = frozenset(
    {
        "sendmessage",
        "editmessagetext",
        "editmessagereplymarkup",
        "senddocument",
        "sendphoto",
        "editmessagecaption",
    }
)


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------
class Fault(StrEnum):
    """Kinds of trouble :meth:`FakeTelegram.chaos` injects; the comment says what PTB 22.8 raises.

    All but ``APPLIED_504`` answer before the call has any effect.
    """

    TOO_MANY_REQUESTS = "429"  # JSON 429 with parameters.retry_after -> RetryAfter
    SERVER_ERROR = "500"  # JSON 500 "Internal Server Error" -> NetworkError
    BAD_GATEWAY = "502"  # JSON 502 "Bad Gateway" -> NetworkError
    BAD_GATEWAY_HTML = "502html"  # nginx's HTML 502 page -> NetworkError("Bad Gateway (502). Parsing ...")
    HANG_504 = "hang504"  # wait ``hang`` s, then JSON 504 "Gateway Timeout" -> NetworkError (or TimedOut)
    APPLIED_504 = "applied504"  # the call takes effect, then as HANG_504: the client cannot tell
    INVALID_JSON = "badjson"  # HTTP 200 with an HTML page -> TelegramError("Invalid server response")


@dataclass(slots=True)
class InjectedFault:
    """One injected failure as the client received it (from ``fail_next`` or ``chaos``)."""

    method: str  # lower-cased
    source: str  # "fail_next" | "chaos"
    status: int
    applied: bool  # the call took effect before the failure was answered
    hang: float
    invalid_json: bool
    kind: Fault | None  # the chaos kind; None for fail_next
    time: float


# --------------------------------------------------------------------------------------------------
# Observable records
# --------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class UploadedFile:
    """A file part of a multipart request."""

    filename: str
    content_type: str
    content: bytes


@dataclass(slots=True)
class SentMessage:
    """A message the bot sent, in its current state. ``text`` is the raw text (or caption) as sent,
    markup included; ``visible_text`` is what the user sees."""

    message_id: int
    chat_id: int
    text: str | None
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    date: int
    kind: str = "text"  # "text" | "document" | "photo"
    visible_text: str = ""
    entities: list[dict[str, Any]] = field(default_factory=list)
    edits: list[str | None] = field(default_factory=list)  # previous raw texts, oldest first
    markup_edits: list[dict[str, Any] | None] = field(default_factory=list)  # previous markups
    edit_date: int | None = None
    deleted: bool = False
    disable_notification: bool = False
    reply_to_message_id: int | None = None
    document_filename: str | None = None
    document_content: bytes | None = None
    document_mime_type: str | None = None
    file_id: str | None = None
    thread_id: int | None = None  # the forum topic it was sent to; None: not in a topic (General)

    @property
    def caption(self) -> str | None:
        return self.text if self.kind != "text" else None

    @property
    def buttons(self) -> list[list[tuple[str, str | None]]]:
        """Inline keyboard as rows of (label, callback_data); url buttons have data None."""
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [[(b.get("text", ""), b.get("callback_data")) for b in row] for row in rows]

    def button_data(self, label: str) -> str:
        """callback_data of the button labelled ``label`` (exact match, then substring)."""
        flat = [b for row in self.buttons for b in row]
        for text, data in flat:
            if text == label and data is not None:
                return data
        for text, data in flat:
            if label in text and data is not None:
                return data
        raise AssertionError(f"no button {label!r} on message {self.message_id}: {flat}")


@dataclass(slots=True)
class CallbackAnswer:
    callback_query_id: str
    text: str | None
    show_alert: bool
    url: str | None = None
    time: float = 0.0


@dataclass(slots=True)
class RecordedRequest:
    method: str  # as the client spelled it
    params: dict[str, Any]
    time: float
    status: int = 0  # HTTP status answered (0 while in flight)
    description: str | None = None  # error description when not ok


@dataclass(slots=True, frozen=True)
class WebhookDelivery:
    """One POST of an update to the webhook: its answer's status (0: no answer) and when."""

    update_id: int
    status: int
    time: float


_SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


@dataclass(slots=True)
class ChatActionCall:
    chat_id: int
    action: str
    time: float
    thread_id: int | None = None

    def __iter__(self):  # allows `chat_id, action, t = call`
        return iter((self.chat_id, self.action, self.time))


@dataclass(slots=True)
class DraftCall:
    """A draft the chat showed (refused and failed calls are in ``requests`` only)."""

    chat_id: int
    draft_id: int
    text: str
    parse_mode: str | None
    time: float  # time.time() when it was shown
    visible_text: str = ""


@dataclass(slots=True)
class CommandsCall:
    commands: list[tuple[str, str]]  # (command, description)
    scope: dict[str, Any]
    language_code: str


@dataclass(slots=True)
class Topic:
    """A forum topic: the thread of its creation service message ``thread_id``."""

    chat_id: int
    thread_id: int
    name: str
    icon_color: int
    creator_id: int  # the bot's id when created with createForumTopic
    closed: bool = False
    deleted: bool = False


@dataclass(slots=True)
class _Failure:
    status: int
    description: str
    retry_after: int | None
    times: int
    when: Callable[[dict[str, Any]], bool] | None = None
    hang: float = 0.0
    applied: bool = False
    invalid_json: bool = False
    kind: Fault | None = None


@dataclass(slots=True)
class _Armed:
    """A failure picked for one call. ``commit`` consumes it when it is answered, and says False
    when a concurrent call used it up meanwhile (an applied failure waits for its call's effect)."""

    failure: _Failure
    source: str
    commit: Callable[[], bool]


@dataclass(slots=True)
class _Chaos:
    rates: dict[str, float]  # lower-cased method -> probability per call
    kinds: tuple[Fault, ...]
    rng: random.Random
    hang: float
    retry_after: int
    left: int  # faults still allowed


@dataclass(slots=True)
class _StoredFile:
    file_id: str
    file_unique_id: str
    path: str
    content: bytes
    name: str | None
    mime_type: str | None
    declared_size: int | None = None  # what Telegram says the file weighs, when not len(content)

    @property
    def size(self) -> int:
        return len(self.content) if self.declared_size is None else self.declared_size


@dataclass(slots=True)
class Download:
    """One request on the file route, as the client made it."""

    path: str
    file_id: str | None  # None: no such file (answered 404)
    time: float


@dataclass(slots=True)
class _PendingCallback:
    user_id: int
    chat_id: int
    message_id: int
    data: str
    created: float


class ApiError(Exception):
    """An error answer; raised inside method handlers and turned into Telegram's JSON."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error_code": self.status, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


def _bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


# --------------------------------------------------------------------------------------------------
# Parameter parsing: Telegram accepts query strings, urlencoded and multipart forms and JSON bodies.
# Form values arrive as strings (python-telegram-bot JSON-encodes non-string values).
# --------------------------------------------------------------------------------------------------
async def _read_params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if not request.body_exists:
        return params
    ctype = request.content_type
    if ctype == "application/json":
        body = await request.json()
        if not isinstance(body, dict):
            raise _bad("parameters must be a JSON object")
        params.update(body)
    elif ctype.startswith("multipart/"):
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or part.name is None:
                continue
            if part.filename is not None:
                content = bytes(await part.read())
                mime = part.headers.get("Content-Type", "application/octet-stream")
                params[part.name] = UploadedFile(part.filename, mime, content)
            else:
                params[part.name] = await part.text()
    else:
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, FileField):
                params[key] = UploadedFile(value.filename, value.content_type, value.file.read())
            else:
                params[key] = value if isinstance(value, str) else bytes(value).decode()
    return params


def _int(params: dict[str, Any], name: str, *, required: bool = True, empty: str | None = None) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise _bad(empty or f"{name} is empty")
        return None
    if isinstance(value, bool):
        raise _bad(f"invalid {name} specified")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(f"invalid {name} specified") from None


def _str(params: dict[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, UploadedFile):
        return value.content.decode()
    return str(value)


def _bool(params: dict[str, Any], name: str) -> bool:
    value = params.get(name)
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1")) or value == 1


def _json(params: dict[str, Any], name: str, error: str) -> Any:
    value = params.get(name)
    if isinstance(value, str):
        if value == "":
            return None
        try:
            return json.loads(value)
        except ValueError:
            raise _bad(error) from None
    return value


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------
class FakeTelegram(LoopbackServer):
    """Fake Bot API server; see the module docstring. All state is plain attributes for assertions."""

    runner_options: ClassVar[Mapping[str, Any]] = {"shutdown_timeout": 0.5}

    def __init__(
        self,
        token: str = "123456:TEST-token",
        bot_id: int = 123456,
        username: str = "agentgram_test_bot",
        *,
        first_name: str = "Agentgram Test",
        first_update_id: int = 700_000_001,
        max_long_poll: float = 50.0,
        strict_html: bool = True,
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.username = username
        self.first_name = first_name
        self.max_long_poll = max_long_poll
        self.strict_html = strict_html
        self.root = ""
        # observable state
        self.requests: list[RecordedRequest] = []
        self.callback_answers: list[CallbackAnswer] = []
        self.chat_actions: list[ChatActionCall] = []
        self.reactions: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self.commands: list[CommandsCall] = []
        self.drafts: list[DraftCall] = []
        self.drafts_supported = True  # False: an older Bot API server (before 9.3) without sendMessageDraft
        self._draftless: set[int] = set()  # chats that refuse drafts with a 400 (refuse_drafts)
        self.confirmed_offset = 0
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.webhook_max_connections = 40
        self.webhook_deliveries: list[WebhookDelivery] = []  # every POST to the webhook, in order
        self.delivered_updates: dict[int, dict[str, Any]] = {}  # what a 2xx confirmed, by update_id
        self.webhook_first_retry = 0.05  # Telegram's is 1 s; tests wait less
        self.webhook_max_retry = 1.0  # Telegram's cap is 60-120 s
        self.webhook_timeout = 30.0  # a POST unanswered this long is a failure (and re-sent)
        self.webhook_last_error: tuple[int, str] | None = None  # (unix time, message)
        self._webhook_task: asyncio.Task[None] | None = None
        self.closed = False
        self.logged_out = False
        self.callback_query_ttl: float | None = None  # seconds; None = queries never expire
        self.injected: list[InjectedFault] = []  # every failure fail_next or chaos answered, in order
        self.downloads: list[Download] = []  # every request on the file route, in order
        self.max_download_bytes = MAX_DOWNLOAD  # raise it to play a local Bot API server
        # internal state
        self._next_update_id = first_update_id
        self._updates: list[dict[str, Any]] = []
        self._allowed_updates: frozenset[str] = DEFAULT_ALLOWED_UPDATES
        self._allowed_explicit = False  # the client named its allowed_updates (not [] or never)
        self._forced: set[int] = set()  # update_ids delivered whatever allowed_updates says
        self._poll_generation = 0
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._blocked: set[int] = set()
        self._next_message_id: dict[int, int] = {}
        self._sent: dict[int, list[SentMessage]] = {}
        self._by_id: dict[tuple[int, int], SentMessage] = {}
        self._user_messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._callbacks: dict[str, _PendingCallback] = {}
        self._next_callback = 1
        self._failures: dict[str, deque[_Failure]] = {}
        self._chaos: _Chaos | None = None
        self._revoked = False
        self._flood_per_chat: float | None = None
        self._flood_hits: dict[int, deque[float]] = {}
        self._flood_per_group: int | None = None
        self._group_hits: dict[int, deque[float]] = {}
        self.topics: dict[tuple[int, int], Topic] = {}  # (chat_id, thread_id); deleted ones stay
        self._files: dict[str, _StoredFile] = {}
        self._downloads_held = False
        self._changed_event = asyncio.Event()
        self._stopping = False
        self._methods: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            name[len("_m_") :].lower(): getattr(self, name) for name in dir(self) if name.startswith("_m_")
        }

    # ---------------------------------------------------------------------------- lifecycle
    def application(self) -> web.Application:
        app = web.Application(client_max_size=60 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        return app

    async def start(self) -> None:
        await super().start()
        self.root = f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        self._stopping = True  # long polls in flight return at once
        self._changed()
        await self._stop_webhook()
        await super().stop()

    @property
    def base_url(self) -> str:
        """What to give PTB's ``base_url`` (it appends the token)."""
        return f"{self.root}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.root}/file/bot"

    @property
    def bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": self.first_name, "username": self.username}

    # ---------------------------------------------------------------------------- test controls
    def add_chat(
        self,
        chat_id: int,
        *,
        chat_type: str = "private",
        title: str | None = None,
        first_name: str = "Ann",
        language_code: str = "en",
    ) -> None:
        """Make a chat known (as if it had written to the bot)."""
        if chat_type == "private":
            self._chats.setdefault(chat_id, {"id": chat_id, "type": "private", "first_name": first_name})
            self._users.setdefault(
                chat_id,
                {"id": chat_id, "is_bot": False, "first_name": first_name, "language_code": language_code},
            )
        else:
            self._chats.setdefault(
                chat_id, {"id": chat_id, "type": chat_type, "title": title or f"Group {chat_id}"}
            )
        self._next_message_id.setdefault(chat_id, 1)

    def add_group(self, chat_id: int, *, title: str, supergroup: bool = True, forum: bool = False) -> None:
        """Make a group the bot is a member of known: a supergroup (ids like ``-100xxxxxxxxxx``), a
        basic group (``supergroup=False``, small negative ids) or a forum supergroup."""
        if chat_id >= 0 or (supergroup and chat_id > -1_000_000_000_000):
            raise ValueError(f"{chat_id} is not a {'supergroup' if supergroup else 'group'} id")
        if forum and not supergroup:
            raise ValueError("only supergroups can be forums")
        known = self._chats.get(chat_id)
        if known is not None and known["type"] not in GROUP_TYPES:
            raise ValueError(f"chat {chat_id} is already a {known['type']} chat")
        chat: dict[str, Any] = {
            "id": chat_id,
            "type": "supergroup" if supergroup else "group",
            "title": title,
        }
        self._next_message_id.setdefault(chat_id, 1)
        if forum:
            chat["is_forum"] = True
            # id 1 is the General topic's: no message, and so no other topic, ever has it
            self._next_message_id[chat_id] = max(self._next_message_id[chat_id], GENERAL_TOPIC + 1)
        self._chats[chat_id] = chat

    def add_topic(self, group_id: int, name: str, *, creator: int | None = None) -> int:
        """Open a topic in forum ``group_id``, as ``createForumTopic`` does (``creator`` None: the
        bot) or a member (``creator``, a user id) would; returns its ``message_thread_id``, the id
        of its creation service message. No update is queued for it."""
        if not self._chats.get(group_id, {}).get("is_forum"):
            raise ValueError(f"chat {group_id} is not a forum (add_group(..., forum=True))")
        return self._open_topic(group_id, name, TOPIC_COLOR, creator).thread_id

    def close_topic(self, group_id: int, thread_id: int) -> None:
        """An admin closes the topic: sends to it answer 400 "TOPIC_CLOSED" until reopened."""
        self._live_topic(group_id, thread_id).closed = True

    def reopen_topic(self, group_id: int, thread_id: int) -> None:
        self._live_topic(group_id, thread_id).closed = False

    def delete_topic(self, group_id: int, thread_id: int) -> None:
        """An admin deletes the topic and with it every message in it; sends to it answer 400
        "message thread not found"."""
        self._remove_topic(self._live_topic(group_id, thread_id))

    def flood_per_group(self, per_minute: int | None = 20) -> None:
        """Answer 429 when one group or supergroup gets more than ``per_minute`` sends/edits within
        60 s, Telegram's guidance for groups (None = off)."""
        self._flood_per_group = per_minute
        self._group_hits.clear()

    def refuse_drafts(self, chat_id: int | None = None) -> None:
        """Drafts are refused: for ``chat_id`` with a 400 as for a chat without drafts, or, with no
        chat, by the whole server as one older than Bot API 9.3 (404 "Not Found", as for any
        unknown method; PTB raises ``InvalidToken`` for it)."""
        if chat_id is None:
            self.drafts_supported = False
        else:
            self._draftless.add(chat_id)

    def draft_texts(self, chat_id: int) -> list[str]:
        """The visible texts of the drafts ``chat_id`` was shown, in order."""
        return [d.visible_text for d in self.drafts if d.chat_id == chat_id]

    def block(self, user_id: int) -> None:
        """The user blocks the bot: sends to their private chat answer 403."""
        self._blocked.add(user_id)

    def unblock(self, user_id: int) -> None:
        self._blocked.discard(user_id)

    def fail_next(
        self,
        method: str,
        *,
        status: int | None = None,
        retry_after: int | None = 1,
        description: str | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
        hang: float = 0.0,
        applied: bool = False,
        invalid_json: bool = False,
    ) -> None:
        """The next ``times`` calls of ``method`` fail (before any effect) with this error.

        With ``when``, only calls whose parameters it accepts fail (and count);
        others pass, so one particular message can be refused whatever came first.

        ``status`` defaults to 429 (200 with ``invalid_json``). ``hang`` waits that many seconds
        before answering (a gateway timing out: ``status=504, hang=3.0``; a client whose read
        timeout is shorter sees ``telegram.error.TimedOut`` instead). With ``applied`` the call is
        carried out first (a sendMessage is recorded, an edit is made, getUpdates confirms and
        collects as usual) and only then answered with the failure, as when Telegram delivered a
        message but its gateway timed out; should the call itself fail (400, flood 429), that real
        error is answered and the failure stays armed for the next matching call. With
        ``invalid_json`` the body is an HTML page instead of Telegram's JSON: with status 200 (a
        proxy's error page) PTB 22.8 raises ``TelegramError("Invalid server response")``, which is
        *not* a ``NetworkError``; with 502 (nginx in front of Telegram) it raises
        ``NetworkError("Bad Gateway (502). Parsing the server response ... failed")``. JSON error
        answers map as PTB's ``_baserequest`` does: 429 -> ``RetryAfter``, 401/404 ->
        ``InvalidToken``, 400 -> ``BadRequest``, 403 -> ``Forbidden``, 409 -> ``Conflict``, any other
        (500, 502, 504) -> ``NetworkError(description)``.
        """
        if status is None:
            status = 200 if invalid_json else 429
        if status == 200 and not invalid_json:
            raise ValueError("a 200 failure needs invalid_json=True")
        failure = _Failure(
            status, _default_description(status, retry_after) if description is None else description,
            retry_after if status == 429 else None, times, when, hang, applied, invalid_json,
        )  # fmt: skip
        self._failures.setdefault(method.lower(), deque()).append(failure)

    def chaos(
        self,
        methods: Mapping[str, float],
        *,
        kinds: Sequence[str] = (Fault.TOO_MANY_REQUESTS, Fault.BAD_GATEWAY, Fault.HANG_504),
        seed: int = 0,
        hang: float = 2.0,
        max_faults: int = 10,
        retry_after: int = 1,
    ) -> None:
        """Random faults: each call of a method in ``methods`` fails with that probability.

        The fault is a :class:`Fault` drawn from ``kinds`` (strings such as ``"429"`` or
        ``"hang504"`` work); ``hang`` is the wait of the 504 kinds, ``retry_after`` the 429's.
        After ``max_faults`` faults chaos stops on its own, so a retrying client always gets
        through. The draws come from ``random.Random(seed)``: the same calls in the same order get
        the same faults. ``fail_next`` failures take precedence; every fault lands in
        :attr:`injected`. Calling ``chaos`` again replaces the previous setting.
        """
        rates = {name.lower(): rate for name, rate in methods.items()}
        if not all(0.0 <= rate <= 1.0 for rate in rates.values()):
            raise ValueError(f"probabilities must be within [0, 1]: {dict(methods)}")
        chosen = tuple(Fault(kind) for kind in kinds)
        if not chosen or max_faults < 0:
            raise ValueError("chaos needs at least one kind and max_faults >= 0")
        self._chaos = _Chaos(rates, chosen, random.Random(seed), hang, retry_after, max_faults)

    def chaos_off(self) -> None:
        self._chaos = None

    def revoke_token(self) -> None:
        """The token is revoked (as by @BotFather): from now on every method answers 401
        Unauthorized (PTB: ``InvalidToken``), long polls in flight included."""
        self._revoked = True
        self._changed()

    def flood_limit(self, per_chat_per_second: float | None) -> None:
        """Answer 429 when one chat gets more than N sends/edits within one second (None = off)."""
        self._flood_per_chat = per_chat_per_second
        self._flood_hits.clear()

    def add_file(
        self,
        content: bytes,
        *,
        folder: str = "documents",
        name: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
    ) -> tuple[str, str]:
        """Put a file on the server, as if a user had sent it; returns its ``(file_id,
        file_unique_id)``. ``size`` is what Telegram claims it weighs (default ``len(content)``),
        so a test can have a 25 MB file without 25 MB of bytes; ``getFile`` goes by it."""
        stored = self._store_file(content, folder, name, mime_type, size)
        return stored.file_id, stored.file_unique_id

    def hold_downloads(self) -> None:
        """File downloads are recorded and then hang, until :meth:`release_downloads` (or the
        server stops): a download still under way when a test kills the bot."""
        self._downloads_held = True

    def release_downloads(self) -> None:
        self._downloads_held = False
        self._changed()

    def downloaded(self, file_id: str) -> int:
        """How many times the file was requested from the file route."""
        return sum(1 for d in self.downloads if d.file_id == file_id)

    # ---------------------------------------------------------------------------- inject updates
    def send_update(self, update: dict[str, Any]) -> int:
        """Queue a raw update payload (without update_id); returns the assigned update_id."""
        update_id = self._next_update_id
        self._next_update_id += 1
        self._updates.append({"update_id": update_id, **update})
        self._changed()
        return update_id

    def send_raw_update(self, payload: Mapping[str, Any], *, force: bool = False) -> int:
        """Queue ``payload`` as it is, whatever its shape (a newer Bot API's, or a broken one);
        returns the update_id it gets (an ``update_id`` in ``payload`` is replaced).

        getUpdates delivers it by Telegram's rule for its type (its first key): a type listed in
        the client's ``allowed_updates``, or with the default (none given, or ``[]``) any default
        type and any type this fake does not know, as a newer API would. ``force`` delivers it
        whatever ``allowed_updates`` says, so a client that asks only for messages can still be
        shown an update it cannot parse.
        """
        update_id = self.send_update({k: v for k, v in payload.items() if k != "update_id"})
        if force:
            self._forced.add(update_id)
        return update_id

    def send_poll(
        self,
        user_id: int,
        *,
        question: str = "Lunch?",
        options: Sequence[str] = ("Yes", "No"),
        chat_id: int | None = None,
        chat_type: str = "private",
        omit: Sequence[str] = (),
        force: bool = False,
    ) -> int:
        """The user sends a poll (a message with ``poll``); ``omit`` drops fields of the poll."""
        message = self._user_message(user_id, chat_id, chat_type, "Ann", "en", None)
        poll: dict[str, Any] = {
            "id": f"poll{message['message_id']}", "question": question,
            "options": [{"text": o, "voter_count": 0, "persistent_id": str(i)} for i, o in enumerate(options)],
            "total_voter_count": 0, "is_closed": False, "is_anonymous": False, "type": "regular",
            "allows_multiple_answers": False, "allows_revoting": True, "members_only": False,
        }  # fmt: skip
        message["poll"] = {k: v for k, v in poll.items() if k not in omit}
        return self.send_raw_update({"message": message}, force=force)

    def send_poll_missing_allows_revoting(self, user_id: int, **kwargs: Any) -> int:
        """A poll message as an older server sends it: no ``allows_revoting``, which PTB 22.8
        requires since Bot API 9.6 (``Update.de_json`` raises ``TypeError``, and
        ``Bot.get_updates`` fails for the whole batch)."""
        return self.send_poll(user_id, omit=("allows_revoting",), **kwargs)

    def send_message_with_bad_chat(
        self, user_id: int, chat: Any = "not-a-chat", *, force: bool = False
    ) -> int:
        """A text message whose ``chat`` is not an object (PTB: ``TypeError``)."""
        stored = self._user_message(user_id, None, "private", "Ann", "en", None)
        stored["text"] = "hello"
        return self.send_raw_update({"message": {**stored, "chat": chat}}, force=force)

    def send_unknown_update(
        self, kind: str = "future_update", body: Any = None, *, force: bool = False
    ) -> int:
        """An update of a type no current client knows (PTB parses it into an ``Update`` whose
        known fields are all None, the payload kept in ``api_kwargs``). With an explicit
        ``allowed_updates`` it is delivered only with ``force``; see :meth:`send_raw_update`."""
        return self.send_raw_update(
            {kind: {"id": 1, "note": "from the future"} if body is None else body}, force=force
        )

    def press_button_with_broken_message(
        self, user_id: int, data: str = "x", *, message: Any = 12345, force: bool = False
    ) -> int:
        """A callback query whose ``message`` is not a message (PTB: ``AttributeError``). The
        query itself is real: answering its id works once, like any other."""
        query_id = f"{self.bot_id}{self._next_callback:08d}"
        self._next_callback += 1
        self._callbacks[query_id] = _PendingCallback(user_id, user_id, 0, data, time.monotonic())
        user = self._users.get(user_id) or {"id": user_id, "is_bot": False, "first_name": "Ann"}
        query = {
            "id": query_id, "from": user, "message": message,
            "chat_instance": str(abs(user_id) * 7 + 1), "data": data,
        }  # fmt: skip
        return self.send_raw_update({"callback_query": query}, force=force)

    def send_text(
        self,
        user_id: int,
        text: str,
        *,
        chat_id: int | None = None,
        chat_type: str = "private",
        language_code: str = "en",
        reply_to_message_id: int | None = None,
        first_name: str = "Ann",
        thread_id: int | None = None,
        mention: bool = False,
        mention_user: bool = False,
    ) -> int:
        """The user writes ``text``; a leading ``/command`` (``/stop@botname`` too) gets a
        bot_command entity. In a group, ``chat_id`` is the group and ``user_id`` the member
        writing; ``thread_id`` is the forum topic written in (None: General). ``mention`` puts
        ``@<bot username> `` before the text with a ``mention`` entity, ``mention_user`` the bot's
        first name with a ``text_mention`` entity carrying the bot's user."""
        if mention and mention_user:
            raise ValueError("mention or mention_user, not both")
        message = self._user_message(
            user_id, chat_id, chat_type, first_name, language_code, reply_to_message_id, thread_id
        )
        entities: list[dict[str, Any]] = []
        prefix = ""
        if mention:
            prefix = f"@{self.username}"
            entities.append({"type": "mention", "offset": 0, "length": _utf16_len(prefix)})
        elif mention_user:
            prefix = self.first_name
            entities.append(
                {"type": "text_mention", "offset": 0, "length": _utf16_len(prefix), "user": self.bot_user}
            )
        prefix += " " if prefix else ""
        command = _BOT_COMMAND.match(text)
        if command:
            length = _utf16_len(command.group())
            entities.append({"type": "bot_command", "offset": _utf16_len(prefix), "length": length})
        message["text"] = prefix + text
        if entities:
            message["entities"] = entities
        return self.send_update({"message": message})

    def send_sticker(
        self, user_id: int, emoji: str = "👍", *, chat_id: int | None = None, chat_type: str = "private"
    ) -> int:
        message = self._user_message(user_id, chat_id, chat_type, "Ann", "en", None)
        stored = self._store_file(b"RIFF-fake-webp", "stickers", "sticker.webp", "image/webp")
        message["sticker"] = {
            "file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "type": "regular",
            "width": 512, "height": 512, "is_animated": False, "is_video": False, "emoji": emoji,
            "file_size": len(stored.content),
        }  # fmt: skip
        return self.send_update({"message": message})

    def send_photo(
        self,
        user_id: int,
        content: bytes = b"\x89PNG fake",
        *,
        caption: str | None = None,
        media_group_id: str | None = None,
        width: int = 1280,
        height: int = 1280,
        size: int | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        """The user sends a photo: as Telegram does, a list of sizes, smallest first, each its own
        file; ``content`` is the largest (``width`` x ``height``), the thumbnail other bytes."""
        scale = 90 / max(width, height, 1)
        thumb_w, thumb_h = max(1, round(width * scale)), max(1, round(height * scale))
        thumb = self._file_fields(b"fake-thumbnail", "photos", "thumb.jpg", "image/jpeg", None)
        full = self._file_fields(content, "photos", "photo.jpg", "image/jpeg", size)
        sizes = [{**thumb, "width": thumb_w, "height": thumb_h}, {**full, "width": width, "height": height}]
        return self._send_media(user_id, "photo", sizes, caption, media_group_id, chat_id, chat_type)

    def send_user_document(
        self,
        user_id: int,
        filename: str,
        content: bytes,
        *,
        mime_type: str = "application/octet-stream",
        caption: str | None = None,
        media_group_id: str | None = None,
        size: int | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        """The user sends a file; ``size`` is the ``file_size`` Telegram reports (see :meth:`add_file`)."""
        body = {
            **self._file_fields(content, "documents", filename, mime_type, size),
            "file_name": filename, "mime_type": mime_type,
        }  # fmt: skip
        return self._send_media(user_id, "document", body, caption, media_group_id, chat_id, chat_type)

    def send_voice(
        self,
        user_id: int,
        content: bytes = b"OggS fake voice",
        *,
        duration: int = 3,
        transcript: str | None = None,
        mime_type: str = "audio/ogg",
        caption: str | None = None,
        size: int | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        """A voice note (``file_path`` ``voice/file_N.oga``). ``transcript`` is the text a Premium
        user's client already has; PTB 22.8's ``Voice`` does not know the field and keeps it in
        ``api_kwargs``."""
        fields = self._file_fields(content, "voice", None, mime_type, size)
        body = {**fields, "duration": duration, "mime_type": mime_type}
        if transcript is not None:
            body["transcript"] = transcript
        return self._send_media(user_id, "voice", body, caption, None, chat_id, chat_type)

    def send_audio(
        self,
        user_id: int,
        content: bytes = b"ID3 fake audio",
        *,
        filename: str = "song.mp3",
        mime_type: str = "audio/mpeg",
        duration: int = 30,
        caption: str | None = None,
        media_group_id: str | None = None,
        size: int | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        body = {
            **self._file_fields(content, "music", filename, mime_type, size),
            "duration": duration, "file_name": filename, "mime_type": mime_type,
        }  # fmt: skip
        return self._send_media(user_id, "audio", body, caption, media_group_id, chat_id, chat_type)

    def send_video_note(
        self,
        user_id: int,
        content: bytes = b"fake round video",
        *,
        duration: int = 5,
        length: int = 384,
        size: int | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        """A round video message: no name, no mime type, a ``file_path`` ending ``.mp4``."""
        fields = self._file_fields(content, "video_notes", None, None, size)
        body = {**fields, "duration": duration, "length": length}
        return self._send_media(user_id, "video_note", body, None, None, chat_id, chat_type)

    def send_video(
        self,
        user_id: int,
        content: bytes = b"fake video",
        *,
        filename: str = "clip.mp4",
        mime_type: str = "video/mp4",
        duration: int = 10,
        width: int = 1280,
        height: int = 720,
        caption: str | None = None,
        media_group_id: str | None = None,
        size: int | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        body = {
            **self._file_fields(content, "videos", filename, mime_type, size), "duration": duration,
            "width": width, "height": height, "file_name": filename, "mime_type": mime_type,
        }  # fmt: skip
        return self._send_media(user_id, "video", body, caption, media_group_id, chat_id, chat_type)

    def send_animation(
        self,
        user_id: int,
        content: bytes = b"fake gif as mp4",
        *,
        caption: str | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
    ) -> int:
        """A GIF: Telegram sends it as ``animation`` and, for older clients, as ``document`` too."""
        fields = self._file_fields(content, "animations", "funny.mp4", "video/mp4", None)
        named = {**fields, "file_name": "funny.mp4", "mime_type": "video/mp4"}
        message = self._user_message(user_id, chat_id, chat_type, "Ann", "en", None)
        message["animation"] = {**named, "duration": 2, "width": 320, "height": 240}
        message["document"] = named
        if caption is not None:
            message["caption"] = caption
        return self.send_update({"message": message})

    def _file_fields(
        self, content: bytes, folder: str, name: str | None, mime: str | None, size: int | None
    ) -> dict[str, Any]:
        stored = self._store_file(content, folder, name, mime, size)
        return {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "file_size": stored.size}

    def _send_media(
        self,
        user_id: int,
        key: str,
        body: Any,
        caption: str | None,
        media_group_id: str | None,
        chat_id: int | None,
        chat_type: str,
    ) -> int:
        message = self._user_message(user_id, chat_id, chat_type, "Ann", "en", None)
        message[key] = body
        if caption is not None:
            message["caption"] = caption
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        return self.send_update({"message": message})

    def send_edited_text(
        self, user_id: int, message_id: int, text: str, *, chat_id: int | None = None
    ) -> int:
        chat_id = user_id if chat_id is None else chat_id
        original = self._user_messages.get((chat_id, message_id))
        if original is None or original["from"]["id"] != user_id:
            raise AssertionError(f"user {user_id} has no message {message_id} in chat {chat_id}")
        original["text"] = text
        original["edit_date"] = int(time.time())
        return self.send_update({"edited_message": dict(original)})

    def press_button(
        self,
        user_id: int,
        message_id: int,
        data: str,
        *,
        chat_id: int | None = None,
        require_button: bool = True,
    ) -> int:
        """The user presses an inline button carrying ``data`` under bot message ``message_id``.

        By default the button must exist on the message as it is now (a user cannot press a
        button that was edited away); pass ``require_button=False`` to simulate a stale client.
        """
        chat_id = user_id if chat_id is None else chat_id
        sent = self._by_id.get((chat_id, message_id))
        if sent is None or sent.deleted:
            raise AssertionError(f"no live bot message {message_id} in chat {chat_id}")
        if require_button and data not in [d for row in sent.buttons for _, d in row]:
            raise AssertionError(f"message {message_id} has no button with data {data!r}: {sent.buttons}")
        query_id = f"{self.bot_id}{self._next_callback:08d}"
        self._next_callback += 1
        self._callbacks[query_id] = _PendingCallback(user_id, chat_id, message_id, data, time.monotonic())
        user = self._users.get(user_id) or {"id": user_id, "is_bot": False, "first_name": "Ann"}
        query = {
            "id": query_id, "from": user, "message": self._message_dict(sent),
            "chat_instance": str(abs(chat_id) * 7 + 1), "data": data,
        }  # fmt: skip
        return self.send_update({"callback_query": query})

    def press_button_labeled(
        self, user_id: int, message_id: int, label: str, *, chat_id: int | None = None
    ) -> int:
        chat_id = user_id if chat_id is None else chat_id
        sent = self._by_id.get((chat_id, message_id))
        if sent is None:
            raise AssertionError(f"no bot message {message_id} in chat {chat_id}")
        return self.press_button(user_id, message_id, sent.button_data(label), chat_id=chat_id)

    def _user_message(
        self,
        user_id: int,
        chat_id: int | None,
        chat_type: str,
        first_name: str,
        language_code: str,
        reply_to_message_id: int | None,
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        if chat_id is None:
            if chat_type != "private":
                raise ValueError("chat_id is required for non-private chats")
            chat_id = user_id
        if chat_id not in self._chats and chat_type == "private" and chat_id != user_id:
            raise ValueError(f"chat {chat_id} is another user's private chat: add_group it first")
        self.add_chat(chat_id, chat_type=chat_type, first_name=first_name, language_code=language_code)
        if thread_id is not None:
            topic = self.topics.get((chat_id, thread_id))
            if topic is None or topic.deleted or topic.closed:
                state = "no" if topic is None or topic.deleted else "a closed"
                raise AssertionError(f"chat {chat_id} has {state} topic {thread_id} to write in")
        user = self._users.setdefault(
            user_id,
            {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": language_code},
        )
        message_id = self._take_message_id(chat_id)
        message: dict[str, Any] = {
            "message_id": message_id, "from": dict(user), "chat": dict(self._chats[chat_id]), "date": int(time.time()),
        }  # fmt: skip
        if thread_id is not None:
            message["message_thread_id"], message["is_topic_message"] = thread_id, True
        if reply_to_message_id is not None:
            target = self._any_message_dict(chat_id, reply_to_message_id)
            if target is None:
                raise AssertionError(f"no message {reply_to_message_id} in chat {chat_id} to reply to")
            target.pop("reply_to_message", None)  # Telegram nests no further replies
            message["reply_to_message"] = target
        elif thread_id is not None:
            message["reply_to_message"] = self._any_message_dict(chat_id, thread_id)
        self._user_messages[(chat_id, message_id)] = message
        return message

    # ---------------------------------------------------------------------------- observe
    def messages(self, chat_id: int, *, include_deleted: bool = True) -> list[SentMessage]:
        """The bot's messages in ``chat_id``, in send order."""
        return [m for m in self._sent.get(chat_id, []) if include_deleted or not m.deleted]

    def messages_in(
        self, chat_id: int, thread_id: int | None = None, *, include_deleted: bool = True
    ) -> list[SentMessage]:
        """The bot's messages in one topic of ``chat_id`` (None: the General topic, or a chat
        without topics), in send order."""
        return [
            m for m in self.messages(chat_id, include_deleted=include_deleted) if m.thread_id == thread_id
        ]

    def topic(self, chat_id: int, thread_id: int) -> Topic:
        try:
            return self.topics[(chat_id, thread_id)]
        except KeyError:
            raise AssertionError(f"chat {chat_id} never had a topic {thread_id}") from None

    def last_message(self, chat_id: int) -> SentMessage | None:
        sent = self.messages(chat_id, include_deleted=False)
        return sent[-1] if sent else None

    def message(self, chat_id: int, message_id: int) -> SentMessage:
        try:
            return self._by_id[(chat_id, message_id)]
        except KeyError:
            raise AssertionError(f"the bot sent no message {message_id} in chat {chat_id}") from None

    def actions(self, chat_id: int) -> list[str]:
        """The chat actions (``typing``, ``upload_document`` …) ``chat_id`` was shown, in order."""
        return [c.action for c in self.chat_actions if c.chat_id == chat_id]

    def files_sent(self, chat_id: int) -> list[SentMessage]:
        """The photos and documents the bot sent to ``chat_id`` (bytes in ``document_content``)."""
        return [m for m in self.messages(chat_id) if m.kind != "text"]

    def calls(self, method: str) -> list[RecordedRequest]:
        """Recorded requests of one method (case-insensitive), in arrival order."""
        return [r for r in self.requests if r.method.lower() == method.lower()]

    def unconfirmed(self) -> list[int]:
        return [u["update_id"] for u in self._updates]

    def pending_update(self, update_id: int) -> dict[str, Any]:
        """The raw payload of an unconfirmed update, as getUpdates would deliver it."""
        for update in self._updates:
            if update["update_id"] == update_id:
                return dict(update)
        raise AssertionError(f"update {update_id} is not pending: {self.unconfirmed()}")

    def unanswered_callbacks(self) -> list[str]:
        return list(self._callbacks)

    def commands_for(self, scope_type: str) -> list[CommandsCall]:
        """Every setMyCommands/deleteMyCommands call for scopes of ``scope_type`` (any language,
        any chat), in order; each keeps its whole ``scope`` object."""
        return [c for c in self.commands if c.scope.get("type", "default") == scope_type]

    def my_commands(self, scope_type: str = "default", language_code: str = "") -> list[tuple[str, str]]:
        for call in reversed(self.commands):
            if call.scope.get("type", "default") == scope_type and call.language_code == language_code:
                return call.commands
        return []

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` holds; re-checked on every state change of the fake."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"wait_for timed out after {timeout}s\n{self.dump()}")
            event = self._changed_event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, 0.25))

    def dump(self) -> str:
        """Human-readable state for failure messages."""
        lines = ["-- recent requests:"]
        for r in self.requests[-25:]:
            shown = {
                k: (v if not isinstance(v, UploadedFile) else f"<file {v.filename}>")
                for k, v in r.params.items()
            }
            lines.append(
                f"   {r.method} {r.status} {shown!r:.300}" + (f" -> {r.description}" if r.description else "")
            )
        for chat_id, sent in self._sent.items():
            lines.append(f"-- bot messages in chat {chat_id}:")
            for m in sent:
                flags = " [deleted]" if m.deleted else ""
                lines.append(f"   #{m.message_id}{flags} {m.text!r:.200} buttons={m.buttons}")
        lines.append(
            f"-- unconfirmed updates: {self.unconfirmed()}; confirmed_offset={self.confirmed_offset}"
        )
        lines.append(f"-- unanswered callback queries: {self.unanswered_callbacks()}")
        return "\n".join(lines)

    def _changed(self) -> None:
        event, self._changed_event = self._changed_event, asyncio.Event()
        event.set()

    # ---------------------------------------------------------------------------- HTTP plumbing
    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        record = RecordedRequest(method, {}, time.time())
        self.requests.append(record)
        try:
            record.params = await _read_params(request)
            self._check_token(request.match_info["token"])
            handler = self._methods.get(method.lower())
            if handler is None:
                raise ApiError(404, "Not Found")
            armed = self._armed_fault(method.lower(), record.params)
            if armed is not None and not armed.failure.applied and armed.commit():
                return await self._answer_fault(record, armed, applied=False)
            self._flood_control(method.lower(), record.params)
            result = await handler(record.params)
            if armed is not None and armed.failure.applied and armed.commit():
                return await self._answer_fault(record, armed, applied=True)
            record.status = 200
            body: dict[str, Any] = {"ok": True, "result": result}
        except ApiError as err:
            record.status, record.description = err.status, err.description
            body = err.payload()
        except Exception as err:  # a bug in the fake (or a request shape it does not model): be loud
            record.status, record.description = 500, f"Internal Server Error: fake crashed: {err!r}"
            body = {"ok": False, "error_code": 500, "description": record.description}
        self._changed()
        return web.json_response(body, status=record.status)

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token or self._revoked:
            return web.json_response(ApiError(401, "Unauthorized").payload(), status=401)
        path = request.match_info["path"]
        stored = next((f for f in self._files.values() if f.path == path), None)
        self.downloads.append(Download(path, None if stored is None else stored.file_id, time.time()))
        self._changed()
        while self._downloads_held and not self._stopping:
            await self._changed_event.wait()  # release_downloads and stop both signal a change
        if stored is None:
            return web.json_response(ApiError(404, "Not Found").payload(), status=404)
        return web.Response(body=stored.content, content_type=stored.mime_type or "application/octet-stream")

    def _check_token(self, token: str) -> None:
        if token == self.token and not self._revoked:
            return
        if not _TOKEN_SHAPE.match(token):
            raise ApiError(404, "Not Found")  # Telegram answers malformed tokens like unknown paths
        raise ApiError(401, "Unauthorized")

    def _armed_fault(self, method: str, params: dict[str, Any]) -> _Armed | None:
        """The failure this call gets, if any: the head of ``fail_next``'s queue, else chaos's draw."""
        queue = self._failures.get(method)
        if queue:
            failure = queue[0]
            if failure.when is None or failure.when(params):

                def consume() -> bool:
                    if failure.times <= 0:
                        return False
                    failure.times -= 1
                    if failure.times <= 0 and queue and queue[0] is failure:
                        queue.popleft()
                    return True

                return _Armed(failure, "fail_next", consume)
        chaos = self._chaos
        rate = None if chaos is None else chaos.rates.get(method)
        # only the methods chaos covers draw, so other traffic does not shift the sequence
        if chaos is None or rate is None or chaos.left <= 0 or chaos.rng.random() >= rate:
            return None
        kind = chaos.rng.choice(chaos.kinds)

        def count() -> bool:
            if chaos.left <= 0 or self._chaos is not chaos:
                return False
            chaos.left -= 1
            return True

        return _Armed(_chaos_failure(kind, chaos), "chaos", count)

    async def _answer_fault(self, record: RecordedRequest, armed: _Armed, *, applied: bool) -> web.Response:
        failure = armed.failure
        self._changed()  # an applied call's effect is visible while the answer hangs
        await self._pause(failure.hang)
        record.status, record.description = failure.status, failure.description
        self.injected.append(
            InjectedFault(
                record.method.lower(), armed.source, failure.status, applied, failure.hang,
                failure.invalid_json, failure.kind, time.time(),
            )
        )  # fmt: skip
        self._changed()
        if failure.invalid_json:
            return web.Response(
                status=failure.status, text=_html_page(failure.status), content_type="text/html"
            )
        error = ApiError(failure.status, failure.description, failure.retry_after)
        return web.json_response(error.payload(), status=failure.status)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, cut short when the server stops."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while not self._stopping and (remaining := deadline - loop.time()) > 0:
            event = self._changed_event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    def _flood_control(self, method: str, params: dict[str, Any]) -> None:
        if method not in _FLOOD_METHODS:
            return
        try:
            chat_id = int(params.get("chat_id"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        now = time.monotonic()
        per_chat = None if self._flood_per_chat is None else self._flood_hits.setdefault(chat_id, deque())
        per_group = None
        if self._flood_per_group is not None and self._chats.get(chat_id, {}).get("type") in GROUP_TYPES:
            per_group = self._group_hits.setdefault(chat_id, deque())
        # both limits are checked before either counts the call: a refused call is no send
        if per_chat is not None and self._flood_per_chat is not None:
            _check_window(per_chat, now, 1.0, self._flood_per_chat)
        if per_group is not None and self._flood_per_group is not None:
            _check_window(per_group, now, 60.0, self._flood_per_group)
        for hits in (per_chat, per_group):
            if hits is not None:
                hits.append(now)

    # ---------------------------------------------------------------------------- shared rules
    def _take_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.setdefault(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _chat_id(self, params: dict[str, Any]) -> int:
        raw = params.get("chat_id")
        if raw is None or raw == "":
            raise _bad("chat_id is empty")
        try:
            chat_id = int(raw)
        except (TypeError, ValueError):
            raise _bad("chat not found") from None  # @usernames of unknown channels
        if chat_id not in self._chats:
            raise _bad("chat not found")
        if chat_id in self._blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        return chat_id

    def _parse_text(self, text: str, parse_mode: str | None) -> tuple[str, list[dict[str, Any]]]:
        """Visible text and entities after applying ``parse_mode``, or Telegram's 400."""
        mode = (parse_mode or "").lower()
        if mode == "html":
            try:
                visible, entities = parse_html_entities(text, strict=self.strict_html)
            except TelegramHTMLError as err:
                raise ApiError(400, str(err)) from None
            return visible, [_entity_dict(e) for e in entities]
        if mode in ("", "markdown", "markdownv2"):
            return text, []  # Markdown is accepted without deep validation
        raise _bad(f"unsupported parse_mode {parse_mode}")

    def _message_text(self, params: dict[str, Any]) -> tuple[str, str | None, str, list[dict[str, Any]]]:
        text = _str(params, "text")
        if text is None or text == "":
            raise _bad("message text is empty")
        parse_mode = _str(params, "parse_mode") or None
        visible, entities = self._parse_text(text, parse_mode)
        if not visible.strip():
            raise _bad("message text is empty")
        if _utf16_len(visible) > MAX_TEXT:
            raise _bad("message is too long")
        explicit = _json(params, "entities", "can't parse entities JSON object")
        if explicit:
            entities = list(explicit)
        return text, parse_mode, visible, entities

    def _reply_markup(self, params: dict[str, Any], *, inline_only: bool = False) -> dict[str, Any] | None:
        markup = _json(params, "reply_markup", "can't parse reply keyboard markup JSON object")
        if markup is None:
            return None
        if not isinstance(markup, dict):
            raise _bad("can't parse reply keyboard markup JSON object")
        if "inline_keyboard" in markup:
            _check_inline_keyboard(markup["inline_keyboard"])
        elif inline_only:
            raise _bad("can't parse inline keyboard markup JSON object")
        elif not any(k in markup for k in ("keyboard", "remove_keyboard", "force_reply")):
            raise _bad("can't parse reply keyboard markup JSON object")
        return markup

    def _reply_to(self, chat_id: int, params: dict[str, Any]) -> int | None:
        reply = _json(params, "reply_parameters", "can't parse reply parameters JSON object")
        target: int | None
        allow_missing = _bool(params, "allow_sending_without_reply")
        if isinstance(reply, dict):
            target = int(reply["message_id"]) if reply.get("message_id") is not None else None
            allow_missing = allow_missing or bool(reply.get("allow_sending_without_reply"))
        else:
            target = _int(params, "reply_to_message_id", required=False)
        if target is None:
            return None
        if self._any_message_dict(chat_id, target) is None:
            if allow_missing:
                return None
            raise _bad("message to be replied not found")
        return target

    def _send_thread(
        self, chat_id: int, params: dict[str, Any], reply_to: int | None = None, *, action: bool = False
    ) -> int | None:
        """The forum topic a send goes to, or Telegram's 400: ``message_thread_id`` if given (0 is
        none), else the topic of the message replied to. The General topic takes no thread id,
        but chat actions may name it (1)."""
        thread = _int(params, "message_thread_id", required=False) or None
        if thread is None and reply_to is not None:
            replied = self._any_message_dict(chat_id, reply_to) or {}
            thread = replied.get("message_thread_id") if replied.get("is_topic_message") else None
        if thread is None or (action and thread == GENERAL_TOPIC and self._chats[chat_id].get("is_forum")):
            return None
        # without is_forum a thread is a comment thread, which the fake does not model
        topic = self.topics.get((chat_id, thread))
        if topic is None or topic.deleted:
            raise _bad("message thread not found")
        if topic.closed:
            raise _bad("TOPIC_CLOSED")
        return thread

    def _live_topic(self, chat_id: int, thread_id: int) -> Topic:
        topic = self.topics.get((chat_id, thread_id))
        if topic is None or topic.deleted:
            raise AssertionError(f"chat {chat_id} has no topic {thread_id}")
        return topic

    def _open_topic(self, chat_id: int, name: str, color: int, creator: int | None) -> Topic:
        thread_id = self._take_message_id(chat_id)
        author = self.bot_user if creator is None else self._users.get(creator)
        if author is None:
            author = {"id": creator, "is_bot": False, "first_name": "Ann"}
        self._user_messages[(chat_id, thread_id)] = {
            "message_id": thread_id, "from": dict(author), "chat": dict(self._chats[chat_id]),
            "date": int(time.time()), "message_thread_id": thread_id, "is_topic_message": True,
            "forum_topic_created": {"name": name, "icon_color": color},
        }  # fmt: skip
        topic = Topic(chat_id, thread_id, name, color, author["id"])
        self.topics[(chat_id, thread_id)] = topic
        return topic

    def _remove_topic(self, topic: Topic) -> None:
        """Delete ``topic`` with every message in it, as Telegram does."""
        topic.deleted = True
        for sent in self.messages_in(topic.chat_id, topic.thread_id):
            sent.deleted = True
        for key, message in list(self._user_messages.items()):
            if key[0] == topic.chat_id and message.get("message_thread_id") == topic.thread_id:
                del self._user_messages[key]

    def _any_message_dict(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        if (chat_id, message_id) in self._user_messages:
            return dict(self._user_messages[(chat_id, message_id)])
        sent = self._by_id.get((chat_id, message_id))
        if sent is None or sent.deleted:
            return None
        return self._message_dict(sent)

    def _message_dict(self, sent: SentMessage) -> dict[str, Any]:
        body: dict[str, Any] = {
            "message_id": sent.message_id, "from": self.bot_user, "chat": dict(self._chats[sent.chat_id]),
            "date": sent.date,
        }  # fmt: skip
        text_key, entities_key = (
            ("text", "entities") if sent.kind == "text" else ("caption", "caption_entities")
        )
        if sent.kind != "text" or sent.visible_text:
            if sent.visible_text:
                body[text_key] = sent.visible_text
            if sent.entities:
                body[entities_key] = sent.entities
        if sent.kind in ("document", "photo") and sent.file_id is not None:
            stored = self._files[sent.file_id]
            if sent.kind == "document":
                body["document"] = {
                    "file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
                    "file_name": stored.name, "mime_type": stored.mime_type, "file_size": len(stored.content),
                }  # fmt: skip
            else:
                body["photo"] = [{
                    "file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "width": 1280,
                    "height": 1280, "file_size": len(stored.content),
                }]  # fmt: skip
        if sent.reply_markup and "inline_keyboard" in sent.reply_markup:
            body["reply_markup"] = sent.reply_markup
        if sent.edit_date is not None:
            body["edit_date"] = sent.edit_date
        if sent.thread_id is not None:
            body["message_thread_id"], body["is_topic_message"] = sent.thread_id, True
        reply_to = sent.thread_id if sent.reply_to_message_id is None else sent.reply_to_message_id
        if reply_to is not None:  # in a topic, a message replying to none replies to its creation
            target = self._any_message_dict(sent.chat_id, reply_to)
            if target is not None:
                target.pop("reply_to_message", None)
                body["reply_to_message"] = target
        return body

    def _record_sent(self, sent: SentMessage) -> dict[str, Any]:
        self._sent.setdefault(sent.chat_id, []).append(sent)
        self._by_id[(sent.chat_id, sent.message_id)] = sent
        return self._message_dict(sent)

    def _store_file(
        self, content: bytes, folder: str, name: str | None, mime: str | None, size: int | None = None
    ) -> _StoredFile:
        n = len(self._files) + 1
        suffix = ("." + name.rsplit(".", 1)[1]) if name and "." in name else _SUFFIXES.get(folder, "")
        stored = _StoredFile(
            f"FILE{n:06d}-{folder}", f"U{n:06d}", f"{folder}/file_{n}{suffix}", content, name, mime, size
        )
        self._files[stored.file_id] = stored
        return stored

    def _editable(self, params: dict[str, Any], missing: str) -> SentMessage:
        if params.get("inline_message_id"):
            raise _bad("MESSAGE_ID_INVALID")  # inline messages are not modelled
        chat_id = self._chat_id(params)
        message_id = _int(params, "message_id", empty="message identifier is not specified")
        assert message_id is not None
        sent = self._by_id.get((chat_id, message_id))
        if sent is None or sent.deleted:
            if (chat_id, message_id) in self._user_messages:
                raise _bad("message can't be edited")
            raise _bad(missing)
        return sent

    # ---------------------------------------------------------------------------- Bot API methods
    async def _m_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False,
            "supports_inline_queries": False, "can_connect_to_business": False, "has_main_web_app": False,
        }  # fmt: skip

    async def _m_logOut(self, params: dict[str, Any]) -> bool:
        self.logged_out = True
        return True

    async def _m_close(self, params: dict[str, Any]) -> bool:
        self.closed = True
        return True

    async def _m_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            )
        self._poll_generation += 1
        generation = self._poll_generation
        self._changed()  # wakes (and so terminates) an older long poll
        offset = _int(params, "offset", required=False) or 0
        limit = _int(params, "limit", required=False) or 100
        limit = limit if 1 <= limit <= 100 else 100
        try:
            timeout = max(0.0, min(float(params.get("timeout") or 0), self.max_long_poll))
        except (TypeError, ValueError):
            raise _bad("invalid timeout specified") from None
        allowed = _json(params, "allowed_updates", "can't parse allowed updates JSON object")
        if allowed is not None:
            self._allowed_updates = frozenset(allowed) if allowed else DEFAULT_ALLOWED_UPDATES
            self._allowed_explicit = bool(allowed)
        self._confirm(offset)
        deadline = time.monotonic() + timeout
        while True:
            if self._revoked:
                raise ApiError(401, "Unauthorized")
            if generation != self._poll_generation:
                raise ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                )
            self._drop_disallowed()
            remaining = deadline - time.monotonic()
            if self._updates or remaining <= 0 or self._stopping:
                return [dict(u) for u in self._updates[:limit]]
            event = self._changed_event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    def _confirm(self, offset: int) -> None:
        if offset < 0:
            keep = self._updates[offset:]
            dropped = self._updates[: len(self._updates) - len(keep)]
            if dropped:
                self.confirmed_offset = max(self.confirmed_offset, dropped[-1]["update_id"] + 1)
            self._updates = keep
        elif offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self.confirmed_offset = max(self.confirmed_offset, offset)
        self._forget_forced()

    def _drop_disallowed(self) -> None:
        self._updates = [u for u in self._updates if self._deliverable(u)]
        self._forget_forced()

    def _deliverable(self, update: dict[str, Any]) -> bool:
        if update["update_id"] in self._forced:
            return True
        kind = next((k for k in update if k != "update_id"), None)
        if kind in self._allowed_updates:
            return True
        return not self._allowed_explicit and kind not in KNOWN_UPDATE_TYPES

    def _forget_forced(self) -> None:
        if self._forced:
            self._forced &= {u["update_id"] for u in self._updates}

    async def _m_setWebhook(self, params: dict[str, Any]) -> bool:
        url = _str(params, "url") or ""
        if url and not url.startswith(("https://", "http://")):  # plain HTTP: a local Bot API server
            raise _bad("bad webhook: An HTTPS URL must be provided for webhook")
        secret = _str(params, "secret_token")
        if secret is not None and not _SECRET_TOKEN.fullmatch(secret):
            raise _bad("secret token contains unallowed characters")
        connections = _int(params, "max_connections", required=False) or 40
        if not 1 <= connections <= 100:
            raise _bad("bad webhook: invalid max_connections specified")
        allowed = _json(params, "allowed_updates", "can't parse allowed updates JSON object")
        if allowed is not None:
            self._allowed_updates = frozenset(allowed) if allowed else DEFAULT_ALLOWED_UPDATES
            self._allowed_explicit = bool(allowed)
        if _bool(params, "drop_pending_updates"):
            self._updates.clear()
        await self._stop_webhook()
        self.webhook_url, self.webhook_secret, self.webhook_max_connections = url, secret, connections
        if url:
            self._webhook_task = asyncio.create_task(self._deliver_webhook(), name="fake webhook")
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> bool:
        await self._stop_webhook()
        self.webhook_url = ""
        if _bool(params, "drop_pending_updates"):
            if self._updates:
                self.confirmed_offset = max(self.confirmed_offset, self._updates[-1]["update_id"] + 1)
            self._updates.clear()
        return True

    async def _m_getWebhookInfo(self, params: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self.webhook_url:
            info["max_connections"] = self.webhook_max_connections
        if self.webhook_last_error is not None:
            info["last_error_date"], info["last_error_message"] = self.webhook_last_error
        return info

    # ---------------------------------------------------------------------------- webhook delivery
    async def _stop_webhook(self) -> None:
        task, self._webhook_task = self._webhook_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _deliver_webhook(self) -> None:
        """Telegram's webhook queues (module docstring): each chat's first queued update is POSTed
        once the chat has none in flight, at most ``max_connections`` at once."""
        busy: set[object] = set()
        room = asyncio.Semaphore(self.webhook_max_connections)
        tasks: set[asyncio.Task[None]] = set()
        async with aiohttp.ClientSession() as http:
            try:
                while not self._stopping:
                    self._drop_disallowed()
                    for update in list(self._updates):
                        queue = _webhook_queue(update)
                        if queue in busy:
                            continue
                        busy.add(queue)
                        task = asyncio.create_task(self._deliver_one(http, update, queue, busy, room))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    event = self._changed_event
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(), 0.25)
            finally:
                for task in list(tasks):
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _deliver_one(
        self,
        http: aiohttp.ClientSession,
        update: dict[str, Any],
        queue: object,
        busy: set[object],
        room: asyncio.Semaphore,
    ) -> None:
        """POST ``update`` until a 2xx, backing off between failures; then it is confirmed."""
        headers = {"X-Telegram-Bot-Api-Secret-Token": self.webhook_secret} if self.webhook_secret else {}
        delay = self.webhook_first_retry
        try:
            while True:
                wait: float | None = None
                async with room:
                    status, wait = await self._post_update(http, update, headers)
                self.webhook_deliveries.append(WebhookDelivery(update["update_id"], status, time.time()))
                if 200 <= status < 300:
                    self.delivered_updates[update["update_id"]] = dict(update)
                    self._updates = [u for u in self._updates if u["update_id"] != update["update_id"]]
                    self.confirmed_offset = max(self.confirmed_offset, update["update_id"] + 1)
                    return
                reason = f"Wrong response from the webhook: {status}" if status else "Connection refused"
                self.webhook_last_error = (int(time.time()), reason)
                self._changed()
                await asyncio.sleep(wait if wait is not None else delay)
                delay = min(delay * 2, self.webhook_max_retry)
        finally:
            busy.discard(queue)
            self._changed()

    async def _post_update(
        self, http: aiohttp.ClientSession, update: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, float | None]:
        """One POST: the answer's status (0 when none came) and the ``Retry-After`` it asked."""
        try:
            async with http.post(
                self.webhook_url,
                json=update,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.webhook_timeout),
            ) as response:
                await response.read()
                retry_after = response.headers.get("Retry-After")
                wait = float(retry_after) if retry_after and retry_after.isdigit() else None
                return response.status, wait
        except (aiohttp.ClientError, TimeoutError):
            return 0, None

    async def _m_setMyCommands(self, params: dict[str, Any]) -> bool:
        raw = _json(params, "commands", "can't parse commands JSON object")
        if not isinstance(raw, list) or len(raw) > 100:
            raise _bad("can't parse commands JSON object")
        commands: list[tuple[str, str]] = []
        for item in raw:
            command, description = str(item.get("command", "")), str(item.get("description", ""))
            if not _COMMAND_NAME.match(command):
                raise _bad("BOT_COMMAND_INVALID")
            if not 1 <= len(description.strip()) <= 256:
                raise _bad("BOT_COMMAND_DESCRIPTION_INVALID")
            commands.append((command, description))
        scope = self._command_scope(params)
        self.commands.append(CommandsCall(commands, scope, _str(params, "language_code") or ""))
        return True

    async def _m_deleteMyCommands(self, params: dict[str, Any]) -> bool:
        scope = self._command_scope(params)
        self.commands.append(CommandsCall([], scope, _str(params, "language_code") or ""))
        return True

    def _command_scope(self, params: dict[str, Any]) -> dict[str, Any]:
        scope = _json(params, "scope", "can't parse scope JSON object") or {"type": "default"}
        if not isinstance(scope, dict) or scope.get("type") not in COMMAND_SCOPES:
            raise _bad("can't parse BotCommandScope JSON object")  # not verified against Telegram
        if scope["type"].startswith("chat"):
            self._chat_id({"chat_id": scope.get("chat_id")})
        return scope

    async def _m_getMyCommands(self, params: dict[str, Any]) -> list[dict[str, str]]:
        scope = _json(params, "scope", "can't parse scope JSON object") or {"type": "default"}
        found = self.my_commands(scope.get("type", "default"), _str(params, "language_code") or "")
        return [{"command": c, "description": d} for c, d in found]

    async def _m_getChat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        gifts = {
            "unlimited_gifts": False, "limited_gifts": False, "unique_gifts": False,
            "premium_subscription": False, "gifts_from_channels": False,
        }  # fmt: skip
        return {
            **self._chats[chat_id],
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": gifts,
        }

    async def _m_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        text, parse_mode, visible, entities = self._message_text(params)
        markup = self._reply_markup(params)
        reply_to = self._reply_to(chat_id, params)
        thread = self._send_thread(chat_id, params, reply_to)
        sent = SentMessage(
            message_id=self._take_message_id(chat_id), chat_id=chat_id, text=text, parse_mode=parse_mode,
            reply_markup=markup, date=int(time.time()), visible_text=visible, entities=entities,
            disable_notification=_bool(params, "disable_notification"), reply_to_message_id=reply_to,
            thread_id=thread,
        )  # fmt: skip
        return self._record_sent(sent)

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        if not self.drafts_supported:
            raise ApiError(404, "Not Found")
        chat_id = self._chat_id(params)
        if self._chats[chat_id]["type"] != "private" or chat_id in self._draftless:
            raise _bad("TEXTDRAFT_PEER_INVALID")  # what Telegram answers for groups and channels
        self._send_thread(chat_id, params)  # private chats have no topics here: any is not found
        draft_id = _int(params, "draft_id", empty="draft_id is empty")
        if not draft_id:
            raise _bad("DRAFT_ID_INVALID")
        text = _str(params, "text") or ""
        parse_mode = _str(params, "parse_mode") or None
        visible, _ = self._parse_text(text, parse_mode)
        if _utf16_len(visible) > MAX_TEXT:
            raise _bad("message is too long")
        self.drafts.append(DraftCall(chat_id, draft_id, text, parse_mode, time.time(), visible))
        return True

    async def _m_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        sent = self._editable(params, "message to edit not found")
        if sent.kind != "text":
            raise _bad("there is no text in the message to edit")
        text, parse_mode, visible, entities = self._message_text(params)
        markup = self._reply_markup(params, inline_only=True)
        if visible == sent.visible_text and entities == sent.entities and markup == sent.reply_markup:
            raise _bad(NOT_MODIFIED[len("Bad Request: ") :])
        sent.edits.append(sent.text)
        sent.markup_edits.append(sent.reply_markup)
        sent.text, sent.parse_mode, sent.visible_text, sent.entities = text, parse_mode, visible, entities
        sent.reply_markup = markup
        sent.edit_date = int(time.time())
        return self._message_dict(sent)

    async def _m_editMessageCaption(self, params: dict[str, Any]) -> dict[str, Any]:
        sent = self._editable(params, "message to edit not found")
        if sent.kind == "text":
            raise _bad("there is no caption in the message to edit")
        caption = _str(params, "caption") or ""
        parse_mode = _str(params, "parse_mode") or None
        visible, entities = self._parse_text(caption, parse_mode)
        if _utf16_len(visible) > MAX_CAPTION:
            raise _bad("message caption is too long")
        markup = self._reply_markup(params, inline_only=True)
        if visible == sent.visible_text and entities == sent.entities and markup == sent.reply_markup:
            raise _bad(NOT_MODIFIED[len("Bad Request: ") :])
        sent.edits.append(sent.text)
        sent.markup_edits.append(sent.reply_markup)
        sent.text, sent.parse_mode, sent.visible_text, sent.entities = (
            caption or None,
            parse_mode,
            visible,
            entities,
        )
        sent.reply_markup = markup
        sent.edit_date = int(time.time())
        return self._message_dict(sent)

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> dict[str, Any]:
        sent = self._editable(params, "message to edit not found")
        markup = self._reply_markup(params, inline_only=True)
        if markup == sent.reply_markup or (
            markup is None and "inline_keyboard" not in (sent.reply_markup or {})
        ):
            raise _bad(NOT_MODIFIED[len("Bad Request: ") :])
        sent.markup_edits.append(sent.reply_markup)
        sent.reply_markup = markup
        sent.edit_date = int(time.time())
        return self._message_dict(sent)

    async def _m_deleteMessage(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat_id(params)
        message_id = _int(params, "message_id", empty="message identifier is not specified")
        assert message_id is not None
        sent = self._by_id.get((chat_id, message_id))
        if sent is not None and not sent.deleted:
            sent.deleted = True
            return True
        if (chat_id, message_id) in self._user_messages and self._chats[chat_id]["type"] == "private":
            del self._user_messages[(chat_id, message_id)]
            return True
        raise _bad("message to delete not found")

    async def _m_sendChatAction(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat_id(params)
        action = _str(params, "action")
        if not action:
            raise _bad("action is empty")
        if action not in CHAT_ACTIONS:
            raise _bad("wrong parameter action in request")
        thread = self._send_thread(chat_id, params, action=True)
        self.chat_actions.append(ChatActionCall(chat_id, action, time.time(), thread))
        return True

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> bool:
        query_id = _str(params, "callback_query_id") or ""
        pending = self._callbacks.get(query_id)
        expired = (
            pending is not None
            and self.callback_query_ttl is not None
            and time.monotonic() - pending.created > self.callback_query_ttl
        )
        if pending is None or expired:
            raise _bad("query is too old and response timeout expired or query ID is invalid")
        text = _str(params, "text")
        if text is not None and len(text) > MAX_CALLBACK_ANSWER:
            raise _bad("MESSAGE_TOO_LONG")
        del self._callbacks[query_id]
        answer = CallbackAnswer(query_id, text, _bool(params, "show_alert"), _str(params, "url"), time.time())
        self.callback_answers.append(answer)
        return True

    async def _m_setMessageReaction(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat_id(params)
        message_id = _int(params, "message_id", empty="message identifier is not specified")
        assert message_id is not None
        if self._any_message_dict(chat_id, message_id) is None:
            raise _bad("message to react not found")
        reaction = _json(params, "reaction", "can't parse reaction types JSON object") or []
        if not isinstance(reaction, list):
            raise _bad("can't parse reaction types JSON object")
        if len(reaction) > 1:
            raise _bad("REACTIONS_TOO_MANY")
        for item in reaction:
            if not isinstance(item, dict) or item.get("type") not in ("emoji", "custom_emoji", "paid"):
                raise _bad("can't parse reaction types JSON object")
            if item["type"] == "emoji" and item.get("emoji") not in _reaction_emojis():
                raise _bad("REACTION_INVALID")
        self.reactions[(chat_id, message_id)] = reaction
        return True

    async def _m_createForumTopic(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._forum(params)
        name = _str(params, "name") or ""
        if not 1 <= len(name) <= 128:
            raise _bad("TOPIC_TITLE_EMPTY" if not name else "TOPIC_TITLE_TOO_LONG")  # not verified
        color = _int(params, "icon_color", required=False) or TOPIC_COLOR
        topic = self._open_topic(chat_id, name, color, None)
        return {"message_thread_id": topic.thread_id, "name": name, "icon_color": color}

    async def _m_closeForumTopic(self, params: dict[str, Any]) -> bool:
        topic = self._topic_param(params)
        if topic.closed:
            raise _bad("TOPIC_NOT_MODIFIED")
        topic.closed = True
        return True

    async def _m_reopenForumTopic(self, params: dict[str, Any]) -> bool:
        topic = self._topic_param(params)
        if not topic.closed:
            raise _bad("TOPIC_NOT_MODIFIED")
        topic.closed = False
        return True

    async def _m_deleteForumTopic(self, params: dict[str, Any]) -> bool:
        self._remove_topic(self._topic_param(params))
        return True

    def _forum(self, params: dict[str, Any]) -> int:
        chat_id = self._chat_id(params)
        if not self._chats[chat_id].get("is_forum"):
            raise _bad("the chat is not a forum")
        return chat_id

    def _topic_param(self, params: dict[str, Any]) -> Topic:
        chat_id = self._forum(params)
        thread = _int(params, "message_thread_id", empty="message thread identifier is not specified")
        topic = self.topics.get((chat_id, thread or 0))
        if topic is None or topic.deleted:
            raise _bad("message thread not found")  # not verified for these methods
        return topic

    async def _m_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._send_file(params, "document")

    async def _m_sendPhoto(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._send_file(params, "photo")

    def _send_file(self, params: dict[str, Any], kind: str) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        value = params.get(kind)
        if isinstance(value, str) and value.startswith("attach://"):  # a multipart part named so
            value = params.get(value.removeprefix("attach://"))
        stored = self._resolve_file(value, kind)
        caption = _str(params, "caption")
        parse_mode = _str(params, "parse_mode") or None
        visible, entities = self._parse_text(caption or "", parse_mode)
        if _utf16_len(visible) > MAX_CAPTION:
            raise _bad("message caption is too long")
        markup, reply_to = self._reply_markup(params), self._reply_to(chat_id, params)
        thread = self._send_thread(chat_id, params, reply_to)
        sent = SentMessage(
            message_id=self._take_message_id(chat_id), chat_id=chat_id, text=caption, parse_mode=parse_mode,
            reply_markup=markup, date=int(time.time()), kind=kind, visible_text=visible,
            entities=entities, disable_notification=_bool(params, "disable_notification"),
            reply_to_message_id=reply_to, document_filename=stored.name,
            document_content=stored.content, document_mime_type=stored.mime_type, file_id=stored.file_id,
            thread_id=thread,
        )  # fmt: skip
        return self._record_sent(sent)

    def _resolve_file(self, value: Any, kind: str) -> _StoredFile:
        if isinstance(value, UploadedFile):
            if not value.content:
                raise _bad("file must be non-empty")
            if kind == "photo" and len(value.content) > MAX_PHOTO_UPLOAD:
                raise _bad("PHOTO_SAVE_FILE_INVALID")  # not verified against Telegram
            if len(value.content) > MAX_UPLOAD:
                raise ApiError(413, "Request Entity Too Large")
            return self._store_file(value.content, kind + "s", value.filename, value.content_type)
        if isinstance(value, str) and value in self._files:
            return self._files[value]
        if not value:
            raise _bad(f"there is no {kind} in the request")
        raise _bad("wrong file identifier/HTTP URL specified")

    async def _m_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        stored = self._files.get(_str(params, "file_id") or "")
        if stored is None:
            raise _bad("invalid file_id")
        if stored.size > self.max_download_bytes:
            raise _bad("file is too big")
        return {
            "file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
            "file_size": stored.size, "file_path": stored.path,
        }  # fmt: skip


def _webhook_queue(update: dict[str, Any]) -> object:
    """The queue an update waits in: its chat's (Telegram keeps one per chat), else its own."""
    for kind in ("message", "edited_message", "channel_post", "edited_channel_post"):
        body = update.get(kind)
        if isinstance(body, dict) and isinstance(body.get("chat"), dict):
            return body["chat"].get("id")
    query = update.get("callback_query")
    message = query.get("message") if isinstance(query, dict) else None
    if isinstance(message, dict) and isinstance(message.get("chat"), dict):
        return message["chat"].get("id")
    return ("update", update["update_id"])


def _check_window(hits: deque[float], now: float, window: float, limit: float) -> None:
    """Telegram's 429 when ``hits`` (times of earlier calls, oldest first) already hold ``limit``
    calls within ``window`` seconds of ``now``; forgets the ones outside it."""
    while hits and now - hits[0] >= window:
        hits.popleft()
    if len(hits) >= limit:
        retry = max(1, math.ceil(window - (now - hits[0])))
        raise ApiError(429, f"Too Many Requests: retry after {retry}", retry)


def _default_description(status: int, retry_after: int | None) -> str:
    return {
        429: f"Too Many Requests: retry after {retry_after}",
        400: "Bad Request: injected failure",
        401: "Unauthorized",
        403: "Forbidden: bot was blocked by the user",
        409: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
        500: "Internal Server Error",
        502: "Bad Gateway",
        503: "Service Unavailable",
        504: "Gateway Timeout",
    }.get(status, "Injected failure")


def _chaos_failure(kind: Fault, chaos: _Chaos) -> _Failure:
    status = {Fault.TOO_MANY_REQUESTS: 429, Fault.SERVER_ERROR: 500, Fault.INVALID_JSON: 200}.get(kind, 502)
    if kind in (Fault.HANG_504, Fault.APPLIED_504):
        status = 504
    retry_after = chaos.retry_after if status == 429 else None
    return _Failure(
        status, _default_description(status, retry_after), retry_after, 1,
        hang=chaos.hang if status == 504 else 0.0, applied=kind == Fault.APPLIED_504,
        invalid_json=kind in (Fault.BAD_GATEWAY_HTML, Fault.INVALID_JSON), kind=kind,
    )  # fmt: skip


def _html_page(status: int) -> str:
    """What sits in front of Telegram answers with when it fails: nginx's error page (for 200, a
    proxy's HTML page served with success)."""
    if status == 200:
        return "<html><head><title>Access denied</title></head><body><h1>Access denied</h1></body></html>\n"
    title = f"{status} {HTTPStatus(status).phrase}"
    return (
        f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n"
        "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    )


def _entity_dict(entity: HTMLEntity) -> dict[str, Any]:
    body: dict[str, Any] = {"type": entity.type, "offset": entity.offset, "length": entity.length}
    if entity.type == "text_link":
        body["url"] = entity.argument
    elif entity.type == "custom_emoji":
        body["custom_emoji_id"] = entity.argument
    elif entity.type == "pre" and entity.argument:
        body["language"] = entity.argument
    return body


def _check_inline_keyboard(rows: Any) -> None:
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise _bad("can't parse inline keyboard markup JSON object")
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not isinstance(button.get("text"), str):
                raise _bad('can\'t parse inline keyboard button: Field "text" must be of type String')
            if not button["text"]:
                raise _bad("BUTTON_TEXT_INVALID")  # not verified against Telegram
            if "callback_data" in button:
                data = button["callback_data"]
                if not isinstance(data, str) or not 1 <= len(data.encode("utf-8")) <= 64:
                    raise _bad("BUTTON_DATA_INVALID")
            elif "url" in button:
                if not re.match(r"^(https?|tg)://\S+$", str(button["url"])):
                    raise _bad("BUTTON_URL_INVALID")
            elif not any(
                k in button
                for k in ("web_app", "login_url", "switch_inline_query", "switch_inline_query_current_chat",
                          "switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay")
            ):  # fmt: skip
                raise _bad(
                    "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
                )


_REACTIONS: frozenset[str] | None = None


def _reaction_emojis() -> frozenset[str]:
    global _REACTIONS
    if _REACTIONS is None:
        from telegram.constants import ReactionEmoji

        _REACTIONS = frozenset(str(e.value) for e in ReactionEmoji)
    return _REACTIONS
