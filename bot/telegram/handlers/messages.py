"""Plain messages: text becomes user mail; a reply to an approval prompt rejects it.

The user gets an honest acknowledgement: nothing extra when a turn starts
(the typing action and the reply say enough), a 👀 reaction plus "noted — I'll
read this at my next step" when a turn is already running, a note when the
session is paused, and a warning when the mailbox is full. Stickers, photos
and other non-text content get a short "not supported yet".
"""

from __future__ import annotations

from telegram import ReactionTypeEmoji, Update
from telegram.error import TelegramError
from telegram.ext import BaseHandler, ContextTypes, MessageHandler, filters

from bot.telegram.context import BotContext, bot_context, envelope_id
from bot.telegram.sender import send_html
from runtime.app import PostResult
from runtime.storage.models import ApprovalStatus

_ACK = {
    PostResult.QUEUED: "noted-busy",
    PostResult.PAUSED: "paused",
    PostResult.FULL: "mailbox-full",
}


async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    message = update.message
    assert message is not None and message.text is not None
    if message.reply_to_message is not None and await _reject_with_reason(update, ctx):
        return
    session = await ctx.session(update)
    result = await ctx.runtime.post_user_message(
        session,
        message.text,
        envelope_id=envelope_id(update),
        chat_message_id=message.message_id,
        user_ref=str(update.effective_user.id) if update.effective_user else None,
        checkpoint=ctx.checkpoint(update),
    )
    key = _ACK.get(result)
    if key is None:
        return
    if result == PostResult.QUEUED:
        try:
            await message.set_reaction(ReactionTypeEmoji("👀"))
        except TelegramError:
            pass
    await send_html(
        context.bot, message.chat_id, ctx.text(update, key), reply_to=message.message_id, silent=True
    )


async def _reject_with_reason(update: Update, ctx: BotContext) -> bool:
    """A reply to a pending approval prompt rejects that call with the text as reason."""
    message = update.message
    assert message is not None and message.reply_to_message is not None
    request = await ctx.runtime.approvals.by_message(message.chat_id, message.reply_to_message.message_id)
    if request is None:
        return False
    if request.status != ApprovalStatus.PENDING:
        await send_html(
            update.get_bot(), message.chat_id, ctx.text(update, "approval-stale"), reply_to=message.message_id
        )
        return True
    await ctx.runtime.decide(request.id, approved=False, reason=message.text, envelope_id=envelope_id(update))
    return True


async def on_unsupported(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    await send_html(context.bot, chat.id, ctx.text(update, "unsupported-content"))


def handlers() -> list[BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]]:
    return [
        MessageHandler(filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND, on_text),
        MessageHandler(filters.UpdateType.MESSAGE & ~filters.TEXT, on_unsupported),
    ]
