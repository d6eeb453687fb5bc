"""Button presses on approval prompts, and /approvals and /trust.

Every press of these buttons is answered with a short toast — decisions and
stale requests alike — so no button keeps spinning; garbage data is answered
by the dispatch in :mod:`bot.telegram.handlers.buttons`, which routes these
buttons here by this file's :data:`router`. (A stranger's tap never gets here: the access gate answers it
with a refusal.) A decision is stored as mail and applied once; a second tap
is told the request is no longer pending. The prompt itself is edited by
delivery when the runtime reports the resolution, so a prompt reads the same
whichever way it was decided (button, reply, /stop, timeout).
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.context import BotContext, bot_context, envelope_id
from agentgram.bot.telegram.core.groups import parse_requester, requester_key
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import Keyboard, KeyButton
from agentgram.bot.telegram.core.router import ButtonHandler, Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import edit_html, send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.handlers.buttons import callback_query
from agentgram.bot.telegram.views.render import escape
from agentgram.bot.telegram.views.wording import local_time, scope_text
from agentgram.runtime.app import Bypass, Decision, Rule
from agentgram.runtime.core.approvals.trust import describe

# --- the prompt's buttons ------------------------------------------------------------


async def who_may_decide(update: Update, ctx: BotContext, request_id: str) -> str | None:
    """``None`` when this update's user may decide the request; else the name of the one who may
    (a group with ``telegram.groups.approver: requester``: the sender of the message that caused
    it, stored beside the prompt; :mod:`bot.telegram.core.groups`)."""
    chat, user = update.effective_chat, update.effective_user
    if chat is None or not chat.is_group or ctx.settings.telegram.groups.approver != "requester":
        return None
    stored = await ctx.runtime.values.get_value(requester_key(request_id))
    requester = parse_requester(stored) if stored is not None else None
    if requester is None or (user is not None and user.id == requester[0]):
        return None  # not known (a prompt of a previous process): any allowed user
    return requester[1]


def _refusing(handler: ButtonHandler) -> ButtonHandler:
    """A prompt button's handler, run only for whoever may decide the request (the button's arg)."""

    async def guarded(update: Update, ctx: BotContext, button: Button) -> None:
        only = await who_may_decide(update, ctx, button.arg)
        if only is not None:
            await buttons.answer(update, ctx.text(update, "approval-only-requester", name=only))
            return
        await handler(update, ctx, button)

    return guarded


async def _decide(update: Update, ctx: BotContext, button: Button) -> None:
    approved = button.action == ButtonAction.APPROVE
    result = await ctx.runtime.approvals.decide(
        button.arg, approved=approved, reason=None, envelope_id=envelope_id(update)
    )
    await _toast(update, ctx, result, "approval-approved" if approved else "approval-rejected")


async def _trust_15(update: Update, ctx: BotContext, button: Button) -> None:
    result, minutes, scope = await ctx.runtime.approvals.trust_for_a_while(
        button.arg, envelope_id=envelope_id(update)
    )
    covered = scope_text(ctx.translator, ctx.lang(update), scope)
    await _toast(update, ctx, result, "trust-bypass-on", minutes=minutes, scope=covered)


async def _always(update: Update, ctx: BotContext, button: Button) -> None:
    """Show the rule "Always" would save; nothing is saved or decided until it is confirmed."""
    rule = await ctx.runtime.approvals.propose_always(button.arg)
    if rule is None:
        await buttons.answer(update, ctx.text(update, "approval-stale"))
        return
    await buttons.answer(update)
    keyboard = Keyboard(
        [
            [
                _button(ctx.text(update, "btn-confirm"), Button(ButtonAction.ALWAYS_CONFIRM, button.arg)),
                _button(ctx.text(update, "btn-cancel"), Button(ButtonAction.ALWAYS_CANCEL, button.arg)),
            ]
        ]
    )
    chat = update.effective_chat
    assert chat is not None
    text = ctx.text(update, "trust-always-confirm", rule=escape(describe(rule)))
    await send_html(update.get_bot(), chat.id, text, reply_markup=keyboard)


async def _always_confirm(update: Update, ctx: BotContext, button: Button) -> None:
    query = callback_query(update)
    result, rule = await ctx.runtime.approvals.trust_always(button.arg, envelope_id=envelope_id(update))
    await _toast(update, ctx, result, "approval-approved")
    message = query.message
    if message is None:
        return
    if rule is None:  # stale: the request was decided meanwhile
        await query.edit_message_reply_markup(reply_markup=None)
        return
    text = ctx.text(update, "trust-always-saved", rule=escape(describe(rule)))
    await edit_html(update.get_bot(), message.chat.id, message.message_id, text)


async def _always_cancel(update: Update, ctx: BotContext, button: Button) -> None:
    query = callback_query(update)
    await buttons.answer(update)
    if query.message is not None:
        await query.delete_message()


async def _toast(update: Update, ctx: BotContext, result: Decision, key: str, **params: str | int) -> None:
    text = ctx.text(update, key, **params) if result.applied else ctx.text(update, "approval-stale")
    await buttons.answer(update, text)


# --- /approvals -------------------------------------------------------------------------

APPROVALS_SHOWN = 10


async def list_approvals(update: Update, context: HandlerContext) -> None:
    """Each pending request as a reply to its prompt: tapping the quote jumps there
    (private chats have no message links), and replying to the prompt rejects with a reason."""
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    pending = await ctx.runtime.approvals.pending_approvals(await ctx.session(update), limit=APPROVALS_SHOWN)
    if not pending:
        await send_html(context.bot, chat.id, ctx.text(update, "approvals-none"))
        return
    await send_html(context.bot, chat.id, ctx.text(update, "approvals-list-header"))
    for request in pending:
        line = f"⏳ <code>{escape(request.tool)}</code> {escape(request.summary)}"
        await send_html(context.bot, chat.id, line, reply_to=request.message_id)


# --- /trust and revoking ----------------------------------------------------------------


async def list_trust(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    trust = ctx.runtime.approvals.trust_overview(await ctx.session(update))
    if not trust.bypasses and not trust.rules:
        await send_html(context.bot, chat.id, ctx.text(update, "trust-none"))
        return
    await send_html(context.bot, chat.id, ctx.text(update, "trust-header"))
    revoke = ctx.text(update, "btn-revoke")
    for bypass in trust.bypasses:
        keyboard = _one(revoke, Button(ButtonAction.REVOKE_BYPASS, _scope_to_arg(bypass.scope)))
        await send_html(context.bot, chat.id, _bypass_line(ctx, update, bypass), reply_markup=keyboard)
    for rule in trust.rules:
        keyboard = _one(revoke, Button(ButtonAction.REVOKE_RULE, str(rule.id)))
        await send_html(context.bot, chat.id, _rule_line(rule), reply_markup=keyboard)


def _bypass_line(ctx: BotContext, update: Update, bypass: Bypass) -> str:
    lang = ctx.lang(update)
    until = local_time(ctx.translator, lang, bypass.expires_at, ctx.runtime.timezone, date=False)
    scope = escape(scope_text(ctx.translator, lang, bypass.scope))
    return ctx.text(update, "trust-bypass-until", scope=scope, until=until)


def _rule_line(rule: Rule) -> str:
    return f"🔁 <code>{escape(describe(rule))}</code>"


async def _revoke_bypass(update: Update, ctx: BotContext, button: Button) -> None:
    removed = ctx.runtime.approvals.revoke_bypass(await ctx.session(update), _scope_from_arg(button.arg))
    await _revoked(update, ctx, removed)


async def _revoke_rule(update: Update, ctx: BotContext, button: Button) -> None:
    removed = button.arg.isdigit() and await ctx.runtime.approvals.revoke_rule(int(button.arg))
    await _revoked(update, ctx, removed)


async def _revoked(update: Update, ctx: BotContext, removed: bool) -> None:
    """Revoking twice (or after expiry) is answered as stale; either way the button goes."""
    query = callback_query(update)
    await buttons.answer(update, ctx.text(update, "trust-revoked" if removed else "approval-stale"))
    await query.edit_message_reply_markup(reply_markup=None)


def _scope_to_arg(scope: str) -> str:
    """Bypass scopes (``all``, ``@group``, a tool name) as opaque-safe button arguments."""
    if scope == "all":
        return "all"
    return "g-" + scope[1:] if scope.startswith("@") else "t-" + scope


def _scope_from_arg(arg: str) -> str:
    if arg.startswith("g-"):
        return "@" + arg[2:]
    return arg[2:] if arg.startswith("t-") else arg


# --- wiring -------------------------------------------------------------------------------


def _button(label: str, button: Button) -> KeyButton:
    return KeyButton(label, callback_data=encode(button))


def _one(label: str, button: Button) -> Keyboard:
    return Keyboard([[_button(label, button)]])


router = Router(
    "approvals",
    handlers=(Command("approvals", list_approvals), Command("trust", list_trust)),
    buttons={
        ButtonAction.APPROVE: _refusing(_decide),
        ButtonAction.REJECT: _refusing(_decide),
        ButtonAction.TRUST_15: _refusing(_trust_15),
        ButtonAction.ALWAYS: _refusing(_always),
        ButtonAction.ALWAYS_CONFIRM: _refusing(_always_confirm),
        ButtonAction.ALWAYS_CANCEL: _always_cancel,
        ButtonAction.REVOKE_BYPASS: _revoke_bypass,
        ButtonAction.REVOKE_RULE: _revoke_rule,
    },
)
