"""``/rollback``: undo the file changes of a recent turn (issue 30).

``/rollback`` lists the newest turns of the chat's session that changed files, each with a
one-line summary (when, how many files, lines added and removed), its files, and a button. A
press shows what undoing it would undo — its files, the later turns it takes along, what was not
checkpointed — with the diff under it, or, when longer than :data:`DIFF_INLINE` characters, as a
``turn-<id>.diff`` document sent just before, and **↩️ Undo** / **Cancel**.

**↩️ Undo** rolls back (:meth:`~runtime.door.protocols.RollbackDoor.roll_back`); the message then
says what was restored and deleted. When the user changed one of the files since, the message
instead names them and offers **↩️ Overwrite and undo**, whose data carries the door's token for
exactly those files; a file changed again after that is asked about anew. A rollback refused (a
turn or a command runs, the turn is gone) is answered in the toast and leaves the message as it
is, so the press can be tried again. Every press acts only on a turn of the session of the chat
it was pressed in; the access gate lets only allowed users press at all.
"""

from __future__ import annotations

from agentgram.bot import rollback_words as words
from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, key_button
from agentgram.bot.telegram.core.context import BotContext, bot_context
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import FileUpload, Keyboard, TelegramError
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import edit_html, send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views.render import escape, html_to_text
from agentgram.bot.telegram.views.wording import local_time
from agentgram.runtime.capabilities.checkpoints import RollbackStatus
from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.rollback")

DIFF_INLINE = 2500
"""A diff longer than this many characters is sent as a file instead of under the question."""


async def rollback(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    session = await ctx.session(update)
    turns = await ctx.runtime.rollback.changed_turns(session)
    bot, chat_id, lang = update.get_bot(), update.chat_id, ctx.lang(update)
    if not turns:
        await send_html(bot, chat_id, ctx.text(update, "rollback-none"))
        return
    t, tz = ctx.translator, ctx.runtime.timezone
    lines = [ctx.text(update, "rollback-title")]
    lines += [words.turn_item(t, lang, turn, local_time(t, lang, turn.started_at, tz)) for turn in turns]
    rows = [
        [
            key_button(
                ctx.text(update, "btn-rollback-pick", id=str(turn.turn_id), files=len(turn.files)),
                ButtonAction.ROLLBACK_PICK,
                str(turn.turn_id),
            )
        ]
        for turn in turns
    ]
    await send_html(bot, chat_id, "\n\n".join(lines), reply_markup=Keyboard(rows))


async def _pick(update: Update, ctx: BotContext, button: Button) -> None:
    """A listed turn: what undoing it would undo, and ↩️ Undo / Cancel."""
    turn_id = _turn(button)
    preview = None
    if turn_id is not None:
        preview = await ctx.runtime.rollback.rollback_preview(await ctx.session(update), turn_id)
    if turn_id is None or preview is None:
        await buttons.answer(update, ctx.text(update, "rollback-gone"))
        return
    await buttons.answer(update)
    bot, chat_id, lang = update.get_bot(), update.chat_id, ctx.lang(update)
    text = words.preview_text(ctx.translator, lang, preview)
    if len(preview.diff) > DIFF_INLINE:
        name = ctx.text(update, "rollback-diff-file", id=str(turn_id))
        try:
            await bot.send_file(chat_id, FileUpload(preview.diff.encode(), name))
            text += "\n" + ctx.text(update, "rollback-diff-attached")
        except TelegramError as error:  # the question still goes out; its diff is the file's loss
            log.warning("the diff of turn %s was not sent: %s", turn_id, error)
    elif preview.diff:
        text += f"\n<pre>{escape(preview.diff)}</pre>"
    arg = str(turn_id)
    keyboard = Keyboard(
        [
            [
                key_button(ctx.text(update, "btn-rollback-undo"), ButtonAction.ROLLBACK_UNDO, arg),
                key_button(ctx.text(update, "btn-rollback-cancel"), ButtonAction.ROLLBACK_CANCEL, arg),
            ]
        ]
    )
    await send_html(bot, chat_id, text, reply_markup=keyboard)


async def _undo(update: Update, ctx: BotContext, button: Button) -> None:
    """↩️ Undo (or ↩️ Overwrite and undo, its data carrying the token of the files it names)."""
    turn_id = _turn(button)
    if turn_id is None:
        await buttons.answer(update, ctx.text(update, "rollback-gone"))
        return
    _, _, confirm = button.arg.partition("_")
    outcome = await ctx.runtime.rollback.roll_back(await ctx.session(update), turn_id, confirm=confirm)
    lang = ctx.lang(update)
    refused = words.refusal_text(ctx.translator, lang, outcome)
    if refused is not None:
        await buttons.answer(update, html_to_text(refused))  # a toast shows no markup
        return
    await buttons.answer(update)
    if outcome.status is RollbackStatus.CHANGED_SINCE:
        text = words.changed_since_text(ctx.translator, lang, turn_id, outcome)
        arg = f"{turn_id}_{outcome.confirm}"
        keyboard = Keyboard(
            [
                [
                    key_button(ctx.text(update, "btn-rollback-overwrite"), ButtonAction.ROLLBACK_UNDO, arg),
                    key_button(
                        ctx.text(update, "btn-rollback-cancel"), ButtonAction.ROLLBACK_CANCEL, str(turn_id)
                    ),
                ]
            ]
        )
        await _edit(update, text, keyboard)
        return
    await _edit(update, words.done_text(ctx.translator, lang, outcome), None)


async def _cancel(update: Update, ctx: BotContext, button: Button) -> None:
    await buttons.answer(update)
    await _edit(update, ctx.text(update, "rollback-cancelled"), None)


async def _edit(update: Update, html: str, keyboard: Keyboard | None) -> None:
    """The pressed message shows ``html`` (its buttons replaced by ``keyboard``, or gone)."""
    query = buttons.callback_query(update)
    if query.message is not None:
        await edit_html(
            update.get_bot(), update.chat_id, query.message.message_id, html, reply_markup=keyboard
        )


def _turn(button: Button) -> int | None:
    head = button.arg.partition("_")[0]
    return int(head) if head.isascii() and head.isdigit() else None


router = Router(
    "rollback",
    handlers=(Command("rollback", rollback),),
    buttons={
        ButtonAction.ROLLBACK_PICK: _pick,
        ButtonAction.ROLLBACK_UNDO: _undo,
        ButtonAction.ROLLBACK_CANCEL: _cancel,
    },
)
