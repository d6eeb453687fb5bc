"""Routers: what one handler file answers, as a value, joined explicitly at start.

aiogram's pattern (``Router`` per feature, ``include_router`` in one place), made
to fit python-telegram-bot: a :class:`Router` holds a feature's PTB handlers (and
the PTB group they run in) and the inline-button actions it owns. A handler file
defines one and registers nothing; :func:`join` puts them in the order PTB
should try them and builds the one table the button dispatch reads, refusing an
action two routers claim. Unlike aiogram's ``include_router``, joining does not
attach a router to a parent: routers are immutable, so each bot (several in one
test process) joins the same ones into a table of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from telegram import Update
from telegram.ext import Application, BaseHandler, ContextTypes

from agentgram.bot.telegram.callback_data import Button, ButtonAction
from agentgram.bot.telegram.context import BotContext

PTBHandler = BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]
ButtonHandler = Callable[[Update, BotContext, Button], Awaitable[None]]
ButtonTable = Mapping[ButtonAction, ButtonHandler]

GATE = -1
"""The PTB group of the access gate: it sees every update before any feature does."""
FEATURES = 0
"""The PTB group of the features' handlers (within a group, the first that matches an update runs)."""


@dataclass(frozen=True, slots=True)
class Router:
    """One handler file's updates and buttons; ``group`` is the PTB group its handlers run in."""

    name: str
    handlers: tuple[PTBHandler, ...] = ()
    buttons: ButtonTable = field(default_factory=dict)
    group: int = FEATURES


@dataclass(frozen=True, slots=True)
class JoinedRouter:
    """Routers in PTB order, and the button table they make together (read-only)."""

    routers: tuple[Router, ...]
    buttons: ButtonTable

    def install(self, application: Application) -> None:  # type: ignore[type-arg]
        """Add every router's handlers to ``application``, in their groups and in joined order."""
        for router in self.routers:
            for handler in router.handlers:
                application.add_handler(handler, group=router.group)


def join(*routers: Router) -> JoinedRouter:
    """Join ``routers`` in this order; an action claimed twice is a developer mistake, refused here."""
    table: dict[ButtonAction, ButtonHandler] = {}
    for router in routers:
        taken = sorted(table.keys() & router.buttons.keys())
        if taken:
            raise ValueError(f"button actions registered twice: {', '.join(taken)} (again by {router.name})")
        table.update(router.buttons)
    return JoinedRouter(routers, MappingProxyType(table))


__all__ = ["FEATURES", "GATE", "ButtonHandler", "ButtonTable", "JoinedRouter", "PTBHandler", "Router", "join"]
