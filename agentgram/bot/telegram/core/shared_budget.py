"""The bot token's Telegram budget, shared by a cluster's instances (issue 27, item 10).

Telegram's limits (about 30 messages a second overall, about one a second in a private chat,
20 a minute in a group) belong to the bot token, not to a process. Alone, agentgram paces itself
in its driver (PTB's limiter, aiogram's session middleware: :mod:`.ratelimit`). With
``cluster.enabled`` the runtime's door hands out its send budget (token buckets and pauses in
the shared PostgreSQL: :mod:`agentgram.runtime.infra.send_budget`), and :class:`SharedBudget`
says, in Telegram's terms, what each send takes from it:

* **The limits** (:class:`TelegramLimits`): overall ``telegram.messages_per_second``, as many at
  once (as PTB's limiter allows a full second's worth); a group or channel 20 a minute, 20 at
  once (as both drivers pace a group alone); a private chat one a second, :data:`PRIVATE_BURST` at
  once (Telegram allows short bursts: the pieces of a long answer go together).
* **Pacing:** the drivers' shared pacers call :meth:`SharedBudget.pace` before each call that
  sends a message, in place of their own limiters; which calls those are is :mod:`.ratelimit`'s
  one list, as alone.
* **Pauses:** a 429 seen by any instance is recorded for the chat (or for every chat, without
  one), and every instance's chat queues wait it out (:mod:`.chat_queue` asks
  :meth:`SharedBudget.paused_for` before each call, cached briefly; a metered send's take honours
  the pause in the database besides).
* **The database out of reach:** :meth:`~SharedBudget.pace` raises :class:`~.port.NetworkError`,
  a transient failure the chat queue retries with backoff, so nothing is sent unpaced; a pause
  that cannot be recorded is logged (this instance still honours it); a pause that cannot be
  read counts as none (the take still honours it).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentgram.bot.telegram.core import port
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.send_budget import GLOBAL, BudgetUnavailable, Rate, SendBudget, chat_key

log = get_logger("telegram.send")

PRIVATE_BURST = 3
"""Messages a private chat may get at once before the one-a-second pace."""
GROUP = Rate(20 / 60, burst=20)
"""A group's or channel's budget: 20 a minute (Telegram's guidance, as both drivers pace a group)."""
PRIVATE = Rate(1.0, burst=PRIVATE_BURST)
"""A private chat's budget: one a second (Telegram's guidance), with short bursts."""

ChatId = int | str
"""A chat as the Bot API names it: its id, or a channel's ``@username``."""


@dataclass(frozen=True, slots=True)
class TelegramLimits:
    """What one send may take: the bot's overall budget, a group's, a private chat's."""

    overall: Rate
    group: Rate = GROUP
    private: Rate = PRIVATE

    @classmethod
    def of(cls, messages_per_second: float) -> TelegramLimits:
        """The limits for ``telegram.messages_per_second`` (a second's worth at once, as alone)."""
        return cls(Rate(messages_per_second, burst=max(1, int(messages_per_second))))

    def of_chat(self, chat_id: ChatId) -> Rate:
        """A group or channel (a negative id, an ``@username``) or a private chat."""
        return self.group if isinstance(chat_id, str) or chat_id < 0 else self.private


def _chat(chat_id: ChatId) -> ChatId:
    """One spelling per chat: a numeric id sent as text (``"-100…"``) is that id."""
    if isinstance(chat_id, str) and chat_id.removeprefix("-").isdigit():
        return int(chat_id)
    return chat_id


class SharedBudget:
    """The Telegram budget of a cluster's instances over the runtime's send budget (module docstring)."""

    def __init__(self, budget: SendBudget, limits: TelegramLimits) -> None:
        self.budget = budget
        self.limits = limits

    async def pace(self, chat_id: ChatId) -> None:
        """Wait until a message to ``chat_id`` fits the overall and the chat's budget, reserved."""
        chat = _chat(chat_id)
        try:
            await self.budget.acquire(self.limits.overall, (chat_key(chat), self.limits.of_chat(chat)))
        except BudgetUnavailable as exc:
            raise port.NetworkError(str(exc)) from exc

    async def pause(self, chat_id: int | None, seconds: float) -> None:
        """No call in ``chat_id`` (``None``: in any chat) for ``seconds``, on every instance."""
        key = GLOBAL if chat_id is None else chat_key(chat_id)
        try:
            await self.budget.pause(key, seconds)
        except BudgetUnavailable as exc:
            log.warning("a 429's pause of %.1fs (%s) reaches no other instance: %s", seconds, key, exc)

    async def paused_for(self, chat_id: int | None) -> float:
        """Seconds until a call in ``chat_id`` may reach Telegram as far as any instance knows."""
        keys = (GLOBAL,) if chat_id is None else (GLOBAL, chat_key(chat_id))
        try:
            return await self.budget.paused_for(*keys)
        except BudgetUnavailable:
            return 0.0  # the send's take honours the pause, or fails and is retried


def shared_budget(budget: SendBudget | None, messages_per_second: float) -> SharedBudget | None:
    """The shared budget a cluster's runtime hands out, in Telegram's terms; ``None`` alone."""
    return None if budget is None else SharedBudget(budget, TelegramLimits.of(messages_per_second))


__all__ = ["GROUP", "PRIVATE", "PRIVATE_BURST", "SharedBudget", "TelegramLimits", "shared_budget"]
