"""Session commands: /start, /help, /new, /stop, /pause, /resume, and unknown ones.

``/stop`` never waits behind a running turn: the handler only accepts a stop
mail and cancels the turn directly; the session worker then settles what was
queued and answers "⏹ Stopped." in order with the turn's other output.
Unknown commands get the help text and never reach the model.
"""

from __future__ import annotations

from telegram import BotCommand, Update
from telegram.ext import BaseHandler, CommandHandler, ContextTypes, MessageHandler, filters

from bot.telegram.context import bot_context, envelope_id
from bot.telegram.sender import send_html

COMMANDS = ("start", "help", "new", "stop", "pause", "resume", "approvals", "trust", "tic", "cron")


def menu() -> list[BotCommand]:
    """Registered once at start with ``setMyCommands`` (descriptions are English; the menu is global)."""
    return [
        BotCommand("new", "Start a fresh conversation"),
        BotCommand("stop", "Stop what the agent is doing"),
        BotCommand("pause", "Pause at the next step"),
        BotCommand("resume", "Continue a paused request"),
        BotCommand("approvals", "Requests waiting for approval"),
        BotCommand("trust", "What the agent may do without asking"),
        BotCommand("tic", "Scheduled check-ins"),
        BotCommand("cron", "Scheduled tasks"),
        BotCommand("help", "What I can do"),
    ]


async def _reply(update: Update, context: ContextTypes.DEFAULT_TYPE, key: str, **params: str | int) -> None:
    chat = update.effective_chat
    assert chat is not None
    await send_html(context.bot, chat.id, bot_context(context).text(update, key, **params))


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await _reply(update, context, "start-greeting")


async def help_(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await _reply(update, context, "help-text")


async def new(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    chat, user = update.effective_chat, update.effective_user
    assert chat is not None
    await ctx.runtime.new_session(
        chat.id, user_id=user.id if user else None, language=ctx.lang(update), envelope_id=envelope_id(update)
    )
    await _reply(update, context, "new-session")


async def stop(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    await ctx.runtime.stop(await ctx.session(update), envelope_id(update))


async def pause(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    running = await ctx.runtime.pause(await ctx.session(update), envelope_id(update))
    await _reply(update, context, "pausing" if running else "nothing-to-pause")


async def resume(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    resumed = await ctx.runtime.resume(await ctx.session(update), envelope_id(update))
    await _reply(update, context, "resumed" if resumed else "nothing-to-resume")


async def unknown(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    text = ctx.text(update, "unknown-command") + "\n\n" + ctx.text(update, "help-text")
    await send_html(context.bot, chat.id, text)


def handlers() -> list[BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]]:
    return [
        CommandHandler("start", start),
        CommandHandler("help", help_),
        CommandHandler("new", new),
        CommandHandler("stop", stop),
        CommandHandler("pause", pause),
        CommandHandler("resume", resume),
    ]


def fallback() -> MessageHandler[ContextTypes.DEFAULT_TYPE, None]:
    """Registered last: any command no other handler took."""
    return MessageHandler(filters.UpdateType.MESSAGE & filters.COMMAND, unknown)
