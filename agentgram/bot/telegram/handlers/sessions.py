"""``/sessions``: the sessions open in this chat, one line each.

A private chat or a plain group has one session; a forum supergroup has one per topic that has
been spoken in (its ``message_thread_id``), General first. Each line names the place — the
session's stored title (a group's name, with its topic's: ``Team › Ideas``), else ``topic #<id>``
for a topic whose name the bot has not seen, else "this chat" — with the session's id and when
its newest message was written; the line of the place the command was sent from is marked. The
answer goes through ``update.get_bot()``, which is bound to the command's topic, so it lands there.

Only listing: nothing is opened here, so a topic nobody has written in yet is not in the list.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.context import BotContext, bot_context, topic_of
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.views.render import escape
from agentgram.bot.telegram.views.wording import local_time
from agentgram.runtime.door.values import PlaceSession


async def sessions(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    listed = await ctx.runtime.sessions.chat_sessions(chat.id)
    if not listed:
        text = ctx.text(update, "sessions-none")
    else:
        here = topic_of(update)
        lines = [ctx.text(update, "sessions-title")]
        lines += [_line(update, ctx, session, here=session.thread_id == here) for session in listed]
        text = "\n".join(lines)
    await send_html(update.get_bot(), chat.id, text)


def _line(update: Update, ctx: BotContext, session: PlaceSession, *, here: bool) -> str:
    """One session's line; ids go in as text (Fluent would group a number's digits: 1,234)."""
    if session.title:
        place = escape(session.title)
    elif session.thread_id:
        place = ctx.text(update, "sessions-topic", id=str(session.thread_id))
    else:
        place = ctx.text(update, "sessions-this-chat")
    if session.last_active is None:
        line = ctx.text(update, "sessions-item", place=place, id=str(session.id))
    else:
        when = local_time(ctx.translator, ctx.lang(update), session.last_active, ctx.runtime.timezone)
        line = ctx.text(update, "sessions-item-last", place=place, id=str(session.id), when=when)
    return ctx.text(update, "sessions-here", item=line) if here else line


router = Router("sessions", handlers=(Command("sessions", sessions),))
