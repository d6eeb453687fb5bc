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
after its handlers ran. The offset reaches the handler as a value: the loop
offers it in a context variable around ``process_update`` (PTB awaits a
blocking handler in the calling task, so the handler sees it), and the
handler whose mail stored it takes it back (:func:`checkpoint_stored`) —
nothing is shared between updates.

**Poison updates.** Telegram adds fields and update types with every Bot API
release and the library trails behind: python-telegram-bot raises for a whole
``getUpdates`` batch when one update lacks a field it requires. So the batch
is fetched as raw JSON and each update parsed on its own. One that does not
parse is stored raw as a dead letter together with the offset past it (one
transaction), logged once at WARNING, and skipped; the rest of its batch goes
on. An update of a type agentgram does not know is confirmed and ignored.

**Recovery.** Failed polls (5xx, invalid JSON, network errors, timeouts, 409
Conflict when another poller holds the token) are retried with capped
backoff, first after :data:`FIRST_RETRY`, at most :data:`MAX_RETRY` apart. A
long poll that has not answered by its timeout plus :data:`WATCHDOG_GRACE` is
cancelled and started again (a half-dead connection never answers at all).
Only a 401 — the token was revoked — ends the loop, by raising
:class:`~telegram.error.InvalidToken`.
"""

from __future__ import annotations

import asyncio
import json
from contextvars import ContextVar
from typing import Any, Protocol

from telegram import Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError
from telegram.ext import Application

from agentgram.bot.telegram.sender import retry_after_seconds
from agentgram.runtime.app import Checkpoint, KeyValueStore
from agentgram.runtime.log import get_logger

log = get_logger("telegram.ingest")

OFFSET_KEY = "telegram.update_offset"
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
FIRST_RETRY = 0.5
MAX_RETRY = 5.0
WATCHDOG_GRACE = 5.0
"""Seconds past the long poll's own timeout before a silent poll counts as hung."""


_OFFERED: ContextVar[Checkpoint | None] = ContextVar("agentgram_update_checkpoint", default=None)
"""The offset past the update being handled, until the mail that completes handling it stored it."""


def offered_checkpoint() -> Checkpoint | None:
    """The offset past the update being handled, for the one piece of mail that completes
    handling it (``None`` outside the ingest loop, or once stored)."""
    return _OFFERED.get()


def checkpoint_stored() -> None:
    """The handler's mail stored the offered offset in its own transaction: the loop need not."""
    _OFFERED.set(None)


class IngestRuntime(Protocol):
    """What the loop needs of the runtime facade (``agentgram.runtime.app.Runtime``)."""

    @property
    def values(self) -> KeyValueStore: ...

    async def dead_letter(
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint
    ) -> None: ...


class PollFailed(Exception):
    """A ``getUpdates`` call that produced no batch (its cause is chained)."""


class Ingest:
    def __init__(
        self,
        application: Application,  # type: ignore[type-arg]
        runtime: IngestRuntime,
        poll_timeout: int,
    ) -> None:
        self.application = application
        self.runtime = runtime
        self.store = runtime.values
        self.poll_timeout = poll_timeout
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        offset = int(await self.store.get_value(OFFSET_KEY) or 0)
        failures = 0
        while not self._stopping.is_set():
            try:
                batch = await self._poll(offset)
            except PollFailed as failed:
                failures += 1
                await self._sleep(self._retry_delay(failed.__cause__, failures))
                continue
            if failures:
                log.info("polling recovered after %d failed getUpdates call(s)", failures)
                failures = 0
            for raw in batch:
                if self._stopping.is_set():
                    break
                offset = await self._take(raw, offset)

    async def _poll(self, offset: int) -> list[Any]:
        """One long poll, as raw JSON; a 401 raises :class:`InvalidToken`, any other failure
        :class:`PollFailed`."""
        hung_after = self.poll_timeout + WATCHDOG_GRACE
        try:
            result = await asyncio.wait_for(self._get_updates(offset), hung_after)
        except InvalidToken:
            raise
        except TimeoutError as error:
            raise PollFailed(f"no answer within {hung_after:.0f}s") from error
        except (TelegramError, ValueError) as error:
            raise PollFailed(str(error)) from error
        if not isinstance(result, list):
            raise PollFailed("getUpdates answered something that is not a list") from ValueError(repr(result))
        return result

    async def _get_updates(self, offset: int) -> Any:
        """The raw ``getUpdates`` result: python-telegram-bot's ``get_updates`` parses the whole
        batch or raises, and ``do_api_request`` refuses the methods it knows, so this goes to the
        bot's request layer directly (the same path, rate limiter and timeouts included)."""
        data = {"timeout": self.poll_timeout, "allowed_updates": ALLOWED_UPDATES}
        if offset:
            data["offset"] = offset
        return await self.application.bot._post(  # see the docstring
            "getUpdates", data, read_timeout=self.poll_timeout + WATCHDOG_GRACE / 2
        )

    def _retry_delay(self, error: BaseException | None, failures: int) -> float:
        if isinstance(error, RetryAfter):
            seconds = retry_after_seconds(error)
            log.warning("getUpdates: Telegram asks to wait %.0fs (429)", seconds)
            return seconds
        backoff = min(FIRST_RETRY * 2 ** (failures - 1), MAX_RETRY)
        if isinstance(error, Conflict):
            log.warning(
                "getUpdates: 409 Conflict — another program is polling with this bot token "
                "(a second agentgram?); retrying in %.1fs",
                backoff,
            )
        elif failures == 1 or failures % 10 == 0:
            log.warning("getUpdates failed (%s); retrying in %.1fs (failure %d)", error, backoff, failures)
        return backoff

    async def _take(self, raw: Any, offset: int) -> int:
        """Handle one raw update; the offset past it (or ``offset`` if it has no usable id)."""
        update_id = raw.get("update_id") if isinstance(raw, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            log.warning("skipping an update without an update_id: %.200r", raw)
            return offset
        checkpoint = Checkpoint(OFFSET_KEY, str(update_id + 1))
        try:
            update = Update.de_json(raw, self.application.bot)
        except Exception as error:
            await self._dead_letter(update_id, raw, error, checkpoint)
            return update_id + 1
        if _is_known(update) and await self._handle(update, checkpoint):
            return update_id + 1
        await self.store.set_value(OFFSET_KEY, checkpoint.value)
        return update_id + 1

    async def _dead_letter(self, update_id: int, raw: Any, error: Exception, checkpoint: Checkpoint) -> None:
        reason = f"{type(error).__name__}: {error}"
        log.warning(
            "update %s could not be parsed (%s); stored as a dead letter and skipped", update_id, reason
        )
        await self.runtime.dead_letter("telegram", str(update_id), reason, json.dumps(raw), checkpoint)

    async def _handle(self, update: Update, checkpoint: Checkpoint) -> bool:
        """Run the update's handlers, offering them its offset; tell whether they stored it."""
        offer = _OFFERED.set(checkpoint)
        try:
            await self.application.process_update(update)
        except Exception:  # a handler's failure must not stop polling; the update is confirmed
            log.exception("handling update %s failed", update.update_id)
        finally:
            stored = _OFFERED.get() is None
            _OFFERED.reset(offer)
        return stored

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass


def _is_known(update: Update) -> bool:
    """An update of a type this version of agentgram handles (unknown types are extra keys)."""
    return (
        update.message is not None or update.edited_message is not None or update.callback_query is not None
    )
