"""Durable long polling: an update is stored before Telegram is told it arrived.

python-telegram-bot's own updater confirms updates before handlers run, so a
crash there loses them. This loop calls ``getUpdates`` itself and hands each
update to its handlers (they only accept mail or answer briefly — turns run
elsewhere). The offset it sends with the next ``getUpdates`` is what confirms
updates to Telegram, so it never passes an update whose handlers have not
finished: it is the lowest update still being handled, or past the newest
update once none is. A crash anywhere in between makes Telegram redeliver what
was not confirmed; the handlers' mail is keyed by ``update_id``, so a
redelivered message is dropped as a duplicate and never answered twice. (A
command that answers without mail, such as ``/help``, is answered again after
such a crash.)

**Lanes.** Updates are handled concurrently across chats and in order within a
chat: one lane per chat id (updates without a chat share one lane), at most
:data:`LANES` busy at once. A lane lives as long as its chat has updates
waiting, across polls. So a chat's first message does not wait behind every
other chat's handling, and the lanes' mail shares the mailbox's group commit.
A failing handler is logged and its update counts as handled; the other lanes
go on.

**Polling never waits on a batch** (issue 31). The loop does not wait for the
lanes before it polls again: once the updates are handed to their lanes it
waits until none is left in hand, or :data:`POLL_AGAIN` at most, and polls
again (the wait doubles while polls bring nothing new, up to
:data:`POLL_AGAIN_AT_MOST`). While some are in hand that poll's offset is the oldest of them, so
Telegram answers at once and resends them with whatever came since; the ones
in hand (or handled since) are recognised by their id and skipped, the new ones
go to their lanes. An update that arrives while another chat's handler is slow
thus waits :data:`POLL_AGAIN` at most, not for that handler. Why not store the
raw batch and confirm it at once, as the issue suggests: that is one more
write per batch on the path of every update, behind the same write lock as the
mail, where this costs one extra ``getUpdates`` per :data:`POLL_AGAIN` while the
handlers are busy and no write at all.

**The offset rides with mail when that is safe.** The offset past an update
confirms every update before it too, so it may be stored only once all of them
are handled. An update that arrives while nothing else is in hand, alone in its
batch, is the only one that offset confirms: a plain message hands it to the
mailbox as a :class:`~runtime.mailbox.Checkpoint`, committed in the same
transaction as the message (one write, not two). The offset reaches the
handler as a value: its lane offers it in a context variable around the
dispatch (it awaits each handler in the lane's task, so the handler sees it),
and the handler whose mail stored it takes it back (:func:`checkpoint_stored`) —
nothing is shared between updates. Any other offset is stored by the loop's
writer once the updates before it are handled: when none is left in hand, or
every :data:`STORE_EVERY` while the lanes stay busy. The stored offset is only
where the next start (or the next poller of a cluster) begins; a lagging one
costs redelivered duplicates, never a lost update.

**Poison updates.** Telegram adds fields and update types with every Bot API
release and the libraries trail behind: python-telegram-bot raises for a whole
``getUpdates`` batch when one update lacks a field it requires. So the batch
is fetched as raw JSON and each update parsed on its own, by the driver's
library (:mod:`.drivers`). One that does not parse is stored raw as a dead
letter in the lane of updates without a chat, and logged once at WARNING, while
the rest of its batch is handled. (A crash before its offset is stored keeps it
twice.) An update of a type agentgram does not know is confirmed and ignored.

**Stopping** cancels the loop and its lanes; an update cut short is not
confirmed, so it is redelivered on the next start and deduplicated as above.

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
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
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
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("telegram.ingest")

OFFSET_KEY = "telegram.update_offset"
FIRST_RETRY = 0.5
MAX_RETRY = 5.0
WATCHDOG_GRACE = 5.0
"""Seconds past the long poll's own timeout before a silent poll counts as hung."""
LANES = 64
"""At most this many chats' updates are handled at once."""
POLL_AGAIN = 0.02
"""Seconds the loop waits for the updates in hand before it polls again beside them."""
POLL_AGAIN_AT_MOST = 0.5
"""The wait doubles, up to this, while polls bring nothing new (a handler stuck behind a 429)."""
STORE_EVERY = 1.0
"""Seconds between two stores of the offset while the lanes stay busy."""


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
        self, source: str, ref: str, error: str, payload: str, checkpoint: Checkpoint | None
    ) -> None: ...


class PollFailed(Exception):
    """A ``getUpdates`` call that produced no batch (its cause is chained)."""


@dataclass(frozen=True, slots=True)
class _Poison:
    """An update that does not parse, kept for its dead letter."""

    update_id: int
    raw: Any
    reason: str


@dataclass(frozen=True, slots=True)
class _Work:
    """One update for a lane: parsed, or poison; with the offset its handler may store."""

    update_id: int
    item: Update | _Poison
    offer: Checkpoint | None


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
        self._end = 0
        """Past the newest update taken (the offset once nothing is in hand)."""
        self._in_hand: set[int] = set()
        """Updates given to a lane and not yet handled."""
        self._handled: set[int] = set()
        """Handled updates Telegram may still resend (at or past the offset of the last poll)."""
        self._lanes: dict[int | None, deque[_Work]] = {}
        self._tasks = TaskSet("ingest")
        """The lanes and the offset writer: cancelled and awaited when the loop ends."""
        self._room = asyncio.Semaphore(LANES)
        self._settled = asyncio.Event()
        """Set whenever nothing is in hand."""
        self._settled.set()
        self._stored = 0
        """The newest offset known to be stored (by the writer, or by an update's mail)."""
        self._stored_at = 0.0
        self._store_wanted = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        self._end = self._stored = int(await self.store.get_value(OFFSET_KEY) or 0)
        self._tasks.spawn(self._write_offsets(), name="ingest offset writer")
        failures = 0
        wait = POLL_AGAIN
        try:
            while not self._stopping.is_set():
                offset = self.offset
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
                fresh = self._take(batch, offset)
                wait = POLL_AGAIN if fresh else min(wait * 2, POLL_AGAIN_AT_MOST)
                await self._until_settled(wait)
        finally:
            await self._tasks.close()

    @property
    def offset(self) -> int:
        """What the next ``getUpdates`` confirms: up to the oldest update in hand, or past the newest."""
        return min(self._in_hand) if self._in_hand else self._end

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

    def _take(self, raws: list[Any], offset: int) -> int:
        """Give the batch's new updates to their lanes (those in hand or handled are resent ones);
        how many were new. ``offset`` is the one the batch was asked with: Telegram resends no
        update before it, so the handled ones before it need no remembering."""
        self._handled = {done for done in self._handled if done >= offset}
        fresh: list[tuple[int, Any]] = []
        for raw in raws:
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                log.warning("skipping an update without an update_id: %.200r", raw)
                continue
            if update_id not in self._in_hand and update_id not in self._handled:
                fresh.append((update_id, raw))
        alone = len(fresh) == 1 and not self._in_hand
        for update_id, raw in fresh:
            self._end = max(self._end, update_id + 1)
            offer = Checkpoint(OFFSET_KEY, str(update_id + 1)) if alone else None
            try:
                update = self.parse(raw)
            except Exception as error:
                self._give(None, _Work(update_id, _poison(update_id, raw, error), offer))
                continue
            if is_known(update):
                self._give(_lane(update), _Work(update_id, update, offer))
        if not self._in_hand:  # nothing (known) was new: the offset moved past the batch
            self._store_wanted.set()
        return len(fresh)

    def _give(self, lane: int | None, work: _Work) -> None:
        self._in_hand.add(work.update_id)
        self._settled.clear()
        waiting = self._lanes.get(lane)
        if waiting is not None:  # the lane is running: it takes this one after the others
            waiting.append(work)
            return
        self._lanes[lane] = deque([work])
        self._tasks.spawn(self._run_lane(lane), name=f"ingest lane {lane}")

    async def _run_lane(self, lane: int | None) -> None:
        """The lane's updates one after another, until none is left waiting."""
        waiting = self._lanes[lane]
        try:
            async with self._room:
                while waiting:
                    work = waiting[0]
                    stored = await self._handle_work(work)
                    waiting.popleft()
                    self._handled_one(work, stored)
        finally:
            if self._lanes.get(lane) is waiting:
                del self._lanes[lane]

    async def _handle_work(self, work: _Work) -> bool:
        if isinstance(work.item, _Poison):
            try:
                await self._dead_letter(work.item, work.offer)
            except Exception:  # as a failing handler: logged, and the update counts as handled
                log.exception("storing update %s as a dead letter failed", work.update_id)
                return False
            return work.offer is not None
        if work.offer is None:
            await self._process(work.item)
            return False
        return await self._handle(work.item, work.offer)

    def _handled_one(self, work: _Work, stored: bool) -> None:
        self._in_hand.discard(work.update_id)
        if stored and work.offer is not None:
            self._stored = max(self._stored, int(work.offer.value))
        self._handled.add(work.update_id)  # a poll in flight may still bring it back
        if not self._in_hand:
            self._settled.set()
        self._store_wanted.set()

    async def _until_settled(self, seconds: float) -> None:
        """Wait until nothing is in hand, at most ``seconds`` (or until stopped)."""
        if self._settled.is_set():
            return
        try:
            await asyncio.wait_for(self._settled.wait(), seconds)
        except TimeoutError:
            pass

    async def _write_offsets(self) -> None:
        """Store the offset when it moved: at once when nothing is in hand, else every
        :data:`STORE_EVERY` (a store is a write; it must not hold up the poll)."""
        while True:
            await self._store_wanted.wait()
            self._store_wanted.clear()
            offset = self.offset
            if offset <= self._stored:
                continue
            if self._in_hand and time.monotonic() - self._stored_at < STORE_EVERY:
                continue
            try:
                await self.store.set_value(OFFSET_KEY, str(offset))
            except Exception:  # a database hiccup: the next change stores it; redelivery is harmless
                log.warning("storing the update offset failed", exc_info=True)
                continue
            self._stored = max(self._stored, offset)
            self._stored_at = time.monotonic()

    async def _dead_letter(self, poison: _Poison, checkpoint: Checkpoint | None) -> None:
        await self.runtime.dead_letter(
            "telegram", str(poison.update_id), poison.reason, json.dumps(poison.raw), checkpoint
        )

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
    """The update that did not parse, logged once (its dead letter is stored in its lane)."""
    reason = f"{type(error).__name__}: {error}"
    log.warning("update %s could not be parsed (%s); stored as a dead letter and skipped", update_id, reason)
    return _Poison(update_id, raw, reason)


def _lane(update: Update) -> int | None:
    """The chat whose updates must keep their order (``None``: updates without a chat)."""
    chat = update.effective_chat
    return chat.id if chat is not None else None
