"""Every inline-button press: one dispatch, and the registry features add their buttons to.

Button data is decoded once here (:mod:`bot.telegram.callback_data`) and routed
by its action to the handler a feature module registered with :func:`register`
— approvals and cron each own their buttons and neither needs the other. A
press that decodes to nothing, or to an action nobody registered, is answered
politely ("This button no longer works") so no button keeps spinning.

Registration happens when a feature module is imported; ``handlers/__init__``
imports them all, so the registry is complete before the first update.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from telegram import CallbackQuery, Update
from telegram.ext import BaseHandler, CallbackQueryHandler, ContextTypes

from bot.telegram.callback_data import Button, ButtonAction, decode
from bot.telegram.context import BotContext, bot_context

ButtonHandler = Callable[[Update, BotContext, Button], Awaitable[None]]

BUTTON_HANDLERS: dict[ButtonAction, ButtonHandler] = {}
"""Action → handler; filled only through :func:`register`."""


def register(buttons: Mapping[ButtonAction, ButtonHandler]) -> None:
    """Add a feature's buttons. An action claimed twice is a developer mistake, refused at import."""
    taken = sorted(BUTTON_HANDLERS.keys() & buttons.keys())
    if taken:
        raise ValueError(f"button actions registered twice: {', '.join(taken)}")
    BUTTON_HANDLERS.update(buttons)


def callback_query(update: Update) -> CallbackQuery:
    query = update.callback_query
    assert query is not None
    return query


async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    button = decode(callback_query(update).data)
    handler = BUTTON_HANDLERS.get(button.action) if button is not None else None
    if button is None or handler is None:
        await callback_query(update).answer(ctx.text(update, "approval-unknown-button"))
        return
    await handler(update, ctx, button)


def handlers() -> list[BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]]:
    return [CallbackQueryHandler(on_button)]
