"""Session commands: /start, /help, /new, /stop, /pause, /resume, and unknown ones.

``/stop`` never waits behind a running turn: the handler only accepts a stop
mail and cancels the turn directly; the session worker then settles what was
queued and answers "⏹ Stopped." in order with the turn's other output. ``/stop all`` also stops
every session spawned under the chat's (issue 29), quietly, and says how many were working.
Unknown commands get the help text and never reach the model.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.context import BotContext, bot_context, envelope_id, topic_of
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import BotCommand
from agentgram.bot.telegram.core.router import Command, HandlerContext, OnMessage, Router, is_command
from agentgram.bot.telegram.core.sender import send_html
from agentgram.runtime.infra.i18n import Translator

MENU = (
    *("new", "stop", "pause", "resume", "approvals", "trust", "tic", "cron", "todos", "jobs", "model"),
    *("sessions", "rollback", "cost", "search", "context", "compact", "skills", "mcp", "help"),
)
"""The commands in the menu, in order; each one's description is ``menu-<name>`` in the locales."""


def menu(translator: Translator) -> dict[str | None, list[BotCommand]]:
    """The command menu per language, each registered at start with ``setMyCommands``.

    ``None`` — every language without a menu of its own — gets the default
    locale's; each other locale gets its own under its language code (Telegram
    takes two-letter ISO 639-1 codes, so ``pt-BR`` registers as ``pt`` unless
    a ``pt`` locale exists).
    """

    def commands(lang: str) -> list[BotCommand]:
        return [BotCommand(name, translator.t(lang, f"menu-{name}")) for name in MENU]

    menus: dict[str | None, list[BotCommand]] = {None: commands(translator.default)}
    default = translator.default.split("-")[0].lower()
    for lang in translator.languages():
        code = lang.split("-")[0].lower()
        if code != default and (code not in menus or code == lang):
            menus[code] = commands(lang)
    return menus


def help_text(ctx: BotContext, update: Update) -> str:
    """The command list; ``/trace`` is in it only while the web view is enabled (there is nothing to link to else)."""
    return ctx.text(update, "help-text", web="on" if ctx.settings.web.enabled else "off")


async def _reply(update: Update, context: HandlerContext, key: str, **params: str | int) -> None:
    chat = update.effective_chat
    assert chat is not None
    await send_html(context.bot, chat.id, bot_context(context).text(update, key, **params))


async def start(update: Update, context: HandlerContext) -> None:
    """What the bot is, then the command list (the README promises both)."""
    chat = update.effective_chat
    assert chat is not None
    ctx = bot_context(context)
    text = ctx.text(update, "start-greeting") + "\n\n" + help_text(ctx, update)
    await send_html(context.bot, chat.id, text)


async def help_(update: Update, context: HandlerContext) -> None:
    chat = update.effective_chat
    assert chat is not None
    await send_html(context.bot, chat.id, help_text(bot_context(context), update))


async def new(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat, user = update.effective_chat, update.effective_user
    assert chat is not None
    await ctx.runtime.chat.new_session(
        chat.id,
        user_id=user.id if user else None,
        language=ctx.lang(update),
        envelope_id=envelope_id(update),
        thread_id=topic_of(update),
        about=ctx.about(update),
    )
    await _reply(update, context, "new-session")


async def stop(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    session = await ctx.session(update)
    await ctx.runtime.chat.stop(session, envelope_id(update))
    if [word.lower() for word in context.args] == ["all"]:
        stopped = await ctx.runtime.chat.stop_spawned(session.id, envelope_id(update))
        await _reply(update, context, "stopped-spawned", count=stopped)


async def pause(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    running = await ctx.runtime.chat.pause(await ctx.session(update), envelope_id(update))
    await _reply(update, context, "pausing" if running else "nothing-to-pause")


async def resume(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    resumed = await ctx.runtime.chat.resume(await ctx.session(update), envelope_id(update))
    await _reply(update, context, "resumed" if resumed else "nothing-to-resume")


async def unknown(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    text = ctx.text(update, "unknown-command") + "\n\n" + help_text(ctx, update)
    await send_html(context.bot, chat.id, text)


router = Router(
    "commands",
    handlers=(
        Command("start", start),
        Command("help", help_),
        Command("new", new),
        Command("stop", stop),
        Command("pause", pause),
        Command("resume", resume),
    ),
)

fallback = Router("fallback", handlers=(OnMessage(is_command, unknown),))
"""Joined last: any command no other router took."""
