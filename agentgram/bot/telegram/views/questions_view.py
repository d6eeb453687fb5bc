"""How a clarifying question looks in the chat: its text, one button per option, its end.

A question (:class:`~runtime.events.QuestionAsked`) is sent with one button
per suggested option, each carrying the question's opaque id and the
option's index; the hint says a typed answer works too. Once settled
(:class:`~runtime.events.QuestionResolved`) the same message is edited: the
buttons go and a last line says how it ended — the answer, "⏭ Superseded" or
"⏹ Cancelled". The message id is stored with the question in the runtime
(``Runtime.question_shown``) and comes back with the resolution, so a process
that did not send it can still edit it.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.port import BotApi, Keyboard, KeyButton
from agentgram.bot.telegram.core.sender import PERSISTENT, edit_html, send_html
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.app import QuestionStatus
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra.events import QuestionAsked, QuestionResolved
from agentgram.runtime.infra.i18n import Translator

MAX_LABEL = 60
"""Characters of an option shown on its button (the answer keeps the whole option)."""

_ENDING = {QuestionStatus.SUPERSEDED: "question-superseded", QuestionStatus.CANCELLED: "question-cancelled"}


def question_body(t: Translator, lang: str | None, question: str) -> str:
    return f"{t.t(lang, 'question-title')}\n{escape(question)}"


def question_keyboard(question_id: str, options: tuple[str, ...]) -> Keyboard | None:
    if not options:
        return None
    rows = [
        [
            KeyButton(
                _label(option),
                callback_data=encode(Button(ButtonAction.QUESTION_ANSWER, f"{question_id}_{i}")),
            )
        ]
        for i, option in enumerate(options)
    ]
    return Keyboard(rows)


def ending_line(t: Translator, lang: str | None, event: QuestionResolved) -> str:
    if event.status == QuestionStatus.ANSWERED:
        return t.t(lang, "question-answered", answer=escape(event.answer or ""))
    return t.t(lang, _ENDING.get(event.status, "question-cancelled"))


def parse_button(arg: str) -> tuple[str, int] | None:
    """A question button's ``(question id, option index)``; ``None`` for anything else."""
    question_id, _, index = arg.rpartition("_")
    return (question_id, int(index)) if question_id and index.isdigit() else None


async def show(
    bot: BotApi,
    runtime: Door,
    t: Translator,
    lang: str | None,
    event: QuestionAsked | QuestionResolved,
    *,
    header: str | None = None,
) -> int | None:
    """Send the question (its message id, ``None`` if not sent) or edit it to its end; ``header``
    goes above it (a spawned session's: who asks)."""
    chat_id = event.to.chat_id
    assert chat_id is not None
    body = question_body(t, lang, event.question)
    if header is not None:
        body = f"{header}\n{body}"
    if isinstance(event, QuestionAsked):
        hint = t.t(lang, "question-reply-hint" if event.options else "question-type-hint")
        html = f"{body}\n<i>{hint}</i>"
        keyboard = question_keyboard(event.question_id, event.options)
        sent = await send_html(bot, chat_id, html, reply_markup=keyboard, retry=PERSISTENT)
        if sent is None:
            return None
        await runtime.approvals.question_shown(event.question_id, chat_id, sent.message_id)
        return sent.message_id
    if event.message_id is not None:  # else never shown: nothing to edit
        await edit_html(bot, chat_id, event.message_id, f"{body}\n\n<b>{ending_line(t, lang, event)}</b>")
    return None


def _label(option: str) -> str:
    return option if len(option) <= MAX_LABEL else option[: MAX_LABEL - 1] + "…"


__all__ = ["parse_button", "question_keyboard", "show"]
