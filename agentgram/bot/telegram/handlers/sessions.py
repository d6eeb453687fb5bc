"""``/sessions``: the sessions open in this chat, one line each.

A private chat or a plain group has one session; a forum supergroup has one per topic that has
been spoken in (its ``message_thread_id``), General first. Each line names the place — the
session's stored title (a group's name, with its topic's: ``Team › Ideas``), else ``topic #<id>``
for a topic whose name the bot has not seen, else "this chat" — with the session's id and when
its newest message was written; the line of the place the command was sent from is marked. The
answer goes through ``update.get_bot()``, which is bound to the command's topic, so it lands there.

Only listing: nothing is opened here, so a topic nobody has written in yet is not in the list.

Then the sessions spawned under the session of the place asked from (issue 29; the newest
:data:`CARDS`), one card each, as ``/cron`` lists its jobs: its name, status and last activity,
with 📖 Open (its last answer sent again, as its own answers are, so a reply to it reaches it),
⏹ Stop (what it does now) and ✖️ Close (stopped, then ended: it reads no more mail); a finished
one has only 📖. A button acts only on a session spawned in this chat
(:meth:`~runtime.door.protocols.SessionsDoor.spawned`); the access gate lets only allowed users
press at all.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, key_button
from agentgram.bot.telegram.core.context import BotContext, bot_context, envelope_id, topic_of
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import Keyboard
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import edit_html, send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views import spawned_view
from agentgram.bot.telegram.views.render import escape
from agentgram.bot.telegram.views.wording import local_time
from agentgram.runtime.core.peers import PeerInfo, PeerStatus
from agentgram.runtime.door.values import PlaceSession, SpawnedSession

CARDS = 10
"""At most this many spawned sessions' cards in one ``/sessions`` answer (the newest)."""


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
    current = next((session for session in listed if session.thread_id == topic_of(update)), None)
    if current is not None:
        await _spawned_cards(update, ctx, current.id)


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


# --- the sessions spawned under this place's ------------------------------------------


async def _spawned_cards(update: Update, ctx: BotContext, root_id: int) -> None:
    spawned = (await ctx.runtime.sessions.spawned_under(root_id))[-CARDS:]
    if not spawned:
        return
    bot, chat_id = update.get_bot(), update.chat_id
    await send_html(bot, chat_id, ctx.text(update, "spawned-title"))
    for info in spawned:
        html, keyboard = _card(update, ctx, info)
        await send_html(bot, chat_id, html, reply_markup=keyboard)


def _card(update: Update, ctx: BotContext, info: PeerInfo) -> tuple[str, Keyboard]:
    """One spawned session's card and its buttons, as listed and as re-drawn after a press."""
    named = {"name": escape(info.name or info.agent), "id": str(info.id)}
    status = ctx.text(update, f"spawned-status-{info.status.name.lower().replace('_', '-')}")
    if info.last_active is None:
        html = ctx.text(update, "spawned-card", status=status, **named)
    else:
        when = local_time(ctx.translator, ctx.lang(update), info.last_active, ctx.runtime.timezone)
        html = ctx.text(update, "spawned-card-last", status=status, when=when, **named)
    arg = str(info.id)
    row = [key_button(ctx.text(update, "btn-spawned-open"), ButtonAction.SPAWNED_OPEN, arg)]
    if info.status is not PeerStatus.FINISHED:
        row.append(key_button(ctx.text(update, "btn-spawned-stop"), ButtonAction.SPAWNED_STOP, arg))
        row.append(key_button(ctx.text(update, "btn-spawned-close"), ButtonAction.SPAWNED_CLOSE, arg))
    return html, Keyboard([row])


async def _pressed(update: Update, ctx: BotContext, button: Button) -> SpawnedSession | None:
    """The card's session, if it was spawned in this chat; else the press is answered so."""
    session_id = int(button.arg) if button.arg.isdigit() else None
    found = None if session_id is None else await ctx.runtime.sessions.spawned(session_id, update.chat_id)
    if found is None:
        await buttons.answer(update, ctx.text(update, "spawned-gone"))
    return found


async def _open(update: Update, ctx: BotContext, button: Button) -> None:
    """📖: the session's last answer (or that it has none yet), sent as its answers are."""
    found = await _pressed(update, ctx, button)
    if found is None:
        return
    await buttons.answer(update)
    answer = await ctx.runtime.chat.last_answer(found.ref)
    values, t, lang = ctx.runtime.values, ctx.translator, ctx.lang(update)
    await spawned_view.send_answer(update.get_bot(), values, t, lang, found, update.chat_id, answer)


async def _stop(update: Update, ctx: BotContext, button: Button) -> None:
    """⏹: stop what the session does now (quietly: the toast says it); it reads its next mail."""
    found = await _pressed(update, ctx, button)
    if found is None:
        return
    if found.finished:
        await buttons.answer(update, ctx.text(update, "spawned-finished-short", id=str(found.ref.id)))
        return
    result = await ctx.runtime.chat.stop(found.ref, envelope_id(update), quiet=True)
    key = "spawned-stopped" if result.was_running else "spawned-not-running"
    await buttons.answer(update, ctx.text(update, key, id=str(found.ref.id)))


async def _close(update: Update, ctx: BotContext, button: Button) -> None:
    """✖️: stop the session and end it; its card shows it finished."""
    found = await _pressed(update, ctx, button)
    if found is None:
        return
    if not found.finished:
        await ctx.runtime.chat.close_spawned(found.ref, envelope_id(update))
    await buttons.answer(update, ctx.text(update, "spawned-closed", id=str(found.ref.id)))
    listed = await ctx.runtime.sessions.spawned_under(found.root_id)
    info = next((info for info in listed if info.id == found.ref.id), None)
    query = buttons.callback_query(update)
    if info is not None and query.message is not None:
        html, keyboard = _card(update, ctx, info)
        await edit_html(
            update.get_bot(), update.chat_id, query.message.message_id, html, reply_markup=keyboard
        )


router = Router(
    "sessions",
    handlers=(Command("sessions", sessions),),
    buttons={
        ButtonAction.SPAWNED_OPEN: _open,
        ButtonAction.SPAWNED_STOP: _stop,
        ButtonAction.SPAWNED_CLOSE: _close,
    },
)
