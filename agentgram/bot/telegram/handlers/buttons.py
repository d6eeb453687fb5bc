"""Every inline-button press: one dispatch over the table the joined routers make.

Button data is decoded once here (:mod:`bot.telegram.callback_data`) and routed
by its action to the handler the feature's router names
(:mod:`bot.telegram.router`) — approvals and cron each own their buttons and
neither needs the other. A press that decodes to nothing, or to an action no
router claimed, is answered politely ("This button no longer works") so no
button keeps spinning.

Nothing registers here: the table is built by :func:`~bot.telegram.router.join`
at start and handed to :func:`dispatch`.

Every press is answered through :func:`answer`, and only after what the press
does is stored: the answer (the toast, and the end of the spinner) is a
courtesy that is only useful within seconds, so it is retried once on a
transient failure and otherwise given up — it never costs the decision.
"""

from __future__ import annotations

from functools import partial

from agentgram.bot.telegram.core.callback_data import decode
from agentgram.bot.telegram.core.context import bot_context
from agentgram.bot.telegram.core.incoming import CallbackQuery, Update
from agentgram.bot.telegram.core.port import TelegramError
from agentgram.bot.telegram.core.router import ButtonHandler, ButtonTable, HandlerContext, OnButton
from agentgram.bot.telegram.core.sender import Retry, with_retry
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.buttons")


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


async def on_button(table: ButtonTable, update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    button = decode(callback_query(update).data)
    handler = table.get(button.action) if button is not None else None
    if button is None or handler is None:
        await answer(update, ctx.text(update, "approval-unknown-button"))
        return
    await handler(update, ctx, button)


def dispatch(table: ButtonTable) -> OnButton:
    """The one handler of every callback query, routing by ``table`` (the joined routers')."""
    return OnButton(partial(on_button, table))


__all__ = ["ANSWER_RETRY", "ButtonHandler", "answer", "callback_query", "dispatch", "on_button"]
