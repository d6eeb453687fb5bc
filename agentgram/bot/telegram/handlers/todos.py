"""``/todos``: the agent's todo list of this chat's session, sent again at the bottom of the chat.

The message sent becomes the one the list's later changes edit
(:mod:`bot.telegram.todos_view`).
"""

from __future__ import annotations

from agentgram.bot.telegram.core.context import bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.views import todos_view


async def todos(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    session = await ctx.session(update)
    items = await ctx.runtime.chat.todos(session)
    html = todos_view.todos_html(ctx.translator, ctx.lang(update), items)
    await todos_view.send(context.bot, ctx.runtime.values, chat.id, session.id, html)


router = Router("todos", handlers=(Command("todos", todos),))
