"""The Telegram Bot API as the adapter uses it, whichever library speaks it (``telegram.library``).

Everything in ``bot/telegram/`` but ``drivers/`` is driver-neutral: the handlers,
delivery, the sender's retry policy, ingest, files. They talk to a
:class:`BotApi`, read the updates of :mod:`.incoming`, build keyboards as data
(:class:`Keyboard`) and catch the errors below. A driver
(:mod:`.drivers.ptb`, :mod:`.drivers.aiogram`) implements :class:`BotApi` with
its library's client, turns its library's keyboard and update types into and
out of these, and maps its library's exceptions onto this module's at its
boundary, so what is transient, what is a refusal and how long a 429 asks to
wait is decided once (:mod:`.sender`).

Method names and parameters are the Bot API's own (``send_message``,
``chat_id``, ``reply_to_message_id``…), so both libraries map onto them
one to one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

HTML = "HTML"
"""The one parse mode the adapter sends (``parse_mode=HTML``); ``None`` sends plain text."""
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
"""The update kinds ``getUpdates`` asks for."""


class TelegramError(Exception):
    """A Bot API call that failed; ``message`` is Telegram's description (or the library's),
    worded alike whichever driver raised it: "Bad Request: no such thing" reads "No such thing",
    as python-telegram-bot words it."""

    def __init__(self, message: str) -> None:
        stripped = message.removeprefix("Error: ").removeprefix("[Error]: ").removeprefix("Bad Request: ")
        message = stripped.capitalize() if stripped != message else message
        super().__init__(message)
        self.message = message


class BadRequest(TelegramError):
    """400: Telegram refuses this request as it is (a retry cannot change that)."""


class TopicGone(BadRequest):
    """400: the forum topic is closed or deleted ("TOPIC_CLOSED", "TOPIC_DELETED", "message
    thread not found"). Nothing sent to it can land until an admin reopens it (or ever, once
    deleted), so a caller can tell a gone topic from a refusal of this one message; it stays a
    :class:`BadRequest`, so whoever handles those handles it too."""


TOPIC_GONE = ("topic_closed", "topic_deleted", "message thread not found")
"""Telegram's descriptions of a 400 for a topic that is gone, lowercased (its errors are worded
"Topic_closed" once the "Bad Request: " prefix is stripped)."""


def bad_request(message: str) -> BadRequest:
    """A 400 as the port's error: :class:`TopicGone` when Telegram's description says the forum
    topic is gone, a plain :class:`BadRequest` otherwise. Both drivers map their 400s here."""
    lowered = message.lower()
    gone = any(description in lowered for description in TOPIC_GONE)
    return TopicGone(message) if gone else BadRequest(message)


class Forbidden(TelegramError):
    """403: the user blocked the bot or left the chat."""


class InvalidToken(TelegramError):
    """401 (and 404, which is how Telegram answers a method this server does not have)."""


class Conflict(TelegramError):
    """409: another poller or a webhook holds this token's updates."""


class ChatMigrated(TelegramError):
    """400 with ``migrate_to_chat_id``: the group became a supergroup."""

    def __init__(self, message: str, new_chat_id: int) -> None:
        super().__init__(message)
        self.new_chat_id = new_chat_id


class RetryAfter(TelegramError):
    """429: flood control; ``retry_after`` is the seconds Telegram asks to wait."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NetworkError(TelegramError):
    """Transient: a 5xx, a dropped connection, an answer that is not JSON."""


class TimedOut(NetworkError):
    """Transient: no answer in time (the request may or may not have been carried out)."""


@dataclass(slots=True, frozen=True)
class KeyButton:
    """An inline button: what it shows and the ``callback_data`` a press sends back."""

    text: str
    callback_data: str


@dataclass(slots=True, frozen=True, init=False)
class Keyboard:
    """An inline keyboard as data: rows of buttons."""

    rows: tuple[tuple[KeyButton, ...], ...]

    def __init__(self, rows: Iterable[Iterable[KeyButton]]) -> None:
        object.__setattr__(self, "rows", tuple(tuple(row) for row in rows))

    def buttons(self) -> list[KeyButton]:
        return [button for row in self.rows for button in row]


@dataclass(slots=True, frozen=True)
class Sent:
    """A message Telegram accepted: where it is."""

    message_id: int
    chat_id: int


@dataclass(slots=True, frozen=True)
class Text:
    """A message's text to send or to show instead (``edit_message_text``)."""

    text: str
    parse_mode: str | None = None  # HTML, or None for plain text
    reply_markup: Keyboard | None = None
    disable_notification: bool = False
    reply_to_message_id: int | None = None
    message_thread_id: int | None = None  # the forum topic; None: the chat itself (or General)

    def send_params(self, chat_id: int) -> dict[str, Any]:
        """``sendMessage``'s parameters but the keyboard and the reply (each library has its own
        types for them), named as both libraries' ``send_message`` takes them; the topic only
        when there is one."""
        params: dict[str, Any] = {
            "chat_id": chat_id,
            "text": self.text,
            "parse_mode": self.parse_mode,
            "disable_notification": self.disable_notification,
        }
        if self.message_thread_id is not None:
            params["message_thread_id"] = self.message_thread_id
        return params

    def edit_params(self, chat_id: int, message_id: int) -> dict[str, Any]:
        """``editMessageText``'s parameters but the keyboard (each library has its own type for
        it), named as both libraries' ``edit_message_text`` takes them."""
        return {
            "text": self.text,
            "chat_id": chat_id,
            "message_id": message_id,
            "parse_mode": self.parse_mode,
        }


@dataclass(slots=True, frozen=True)
class FileUpload:
    """A file to send as a document (or a photo): its bytes, the name the chat shows, its caption."""

    content: bytes
    filename: str
    as_photo: bool = False
    caption: str | None = None
    parse_mode: str | None = None
    reply_to_message_id: int | None = None
    disable_notification: bool = False
    write_timeout: float = 20.0
    message_thread_id: int | None = None  # the forum topic; None: the chat itself (or General)

    @property
    def method(self) -> str:
        return "sendPhoto" if self.as_photo else "sendDocument"


@dataclass(slots=True, frozen=True)
class BotIdentity:
    id: int
    username: str | None
    first_name: str


@dataclass(slots=True, frozen=True)
class BotCommand:
    command: str
    description: str


@dataclass(slots=True, frozen=True)
class WebhookInfo:
    """``getWebhookInfo``'s answer, the part agentgram reports (``/healthz`` in webhook mode)."""

    url: str
    pending_update_count: int = 0
    last_error_date: datetime | None = None
    last_error_message: str | None = None


class BotApi(Protocol):
    """What the adapter asks of Telegram. Every method raises this module's errors only."""

    @property
    def username(self) -> str | None:
        """The bot's username, once :meth:`get_me` answered (commands may be addressed to it)."""

    @property
    def id(self) -> int | None:
        """The bot's user id, once :meth:`get_me` answered (which messages are its own)."""

    async def get_me(self) -> BotIdentity: ...
    async def delete_webhook(self) -> None:
        """Polling's start only: a bot in webhook mode never calls it (it would end the webhook)."""

    async def set_webhook(
        self,
        url: str,
        secret_token: str,
        max_connections: int,
        allowed_updates: Sequence[str] = ALLOWED_UPDATES,
    ) -> None:
        """``setWebhook`` (idempotent), never with ``drop_pending_updates``: updates Telegram
        holds for the bot are delivered, not dropped."""

    async def get_webhook_info(self) -> WebhookInfo: ...
    async def set_my_commands(
        self, commands: Sequence[BotCommand], *, language_code: str | None = None, groups: bool = False
    ) -> None:
        """The command menu (``groups``: the one group chats show, scope ``all_group_chats``)."""
        ...

    async def get_updates_raw(
        self,
        offset: int,
        timeout: int,
        read_timeout: float,
        allowed_updates: Sequence[str] = ALLOWED_UPDATES,
    ) -> list[Any]:
        """``getUpdates`` as raw JSON, one item per update, unparsed (ingest parses each on its
        own so one the library cannot read costs only itself); ``offset`` 0 is not sent. A result
        that is not a JSON list raises :class:`NetworkError`. ``timeout`` is the long poll's, which
        Telegram holds the request open for; ``read_timeout`` the whole wait for the answer, so it
        should exceed ``timeout`` (ingest gives it a margin)."""

    async def send_message(self, chat_id: int, message: Text) -> Sent:
        """A reply to a message that is gone is sent without the reply. To a forum topic that is
        closed or deleted (``message.message_thread_id``) it raises :class:`TopicGone`, as
        :meth:`send_file` and :meth:`send_chat_action` do."""

    async def edit_message_text(self, chat_id: int, message_id: int, message: Text) -> None:
        """The message's text and keyboard become ``message``'s (its reply and silence do not apply)."""

    async def edit_message_reply_markup(
        self, chat_id: int, message_id: int, reply_markup: Keyboard | None
    ) -> None: ...

    async def delete_message(self, chat_id: int, message_id: int) -> None: ...

    async def send_message_draft(
        self, chat_id: int, draft_id: int, text: str, *, parse_mode: str | None, read_timeout: float
    ) -> None: ...

    async def send_chat_action(self, chat_id: int, action: str, *, thread_id: int | None = None) -> None:
        """``action``: the Bot API's name (``typing``, ``upload_document``, ``record_voice``…);
        ``thread_id``: the forum topic it shows in (None: the chat itself)."""

    async def send_file(self, chat_id: int, file: FileUpload) -> Sent:
        """``sendDocument``, or ``sendPhoto`` for ``file.as_photo``; like a message, a reply to a
        message that is gone is sent without the reply."""

    async def download(self, file_id: str, dest: Path, *, read_timeout: float) -> None:
        """``getFile``, then the file's bytes to ``dest``. :class:`BadRequest` when Telegram
        gives no path to download it from."""

    async def answer_callback_query(
        self, callback_query_id: str, *, text: str | None = None, show_alert: bool = False
    ) -> None: ...

    async def set_message_reaction(self, chat_id: int, message_id: int, emoji: str | None) -> None: ...

    async def close(self) -> None:
        """Close the client's connections (the bot stops)."""


__all__ = [
    "ALLOWED_UPDATES",
    "HTML",
    "TOPIC_GONE",
    "BadRequest",
    "BotApi",
    "BotCommand",
    "BotIdentity",
    "ChatMigrated",
    "Conflict",
    "FileUpload",
    "Forbidden",
    "InvalidToken",
    "KeyButton",
    "Keyboard",
    "NetworkError",
    "RetryAfter",
    "Sent",
    "TelegramError",
    "Text",
    "TimedOut",
    "TopicGone",
    "WebhookInfo",
    "bad_request",
]
