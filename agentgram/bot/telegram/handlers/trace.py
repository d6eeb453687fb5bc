"""``/trace``: a link to this chat's current session in the web view (:mod:`bot.web`).

The link is ``web.public_url`` + ``/sessions/<id>``; it carries no token (a
link in a chat is easily forwarded): a browser that opened the web view with
``?token=`` once has its cookie. With the web view off the reply says so; with
it on but without ``web.public_url`` the reply says that it runs but has no
public address, and names the key to set.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.context import bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.views.render import escape


def session_url(public_url: str, session_id: int) -> str:
    return f"{public_url.rstrip('/')}/sessions/{session_id}"


async def trace(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    web = ctx.settings.web
    if not web.enabled or web.public_url is None:
        key = "trace-no-url" if web.enabled else "trace-off"
        await send_html(context.bot, chat.id, ctx.text(update, key))
        return
    session = await ctx.session(update)
    url = escape(session_url(web.public_url, session.id))
    await send_html(context.bot, chat.id, ctx.text(update, "trace-link", url=url, id=session.id))


router = Router("trace", handlers=(Command("trace", trace),))
