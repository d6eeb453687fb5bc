"""Answers to the agent's clarifying questions: a tapped option, or the next text sent.

A tap on an option's button answers its question (the runtime stores the
answer as mail, then applies it once; a second tap, or a tap on a question
superseded or stopped meanwhile, is told the question is no longer open).
While a question is pending, the next plain text the user sends is its
answer, not a new message for the turn: :func:`answer_by_text`, which the
messages handler asks first. The question's message is edited by delivery
when the runtime reports it settled, whichever way it was.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction
from agentgram.bot.telegram.core.context import BotContext, envelope_id
from agentgram.bot.telegram.core.groups import question_key, session_question_key
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Router
from agentgram.bot.telegram.handlers import approvals, buttons
from agentgram.bot.telegram.views.questions_view import parse_button


async def _answer(update: Update, ctx: BotContext, button: Button) -> None:
    parsed = parse_button(button.arg)
    if parsed is None:
        await buttons.answer(update, ctx.text(update, "question-toast-stale"))
        return
    question_id, option = parsed
    only = await approvals.who_may_decide(update, ctx, question_key(question_id))
    if only is not None:
        await buttons.answer(update, ctx.text(update, "approval-only-requester", name=only))
        return
    result = await ctx.runtime.approvals.answer_question(
        question_id, option=option, envelope_id=envelope_id(update)
    )
    await buttons.answer(
        update, ctx.text(update, "question-toast-answered" if result.applied else "question-toast-stale")
    )


async def answer_by_text(update: Update, ctx: BotContext, text: str) -> bool:
    """``text`` answers the session's pending question, if it has one (then it is no message). In
    a group under ``approver: requester`` only the asker's text answers; another's is a message."""
    session = await ctx.session(update)
    if await approvals.who_may_decide(update, ctx, session_question_key(session.id)) is not None:
        return False
    return await ctx.runtime.approvals.answer_pending_question(session, text, envelope_id=envelope_id(update))


router = Router("questions", buttons={ButtonAction.QUESTION_ANSWER: _answer})
