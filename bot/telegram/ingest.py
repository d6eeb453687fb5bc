"""Durable long polling: an update is stored before Telegram is told it arrived.

python-telegram-bot's own updater confirms updates before handlers run, so a
crash there loses them. This loop calls ``getUpdates`` itself and, for each
update in order, lets the handlers run (they only accept mail or answer
briefly — turns run elsewhere), then stores ``update_id + 1`` as the offset
in the database. The next ``getUpdates`` call sends that offset, which is
what confirms the update to Telegram. A crash anywhere in between makes
Telegram redeliver; the handlers' mail is keyed by ``update_id``, so a
redelivered message is dropped as a duplicate and never answered twice.

A plain message — the common update — hands its offset to the mailbox as a
:class:`~runtime.mailbox.Checkpoint`, committed in the same transaction as
the message (one write, not two); every other update stores its offset here
after its handlers ran.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from telegram import Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import Application

from runtime.log import get_logger
from runtime.mailbox import Checkpoint
from runtime.storage.sessions import SessionStore

log = get_logger("telegram.ingest")

OFFSET_KEY = "telegram.update_offset"
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]


class Ingest:
    def __init__(
        self,
        application: Application,  # type: ignore[type-arg]
        store: SessionStore,
        poll_timeout: int,
        checkpoints: dict[int, Checkpoint],
    ) -> None:
        self.application = application
        self.store = store
        self.poll_timeout = poll_timeout
        self.checkpoints = checkpoints  # the offset of the update being handled, by update_id
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
                offset = update.update_id + 1
                if not (await self._handle(update, Checkpoint(OFFSET_KEY, str(offset)))).stored:
                    await self.store.set_value(OFFSET_KEY, str(offset))

    async def _handle(self, update: Update, checkpoint: Checkpoint) -> Checkpoint:
        """Run the update's handlers, offering them its offset; tell whether they stored it."""
        self.checkpoints[update.update_id] = checkpoint
        try:
            await self.application.process_update(update)
        finally:
            self.checkpoints.pop(update.update_id, None)
        return checkpoint

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass
