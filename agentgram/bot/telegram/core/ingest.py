"""Durable long polling: an update is stored before Telegram is told it arrived.

python-telegram-bot's own updater confirms updates before handlers run, so a
crash there loses them. This loop calls ``getUpdates`` itself, lets the
handlers of a batch's updates run (they only accept mail or answer briefly —
turns run elsewhere), then stores the offset past the batch in the database.
The next ``getUpdates`` call sends that offset, which is what confirms the
batch to Telegram. A crash anywhere in between makes Telegram redeliver the
batch; the handlers' mail is keyed by ``update_id``, so a redelivered message
is dropped as a duplicate and never answered twice. (A command that answers
without mail, such as ``/help``, is answered again after such a crash.)

**Lanes.** A batch's updates are handled concurrently across chats and in
order within a chat: one lane per chat id (updates without a chat share one
lane), at most :data:`LANES` at once. So a chat's first message does not wait
behind every other chat's handling, and the lanes' mail shares the mailbox's
group commit. A failing handler is logged and its update confirmed; the other
lanes go on.

**The offset rides with mail only when that is safe.** The offset past one
update confirms every update before it too, so it may be stored only once all
of them are handled. In a batch of one update that is the update itself: a
plain message hands its offset to the mailbox as a
:class:`~runtime.mailbox.Checkpoint`, committed in the same transaction as the
message (one write, not two), and any other lone update stores it after its
handlers ran. The offset reaches the handler as a value: the loop offers it
in a context variable around the dispatch (it awaits each handler in the
calling task, so the handler sees it), and the handler whose
mail stored it takes it back (:func:`checkpoint_stored`) — nothing is shared
between updates. In a batch of several updates nothing is offered (one lane
cannot know the others are done): the offset past the batch is stored once,
after every lane has finished.

**Poison updates.** Telegram adds fields and update types with every Bot API
release and the libraries trail behind: python-telegram-bot raises for a whole
``getUpdates`` batch when one update lacks a field it requires. So the batch
is fetched as raw JSON and each update parsed on its own, by the driver's
library (:mod:`.drivers`). One that does not
parse is skipped while the rest of its batch is handled, then stored raw as a
dead letter together with the offset past the batch (one transaction) and
logged once at WARNING. (A crash between two dead letters of one batch keeps
the first twice.) An update of a type agentgram does not know is confirmed and
ignored.

**Stopping** cancels the loop; a batch cut short is not confirmed, so it is
redelivered on the next start and deduplicated as above.

**Recovery.** Failed polls (5xx, invalid JSON, network errors, timeouts, 409
Conflict when another poller holds the token) are retried with capped
backoff (:class:`~agentgram.runtime.infra.backoff.Backoff`), first after :data:`FIRST_RETRY`, at most :data:`MAX_RETRY` apart. A
long poll that has not answered by its timeout plus :data:`WATCHDOG_GRACE` is
cancelled and started again (a half-dead connection never answers at all).
Only a 401 — the token was revoked — ends the loop, by raising
:class:`~.port.InvalidToken`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentgram.bot.telegram.core.chat_queue import retry_after_seconds
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import (
    ALLOWED_UPDATES,
    BotApi,
    Conflict,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from agentgram.runtime.app import Checkpoint, KeyValueStore
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.ingest")

OFFSET_KEY = "telegram.update_offset"
FIRST_RETRY = 0.5
MAX_RETRY = 5.0
WATCHDOG_GRACE = 5.0
"""Seconds past the long poll's own timeout before a silent poll counts as hung."""
LANES = 64
"""At most this many chats' updates of one batch are handled at once."""


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


@dataclass(frozen=True, slots=True)
class _Poison:
    """An update that does not parse, kept for its dead letter."""

    update_id: int
    raw: Any
    reason: str


@dataclass(slots=True)
class _Batch:
    """One ``getUpdates`` batch, parsed: the known updates by lane, the poison ones, and the
    offset past the batch (``None`` when no update in it had a usable id)."""

    lanes: dict[int | None, list[Update]] = field(default_factory=dict)
    poison: list[_Poison] = field(default_factory=list)
    end: int | None = None


Parse = Callable[[dict[str, Any]], Update]
"""The driver's parser of one raw update (it raises for one its library cannot read)."""
Process = Callable[[Update], Awaitable[None]]
"""The handlers of one update (the dispatcher's)."""


class Ingest:
    def __init__(
        self,
        api: BotApi,
        parse: Parse,
        process: Process,
        runtime: IngestRuntime,
        poll_timeout: int,
    ) -> None:
        self.api = api
        self.parse = parse
        self.process = process
        self.runtime = runtime
        self.store = runtime.values
        self.poll_timeout = poll_timeout
        self._stopping = asyncio.Event()
        self.last_poll_ok: float | None = None
        """Monotonic time the last ``getUpdates`` returned a batch (``None`` before the first): the
        web view's health check."""

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
            self.last_poll_ok = time.monotonic()
            if failures:
                log.info("polling recovered after %d failed getUpdates call(s)", failures)
                failures = 0
            offset = await self._take(batch, offset)

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
        """The raw ``getUpdates`` result (the driver leaves each update unparsed)."""
        return await self.api.get_updates_raw(
            offset, self.poll_timeout, self.poll_timeout + WATCHDOG_GRACE / 2, ALLOWED_UPDATES
        )

    def _retry_delay(self, error: BaseException | None, failures: int) -> float:
        if isinstance(error, RetryAfter):
            seconds = retry_after_seconds(error)
            log.warning("getUpdates: Telegram asks to wait %.0fs (429)", seconds)
            return seconds
        backoff = Backoff(FIRST_RETRY, MAX_RETRY).next_delay(failures)
        if isinstance(error, Conflict):
            log.warning(
                "getUpdates: 409 Conflict — another program is polling with this bot token "
                "(a second agentgram?); retrying in %.1fs",
                backoff,
            )
        elif failures == 1 or failures % 10 == 0:
            log.warning("getUpdates failed (%s); retrying in %.1fs (failure %d)", error, backoff, failures)
        return backoff

    async def _take(self, raws: list[Any], offset: int) -> int:
        """Handle one batch, then store the offset past it; that offset (or ``offset``)."""
        batch = self._parse(raws)
        if batch.end is None:
            return offset
        past = Checkpoint(OFFSET_KEY, str(batch.end))
        stored = False
        if len(raws) == 1 and batch.lanes:  # a lone update: its mail may store its offset
            [[update]] = batch.lanes.values()
            stored = await self._handle(update, past)
        else:
            await self._handle_lanes(batch.lanes)
        for poison in batch.poison:  # every lane is done: the offset past the batch is safe
            await self._dead_letter(poison, past)
            stored = True
        if not stored:
            await self.store.set_value(OFFSET_KEY, past.value)
        return batch.end

    def _parse(self, raws: list[Any]) -> _Batch:
        batch = _Batch()
        for raw in raws:
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                log.warning("skipping an update without an update_id: %.200r", raw)
                continue
            batch.end = max(batch.end or 0, update_id + 1)
            try:
                update = self.parse(raw)
            except Exception as error:
                batch.poison.append(_poison(update_id, raw, error))
                continue
            if is_known(update):
                batch.lanes.setdefault(_lane(update), []).append(update)
        return batch

    async def _dead_letter(self, poison: _Poison, checkpoint: Checkpoint) -> None:
        await self.runtime.dead_letter(
            "telegram", str(poison.update_id), poison.reason, json.dumps(poison.raw), checkpoint
        )

    async def _handle_lanes(self, lanes: dict[int | None, list[Update]]) -> None:
        """Each lane's updates in order, the lanes side by side (at most :data:`LANES`)."""
        room = asyncio.Semaphore(LANES)

        async def lane(updates: list[Update]) -> None:
            async with room:
                for update in updates:
                    await self._process(update)

        async with asyncio.TaskGroup() as group:
            for key, updates in lanes.items():
                group.create_task(lane(updates), name=f"ingest lane {key}")

    async def _handle(self, update: Update, checkpoint: Checkpoint) -> bool:
        """Run the update's handlers, offering them its offset; tell whether they stored it."""
        offer = _OFFERED.set(checkpoint)
        try:
            await self._process(update)
        finally:
            stored = _OFFERED.get() is None
            _OFFERED.reset(offer)
        return stored

    async def _process(self, update: Update) -> None:
        try:
            await self.process(update)
        except Exception:  # a handler's failure must not stop polling; the update is confirmed
            log.exception("handling update %s failed", update.update_id)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass


def is_known(update: Update) -> bool:
    """An update of a type this version of agentgram handles (unknown types are extra keys)."""
    return (
        update.message is not None or update.edited_message is not None or update.callback_query is not None
    )


def _poison(update_id: int, raw: Any, error: Exception) -> _Poison:
    """The update that did not parse, logged once (its dead letter is stored after its batch)."""
    reason = f"{type(error).__name__}: {error}"
    log.warning("update %s could not be parsed (%s); stored as a dead letter and skipped", update_id, reason)
    return _Poison(update_id, raw, reason)


def _lane(update: Update) -> int | None:
    """The chat whose updates must keep their order (``None``: updates without a chat)."""
    chat = update.effective_chat
    return chat.id if chat is not None else None
