"""Button presses on approval prompts, and /approvals and /trust.

Every callback query is answered with a short toast — decisions, stale
requests, garbage data alike — so no button keeps spinning. A decision is
stored as mail and applied once; a second tap is told the request is no
longer pending. The prompt itself is edited by delivery when the runtime
reports the resolution, so a prompt reads the same whichever way it was
decided (button, reply, /stop, timeout).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, ContextTypes

from bot.telegram.callback_data import Button, ButtonAction, decode, encode
from bot.telegram.context import BotContext, bot_context, envelope_id
from bot.telegram.render import escape
from bot.telegram.sender import send_html
from runtime.approvals.manager import DecisionResult
from runtime.approvals.trust import describe
from runtime.turn.loop import call_summary

_DECIDE = {ButtonAction.APPROVE: True, ButtonAction.REJECT: False}
ButtonHandler = Callable[[Update, BotContext, Button], Awaitable[None]]
"""Every button action routes through :data:`BUTTON_HANDLERS`; other features add theirs there."""


async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    query = update.callback_query
    assert query is not None
    button = decode(query.data)
    if button is None:
        await query.answer(ctx.text(update, "approval-unknown-button"))
        return
    handler = BUTTON_HANDLERS.get(button.action)
    if handler is None:
        await query.answer(ctx.text(update, "approval-unknown-button"))
        return
    await handler(update, ctx, button)


async def _decide(update: Update, ctx: BotContext, button: Button) -> None:
    query = update.callback_query
    assert query is not None
    approved = _DECIDE[button.action]
    result = await ctx.runtime.decide(
        button.arg, approved=approved, reason=None, envelope_id=envelope_id(update)
    )
    await _toast(update, ctx, result, "approval-approved" if approved else "approval-rejected")


async def _trust_15(update: Update, ctx: BotContext, button: Button) -> None:
    result, minutes = await ctx.runtime.trust_for_a_while(button.arg, envelope_id=envelope_id(update))
    await _toast(update, ctx, result, "trust-bypass-on", minutes=minutes)


async def _always(update: Update, ctx: BotContext, button: Button) -> None:
    query = update.callback_query
    assert query is not None
    rule = await ctx.runtime.propose_always(button.arg)
    if rule is None:
        await query.answer(ctx.text(update, "approval-stale"))
        return
    await query.answer()
    keyboard = InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(
                    ctx.text(update, "btn-confirm"),
                    callback_data=encode(Button(ButtonAction.ALWAYS_CONFIRM, button.arg)),
                ),
                InlineKeyboardButton(
                    ctx.text(update, "btn-cancel"),
                    callback_data=encode(Button(ButtonAction.ALWAYS_CANCEL, button.arg)),
                ),
            ]
        ]
    )
    chat = update.effective_chat
    assert chat is not None
    text = ctx.text(update, "trust-always-confirm", rule=escape(describe(rule)))
    await send_html(update.get_bot(), chat.id, text, reply_markup=keyboard)


async def _always_confirm(update: Update, ctx: BotContext, button: Button) -> None:
    query = update.callback_query
    assert query is not None
    result, rule = await ctx.runtime.trust_always(button.arg, envelope_id=envelope_id(update))
    await _toast(update, ctx, result, "approval-approved")
    if rule is not None and query.message is not None:
        await query.edit_message_reply_markup(reply_markup=None)


async def _always_cancel(update: Update, ctx: BotContext, button: Button) -> None:
    query = update.callback_query
    assert query is not None
    await query.answer()
    if query.message is not None:
        await query.delete_message()


async def _revoke_bypass(update: Update, ctx: BotContext, button: Button) -> None:
    query = update.callback_query
    assert query is not None
    session = await ctx.session(update)
    ctx.runtime.approvals.bypasses.revoke(session.id or 0, _scope_from_arg(button.arg))
    await query.answer(ctx.text(update, "trust-revoked"))
    await query.edit_message_reply_markup(reply_markup=None)


async def _revoke_rule(update: Update, ctx: BotContext, button: Button) -> None:
    query = update.callback_query
    assert query is not None
    removed = await ctx.runtime.approvals.delete_rule(int(button.arg)) if button.arg.isdigit() else False
    await query.answer(ctx.text(update, "trust-revoked" if removed else "approval-unknown-button"))
    if removed:
        await query.edit_message_reply_markup(reply_markup=None)


async def _toast(
    update: Update, ctx: BotContext, result: DecisionResult, key: str, **params: str | int
) -> None:
    query = update.callback_query
    assert query is not None
    await query.answer(
        ctx.text(update, key, **params) if result.applied else ctx.text(update, "approval-stale")
    )


BUTTON_HANDLERS: dict[ButtonAction, ButtonHandler] = {
    ButtonAction.APPROVE: _decide,
    ButtonAction.REJECT: _decide,
    ButtonAction.TRUST_15: _trust_15,
    ButtonAction.ALWAYS: _always,
    ButtonAction.ALWAYS_CONFIRM: _always_confirm,
    ButtonAction.ALWAYS_CANCEL: _always_cancel,
    ButtonAction.REVOKE_BYPASS: _revoke_bypass,
    ButtonAction.REVOKE_RULE: _revoke_rule,
}


def _scope_to_arg(scope: str) -> str:
    return "all" if scope == "all" else ("g-" + scope[1:] if scope.startswith("@") else "t-" + scope)


def _scope_from_arg(arg: str) -> str:
    if arg.startswith("g-"):
        return "@" + arg[2:]
    return arg[2:] if arg.startswith("t-") else arg


async def list_approvals(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Each pending prompt is answered by a reply to it: tapping the quote jumps there
    (Telegram has no message links in private chats)."""
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    pending = await ctx.runtime.approvals.pending((await ctx.session(update)).id)
    if not pending:
        await send_html(context.bot, chat.id, ctx.text(update, "approvals-none"))
        return
    await send_html(context.bot, chat.id, ctx.text(update, "approvals-list-header"))
    for request in pending[:10]:
        call = await ctx.runtime.call_for_request(request.id)
        line = f"⏳ <code>{escape(call.name if call else '?')}</code> {escape(call_summary(call) if call else '')}"
        await send_html(context.bot, chat.id, line, reply_to=request.message_id)


async def list_trust(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    session = await ctx.session(update)
    bypasses = ctx.runtime.approvals.bypasses.active(session.id or 0, _now())
    rules = [r for r in ctx.runtime.approvals.rules() if r.origin == "user"]
    if not bypasses and not rules:
        await send_html(context.bot, chat.id, ctx.text(update, "trust-none"))
        return
    await send_html(context.bot, chat.id, ctx.text(update, "trust-header"))
    revoke = ctx.text(update, "btn-revoke")
    for bypass in bypasses:
        until = bypass.expires_at.astimezone(ctx.runtime.timezone).strftime("%H:%M")
        text = (
            f"⏱ <code>{escape(bypass.scope)}</code> — {ctx.text(update, 'trust-bypass-until', until=until)}"
        )
        data = encode(Button(ButtonAction.REVOKE_BYPASS, _scope_to_arg(bypass.scope)))
        await send_html(context.bot, chat.id, text, reply_markup=_one(revoke, data))
    for rule in rules:
        data = encode(Button(ButtonAction.REVOKE_RULE, str(rule.id)))
        await send_html(
            context.bot, chat.id, f"🔁 <code>{escape(describe(rule))}</code>", reply_markup=_one(revoke, data)
        )


def _one(label: str, data: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=data)]])


def _now():  # type: ignore[no-untyped-def]
    from runtime.storage.models import utcnow

    return utcnow()


def handlers() -> list[BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]]:
    return [
        CallbackQueryHandler(on_button),
        CommandHandler("approvals", list_approvals),
        CommandHandler("trust", list_trust),
    ]
