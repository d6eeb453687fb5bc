"""Plain messages: text becomes user mail; a reply to an approval prompt rejects it.

The user gets an honest acknowledgement: nothing extra when a turn starts
(the typing action and the reply say enough), a 👀 reaction plus "noted — I'll
read this at my next step" when a turn is already running — or, when that
turn waits for an approval, a note quoting the prompt that says how to decide
it — a note when the session is paused, and a warning when the mailbox is
full. Stickers, photos and other non-text content get a short "not supported
yet"; a document's caption is passed on with a note that the file was not read.
"""

from __future__ import annotations

from telegram import Message, ReactionTypeEmoji, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes, MessageHandler, filters

from agentgram.bot.telegram.callback_data import ButtonAction, decode
from agentgram.bot.telegram.context import BotContext, bot_context, envelope_id
from agentgram.bot.telegram.handlers import questions
from agentgram.bot.telegram.ingest import checkpoint_stored, offered_checkpoint
from agentgram.bot.telegram.render import escape
from agentgram.bot.telegram.router import Router
from agentgram.bot.telegram.sender import send_html
from agentgram.runtime.app import ApprovalStatus, DecidedBy, PostResult, SessionRef

_ACK = {
    PostResult.QUEUED: "noted-busy",
    PostResult.WAITING_APPROVAL: "noted-busy",  # when the decision came meanwhile
    PostResult.PAUSED: "paused",
    PostResult.FULL: "mailbox-full",
}
_READ_AT_NEXT_STEP = frozenset({PostResult.QUEUED, PostResult.WAITING_APPROVAL})
_PROMPT_ACTIONS = frozenset({ButtonAction.APPROVE, ButtonAction.REJECT})
"""The prompt's buttons that carry its request id."""


async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    message = update.message
    assert message is not None and message.text is not None
    if message.reply_to_message is not None and await _reject_with_reason(update, ctx):
        return
    if await questions.answer_by_text(update, ctx, message.text):  # the agent asked: this answers it
        return
    await _post(update, ctx, message.text)


async def _post(update: Update, ctx: BotContext, text: str) -> None:
    """``text`` as the user's mail, acknowledged as the mailbox took it."""
    message = update.message
    assert message is not None
    session = await ctx.session(update)
    posted = await ctx.runtime.accept_user_message(
        session,
        text,
        envelope_id=envelope_id(update),
        chat_message_id=message.message_id,
        user_ref=str(update.effective_user.id) if update.effective_user else None,
        checkpoint=offered_checkpoint(),
    )
    if posted.checkpoint_stored:
        checkpoint_stored()
    result = posted.result
    if result in _READ_AT_NEXT_STEP:
        try:
            await message.set_reaction(ReactionTypeEmoji("👀"))
        except TelegramError:
            pass
    if result == PostResult.WAITING_APPROVAL and await _point_at_prompt(update, ctx, session):
        return
    key = _ACK.get(result)
    if key is None:
        return
    await send_html(
        update.get_bot(), message.chat_id, ctx.text(update, key), reply_to=message.message_id, silent=True
    )


async def _point_at_prompt(update: Update, ctx: BotContext, session: SessionRef) -> bool:
    """Say the next step waits for a decision and how to give it, quoting the prompt once the
    chat has it; ``False`` if the turn no longer waits (the plain note is true again)."""
    message = update.message
    assert message is not None
    awaited = await ctx.runtime.awaited_approval(session)
    if awaited is None:
        return False
    text = ctx.text(update, "noted-waiting-approval", tool=escape(awaited.tool))
    reply_to = awaited.message_id if awaited.message_id is not None else message.message_id
    await send_html(update.get_bot(), message.chat_id, text, reply_to=reply_to, silent=True)
    return True


async def _reject_with_reason(update: Update, ctx: BotContext) -> bool:
    """A reply to an approval prompt rejects that call with the text as reason.

    The request is read from the prompt's own buttons, so a reply is recognised
    even before the prompt's send returned and its message id was stored. A
    prompt without buttons (decided already) is looked up by that stored id.
    """
    message = update.message
    assert message is not None and message.reply_to_message is not None
    request_id = _prompt_request(message.reply_to_message, update.get_bot().id)
    if request_id is None:
        request = await ctx.runtime.approval_for_message(message.chat_id, message.reply_to_message.message_id)
        if request is None:
            return False
        if request.status != ApprovalStatus.PENDING:
            await _say_stale(update, ctx)
            return True
        request_id = request.request_id
    result = await ctx.runtime.decide(
        request_id, approved=False, reason=message.text, envelope_id=envelope_id(update), how=DecidedBy.REPLY
    )
    if not result.applied:
        await _say_stale(update, ctx)
    return True


def _prompt_request(prompt: Message, bot_id: int) -> str | None:
    """The request id an approval prompt of ours carries in its Approve/Reject buttons."""
    if prompt.from_user is None or prompt.from_user.id != bot_id or prompt.reply_markup is None:
        return None
    for row in prompt.reply_markup.inline_keyboard:
        for key in row:
            button = decode(key.callback_data if isinstance(key.callback_data, str) else None)
            if button is not None and button.action in _PROMPT_ACTIONS:
                return button.arg
    return None


async def _say_stale(update: Update, ctx: BotContext) -> None:
    message = update.message
    assert message is not None
    await send_html(
        update.get_bot(), message.chat_id, ctx.text(update, "approval-stale"), reply_to=message.message_id
    )


async def on_unsupported(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Files are not read yet. A document's caption still reaches the model, with a note that the
    file was not read (and the user is told so); a bare document, sticker, photo or voice
    message gets a short "not supported yet"."""
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    message = update.message
    document = message.document if message is not None else None
    if message is None or document is None:
        await send_html(context.bot, chat.id, ctx.text(update, "unsupported-content"))
        return
    caption = (message.caption or "").strip()
    if not caption:
        await send_html(context.bot, chat.id, ctx.text(update, "unsupported-document"))
        return
    name = document.file_name or "file"
    note = ctx.text(update, "document-caption-only", file=escape(name))
    await send_html(context.bot, chat.id, note, reply_to=message.message_id, silent=True)
    await _post(update, ctx, f"{caption}\n\n{_unread_file(name)}")


def _unread_file(name: str) -> str:
    """What the model reads about a document it was not given."""
    return (
        f"[The user attached a file, “{name}”, with this message as its caption. The file itself was "
        "not read: files are not supported yet, so only the caption was passed on.]"
    )


router = Router(
    "messages",
    handlers=(
        MessageHandler(filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND, on_text),
        MessageHandler(filters.UpdateType.MESSAGE & ~filters.TEXT, on_unsupported),
    ),
)
