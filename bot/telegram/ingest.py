"""Durable long polling: an update is stored before Telegram is told it arrived.

python-telegram-bot's own updater confirms updates before handlers run, so a
crash there loses them. This loop calls ``getUpdates`` itself and, for each
update in order, lets the handlers run (they only accept mail or answer
briefly — turns run elsewhere), then stores ``update_id + 1`` as the offset
in the database. The next ``getUpdates`` call sends that offset, which is
what confirms the update to Telegram. A crash anywhere in between makes
Telegram redeliver; the handlers' mail is keyed by ``update_id``, so a
redelivered message is dropped as a duplicate and never answered twice.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import Application

from runtime.log import get_logger
from runtime.storage.sessions import SessionStore

log = get_logger("telegram.ingest")

OFFSET_KEY = "telegram.update_offset"
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]


class Ingest:
    def __init__(self, application: Application, store: SessionStore, poll_timeout: int) -> None:  # type: ignore[type-arg]
        self.application = application
        self.store = store
        self.poll_timeout = poll_timeout
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        offset = int(await self.store.get_value(OFFSET_KEY) or 0)
        backoff = 1.0
        while not self._stopping.is_set():
            try:
                updates = await self.application.bot.get_updates(
                    offset=offset or None,
                    timeout=self.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                    read_timeout=self.poll_timeout + 10,
                )
                backoff = 1.0
            except InvalidToken:
                raise
            except RetryAfter as error:
                delay = error.retry_after
                await self._sleep(delay.total_seconds() if isinstance(delay, timedelta) else float(delay))
                continue
            except (Conflict, NetworkError, TelegramError) as error:
                log.warning("getUpdates failed: %s; retrying in %.0fs", error, backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            for update in updates:
                if self._stopping.is_set():
                    break
                await self.application.process_update(update)
                offset = update.update_id + 1
                await self.store.set_value(OFFSET_KEY, str(offset))

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass
