"""``/skills``: the Agent Skills loaded at start, each with its description.

The list is what the model's system message holds (:mod:`runtime.agents.skills`), so the user
sees exactly which procedures the agent can load; a skill added or fixed on disk shows after
the next start, as it reaches the model.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.context import bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.views.render import escape


async def skills(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    found = ctx.runtime.sessions.skills()
    if not found:
        await send_html(context.bot, chat.id, ctx.text(update, "skills-none"))
        return
    lines = [ctx.text(update, "skills-title")]
    lines += [
        ctx.text(update, "skills-item", name=escape(s.name), description=escape(s.description)) for s in found
    ]
    await send_html(context.bot, chat.id, "\n".join(lines))


router = Router("skills", handlers=(Command("skills", skills),))
