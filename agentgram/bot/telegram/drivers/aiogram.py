"""The aiogram 3 driver (``telegram.library: aiogram``): :class:`~..port.BotApi` over ``aiogram.Bot``.

It owns aiogram's transport and types and nothing else: the calls, the mapping of
aiogram's exceptions onto :mod:`..port`'s (:func:`_mapped`, the one place), the
rate limit, the metrics hook, and :func:`parse_update`.

Choices made where the issue is silent:

* **The rate limit is one session middleware** (:class:`RateLimit`), as
  aiogram has no built-in limiter. It follows python-telegram-bot's
  ``AIORateLimiter`` as :mod:`..ratelimit` tunes it: ``messages_per_second``
  overall and 20 a minute per group (negative ids, ``@channel`` names); a
  private chat has only the overall budget, as with PTB. The calls in ``UNMETERED`` skip the budget
  and those in ``UNLIMITED`` the whole limiter (both sets come from
  :mod:`..ratelimit`, so the two drivers cannot drift). It only paces: a 429 is
  raised at once, as PTB's limiter with ``max_retries=0`` raises it, to the one
  retry layer (:mod:`..core.chat_queue`), which pauses the chat's queue. In a
  cluster it is :class:`SharedRateLimit` instead: the same calls paced by the
  budget every instance shares, overall and per chat (:mod:`..core.shared_budget`).
* **The metrics hook is the innermost middleware** (:class:`Counted`): it sees
  each HTTP request once, retries included, and labels it as
  :class:`~.ptb.MeteredRequest` does. aiogram decodes the body before it
  reads the status, so an answer that is not JSON is counted ``error``
  whatever its status (PTB counts it by status). A file download passes no
  middleware; it is counted as ``file`` where it is made.
* **Raw ``getUpdates`` is a method of our own** (:class:`_RawUpdates`) whose
  result type is a plain JSON list: it passes the same session, middlewares
  and error mapping as every call, and pydantic checks only that the answer is
  a list, so one update aiogram cannot read fails only itself, in
  :func:`parse_update`.
* Timeouts: aiogram has one total timeout per request, :data:`CALL_TIMEOUT`
  unless a call says otherwise; a call's ``read_timeout``/``write_timeout``
  becomes it (rounded up to whole seconds, aiogram's unit), a long poll's
  ``read_timeout`` is already the whole wait. A file download is streamed
  through the session's own aiohttp client (:meth:`AiogramApi._stream`), since
  ``Bot.download_file`` knows only a total timeout: its ``read_timeout`` is the
  longest gap between reads, as PTB's is.
* A failed download's HTTP status is all its error says (:func:`_http_error`):
  aiohttp's own text holds the file URL, and the URL holds the bot token.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import aiohttp

import agentgram.bot.telegram.drivers.aiogram_models  # noqa: F401  (first: see its docstring)

# isort: split
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.session.middlewares.base import BaseRequestMiddleware, NextRequestMiddlewareType
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramConflictError,
    TelegramEntityTooLarge,
    TelegramForbiddenError,
    TelegramMigrateToChat,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.methods import TelegramMethod
from aiogram.methods.base import TelegramType
from aiogram.types import BotCommand as AiogramCommand
from aiogram.types import (
    BotCommandScopeAllGroupChats,
    BufferedInputFile,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReactionTypeCustomEmoji,
    ReactionTypeEmoji,
    ReactionTypePaid,
    ReplyParameters,
)
from aiogram.types import Message as AiogramMessage
from aiogram.types import Update as AiogramUpdate
from aiogram.utils.token import TokenValidationError
from aiolimiter import AsyncLimiter

from agentgram.bot.telegram.core import incoming
from agentgram.bot.telegram.core.metrics import result_of
from agentgram.bot.telegram.core.port import (
    ALLOWED_UPDATES,
    BadRequest,
    BotApi,
    BotCommand,
    BotIdentity,
    ChatMigrated,
    Conflict,
    FileUpload,
    Forbidden,
    InvalidToken,
    Keyboard,
    NetworkError,
    RetryAfter,
    Sent,
    TelegramError,
    Text,
    TimedOut,
    WebhookInfo,
    bad_request,
)
from agentgram.bot.telegram.core.ratelimit import UNLIMITED, UNMETERED
from agentgram.bot.telegram.core.shared_budget import SharedBudget

if TYPE_CHECKING:
    from aiogram.methods import Response

Count = Callable[[str, str], None]
"""``count(method, result)``: one Bot API request and how it ended (see :mod:`..metrics`)."""

PER_GROUP = (20, 60.0)
"""Messages per period (seconds) to one group, Telegram's published guidance (as PTB's limiter,
no limit per private chat beyond the overall one)."""
KEPT_CHAT_LIMITERS = 512
"""Past this many chats, the limiters of idle chats are dropped (PTB's threshold)."""
FILE = "file"
"""The ``method`` a file download is counted as (:mod:`..metrics`)."""
CALL_TIMEOUT = 10.0
"""Seconds an ordinary call may take in all (aiogram's 60 would hold a sender long past PTB's 5 s
connect, read and write timeouts)."""
CONNECT_TIMEOUT = 10.0
"""Seconds a file download may take to connect."""
CHUNK = 64 * 1024


def parse_update(raw: dict[str, Any], api: BotApi) -> incoming.Update:
    """One raw update as the handlers read it; raises (pydantic's ``ValidationError``) when
    aiogram cannot read it, so ingest can dead-letter it."""
    return incoming.from_library(AiogramUpdate.model_validate(raw), api)


class AiogramApi:
    """:class:`~..port.BotApi` over ``aiogram.Bot``, against the Bot API server at ``api_base_url``;
    paced alone at ``messages_per_second``, or by a cluster's ``shared`` budget."""

    def __init__(
        self,
        token: str,
        api_base_url: str,
        *,
        messages_per_second: float,
        count: Count | None = None,
        shared: SharedBudget | None = None,
    ) -> None:
        session = AiohttpSession(api=TelegramAPIServer.from_base(str(api_base_url)), timeout=CALL_TIMEOUT)
        pacer = RateLimit(messages_per_second) if shared is None else SharedRateLimit(shared)
        session.middleware(pacer)  # outermost: paced before it is counted
        if count is not None:
            session.middleware(Counted(count))
        try:
            self._bot = Bot(token, session=session)
        except TokenValidationError as error:  # aiogram checks the token's shape at once
            raise InvalidToken(str(error)) from error
        self._session = session  # its aiohttp client streams the downloads
        self._count = count
        self._me: BotIdentity | None = None

    @property
    def username(self) -> str | None:
        return None if self._me is None else self._me.username

    @property
    def id(self) -> int | None:
        return None if self._me is None else self._me.id

    async def get_me(self) -> BotIdentity:
        with _mapped():
            me = await self._bot.get_me()
        self._me = BotIdentity(id=me.id, username=me.username, first_name=me.first_name)
        return self._me

    async def delete_webhook(self) -> None:
        with _mapped():
            await self._bot.delete_webhook()

    async def set_webhook(
        self,
        url: str,
        secret_token: str,
        max_connections: int,
        allowed_updates: Sequence[str] = ALLOWED_UPDATES,
    ) -> None:
        with _mapped():
            await self._bot.set_webhook(
                url,
                secret_token=secret_token,
                max_connections=max_connections,
                allowed_updates=list(allowed_updates),
            )

    async def get_webhook_info(self) -> WebhookInfo:
        with _mapped():
            info = await self._bot.get_webhook_info()
        return WebhookInfo(info.url, info.pending_update_count, info.last_error_date, info.last_error_message)

    async def set_my_commands(
        self, commands: Sequence[BotCommand], *, language_code: str | None = None, groups: bool = False
    ) -> None:
        listed = [AiogramCommand(command=c.command, description=c.description) for c in commands]
        scope = BotCommandScopeAllGroupChats() if groups else None
        with _mapped():
            await self._bot.set_my_commands(listed, scope=scope, language_code=language_code)

    async def get_updates_raw(
        self,
        offset: int,
        timeout: int,
        read_timeout: float,
        allowed_updates: Sequence[str] = ALLOWED_UPDATES,
    ) -> list[Any]:
        method = _RawUpdates(offset=offset or None, timeout=timeout, allowed_updates=list(allowed_updates))
        with _mapped():
            return await self._bot(method, request_timeout=_seconds(read_timeout))

    async def send_message(self, chat_id: int, message: Text) -> Sent:
        with _mapped():
            sent = await self._bot.send_message(
                **message.send_params(chat_id),
                reply_markup=_markup(message.reply_markup),
                reply_parameters=_reply(message.reply_to_message_id),
            )
        return _sent(sent)

    async def edit_message_text(self, chat_id: int, message_id: int, message: Text) -> None:
        with _mapped():
            await self._bot.edit_message_text(
                **message.edit_params(chat_id, message_id), reply_markup=_markup(message.reply_markup)
            )

    async def edit_message_reply_markup(
        self, chat_id: int, message_id: int, reply_markup: Keyboard | None
    ) -> None:
        with _mapped():
            await self._bot.edit_message_reply_markup(
                chat_id=chat_id, message_id=message_id, reply_markup=_markup(reply_markup)
            )

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        with _mapped():
            await self._bot.delete_message(chat_id, message_id)

    async def send_message_draft(
        self, chat_id: int, draft_id: int, text: str, *, parse_mode: str | None, read_timeout: float
    ) -> None:
        with _mapped():
            await self._bot.send_message_draft(
                chat_id, draft_id, text=text, parse_mode=parse_mode, request_timeout=_seconds(read_timeout)
            )

    async def send_chat_action(self, chat_id: int, action: str, *, thread_id: int | None = None) -> None:
        with _mapped():
            await self._bot.send_chat_action(chat_id, action, message_thread_id=thread_id)

    async def send_file(self, chat_id: int, file: FileUpload) -> Sent:
        send = self._bot.send_photo if file.as_photo else self._bot.send_document
        with _mapped():
            message = await send(
                chat_id,
                BufferedInputFile(file.content, file.filename),
                caption=file.caption,
                parse_mode=file.parse_mode,
                reply_parameters=_reply(file.reply_to_message_id),
                disable_notification=file.disable_notification,
                message_thread_id=file.message_thread_id,
                request_timeout=_seconds(file.write_timeout),
            )
        return _sent(message)

    async def download(self, file_id: str, dest: Path, *, read_timeout: float) -> None:
        with _mapped():
            file = await self._bot.get_file(file_id)
        if file.file_path is None:
            raise BadRequest(f"Telegram gives no path to download file {file_id} from")
        with _mapped(), self._counted_download():
            await self._stream(file.file_path, dest, read_timeout)

    async def _stream(self, file_path: str, dest: Path, read_timeout: float) -> None:
        """The file's bytes to ``dest``, waiting at most ``read_timeout`` for each read."""
        url = self._session.api.file_url(self._bot.token, file_path)
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT, sock_read=read_timeout)
        client = await self._session.create_session()
        async with client.get(url, timeout=timeout, raise_for_status=True) as response:
            with dest.open("wb") as out:
                async for chunk in response.content.iter_chunked(CHUNK):
                    await asyncio.to_thread(out.write, chunk)

    async def answer_callback_query(
        self, callback_query_id: str, *, text: str | None = None, show_alert: bool = False
    ) -> None:
        with _mapped():
            await self._bot.answer_callback_query(callback_query_id, text=text, show_alert=show_alert)

    async def set_message_reaction(self, chat_id: int, message_id: int, emoji: str | None) -> None:
        reaction: list[ReactionTypeEmoji | ReactionTypeCustomEmoji | ReactionTypePaid] = (
            [] if emoji is None else [ReactionTypeEmoji(emoji=emoji)]
        )
        with _mapped():
            await self._bot.set_message_reaction(chat_id, message_id, reaction=reaction)

    async def close(self) -> None:
        await self._bot.session.close()

    @contextmanager
    def _counted_download(self) -> Iterator[None]:
        """A file download as one ``file`` request for the metrics hook (it passes no middleware)."""
        if self._count is None:
            yield
            return
        try:
            yield
        except aiohttp.ClientResponseError as error:
            self._count(FILE, result_of(error.status))
            raise
        except TimeoutError:
            self._count(FILE, "timeout")
            raise
        except Exception:
            self._count(FILE, "error")
            raise
        self._count(FILE, "ok")


class _RawUpdates(TelegramMethod[list[Any]]):
    """``getUpdates`` answered as plain JSON (aiogram's ``GetUpdates`` parses the batch): any
    list passes, an answer that is not one is aiogram's ``ClientDecodeError``."""

    __returning__: ClassVar[Any] = list[Any]
    __api_method__: ClassVar[str] = "getUpdates"

    offset: int | None = None
    timeout: int | None = None
    allowed_updates: list[str] | None = None


# --- the session's middlewares ----------------------------------------------------------


class RateLimit(BaseRequestMiddleware):
    """The message budget, and nothing else: a 429 passes as it came (module docstring)."""

    def __init__(self, messages_per_second: float) -> None:
        self._overall = AsyncLimiter(messages_per_second, 1.0)
        self._chats: dict[int | str, AsyncLimiter] = {}

    async def __call__(
        self,
        make_request: NextRequestMiddlewareType[TelegramType],
        bot: Bot,
        method: TelegramMethod[TelegramType],
    ) -> Response[TelegramType]:
        chat_id = getattr(method, "chat_id", None)
        metered = method.__api_method__ not in UNLIMITED | UNMETERED
        if isinstance(chat_id, int | str) and metered:
            if isinstance(chat_id, str) or chat_id < 0:  # a group or channel
                await self._group(chat_id).acquire()
            await self._overall.acquire()
        return await make_request(bot, method)

    def _group(self, chat_id: int | str) -> AsyncLimiter:
        limiter = self._chats.get(chat_id)
        if limiter is None:
            self._forget_idle()
            limiter = self._chats[chat_id] = AsyncLimiter(*PER_GROUP)
        return limiter

    def _forget_idle(self) -> None:
        """Drop the limiters with their whole budget left: they hold no history worth keeping."""
        if len(self._chats) >= KEPT_CHAT_LIMITERS:
            for key, limiter in list(self._chats.items()):
                if limiter.has_capacity(limiter.max_rate):
                    del self._chats[key]


class SharedRateLimit(BaseRequestMiddleware):
    """A cluster's instance's message budget: the calls :class:`RateLimit` meters, paced by the
    budget every instance shares (overall and per chat); a 429 passes as it came."""

    def __init__(self, shared: SharedBudget) -> None:
        self._shared = shared

    async def __call__(
        self,
        make_request: NextRequestMiddlewareType[TelegramType],
        bot: Bot,
        method: TelegramMethod[TelegramType],
    ) -> Response[TelegramType]:
        chat_id = getattr(method, "chat_id", None)
        if isinstance(chat_id, int | str) and method.__api_method__ not in UNLIMITED | UNMETERED:
            await self._shared.pace(chat_id)
        return await make_request(bot, method)


class Counted(BaseRequestMiddleware):
    """Each HTTP request's result for the metrics hook (a cancelled request is not counted)."""

    def __init__(self, count: Count) -> None:
        self._count = count

    async def __call__(
        self,
        make_request: NextRequestMiddlewareType[TelegramType],
        bot: Bot,
        method: TelegramMethod[TelegramType],
    ) -> Response[TelegramType]:
        try:
            response = await make_request(bot, method)
        except Exception as error:
            self._count(method.__api_method__, _result(error))
            raise
        self._count(method.__api_method__, "ok")
        return response


def _result(error: Exception) -> str:
    """The ``result`` label of a request that raised (:func:`~..metrics.result_of`'s labels)."""
    if isinstance(error, TelegramRetryAfter):
        return "429"
    if isinstance(error, TelegramServerError):
        return "5xx"
    if isinstance(error, TelegramEntityTooLarge):
        return "4xx"  # a 413, though aiogram files it under its network errors
    if isinstance(error, TelegramNetworkError):
        return "timeout" if isinstance(error.__cause__, TimeoutError) else "error"
    return "4xx" if isinstance(error, TelegramAPIError) else "error"


# --- aiogram's types and errors into and out of the port's -------------------------------


def _network_reason(message: str) -> str:
    """aiohttp's reason in one short clause: aiogram's "HTTP Client says - " prefix and the
    socket details in brackets left out (the log line quotes it in parentheses)."""
    reason = message.removeprefix("HTTP Client says - ")
    return reason.split(" [", 1)[0].split(" ssl:", 1)[0].strip() or reason


@contextmanager
def _mapped() -> Iterator[None]:
    """aiogram's (and aiohttp's) exceptions as :mod:`..port`'s, with Telegram's description; a 400
    for a forum topic that is gone is :class:`~..port.TopicGone` (:func:`~..port.bad_request`)."""
    try:
        yield
    except TelegramError:
        raise
    except TelegramMigrateToChat as error:
        raise ChatMigrated(_description(error), error.migrate_to_chat_id) from error
    except TelegramRetryAfter as error:
        raise RetryAfter(_description(error), float(error.retry_after)) from error
    except TelegramBadRequest as error:
        raise bad_request(error.message) from error
    except TelegramForbiddenError as error:
        raise Forbidden(error.message) from error
    except (TelegramUnauthorizedError, TelegramNotFound) as error:
        raise InvalidToken(error.message) from error
    except TelegramConflictError as error:
        raise Conflict(error.message) from error
    except TelegramNetworkError as error:  # aiohttp's failures, aiogram's timeout, a 413
        timed_out = isinstance(error.__cause__, TimeoutError)
        raise (TimedOut if timed_out else NetworkError)(_network_reason(error.message)) from error
    except TelegramAPIError as error:  # a 5xx, or a status Telegram does not document
        raise NetworkError(error.message) from error
    except ClientDecodeError as error:
        raise NetworkError(f"Invalid server response: {error.message}") from error
    except TimeoutError as error:
        raise TimedOut("Timed out") from error
    except aiohttp.ClientResponseError as error:  # a file download's status (its text has the URL)
        raise _http_error(error.status) from error
    except aiohttp.ClientError as error:
        raise NetworkError(f"{type(error).__name__}: {error}") from error


def _http_error(status: int) -> TelegramError:
    """A download's HTTP status as the port's error, classed as PTB classes a status (401 and
    404 are :class:`InvalidToken`, another 4xx a refusal, the rest transient)."""
    message = f"HTTP {status}"
    if status in (401, 404):
        return InvalidToken(message)
    if status == 403:
        return Forbidden(message)
    if status == 409:
        return Conflict(message)
    if 400 <= status < 500 and status != 429:
        return BadRequest(message)
    return NetworkError(message)


ORIGINAL = "\nOriginal description: "


def _description(error: TelegramRetryAfter | TelegramMigrateToChat) -> str:
    """Telegram's own words: aiogram puts its explanation before them."""
    return error.message.partition(ORIGINAL)[2] or error.message


def _markup(keyboard: Keyboard | None) -> InlineKeyboardMarkup | None:
    if keyboard is None:
        return None
    rows = [
        [InlineKeyboardButton(text=b.text, callback_data=b.callback_data) for b in row]
        for row in keyboard.rows
    ]
    return InlineKeyboardMarkup(inline_keyboard=rows)


def _reply(message_id: int | None) -> ReplyParameters | None:
    """A reply that Telegram sends without the quote when the message is gone."""
    if message_id is None:
        return None
    return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)


def _sent(message: AiogramMessage) -> Sent:
    return Sent(message_id=message.message_id, chat_id=message.chat.id)


def _seconds(timeout: float) -> int:
    """A timeout in aiogram's unit, whole seconds (rounded up: never shorter than asked)."""
    return math.ceil(timeout)


__all__ = ["AiogramApi", "Counted", "RateLimit", "SharedRateLimit", "parse_update"]
