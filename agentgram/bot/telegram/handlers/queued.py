"""⚡ Now, ⏭ After and 🗑 Cancel on a message sent while the agent works (issue 30).

Each press is the user's choice for that message, stored as control mail
(:meth:`~runtime.door.protocols.ChatDoor.steer`) before anything acts on it, so a restart between
the press and its effect keeps it. ⚡ stops the running turn as /stop does (the model's stream and
running commands; calls already done stay done) and the next turn starts on the message; ⏭ keeps
it out of the running turn for a turn of its own; 🗑 drops it unread. The acknowledgement is
edited to say so, its buttons gone. A press on a message the turn read already changes nothing
and says at which step it was read; one on a message of another session (the chat's before
/new) is refused as a stale button. Only allowed users reach here (the access gate).
"""

from __future__ import annotations

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction
from agentgram.bot.telegram.core.context import BotContext, envelope_id
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.router import Router
from agentgram.bot.telegram.core.sender import edit_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views import queued_view
from agentgram.runtime.app import Steer, Steered

_CHOICE = {
    ButtonAction.QUEUED_NOW: (Steer.NOW, "queued-now"),
    ButtonAction.QUEUED_AFTER: (Steer.AFTER, "queued-after"),
    ButtonAction.QUEUED_CANCEL: (Steer.CANCEL, "queued-cancelled"),
}


async def _pressed(update: Update, ctx: BotContext, button: Button) -> None:
    choice, done_key = _CHOICE[button.action]
    target = queued_view.target(button.arg)
    session = await ctx.session(update)
    if target is None or target[0] != session.id:
        await buttons.answer(update, ctx.text(update, "queued-gone"))
        return
    seq = target[1]
    result = await ctx.runtime.chat.steer(session, seq, choice, envelope_id(update))
    match result.outcome:
        case Steered.APPLIED:
            html = ctx.text(update, done_key)
        case Steered.READ if result.step is not None:
            html = ctx.text(update, "queued-already-read", step=result.step)
        case Steered.CANCELLED:
            html = ctx.text(update, "queued-already-cancelled")
        case _:
            html = ctx.text(update, "queued-gone")
    await buttons.answer(update, html)
    query = buttons.callback_query(update)
    if query.message is not None:
        await ctx.runtime.values.delete_value(queued_view.ack_key(session.id, seq))
        await edit_html(update.get_bot(), update.chat_id, query.message.message_id, html)


router = Router(
    "queued",
    buttons={action: _pressed for action in _CHOICE},
)
