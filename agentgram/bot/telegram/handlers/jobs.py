"""``/jobs`` and the ⏹ button: the chat's running commands, and stopping one of them.

``/jobs`` lists the session's tracked calls still running — detached or not — each with how
long it has run and a numbered ⏹ button. A ⏹ (here, or on a detached call's live line,
:mod:`bot.telegram.jobs_view`) cancels that one call (:meth:`Runtime.cancel_call`: its
processes are killed, its result mail says cancelled) and is answered "Stopping…"; a call that
is not running any more, or not this chat's, or a button whose data is garbage, is answered
"That command is no longer running." and nothing happens. The live line reads "cancelled" once
the runtime reports the call ended. A stranger's press never gets here: the access gate
answers it.
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.context import BotContext, bot_context, envelope_id
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import Keyboard, KeyButton
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views.jobs_view import command_html
from agentgram.bot.telegram.views.wording import span_text
from agentgram.runtime.app import RunningCall

BUTTONS_PER_ROW = 4


async def jobs(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    chat = update.effective_chat
    assert chat is not None
    running = ctx.runtime.calls.running_calls(await ctx.session(update))
    if not running:
        await send_html(context.bot, chat.id, ctx.text(update, "jobs-none"))
        return
    lines = [ctx.text(update, "jobs-title")]
    lines += [_item(update, ctx, number, call) for number, call in enumerate(running, start=1)]
    await send_html(context.bot, chat.id, "\n".join(lines), reply_markup=_stop_buttons(update, ctx, running))


def _item(update: Update, ctx: BotContext, number: int, call: RunningCall) -> str:
    elapsed = span_text(ctx.translator, ctx.lang(update), call.elapsed)
    return ctx.text(
        update, "jobs-item", number=number, command=command_html(call.summary, call.name), elapsed=elapsed
    )


def _stop_buttons(update: Update, ctx: BotContext, running: list[RunningCall]) -> Keyboard:
    keys = [
        KeyButton(
            ctx.text(update, "jobs-stop-numbered", number=number),
            callback_data=encode(Button(ButtonAction.CALL_CANCEL, str(call.run_id))),
        )
        for number, call in enumerate(running, start=1)
    ]
    return Keyboard([keys[i : i + BUTTONS_PER_ROW] for i in range(0, len(keys), BUTTONS_PER_ROW)])


async def stop_call(update: Update, ctx: BotContext, button: Button) -> None:
    """⏹ on a running call: cancelled only if it runs in this chat's session (the arg is untrusted)."""
    session = await ctx.session(update)
    stopping = button.arg.isdigit() and await ctx.runtime.calls.cancel_call(
        session, int(button.arg), envelope_id=envelope_id(update)
    )
    await buttons.answer(update, ctx.text(update, "jobs-toast-stopping" if stopping else "jobs-toast-gone"))


router = Router(
    "jobs",
    handlers=(Command("jobs", jobs),),
    buttons={ButtonAction.CALL_CANCEL: stop_call},
)
