"""The python-telegram-bot driver (``telegram.library: ptb``, the default).

Its transport is PTB's ``ExtBot``: its HTTP layer (:class:`MeteredRequest`,
``HTTPXRequest`` counting every request) and its ``AIORateLimiter``
(:class:`MessageRateLimiter`: the flood limits, minus the calls that send
no message, :mod:`..ratelimit`). The limiter only paces: ``max_retries=0``, so a
429 is raised at once, to the one retry layer (:mod:`..core.chat_queue`), which
pauses the chat's queue. In a cluster the limiter is :class:`SharedLimiter`
instead: the same calls paced by the budget every instance shares
(:mod:`..core.shared_budget`). :class:`PtbApi` is the :class:`~..port.BotApi`
over it; every call maps PTB's exceptions onto the port's (:func:`_mapped`).
Raw updates are parsed with PTB's ``Update.de_json`` (:func:`parse_update`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import telegram
import telegram.error as ptb
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, ReactionTypeEmoji
from telegram._utils.types import ODVInput
from telegram.ext import AIORateLimiter, BaseRateLimiter, ExtBot
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from agentgram.bot.telegram.core import port
from agentgram.bot.telegram.core.incoming import Update, from_library
from agentgram.bot.telegram.core.metrics import count_call, result_of
from agentgram.bot.telegram.core.ratelimit import UNLIMITED, UNMETERED
from agentgram.bot.telegram.core.shared_budget import SharedBudget
from agentgram.runtime.infra.http import ReadClient, httpx_transport


def _not_a_retry_budget(record: logging.LogRecord) -> bool:
    """PTB logs every 429 its limiter does not retry as an error with a traceback ("Rate limit
    hit after maximum of 0 retries"); with ``max_retries=0`` that is every 429, which the chat
    queue waits out and logs itself."""
    return not str(record.msg).startswith("Rate limit hit after maximum of")


logging.getLogger("telegram.ext.AIORateLimiter").addFilter(_not_a_retry_budget)


class MessageRateLimiter(AIORateLimiter):
    """PTB's limiter, minus the calls that send no message (see :mod:`..ratelimit`); it paces and
    never retries (``max_retries=0``: the chat queue owns retries)."""

    def __init__(self, overall_max_rate: float) -> None:
        super().__init__(overall_max_rate=overall_max_rate, max_retries=0)

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Any]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        if endpoint in UNLIMITED:
            return await callback(*args, **kwargs)
        if endpoint in UNMETERED:
            data = {key: value for key, value in data.items() if key != "chat_id"}
        return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)


class SharedLimiter(BaseRateLimiter[int]):
    """The limiter of a cluster's instance: the calls :class:`MessageRateLimiter` meters, paced by
    the budget every instance shares (overall and per chat); it never retries either."""

    def __init__(self, shared: SharedBudget) -> None:
        self._shared = shared

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Any]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        chat_id = data.get("chat_id")
        if isinstance(chat_id, int | str) and endpoint not in UNLIMITED | UNMETERED:
            await self._shared.pace(chat_id)
        return await callback(*args, **kwargs)


def method_of(url: str, http_method: str) -> str:
    """The Bot API method a request calls: the URL's last segment (``…/bot<token>/sendMessage``).

    PTB posts every API call; a GET is a file download, whose URL ends in a file path.
    """
    return url.rsplit("/", 1)[-1] if http_method == "POST" else "file"


CONNECTIONS = 32
"""Connections to the Bot API at most (PTB's application builder takes 256); at Telegram's 30
messages a second and ≈ 0.1 s a request, 32 are plenty, and a request beyond them waits for one."""
POOL_WAIT = 30.0
"""Seconds a request waits for a free connection (httpx's default is 1 s: a burst of more than
:data:`CONNECTIONS` requests must queue, not fail)."""


class MeteredRequest(HTTPXRequest):
    """PTB's HTTP layer over aiohttp (:mod:`agentgram.runtime.infra.http` says why), counting each
    request's result (:func:`~..metrics.count_call`)."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        self._url = url  # the Bot API's: its proxy is looked up once (``runtime.infra.http``)
        super().__init__(**kwargs)

    def _build_client(self) -> httpx.AsyncClient:
        limits: httpx.Limits = self._client_kwargs["limits"]
        transport = httpx_transport(self._url, limits.max_connections or CONNECTIONS, limits.keepalive_expiry)
        return ReadClient(**{**self._client_kwargs, "transport": transport})

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        name = method_of(url, method)
        try:
            status, payload = await super().do_request(
                url, method, request_data, read_timeout, write_timeout, connect_timeout, pool_timeout
            )
        except ptb.TimedOut:  # before NetworkError, its base
            count_call(name, "timeout")
            raise
        except Exception:  # no answer (PTB's NetworkError); a cancelled request is not counted
            count_call(name, "error")
            raise
        count_call(name, result_of(status))
        return status, payload


@contextlib.asynccontextmanager
async def _mapped() -> AsyncIterator[None]:
    """PTB's exceptions as the port's (the most specific first: ``BadRequest`` is a
    ``NetworkError`` in PTB, ``TimedOut`` too); a 400 for a forum topic that is gone is
    :class:`~..port.TopicGone` (:func:`~..port.bad_request`)."""
    try:
        yield
    except ptb.RetryAfter as error:
        delay = error.retry_after
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        raise port.RetryAfter(error.message, seconds) from error
    except ptb.ChatMigrated as error:
        raise port.ChatMigrated(error.message, error.new_chat_id) from error
    except ptb.BadRequest as error:
        raise port.bad_request(error.message) from error
    except ptb.Forbidden as error:
        raise port.Forbidden(error.message) from error
    except ptb.InvalidToken as error:
        raise port.InvalidToken(error.message) from error
    except ptb.Conflict as error:
        raise port.Conflict(error.message) from error
    except ptb.TimedOut as error:
        raise port.TimedOut(error.message) from error
    except ptb.TelegramError as error:  # NetworkError: 5xx, invalid JSON, the connection
        raise port.NetworkError(error.message) from error


def _markup(keyboard: port.Keyboard | None) -> InlineKeyboardMarkup | None:
    if keyboard is None:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.text, callback_data=b.callback_data) for b in row] for row in keyboard.rows]
    )


def _sent(message: telegram.Message) -> port.Sent:
    return port.Sent(message.message_id, message.chat_id)


class PtbApi:
    """:class:`~..port.BotApi` over python-telegram-bot's ``ExtBot``; paced alone at
    ``per_second``, or by a cluster's ``shared`` budget."""

    def __init__(
        self,
        token: str,
        base_url: str,
        file_base_url: str,
        *,
        per_second: float,
        shared: SharedBudget | None = None,
    ) -> None:
        limiter = MessageRateLimiter(per_second) if shared is None else SharedLimiter(shared)
        self.bot: ExtBot[int] = ExtBot(
            token,
            base_url=base_url,
            base_file_url=file_base_url,
            request=MeteredRequest(base_url, connection_pool_size=CONNECTIONS, pool_timeout=POOL_WAIT),
            get_updates_request=MeteredRequest(base_url, connection_pool_size=1),
            rate_limiter=limiter,
        )
        self._started = False

    @property
    def username(self) -> str | None:
        return self.bot.username if self._started else None

    @property
    def id(self) -> int | None:
        return self.bot.id if self._started else None

    async def get_me(self) -> port.BotIdentity:
        async with _mapped():
            if not self._started:
                await self.bot.initialize()  # getMe, and the limiter's start
                self._started = True
            me = self.bot.bot
        return port.BotIdentity(me.id, me.username, me.first_name)

    async def delete_webhook(self) -> None:
        async with _mapped():
            await self.bot.delete_webhook()

    async def set_webhook(
        self,
        url: str,
        secret_token: str,
        max_connections: int,
        allowed_updates: Sequence[str] = port.ALLOWED_UPDATES,
    ) -> None:
        async with _mapped():
            await self.bot.set_webhook(
                url,
                secret_token=secret_token,
                max_connections=max_connections,
                allowed_updates=list(allowed_updates),
            )

    async def get_webhook_info(self) -> port.WebhookInfo:
        async with _mapped():
            info = await self.bot.get_webhook_info()
        return port.WebhookInfo(
            info.url, info.pending_update_count, info.last_error_date, info.last_error_message
        )

    async def set_my_commands(
        self, commands: Sequence[port.BotCommand], *, language_code: str | None = None, groups: bool = False
    ) -> None:
        listed = [telegram.BotCommand(c.command, c.description) for c in commands]
        scope = telegram.BotCommandScopeAllGroupChats() if groups else None
        async with _mapped():
            await self.bot.set_my_commands(listed, scope=scope, language_code=language_code)

    async def get_updates_raw(
        self,
        offset: int,
        timeout: int,
        read_timeout: float,
        allowed_updates: Sequence[str] = port.ALLOWED_UPDATES,
    ) -> list[Any]:
        """Through the bot's request layer directly: PTB's ``get_updates`` parses the whole batch
        or raises, and ``do_api_request`` refuses the methods it knows."""
        data: dict[str, Any] = {"timeout": timeout, "allowed_updates": list(allowed_updates)}
        if offset:
            data["offset"] = offset
        async with _mapped():
            result = await self.bot._post("getUpdates", data, read_timeout=read_timeout)
        if not isinstance(result, list):
            raise port.NetworkError(f"getUpdates answered something that is not a list: {result!r:.200}")
        return result

    async def send_message(self, chat_id: int, message: port.Text) -> port.Sent:
        reply: dict[str, Any] = {}
        if message.reply_to_message_id is not None:
            reply = {"reply_to_message_id": message.reply_to_message_id, "allow_sending_without_reply": True}
        async with _mapped():
            markup = _markup(message.reply_markup)
            sent = await self.bot.send_message(**message.send_params(chat_id), reply_markup=markup, **reply)
        return _sent(sent)

    async def edit_message_text(self, chat_id: int, message_id: int, message: port.Text) -> None:
        async with _mapped():
            await self.bot.edit_message_text(
                **message.edit_params(chat_id, message_id), reply_markup=_markup(message.reply_markup)
            )

    async def edit_message_reply_markup(
        self, chat_id: int, message_id: int, reply_markup: port.Keyboard | None
    ) -> None:
        async with _mapped():
            await self.bot.edit_message_reply_markup(
                chat_id=chat_id, message_id=message_id, reply_markup=_markup(reply_markup)
            )

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        async with _mapped():
            await self.bot.delete_message(chat_id, message_id)

    async def send_message_draft(
        self, chat_id: int, draft_id: int, text: str, *, parse_mode: str | None, read_timeout: float
    ) -> None:
        async with _mapped():
            await self.bot.send_message_draft(
                chat_id, draft_id, text, parse_mode=parse_mode, read_timeout=read_timeout
            )

    async def send_chat_action(self, chat_id: int, action: str, *, thread_id: int | None = None) -> None:
        async with _mapped():
            await self.bot.send_chat_action(chat_id, action, message_thread_id=thread_id)

    async def send_file(self, chat_id: int, file: port.FileUpload) -> port.Sent:
        send = self.bot.send_photo if file.as_photo else self.bot.send_document
        async with _mapped():
            message = await send(
                chat_id,
                file.content,
                filename=file.filename,
                caption=file.caption,
                parse_mode=file.parse_mode,
                reply_to_message_id=file.reply_to_message_id,
                allow_sending_without_reply=True,
                disable_notification=file.disable_notification,
                write_timeout=file.write_timeout,
                message_thread_id=file.message_thread_id,
            )
        return _sent(message)

    async def download(self, file_id: str, dest: Path, *, read_timeout: float) -> None:
        async with _mapped():
            file = await self.bot.get_file(file_id)
            if file.file_path is None:
                raise port.BadRequest("Telegram gave no path to download the file from")
            await file.download_to_drive(dest, read_timeout=read_timeout)

    async def answer_callback_query(
        self, callback_query_id: str, *, text: str | None = None, show_alert: bool = False
    ) -> None:
        async with _mapped():
            await self.bot.answer_callback_query(callback_query_id, text=text, show_alert=show_alert)

    async def set_message_reaction(self, chat_id: int, message_id: int, emoji: str | None) -> None:
        reaction = [ReactionTypeEmoji(emoji)] if emoji else []
        async with _mapped():
            await self.bot.set_message_reaction(chat_id, message_id, reaction)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.bot.shutdown()


def parse_update(raw: dict[str, Any], api: port.BotApi) -> Update:
    """One raw update through PTB's own parser (it raises for one it cannot read)."""
    update = telegram.Update.de_json(raw, None)
    if update is None:
        raise ValueError("python-telegram-bot parsed the update as nothing")
    return from_library(update, api)
