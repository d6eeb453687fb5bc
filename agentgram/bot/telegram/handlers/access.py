"""The gate every update passes first: strangers, other groups and group chatter stop here;
pairing lets strangers in.

Only allowed users reach the agent or its buttons: ``telegram.allowed_user_ids``
plus, with ``telegram.pairing`` on, the users the owner approved
(:mod:`bot.telegram.access_list`). Neither a stranger nor a group chat causes
an LLM call or a tool run.

* A stranger's message is answered once (remembered in the database, so
  restarts do not repeat it) with their Telegram user id, so the owner of a
  fresh install learns the id to put in the config; every refused update is
  logged at INFO with the config line that would allow it (no state kept to
  log only the first: a stranger's traffic is bounded by Telegram anyway).
* A stranger's button tap is answered "This button isn't for you."
* With pairing on, a stranger's first private message instead opens a
  request: they are told their id and a one-time code, the owner gets the
  request with Approve / Deny buttons. Until the owner decides, and after a
  denial, the stranger's messages get no answer (the owner is asked once per
  stranger). Approve lets them in from their next message on.
* A group not in ``telegram.groups.allowed_chat_ids`` gets one note that the bot is not enabled
  there (the log names its id); in an allowed group a message not addressed to the bot stops here
  unless ``telegram.groups.require_mention`` is off (:mod:`bot.telegram.core.groups`), before
  anyone is told anything: a stranger's chatter is not answered either.

Edited messages never reach any handler (documented: the agent works with
what was sent).
"""

from __future__ import annotations

from agentgram.bot.telegram.core.access_list import PairingRequest
from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.context import BotContext, bot_context
from agentgram.bot.telegram.core.groups import addressed
from agentgram.bot.telegram.core.incoming import PRIVATE, Chat, Update, User
from agentgram.bot.telegram.core.port import Keyboard, KeyButton
from agentgram.bot.telegram.core.router import GATE, HandlerContext, OnUpdate, Router, StopUpdate
from agentgram.bot.telegram.core.sender import edit_html, send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.access")


async def gate(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    if update.edited_message is not None or update.edited_channel_post is not None:
        raise StopUpdate
    chat = update.effective_chat
    if chat is not None and chat.type != PRIVATE:
        await _group_gate(update, ctx, chat)
    user = update.effective_user
    await ctx.access.load()
    if not ctx.allowed(user.id if user else None):
        await _refuse(update, ctx)
        raise StopUpdate


async def _group_gate(update: Update, ctx: BotContext, chat: Chat) -> None:
    """A group's update goes on only in an allowed group, and a message only when addressed."""
    groups = ctx.settings.telegram.groups
    if not chat.is_group or chat.id not in groups.allowed_chat_ids:
        log.info(
            "ignored %s %d (%s): add %d to telegram.groups.allowed_chat_ids to enable the bot there",
            chat.type,
            chat.id,
            chat.title or "untitled",
            chat.id,
        )
        await _once(ctx, f"group-told:{chat.id}", update, "group-not-enabled", id=str(chat.id))
        raise StopUpdate
    message = update.message
    if message is not None and groups.require_mention:
        api = update.get_bot()
        if not addressed(message, api.id, api.username):
            raise StopUpdate  # not for the bot: no model call, no answer, not kept


async def _refuse(update: Update, ctx: BotContext) -> None:
    user = update.effective_user
    if user is not None:
        log.info(
            "refused user %d%s: add %d to telegram.allowed_user_ids to allow", user.id, _handle(user), user.id
        )
    if update.callback_query is not None:
        await buttons.answer(update, ctx.text(update, "approval-not-yours"))
        return
    chat = update.effective_chat
    if user is None or chat is None:
        return
    if ctx.settings.telegram.pairing and chat.type == PRIVATE and await _pairing(update, ctx, user):
        return
    await _once(ctx, f"refused:{user.id}", update, "not-allowed", id=str(user.id))


async def _once(ctx: BotContext, key: str, update: Update, message: str, **params: str) -> None:
    if await ctx.runtime.values.get_value(key) is not None:
        return
    await ctx.runtime.values.set_value(key, "1")
    chat = update.effective_chat
    if chat is not None:
        await send_html(update.get_bot(), chat.id, ctx.text(update, message, **params))


def _handle(user: User) -> str:
    return f" (@{user.username})" if user.username else ""


# --- pairing ------------------------------------------------------------------------


async def _pairing(update: Update, ctx: BotContext, user: User) -> bool:
    """Ask the owner to let ``user`` in; ``False`` when the plain refusal should answer instead."""
    if await ctx.access.request(user.id) is not None:
        return True  # asked already (waiting, or denied): the owner's answer is all they get
    who = f"@{user.username}" if user.username else user.full_name
    request = await ctx.access.new_request(user.id, who, ctx.lang(update))
    if request is None:
        return False
    bot = update.get_bot()
    owner = ctx.access.owner
    asked = await send_html(
        bot,
        owner,
        _owner_text(ctx, "pairing-request", request),
        reply_markup=_decision_keyboard(ctx, request),
    )
    if asked is None:  # the owner never wrote to the bot, or blocked it: nobody to ask
        log.warning("pairing: cannot reach the owner %d; user %d gets the plain refusal", owner, user.id)
        return False
    await ctx.access.save(request)  # after the owner has it: a crash before asks again, never nobody
    log.info("pairing: user %d (%s) asks for access; the owner %d was asked", user.id, who, owner)
    chat_id = update.effective_chat.id if update.effective_chat else user.id
    await send_html(bot, chat_id, ctx.text(update, "pairing-asked", id=str(user.id), code=request.code))
    return True


def _owner_text(ctx: BotContext, key: str, request: PairingRequest) -> str:
    return ctx.translator.t(None, key, id=str(request.user_id), user=escape(request.who), code=request.code)


def _decision_keyboard(ctx: BotContext, request: PairingRequest) -> Keyboard:
    arg = f"{request.user_id}_{request.code}"
    approve = Button(ButtonAction.PAIR_APPROVE, arg)
    deny = Button(ButtonAction.PAIR_DENY, arg)
    return Keyboard(
        [
            [
                KeyButton(ctx.translator.t(None, "btn-approve"), callback_data=encode(approve)),
                KeyButton(ctx.translator.t(None, "btn-deny"), callback_data=encode(deny)),
            ]
        ]
    )


async def _decide(update: Update, ctx: BotContext, button: Button) -> None:
    presser = update.effective_user
    if presser is None or not ctx.access.decides(presser.id):
        await buttons.answer(update, ctx.text(update, "approval-not-yours"))
        return
    user_id, _, code = button.arg.partition("_")
    request = await ctx.access.pending(int(user_id), code) if user_id.isdigit() else None
    if request is None:
        await buttons.answer(update, ctx.text(update, "approval-stale"))
        return
    approved = button.action == ButtonAction.PAIR_APPROVE
    if approved:
        await ctx.access.approve(request, by=presser.id)
    else:
        await ctx.access.deny(request, by=presser.id)
    await buttons.answer(update, ctx.text(update, "approval-approved" if approved else "approval-rejected"))
    bot = update.get_bot()
    message = buttons.callback_query(update).message
    if message is not None:
        outcome = "pairing-request-approved" if approved else "pairing-request-denied"
        await edit_html(bot, message.chat.id, message.message_id, _owner_text(ctx, outcome, request))
    told = "pairing-welcome" if approved else "pairing-refused"
    await send_html(bot, request.user_id, ctx.translator.t(request.lang, told))


router = Router(
    "access",
    handlers=(OnUpdate(gate),),
    buttons={ButtonAction.PAIR_APPROVE: _decide, ButtonAction.PAIR_DENY: _decide},
    group=GATE,
)
