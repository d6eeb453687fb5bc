"""Every inline-button press: one dispatch, and the registry features add their buttons to.

Button data is decoded once here (:mod:`bot.telegram.callback_data`) and routed
by its action to the handler a feature module registered with :func:`register`
— approvals and cron each own their buttons and neither needs the other. A
press that decodes to nothing, or to an action nobody registered, is answered
politely ("This button no longer works") so no button keeps spinning.

Registration happens when a feature module is imported; ``handlers/__init__``
imports them all, so the registry is complete before the first update.

Every press is answered through :func:`answer`, and only after what the press
does is stored: the answer (the toast, and the end of the spinner) is a
courtesy that is only useful within seconds, so it is retried once on a
transient failure and otherwise given up — it never costs the decision.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from telegram import CallbackQuery, Update
from telegram.error import TelegramError
from telegram.ext import BaseHandler, CallbackQueryHandler, ContextTypes

from agentgram.bot.telegram.callback_data import Button, ButtonAction, decode
from agentgram.bot.telegram.context import BotContext, bot_context
from agentgram.bot.telegram.sender import Retry, with_retry
from agentgram.runtime.log import get_logger

log = get_logger("telegram.buttons")

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


ANSWER_RETRY = Retry(attempts=2, first_delay=0.3, max_wait=3.0)
"""One retry of an answer: after a 5xx or a network failure, or a 429 asking for at most 3 s —
a toast is only useful within seconds."""


async def answer(update: Update, text: str | None = None) -> None:
    """Answer the press: show the toast ``text`` and stop the spinner.

    Never raises: callers answer after the press took effect, and a lost
    answer must not break the update. A transient failure is retried once
    (:data:`ANSWER_RETRY`); a refusal (the query expired or was answered
    already) is not, as a retry cannot change it.
    """
    query = callback_query(update)
    try:
        await with_retry(lambda: query.answer(text), ANSWER_RETRY, "button answer")
    except TelegramError as error:
        log.warning("button answer given up: %s: %s", type(error).__name__, error)


async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    button = decode(callback_query(update).data)
    handler = BUTTON_HANDLERS.get(button.action) if button is not None else None
    if button is None or handler is None:
        await answer(update, ctx.text(update, "approval-unknown-button"))
        return
    await handler(update, ctx, button)


def handlers() -> list[BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]]:
    return [CallbackQueryHandler(on_button)]
