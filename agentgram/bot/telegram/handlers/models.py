"""/model and /cost: which model the conversation runs on, and what it used.

``/model`` lists the configured models (``llm.model`` as ``default``, then
``llm.models``) with one button each, the current one marked ✅; a tap, or
``/model <name>``, switches the session from its next request on, and the
list is redrawn in place. ``/new`` keeps the choice (the runtime carries it).
``/cost`` shows the session's prompt and completion tokens per model, and the
cost where ``prices`` are configured (in whatever currency they are given).
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.context import BotContext, bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import Keyboard, KeyButton
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import edit_html, send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.app import SessionRef
from agentgram.runtime.infra.llm.models import ModelCost, ModelInfo, Price, SessionCost


def _money(value: float) -> str:
    """Cents for whole amounts; below one, enough digits that a few requests do not read as zero."""
    if value >= 1:
        return f"{value:.2f}"
    digits = 4 if value >= 0.01 else 6
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


# --- /model ----------------------------------------------------------------------------


def _details(update: Update, ctx: BotContext, info: ModelInfo) -> str:
    parts = [escape(", ".join(info.capabilities))] if info.capabilities else []
    if info.price is not None:
        parts.append(_price(update, ctx, info.price))
    return " · ".join(parts)


def _price(update: Update, ctx: BotContext, price: Price) -> str:
    return ctx.text(update, "models-price", input=f"{price.input:g}", output=f"{price.output:g}")


def _item(update: Update, ctx: BotContext, info: ModelInfo) -> str:
    details = _details(update, ctx, info)
    key = "models-item-details" if details else "models-item"
    return ctx.text(update, key, name=escape(info.name), model=escape(info.model), details=details)


def _model_list(update: Update, ctx: BotContext, current: ModelInfo) -> tuple[str, Keyboard | None]:
    """The list and its buttons, as sent and as redrawn after a switch."""
    choices = ctx.runtime.sessions.model_choices
    if len(choices) == 1:
        return ctx.text(update, "models-only-one", model=escape(current.model)), None
    lines = [
        ctx.text(update, "models-title", name=escape(current.name), model=escape(current.model)),
        "",
        ctx.text(update, "models-pick"),
        *(_item(update, ctx, info) for info in choices),
    ]
    rows = [
        [
            KeyButton(
                ("✅ " if info.name == current.name else "") + info.name,
                callback_data=encode(Button(ButtonAction.MODEL_PICK, info.name)),
            )
        ]
        for info in choices
    ]
    return "\n".join(lines), Keyboard(rows)


async def model(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    session = await ctx.session(update)
    args = context.args or []
    if args:
        await _switch_by_name(update, ctx, session, args[0])
        return
    html, keyboard = _model_list(update, ctx, await ctx.runtime.sessions.session_model(session))
    await send_html(update.get_bot(), update.chat_id, html, reply_markup=keyboard)


async def _switch_by_name(update: Update, ctx: BotContext, session: SessionRef, name: str) -> None:
    chosen = await ctx.runtime.sessions.choose_model(session, name)
    if chosen is None:
        html = ctx.text(update, "models-unknown", name=escape(name))
    else:
        html = ctx.text(update, "models-switched", name=escape(chosen.name), model=escape(chosen.model))
    await send_html(update.get_bot(), update.chat_id, html)


async def _picked(update: Update, ctx: BotContext, button: Button) -> None:
    session = await ctx.session(update)
    chosen = await ctx.runtime.sessions.choose_model(session, button.arg)
    if chosen is None:
        await buttons.answer(update, ctx.text(update, "models-unknown-toast"))
        chosen = await ctx.runtime.sessions.session_model(session)
    else:
        await buttons.answer(update, ctx.text(update, "models-switched-toast", name=chosen.name))
    html, keyboard = _model_list(update, ctx, chosen)
    query = buttons.callback_query(update)
    if query.message is not None:
        await edit_html(
            update.get_bot(), update.chat_id, query.message.message_id, html, reply_markup=keyboard
        )


# --- /cost -----------------------------------------------------------------------------


def _cost_line(update: Update, ctx: BotContext, line: ModelCost) -> str:
    used = line.usage
    params: dict[str, str | int] = {
        "model": escape(used.model),
        "input": used.input_tokens,
        "output": used.output_tokens,
    }
    if line.cost is None:
        return ctx.text(update, "cost-line", **params)
    return ctx.text(update, "cost-line-priced", cost=_money(line.cost), **params)


def _cost_text(update: Update, ctx: BotContext, cost: SessionCost) -> str:
    if not cost.lines:
        return ctx.text(update, "cost-empty")
    lines = [
        ctx.text(update, "cost-title", rounds=cost.rounds),
        ctx.text(update, "cost-tokens", input=cost.input_tokens, output=cost.output_tokens),
        "",
        *(_cost_line(update, ctx, line) for line in cost.lines),
        "",
    ]
    total = cost.cost
    if total is None:
        lines.append(ctx.text(update, "cost-no-prices"))
    else:
        key = "cost-total" if cost.fully_priced else "cost-total-partial"
        lines.append(ctx.text(update, key, cost=_money(total)))
    return "\n".join(lines)


async def cost(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    usage = await ctx.runtime.sessions.session_cost(await ctx.session(update))
    await send_html(update.get_bot(), update.chat_id, _cost_text(update, ctx, usage))


router = Router(
    "models",
    handlers=(Command("model", model), Command("cost", cost)),
    buttons={ButtonAction.MODEL_PICK: _picked},
)
