"""The gate every update passes first: strangers and group chats stop here.

Only ``telegram.allowed_user_ids`` reach the agent or its buttons. A stranger
gets at most one short refusal (remembered in the database, so restarts do
not repeat it), a group chat one note that groups are not supported; neither
causes an LLM call or a tool run. Edited messages never reach any handler
(documented: the agent works with what was sent).
"""

from __future__ import annotations

from telegram import Update
from telegram.constants import ChatType
from telegram.ext import ApplicationHandlerStop, ContextTypes, TypeHandler

from bot.telegram.context import BotContext, bot_context
from bot.telegram.handlers import buttons
from bot.telegram.sender import send_html


async def gate(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    if update.edited_message is not None or update.edited_channel_post is not None:
        raise ApplicationHandlerStop
    user = update.effective_user
    if not ctx.allowed(user.id if user else None):
        await _refuse(update, ctx)
        raise ApplicationHandlerStop
    chat = update.effective_chat
    if chat is not None and chat.type != ChatType.PRIVATE:
        await _once(ctx, f"group-told:{chat.id}", update, "group-not-supported")
        raise ApplicationHandlerStop


async def _refuse(update: Update, ctx: BotContext) -> None:
    if update.callback_query is not None:
        await buttons.answer(update, ctx.text(update, "approval-not-yours"))
        return
    user = update.effective_user
    if user is not None and update.effective_chat is not None:
        await _once(ctx, f"refused:{user.id}", update, "not-allowed")


async def _once(ctx: BotContext, key: str, update: Update, message: str) -> None:
    if await ctx.runtime.sessions.get_value(key) is not None:
        return
    await ctx.runtime.sessions.set_value(key, "1")
    chat = update.effective_chat
    if chat is not None:
        await send_html(update.get_bot(), chat.id, ctx.text(update, message))


def handler() -> TypeHandler[Update, ContextTypes.DEFAULT_TYPE, None]:
    return TypeHandler(Update, gate)
