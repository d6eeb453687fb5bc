"""One ordered queue per chat for every Bot API call that shows something there, and the one
retry layer.

**The queue.** :class:`QueuedBot` is the :class:`~.port.BotApi` the whole adapter uses
(:func:`~..drivers.make_driver` hands out no other): handler replies and acknowledgements,
reactions, button edits, notices, prompts, stream drafts and edits, status lines, reports,
files, chat actions. Each call that names a chat takes its turn in that chat's
:class:`ChatQueue` — first come, first served (asyncio's lock wakes its waiters in order) — so
two senders to one chat never overtake each other. A sender that must keep several calls
together (the pieces of a long text, a retried send, an event's whole output) holds the turn
across them with :func:`chat_turn`; the calls it makes meanwhile are its own (the turn belongs
to the task holding it), while any other task, even one it started, waits. Chats do not wait
for each other.

**Pauses.** A 429 on any call in a chat pauses that chat's whole queue for the ``retry_after``
Telegram named (plus :data:`PAUSE_MARGIN`): no call reaches Telegram in that chat meanwhile,
whatever its retry policy. A 429 on a call that names no chat (a start-up call such as
``setMyCommands``) pauses every queue. ``getUpdates`` and file downloads are input, not output:
they pass unqueued (polling spaces itself, :mod:`.ingest`). So does a button's answer
(``answerCallbackQuery``): its toast is shown to the one user who pressed, not in the chat, and
is worth sending only within seconds, so a 429 on it pauses nothing and a long ``retry_after``
drops it (the decision it acknowledges stands; the prompt's own edit shows it). In a cluster
(``cluster.enabled``) a 429 pauses every instance: the pause is recorded in the shared database,
and each queue also waits out the pauses other instances recorded (:class:`SharedPauses`,
:mod:`.shared_budget`); alone, :data:`ALONE` adds nothing.

**Retries** live here and nowhere else: the drivers only pace (PTB's limiter with
``max_retries=0``, aiogram's session middleware the same). Every call names a :class:`Retry`
policy. A transient failure (429 after its ``retry_after``, a 5xx, a timeout, a dropped
connection, an answer that is not JSON) is retried with capped, jittered backoff
(:class:`~agentgram.runtime.infra.backoff.Backoff`); a permanent one is not: a 400, a 403 (the
user blocked the bot), a 401 (the token was revoked). A retried call keeps its chat's turn
while it waits, so nothing sent to the chat later overtakes it.

- :data:`ONCE` — best effort: streaming edits, typing, clean-ups. The next edit or the final
  text makes up for a lost one.
- :data:`BRIEF` — a handler's direct reply (an acknowledgement, a command's answer): a few
  tries within ~10 s.
- :data:`PERSISTENT` — what must reach the user (final answers, approval prompts, notices,
  reports): retried until delivered or refused, however long Telegram is down.

Lanes are made on first use and dropped once nobody holds or waits for them and their pause
is over, so memory stays flat however many chats come.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentgram.bot.telegram.core import port
from agentgram.bot.telegram.core.metrics import SEND_RETRIES
from agentgram.bot.telegram.core.topics import TopicBot
from agentgram.runtime.infra.backoff import Backoff, retrying
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.send")

T = TypeVar("T")

PAUSE_MARGIN = 0.1
"""Seconds added to a 429's ``retry_after`` (as python-telegram-bot's limiter adds)."""
JITTER = 0.2
"""Retries of chats failing together spread over ±20 % of their delay."""


@dataclass(slots=True, frozen=True)
class Retry:
    """How hard a call tries on transient failures; ``attempts=None`` tries until it is delivered."""

    attempts: int | None
    first_delay: float = 0.5
    max_delay: float = 30.0
    max_wait: float | None = None
    """The longest 429 ``retry_after`` worth waiting for; a longer one raises (``None``: any)."""

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.first_delay, self.max_delay, jitter=JITTER)

    def another(self, attempt: int) -> bool:
        return self.attempts is None or attempt < self.attempts

    def delay(self, attempt: int) -> float:
        """Seconds before the try after the ``attempt``-th failure (jittered)."""
        return self.backoff.next_delay(attempt)


ONCE = Retry(attempts=1)
BRIEF = Retry(attempts=4, max_delay=4.0)
PERSISTENT = Retry(attempts=None, max_delay=30.0)

PERMANENT = (port.BadRequest, port.Forbidden, port.InvalidToken, port.ChatMigrated, port.Conflict)
"""Refusals a retry cannot change; every other :class:`~.port.TelegramError` is transient."""


def retry_after_seconds(error: port.RetryAfter) -> float:
    """A 429's ``retry_after`` in seconds."""
    return error.retry_after


async def with_retry(call: Callable[[], Awaitable[T]], retry: Retry, what: str) -> T:
    """Run ``call``, retrying transient Telegram failures as ``retry`` allows; permanent ones raise.

    A call into a chat should run inside that chat's :func:`chat_turn`, so that its retries
    keep its place in the chat's queue.
    """

    def retriable(error: BaseException) -> bool:
        if not isinstance(error, port.TelegramError) or isinstance(error, PERMANENT):
            return False
        if isinstance(error, port.RetryAfter):
            return retry.max_wait is None or _wait(error) <= retry.max_wait
        return True

    def wait_for(error: BaseException) -> float | None:
        return _wait(error) if isinstance(error, port.RetryAfter) else None

    def retried(attempt: int, error: BaseException, delay: float) -> None:
        SEND_RETRIES.inc()
        if isinstance(error, port.RetryAfter):
            log.info("%s: Telegram asks to wait %.1fs (429)", what, delay)
        else:
            kind = type(error).__name__
            log.warning("%s failed (%s: %s); retry %d in %.1fs", what, kind, error, attempt, delay)

    return await retrying(
        call,
        retry.backoff,
        attempts=retry.attempts,
        retry_if=retriable,
        wait_for=wait_for,
        on_retry=retried,
    )


def _wait(error: port.RetryAfter) -> float:
    return retry_after_seconds(error) + PAUSE_MARGIN


# --- the queues -----------------------------------------------------------------------------


class SharedPauses(Protocol):
    """The 429 pauses every instance of a cluster honours (:class:`.shared_budget.SharedBudget`)."""

    async def pause(self, chat_id: int | None, seconds: float) -> None:
        """Tell every instance: no call in ``chat_id`` (``None``: any chat) for ``seconds``."""
        ...

    async def paused_for(self, chat_id: int | None) -> float:
        """Seconds until a call in ``chat_id`` may go, as far as the other instances said."""
        ...


class _Alone:
    """One instance: no pauses but its own queues'."""

    async def pause(self, chat_id: int | None, seconds: float) -> None:
        return None

    async def paused_for(self, chat_id: int | None) -> float:
        return 0.0


ALONE: SharedPauses = _Alone()
"""The :class:`SharedPauses` of an agentgram without a cluster."""


@dataclass(slots=True, eq=False)
class ChatQueue:
    """One chat's turn to call Telegram: who holds it, who waits, and until when it is paused."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holder: asyncio.Task[Any] | None = None
    users: int = 0
    """Tasks holding or waiting for the turn."""
    paused_until: float = 0.0
    """``time.monotonic()`` before which no call of this chat reaches Telegram."""

    def idle(self, now: float) -> bool:
        return self.users == 0 and self.paused_until <= now


class ChatQueues:
    """Every chat's :class:`ChatQueue`, and the pause that holds them all (a 429 without a chat);
    ``shared``: the pauses of the other instances of a cluster (:data:`ALONE` without one)."""

    def __init__(self, shared: SharedPauses = ALONE) -> None:
        self._chats: dict[int, ChatQueue] = {}
        self._all_paused_until = 0.0
        self.shared = shared

    def __len__(self) -> int:
        """Chats with a queue now (held, waited for or paused)."""
        return len(self._chats)

    @asynccontextmanager
    async def turn(self, chat_id: int | None) -> AsyncIterator[None]:
        """Hold ``chat_id``'s turn (re-entrant within one task); ``None`` holds nothing."""
        if chat_id is None:
            yield
            return
        queue = self._queue(chat_id)
        me = asyncio.current_task()
        if queue.holder is me:
            yield
            return
        queue.users += 1
        try:
            async with queue.lock:
                queue.holder = me
                try:
                    yield
                finally:
                    queue.holder = None
        finally:
            queue.users -= 1
            if queue.idle(time.monotonic()):
                self._chats.pop(chat_id, None)

    async def call(self, chat_id: int | None, call: Callable[[], Awaitable[T]]) -> T:
        """One call in ``chat_id``'s turn, once its pauses are over; a 429 pauses the chat (or,
        without a chat, every chat), on every instance of a cluster, and is raised for the
        caller's retry policy."""
        async with self.turn(chat_id):
            await self._unpaused(chat_id)
            try:
                return await call()
            except port.RetryAfter as error:
                self.pause(chat_id, _wait(error))
                await self.shared.pause(chat_id, _wait(error))
                raise

    def pause(self, chat_id: int | None, seconds: float) -> None:
        until = time.monotonic() + seconds
        if chat_id is None:
            self._all_paused_until = max(self._all_paused_until, until)
            log.info("Telegram asks every chat to wait %.1fs (429)", seconds)
        else:
            queue = self._queue(chat_id)
            queue.paused_until = max(queue.paused_until, until)

    def waiting(self, chat_id: int) -> int:
        """Tasks holding or waiting for ``chat_id``'s turn now."""
        queue = self._chats.get(chat_id)
        return queue.users if queue is not None else 0

    def paused_for(self, chat_id: int | None) -> float:
        """Seconds until a call in ``chat_id`` may reach Telegram (0: now)."""
        queue = self._chats.get(chat_id) if chat_id is not None else None
        until = max(self._all_paused_until, queue.paused_until if queue is not None else 0.0)
        return max(0.0, until - time.monotonic())

    async def _unpaused(self, chat_id: int | None) -> None:
        left = max(self.paused_for(chat_id), await self.shared.paused_for(chat_id))
        if left > 0:
            await asyncio.sleep(left)
            await self._unpaused(chat_id)  # a pause may have grown while it was waited out

    def _queue(self, chat_id: int) -> ChatQueue:
        queue = self._chats.get(chat_id)
        if queue is None:
            now = time.monotonic()
            for stale in [key for key, old in self._chats.items() if old.idle(now)]:
                del self._chats[stale]  # paused lanes nobody came back to
            queue = self._chats[chat_id] = ChatQueue()
        return queue


class QueuedBot:
    """The :class:`~.port.BotApi` every part of the adapter uses: the driver's, with each call
    that shows something in a chat made in that chat's turn (module docstring)."""

    def __init__(self, api: port.BotApi, queues: ChatQueues | None = None) -> None:
        self.api = api
        """The driver's client (paced, never retrying)."""
        self.queues = queues if queues is not None else ChatQueues()  # an empty one is falsy (len)

    @property
    def username(self) -> str | None:
        return self.api.username

    @property
    def id(self) -> int | None:
        return self.api.id

    async def get_me(self) -> port.BotIdentity:
        return await self.queues.call(None, self.api.get_me)

    async def delete_webhook(self) -> None:
        await self.queues.call(None, self.api.delete_webhook)

    async def set_webhook(
        self,
        url: str,
        secret_token: str,
        max_connections: int,
        allowed_updates: Sequence[str] = port.ALLOWED_UPDATES,
    ) -> None:
        await self.queues.call(
            None, lambda: self.api.set_webhook(url, secret_token, max_connections, allowed_updates)
        )

    async def get_webhook_info(self) -> port.WebhookInfo:
        """A read for ``/healthz``, outside the queues (a paused queue must not stall a probe)."""
        return await self.api.get_webhook_info()

    async def set_my_commands(
        self, commands: Sequence[port.BotCommand], *, language_code: str | None = None, groups: bool = False
    ) -> None:
        await self.queues.call(
            None, lambda: self.api.set_my_commands(commands, language_code=language_code, groups=groups)
        )

    async def get_updates_raw(
        self,
        offset: int,
        timeout: int,
        read_timeout: float,
        allowed_updates: Sequence[str] = port.ALLOWED_UPDATES,
    ) -> list[Any]:
        return await self.api.get_updates_raw(offset, timeout, read_timeout, allowed_updates)

    async def send_message(self, chat_id: int, message: port.Text) -> port.Sent:
        return await self.queues.call(chat_id, lambda: self.api.send_message(chat_id, message))

    async def edit_message_text(self, chat_id: int, message_id: int, message: port.Text) -> None:
        await self.queues.call(chat_id, lambda: self.api.edit_message_text(chat_id, message_id, message))

    async def edit_message_reply_markup(
        self, chat_id: int, message_id: int, reply_markup: port.Keyboard | None
    ) -> None:
        await self.queues.call(
            chat_id, lambda: self.api.edit_message_reply_markup(chat_id, message_id, reply_markup)
        )

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        await self.queues.call(chat_id, lambda: self.api.delete_message(chat_id, message_id))

    async def send_message_draft(
        self, chat_id: int, draft_id: int, text: str, *, parse_mode: str | None, read_timeout: float
    ) -> None:
        await self.queues.call(
            chat_id,
            lambda: self.api.send_message_draft(
                chat_id, draft_id, text, parse_mode=parse_mode, read_timeout=read_timeout
            ),
        )

    async def send_chat_action(self, chat_id: int, action: str, *, thread_id: int | None = None) -> None:
        await self.queues.call(
            chat_id, lambda: self.api.send_chat_action(chat_id, action, thread_id=thread_id)
        )

    async def send_file(self, chat_id: int, file: port.FileUpload) -> port.Sent:
        return await self.queues.call(chat_id, lambda: self.api.send_file(chat_id, file))

    async def download(self, file_id: str, dest: Path, *, read_timeout: float) -> None:
        await self.api.download(file_id, dest, read_timeout=read_timeout)

    async def answer_callback_query(
        self, callback_query_id: str, *, text: str | None = None, show_alert: bool = False
    ) -> None:
        # not in any queue: the toast is shown to the one user who pressed, not in the chat, and
        # must come within seconds or not at all; its 429 pauses nothing (module docstring)
        await self.api.answer_callback_query(callback_query_id, text=text, show_alert=show_alert)

    async def set_message_reaction(self, chat_id: int, message_id: int, emoji: str | None) -> None:
        await self.queues.call(chat_id, lambda: self.api.set_message_reaction(chat_id, message_id, emoji))

    async def close(self) -> None:
        await self.api.close()


@asynccontextmanager
async def chat_turn(bot: port.BotApi, chat_id: int) -> AsyncIterator[None]:
    """Hold ``chat_id``'s turn across several calls through ``bot`` (its retries included).

    A bot bound to a forum topic (:class:`~.topics.TopicBot`) holds the turn of the bot inside
    (a chat's topics share its one queue). A bare driver client (a driver's own tests) has no
    queues: nothing is held.
    """
    while isinstance(bot, TopicBot):
        bot = bot.inner
    if isinstance(bot, QueuedBot):
        async with bot.queues.turn(chat_id):
            yield
    else:
        yield


__all__ = [
    "ALONE",
    "BRIEF",
    "ONCE",
    "PERMANENT",
    "PERSISTENT",
    "ChatQueue",
    "ChatQueues",
    "QueuedBot",
    "Retry",
    "SharedPauses",
    "chat_turn",
    "retry_after_seconds",
    "with_retry",
]
