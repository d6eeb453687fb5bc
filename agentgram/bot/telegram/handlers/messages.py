"""Plain messages: text becomes user mail; a reply to an approval prompt rejects it; a reply to a
message a spawned session sent (issue 29, :mod:`..views.spawned_view`) is mail to that session —
or answers its pending question — unless it has finished (then the user is told so).

The user gets an honest acknowledgement: nothing extra when a turn starts
(the typing action and the reply say enough), a 👀 reaction plus "noted — I'll
read this at my next step" when a turn is already running — or, when that
turn waits for an approval, a note quoting the prompt that says how to decide
it — a note when the session is paused, and a warning when the mailbox is
full.

A photo, voice note, audio file, video note, video, GIF or document becomes the
same mail, its caption the text and the file an :class:`Attachment` the runtime
fetches and prepares off this path (:mod:`bot.telegram.attachments`). A file
over ``telegram.max_download_mb`` is not fetched: the user is told at once,
naming the limit, and the mail says why it is missing. An album's items share a
``media_group_id`` (the runtime folds them into one message) and are
acknowledged once. A sticker gets a short friendly answer; other content (a
location, a poll, …) a note of what is understood.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentgram.bot.shown import STEERABLE, ack_key
from agentgram.bot.telegram.core.attachments import attachment_of
from agentgram.bot.telegram.core.callback_data import ButtonAction, decode
from agentgram.bot.telegram.core.context import BotContext, bot_context, envelope_id
from agentgram.bot.telegram.core.groups import with_sender
from agentgram.bot.telegram.core.incoming import Message, Update
from agentgram.bot.telegram.core.ingest import checkpoint_stored, offered_checkpoint
from agentgram.bot.telegram.core.port import TelegramError
from agentgram.bot.telegram.core.router import HandlerContext, OnMessage, Router, is_command
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.handlers import approvals, questions
from agentgram.bot.telegram.views import queued_view, spawned_view
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.app import (
    ApprovalStatus,
    Attachment,
    DecidedBy,
    PostResult,
    SessionRef,
)
from agentgram.runtime.door.values import SpawnedSession

_READ_AT_NEXT_STEP = frozenset({PostResult.QUEUED, PostResult.QUEUED_AFTER, PostResult.WAITING_APPROVAL})
_PROMPT_ACTIONS = frozenset({ButtonAction.APPROVE, ButtonAction.REJECT})
"""The prompt's buttons that carry its request id."""


def _has_text(message: Message) -> bool:
    return message.text is not None


def _has_attachment(message: Message) -> bool:
    return bool(message.photo) or any(
        part is not None
        for part in (
            message.voice,
            message.audio,
            message.video_note,
            message.video,
            message.animation,
            message.document,
        )
    )


async def on_text(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    message = update.message
    assert message is not None and message.text is not None
    if message.reply_to_message is not None and await _reject_with_reason(update, ctx):
        return
    spawned = await _replied_spawned(update, ctx)
    if spawned is not None:
        await _to_spawned(update, ctx, spawned, message.text)
        return
    if await questions.answer_by_text(update, ctx, message.text):  # the agent asked: this answers it
        return
    await _post(update, ctx, message.text)


async def on_attachment(update: Update, context: HandlerContext) -> None:
    """A file with its caption as the user's mail; one too large to fetch is explained at once."""
    ctx = bot_context(context)
    message = update.message
    assert message is not None
    attachment = attachment_of(message, ctx.settings.telegram.max_download_mb)
    if attachment is None:
        await on_unsupported(update, context)
        return
    if attachment.skipped:
        await _say_too_large(update, ctx, attachment)
    caption = (message.caption or "").strip()
    spawned = await _replied_spawned(update, ctx)
    if spawned is not None:
        await _to_spawned(update, ctx, spawned, caption, attachments=(attachment,))
        return
    await _post(update, ctx, caption, attachments=(attachment,), media_group_id=message.media_group_id)


async def _replied_spawned(update: Update, ctx: BotContext) -> SpawnedSession | None:
    """The spawned session whose message (of this chat) the user's message replies to, if any."""
    message = update.message
    assert message is not None
    replied = message.reply_to_message
    bot_id = update.get_bot().id
    if replied is None or replied.from_user is None or replied.from_user.id != bot_id:
        return None
    session_id = await spawned_view.sender_of(ctx.runtime.values, message.chat_id, replied.message_id)
    if session_id is None:
        return None
    return await ctx.runtime.sessions.spawned(session_id, message.chat_id)


async def _to_spawned(
    update: Update,
    ctx: BotContext,
    spawned: SpawnedSession,
    text: str,
    *,
    attachments: Sequence[Attachment] = (),
) -> None:
    """The user's reply to a spawned session's message: its answer to the question that session
    waits on, else mail to it; a finished session reads no more, which the user is told."""
    message = update.message
    assert message is not None
    if spawned.finished:
        finished = ctx.text(update, "spawned-finished", id=str(spawned.ref.id))
        await send_html(update.get_bot(), message.chat_id, finished, reply_to=message.message_id)
        return
    answers = ctx.runtime.approvals.answer_pending_question
    if not attachments and await answers(spawned.ref, text, envelope_id=envelope_id(update)):
        return
    await _post(update, ctx, text, attachments=attachments, session=spawned.ref)


async def _say_too_large(update: Update, ctx: BotContext, attachment: Attachment) -> None:
    message = update.message
    assert message is not None
    limit = ctx.settings.telegram.max_download_mb
    file = escape(attachment.name) if attachment.name else ctx.text(update, "file-kind", kind=attachment.kind)
    text = ctx.text(update, "file-too-large", file=file, limit=limit)
    await send_html(update.get_bot(), message.chat_id, text, reply_to=message.message_id)


async def _post(
    update: Update,
    ctx: BotContext,
    text: str,
    *,
    attachments: Sequence[Attachment] = (),
    media_group_id: str | None = None,
    session: SessionRef | None = None,
) -> None:
    """``text`` (and files) as the user's mail to ``session`` (default: the place's own),
    acknowledged as the mailbox took it."""
    message = update.message
    assert message is not None
    session = session or await ctx.session(update)
    if message.chat.is_group:  # the session is the group's: the model is told who speaks
        text = with_sender(text, update.effective_user)
        ctx.delivery.speakers.note(message.chat_id, message.message_id, update.effective_user, message.topic)
    posted = await ctx.runtime.chat.accept_user_message(
        session,
        text,
        envelope_id=envelope_id(update),
        chat_message_id=message.message_id,
        user_ref=str(update.effective_user.id) if update.effective_user else None,
        checkpoint=offered_checkpoint(),
        attachments=attachments,
        media_group_id=media_group_id,
    )
    if posted.checkpoint_stored:
        checkpoint_stored()
    if media_group_id is not None and _acked_before(ctx, message.chat_id, media_group_id):
        return
    result = posted.result
    # what the turn waits for is read now, as the message is taken in: the chat's queue may hold
    # the reaction below behind the prompt's own send
    awaited = (
        await ctx.runtime.approvals.awaited_approval(session)
        if result == PostResult.WAITING_APPROVAL
        else None
    )
    if result in _READ_AT_NEXT_STEP:
        try:
            await message.set_reaction("👀")
        except TelegramError:
            pass
    reply_to = message.message_id
    if awaited is not None:  # the note quotes the prompt, when the chat had it as the message came in
        text = ctx.text(update, "noted-waiting-approval", tool=escape(awaited.tool))
        reply_to = awaited.message_id if awaited.message_id is not None else reply_to
    elif (key := ack_key(result)) is not None:
        text = ctx.text(update, key)
    else:
        return
    steerable = (awaited is not None or result in STEERABLE) and posted.seq is not None
    keyboard = queued_view.keyboard(ctx.translator, ctx.lang(update), session.id, posted.seq or 0)
    bot, chat_id = update.get_bot(), message.chat_id
    sent = await send_html(
        bot, chat_id, text, reply_to=reply_to, silent=True, reply_markup=keyboard if steerable else None
    )
    if steerable and sent is not None and posted.seq is not None:
        await queued_view.remember(ctx.runtime.values, session.id, posted.seq, chat_id, sent.message_id)


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
        request = await ctx.runtime.approvals.approval_for_message(
            message.chat_id, message.reply_to_message.message_id
        )
        if request is None:
            return False
        if request.status != ApprovalStatus.PENDING:
            await _say_stale(update, ctx)
            return True
        request_id = request.request_id
    only = await approvals.who_may_decide(update, ctx, request_id)
    if only is not None:  # a group's prompt someone else must decide: their reply decides nothing
        text = ctx.text(update, "approval-only-requester", name=escape(only))
        await send_html(update.get_bot(), message.chat_id, text, reply_to=message.message_id, silent=True)
        return True
    result = await ctx.runtime.approvals.decide(
        request_id, approved=False, reason=message.text, envelope_id=envelope_id(update), how=DecidedBy.REPLY
    )
    if not result.applied:
        await _say_stale(update, ctx)
    return True


def _prompt_request(prompt: Message, bot_id: int | None) -> str | None:
    """The request id an approval prompt of ours carries in its Approve/Reject buttons."""
    if prompt.from_user is None or prompt.from_user.id != bot_id or prompt.reply_markup is None:
        return None
    for key in prompt.reply_markup.buttons():
        button = decode(key.callback_data)
        if button is not None and button.action in _PROMPT_ACTIONS:
            return button.arg
    return None


async def _say_stale(update: Update, ctx: BotContext) -> None:
    message = update.message
    assert message is not None
    await send_html(
        update.get_bot(), message.chat_id, ctx.text(update, "approval-stale"), reply_to=message.message_id
    )


def _acked_before(ctx: BotContext, chat_id: int, media_group_id: str) -> bool:
    """Whether an earlier item of this album was acknowledged (and remember this one was)."""
    key = (chat_id, media_group_id)
    if key in ctx.albums_acked:
        return True
    ctx.albums_acked.append(key)
    return False


async def on_sticker(update: Update, context: HandlerContext) -> None:
    """A sticker is a gesture, not a request: a short friendly answer, and the model is not asked."""
    ctx = bot_context(context)
    message = update.message
    assert message is not None and message.sticker is not None
    text = ctx.text(update, "sticker-reply", emoji=message.sticker.emoji or "🙂")
    await send_html(context.bot, message.chat_id, text, reply_to=message.message_id)


async def on_unsupported(update: Update, context: HandlerContext) -> None:
    """A location, contact, poll, dice, …: say what is understood instead."""
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    await send_html(context.bot, chat.id, ctx.text(update, "unsupported-content"))


router = Router(
    "messages",
    handlers=(
        OnMessage(lambda m: _has_text(m) and not is_command(m), on_text),
        OnMessage(_has_attachment, on_attachment),
        OnMessage(lambda m: m.sticker is not None, on_sticker),
        OnMessage(lambda m: not _has_text(m), on_unsupported),
    ),
)
