"""A bot bound to one forum topic: :class:`TopicBot`, made by :func:`in_topic`.

In a forum supergroup each topic is a session of its own, and Telegram puts a message in a
topic only when the send names its ``message_thread_id``; one that does not lands in the General
topic, which is another session's. So every message, file and chat action for a topic must
carry its thread. Rather than have each handler and view pass the thread by hand (and one of
them forget it), they are given a bot bound to their topic: whatever it sends carries the
thread, and everything else (edits, deletions, reactions, downloads, answers to button presses:
the message or the query already says where it is) passes to the bot inside unchanged.

The General topic takes no thread id (Telegram refuses ``message_thread_id`` 1 for a message),
and neither does a chat without topics: :func:`in_topic` gives those the bot itself. A send to a
topic that is closed or deleted raises :class:`~.port.TopicGone`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgram.bot.telegram.core.port import (
    ALLOWED_UPDATES,
    BotApi,
    BotCommand,
    BotIdentity,
    FileUpload,
    Keyboard,
    Sent,
    Text,
    WebhookInfo,
)


class TopicBot:
    """:class:`~.port.BotApi` for one forum topic: ``inner``'s, with the thread ``thread_id`` put
    on every message, file and chat action to the topic's chat ``chat_id`` that names none (module
    docstring). What it sends to another chat (an owner's private chat) goes as ``inner`` sends it."""

    def __init__(self, inner: BotApi, chat_id: int, thread_id: int) -> None:
        self.inner = inner
        """The bot it sends through (the adapter's queued client, whose chat turns it keeps)."""
        self.chat_id = chat_id
        self.thread_id = thread_id

    def __repr__(self) -> str:
        return f"TopicBot({self.inner!r}, chat_id={self.chat_id}, thread_id={self.thread_id})"

    def _thread(self, chat_id: int, named: int | None) -> int | None:
        return named if named is not None or chat_id != self.chat_id else self.thread_id

    @property
    def username(self) -> str | None:
        return self.inner.username

    @property
    def id(self) -> int | None:
        return self.inner.id

    # --- what shows in the topic: carries its thread ----------------------------------------

    async def send_message(self, chat_id: int, message: Text) -> Sent:
        message = dataclasses.replace(
            message, message_thread_id=self._thread(chat_id, message.message_thread_id)
        )
        return await self.inner.send_message(chat_id, message)

    async def send_file(self, chat_id: int, file: FileUpload) -> Sent:
        file = dataclasses.replace(file, message_thread_id=self._thread(chat_id, file.message_thread_id))
        return await self.inner.send_file(chat_id, file)

    async def send_chat_action(self, chat_id: int, action: str, *, thread_id: int | None = None) -> None:
        await self.inner.send_chat_action(chat_id, action, thread_id=self._thread(chat_id, thread_id))

    # --- everything else: unchanged ----------------------------------------------------------

    async def get_me(self) -> BotIdentity:
        return await self.inner.get_me()

    async def delete_webhook(self) -> None:
        await self.inner.delete_webhook()

    async def set_webhook(
        self,
        url: str,
        secret_token: str,
        max_connections: int,
        allowed_updates: Sequence[str] = ALLOWED_UPDATES,
    ) -> None:
        await self.inner.set_webhook(url, secret_token, max_connections, allowed_updates)

    async def get_webhook_info(self) -> WebhookInfo:
        return await self.inner.get_webhook_info()

    async def set_my_commands(
        self, commands: Sequence[BotCommand], *, language_code: str | None = None, groups: bool = False
    ) -> None:
        await self.inner.set_my_commands(commands, language_code=language_code, groups=groups)

    async def get_updates_raw(
        self,
        offset: int,
        timeout: int,
        read_timeout: float,
        allowed_updates: Sequence[str] = ALLOWED_UPDATES,
    ) -> list[Any]:
        return await self.inner.get_updates_raw(offset, timeout, read_timeout, allowed_updates)

    async def edit_message_text(self, chat_id: int, message_id: int, message: Text) -> None:
        await self.inner.edit_message_text(chat_id, message_id, message)

    async def edit_message_reply_markup(
        self, chat_id: int, message_id: int, reply_markup: Keyboard | None
    ) -> None:
        await self.inner.edit_message_reply_markup(chat_id, message_id, reply_markup)

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        await self.inner.delete_message(chat_id, message_id)

    async def send_message_draft(
        self, chat_id: int, draft_id: int, text: str, *, parse_mode: str | None, read_timeout: float
    ) -> None:
        # drafts are shown in private chats only, which have no topics
        await self.inner.send_message_draft(
            chat_id, draft_id, text, parse_mode=parse_mode, read_timeout=read_timeout
        )

    async def download(self, file_id: str, dest: Path, *, read_timeout: float) -> None:
        await self.inner.download(file_id, dest, read_timeout=read_timeout)

    async def answer_callback_query(
        self, callback_query_id: str, *, text: str | None = None, show_alert: bool = False
    ) -> None:
        await self.inner.answer_callback_query(callback_query_id, text=text, show_alert=show_alert)

    async def set_message_reaction(self, chat_id: int, message_id: int, emoji: str | None) -> None:
        await self.inner.set_message_reaction(chat_id, message_id, emoji)

    async def close(self) -> None:
        await self.inner.close()


def in_topic(bot: BotApi, chat_id: int, thread_id: int | None) -> BotApi:
    """``bot`` bound to the forum topic ``thread_id`` of ``chat_id``; ``bot`` itself for None or 0
    (no topic: a chat without topics, or a forum's General topic, which takes no thread id). A bot
    already bound to a topic is rebound, not wrapped twice."""
    if isinstance(bot, TopicBot):
        bot = bot.inner
    if not thread_id:
        return bot
    return TopicBot(bot, chat_id, thread_id)


__all__ = ["TopicBot", "in_topic"]
