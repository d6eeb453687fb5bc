"""Routers: what one handler file answers, as a value, joined explicitly at start.

aiogram's pattern (``Router`` per feature, ``include_router`` in one place),
with the adapter's own small dispatch so it is the same whichever library
drives Telegram (:mod:`.port`). A :class:`Router` holds a feature's handlers
(and the group they run in) and the inline-button actions it owns. A handler
file defines one and registers nothing; :func:`join` puts them in the order
they are tried and builds the one table the button dispatch reads, refusing an
action two routers claim. Routers are immutable, so each bot (several in one
test process) joins the same ones into a table of its own.

**Dispatch** (:meth:`Dispatcher.process`) is modelled on python-telegram-bot's
groups, which the handlers were written for, but is not the same: groups run
in ascending order; in the gate's group every handler that matches runs (PTB
runs one a group), in a feature group only the first that matches; a handler
raising :class:`StopUpdate` ends the update's handling. Any other exception is
logged and ends that update too, also one from the gate: it fails closed, so a
gate that breaks lets nothing through (PTB would go on to the next group).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction
from agentgram.bot.telegram.core.incoming import Message, Update
from agentgram.bot.telegram.core.port import BotApi
from agentgram.runtime.infra.log import get_logger

if TYPE_CHECKING:
    from agentgram.bot.telegram.core.context import BotContext

log = get_logger("telegram")

GATE = -1
"""The group of the access gate: it sees every update before any feature does."""
FEATURES = 0
"""The group of the features' handlers (within a group, the first that matches an update runs)."""


class StopUpdate(Exception):
    """Raised by a handler: no later handler sees this update."""


@dataclass(slots=True)
class HandlerContext:
    """What a handler gets beside the update: the Bot API, the bot's shared parts, a command's words."""

    bot: BotApi
    shared: BotContext
    args: list[str] = field(default_factory=list)


Callback = Callable[[Update, HandlerContext], Awaitable[None]]
ButtonHandler = Callable[[Update, "BotContext", Button], Awaitable[None]]
ButtonTable = Mapping[ButtonAction, ButtonHandler]


@dataclass(slots=True, frozen=True)
class Command:
    """``/name`` (or ``/name@this_bot``) in a new message."""

    name: str
    callback: Callback

    def matches(self, update: Update) -> bool:
        return update.message is not None and update.message.command == self.name


@dataclass(slots=True, frozen=True)
class OnMessage:
    """A new message that ``accepts``."""

    accepts: Callable[[Message], bool]
    callback: Callback

    def matches(self, update: Update) -> bool:
        return update.message is not None and self.accepts(update.message)


@dataclass(slots=True, frozen=True)
class OnUpdate:
    """Every update (the gate)."""

    callback: Callback

    def matches(self, update: Update) -> bool:
        return True


@dataclass(slots=True, frozen=True)
class OnButton:
    """A button press (a callback query)."""

    callback: Callback

    def matches(self, update: Update) -> bool:
        return update.callback_query is not None


Handler = Command | OnMessage | OnUpdate | OnButton


def is_command(message: Message) -> bool:
    """The text starts with a bot command, for whichever bot (python-telegram-bot's ``COMMAND``)."""
    first = message.entities[0] if message.entities else None
    return (
        message.text is not None and first is not None and first.type == "bot_command" and first.offset == 0
    )


@dataclass(frozen=True, slots=True)
class Router:
    """One handler file's updates and buttons; ``group`` is the group its handlers run in."""

    name: str
    handlers: tuple[Handler, ...] = ()
    buttons: ButtonTable = field(default_factory=dict)
    group: int = FEATURES


@dataclass(frozen=True, slots=True)
class JoinedRouter:
    """Routers in the order they are tried, and the button table they make together (read-only)."""

    routers: tuple[Router, ...]
    buttons: ButtonTable


def join(*routers: Router) -> JoinedRouter:
    """Join ``routers`` in this order; an action claimed twice is a developer mistake, refused here."""
    table: dict[ButtonAction, ButtonHandler] = {}
    for router in routers:
        taken = sorted(table.keys() & router.buttons.keys())
        if taken:
            raise ValueError(f"button actions registered twice: {', '.join(taken)} (again by {router.name})")
        table.update(router.buttons)
    return JoinedRouter(routers, MappingProxyType(table))


@dataclass(frozen=True, slots=True)
class Dispatcher:
    """The handlers of a joined router by group, in order, and where updates are handled."""

    groups: tuple[tuple[int, tuple[Handler, ...]], ...]

    @classmethod
    def of(cls, joined: JoinedRouter, first: tuple[Handler, ...] = ()) -> Dispatcher:
        """``first`` goes before the routers' own handlers of the features' group."""
        groups: dict[int, list[Handler]] = {FEATURES: list(first)}
        for router in joined.routers:
            groups.setdefault(router.group, []).extend(router.handlers)
        return cls(tuple((group, tuple(groups[group])) for group in sorted(groups)))

    def handlers(self, group: int) -> tuple[Handler, ...]:
        return next((handlers for number, handlers in self.groups if number == group), ())

    async def process(self, update: Update, shared: BotContext, *, reraise: bool = False) -> None:
        """Run the update's handlers; a failing one is logged, or with ``reraise`` raised (the
        webhook answers by it: a database that failed a handler is a 503, see :mod:`.webhook`)."""
        try:
            for group, handlers in self.groups:
                for handler in handlers:
                    if not handler.matches(update):
                        continue
                    args = update.message.args if isinstance(handler, Command) and update.message else []
                    await handler.callback(update, HandlerContext(update.get_bot(), shared, args))
                    if group != GATE:
                        break
        except StopUpdate:
            return
        except Exception:
            if reraise:
                raise
            log.exception("handler failed on update %s", update.update_id)


__all__ = [
    "FEATURES",
    "GATE",
    "ButtonHandler",
    "ButtonTable",
    "Command",
    "Dispatcher",
    "HandlerContext",
    "JoinedRouter",
    "OnButton",
    "OnMessage",
    "OnUpdate",
    "Router",
    "StopUpdate",
    "is_command",
    "join",
]
