"""/tic and /cron, and the buttons on each listed cron job's card.

``/tic`` shows whether check-ins run, on which schedule, when next and how the
last one went; ``/tic now``, ``/tic on|off`` and ``/tic every 45m`` act on the
scheduler service. ``/cron`` lists the chat's jobs, one card each with
▶️ run now, ⏸ pause / ▶️ resume (a finished job has none: it is shown as
done) and 🗑 delete; ``/cron add <schedule> <prompt>`` schedules one (without
arguments it shows how, with examples); ``/cron kill <id>`` stops a running
one at once (the /stop path). Everything here only ever touches the jobs of
the chat it is typed in; a job added in a forum topic belongs to that topic
(its runs report there), while ``/cron`` lists the whole chat's jobs.

A card is edited in place: 🗑 turns it into the confirmation naming the task,
✅ Yes into "🗑 Deleted" with no buttons, ✖️ Cancel back into the card. A
button on a card whose job is gone is answered and strips that card too, so
no dead buttons stay. Times carry their zone and schedules are worded in the
user's language (:mod:`bot.telegram.wording`). The buttons are named in
this file's :data:`router`, for the one button dispatch in
:mod:`bot.telegram.handlers.buttons`.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from agentgram.bot.shown import JobState, job_state
from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, key_button
from agentgram.bot.telegram.core.context import BotContext, bot_context, topic_of
from agentgram.bot.telegram.core.incoming import Update
from agentgram.bot.telegram.core.port import Keyboard
from agentgram.bot.telegram.core.router import Command, HandlerContext, Router
from agentgram.bot.telegram.core.sender import edit_html, send_html
from agentgram.bot.telegram.handlers import buttons
from agentgram.bot.telegram.views.render import escape
from agentgram.bot.telegram.views.wording import local_time, schedule_error, schedule_text
from agentgram.runtime.door.protocols import JobsDoor
from agentgram.runtime.scheduler.commands import split_schedule
from agentgram.runtime.scheduler.jobs import JobFinished, JobNotFound
from agentgram.runtime.scheduler.schedule import ScheduleError
from agentgram.runtime.scheduler.tic import DeferBusy, Run, SkipNothingToDo, SkipQuiet
from agentgram.runtime.scheduler.values import Job, JobSpec, TicRecord, TicRunStatus

_ADD = re.compile(r"^\s*/cron(?:@\w+)?\s+add\b(.*)$", re.DOTALL | re.IGNORECASE)
TOAST_TITLE = 60
"""Characters of a job's title a toast quotes (a toast holds 200)."""


async def _say(update: Update, ctx: BotContext, key: str, **params: str | int) -> None:
    await send_html(update.get_bot(), update.chat_id, ctx.text(update, key, **params))


def _when(update: Update, ctx: BotContext, moment: datetime | None, tz: tzinfo) -> str:
    if moment is None:
        return ctx.text(update, "cron-next-none")
    return local_time(ctx.translator, ctx.lang(update), moment, tz)


# --- /tic ------------------------------------------------------------------------------

_SKIP_REASONS = {
    SkipNothingToDo.reason: "tic-reason-nothing-to-do",
    SkipQuiet.reason: "tic-reason-quiet-hours",
}


async def tic(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    service = ctx.runtime.jobs
    args = context.args or []
    sub = args[0].lower() if args else ""
    if not sub:
        await _tic_status(update, ctx, service)
    elif sub == "now":
        decision = await service.tic(manual=True)
        key = {Run: "tic-started", DeferBusy: "tic-deferred", SkipNothingToDo: "tic-nothing-to-do"}
        await _say(update, ctx, key.get(type(decision), "tic-started"))
    elif sub in ("on", "off"):
        await service.set_tic_enabled(sub == "on")
        await _say(update, ctx, f"tic-{sub}")
    elif sub == "every" and len(args) > 1:
        try:
            plan = await service.set_tic_interval(" ".join(args[1:]))
        except ScheduleError as exc:
            await _say(
                update, ctx, "tic-bad-interval", error=schedule_error(ctx.translator, ctx.lang(update), exc)
            )
            return
        shown = schedule_text(ctx.translator, ctx.lang(update), plan.schedule, ctx.runtime.timezone)
        await _say(update, ctx, "tic-interval-set", schedule=shown)
    else:
        await _say(update, ctx, "tic-usage")


async def _tic_status(update: Update, ctx: BotContext, service: JobsDoor) -> None:
    status = await service.tic_status()
    tz = ctx.runtime.timezone
    last = ctx.text(update, "tic-never")
    if status.last is not None:
        when = _when(update, ctx, status.last.started_at, tz)
        last = ctx.text(update, "tic-last", when=when, result=_tic_result(update, ctx, status.last))
    await _say(
        update,
        ctx,
        "tic-status",
        enabled=ctx.text(update, "state-on" if status.plan.enabled else "state-off"),
        schedule=schedule_text(ctx.translator, ctx.lang(update), status.plan.schedule, tz),
        next=_when(update, ctx, status.next_run if status.plan.enabled else None, tz),
        last=last,
    )


def _tic_result(update: Update, ctx: BotContext, row: TicRecord) -> str:
    match row.status:
        case TicRunStatus.RAN if row.ended_at is None:
            return ctx.text(update, "tic-result-running")
        case TicRunStatus.RAN:
            return ctx.text(update, "tic-result-reported" if row.delivered else "tic-result-silent")
        case TicRunStatus.SKIPPED if row.reason in _SKIP_REASONS:
            reason = ctx.text(update, _SKIP_REASONS[row.reason])
            return ctx.text(update, "tic-result-skipped", reason=reason)
        case TicRunStatus.SKIPPED:
            return ctx.text(update, "tic-result-skipped-plain")
        case TicRunStatus.DEFERRED:
            return ctx.text(update, "tic-result-deferred")
        case _:
            return ctx.text(update, "tic-result-failed")


# --- /cron -----------------------------------------------------------------------------


async def cron(update: Update, context: HandlerContext) -> None:
    ctx = bot_context(context)
    args = context.args or []
    sub = args[0].lower() if args else ""
    if not sub:
        await _list(update, ctx)
    elif sub == "add" and len(args) == 1:
        await _say(update, ctx, "cron-add-usage")
    elif sub == "add":
        message = update.effective_message
        match = _ADD.match(message.text or "") if message is not None else None
        await _add(update, ctx, match.group(1) if match else "")
    elif sub == "kill" and len(args) == 2 and args[1].lstrip("#").isdigit():
        await _kill(update, ctx, int(args[1].lstrip("#")))
    else:
        await _say(update, ctx, "cron-usage")


async def _add(update: Update, ctx: BotContext, text: str) -> None:
    service = ctx.runtime.jobs
    try:
        schedule, prompt = split_schedule(text, ctx.runtime.timezone, service.now())
        spec = JobSpec(
            title="", schedule=schedule, prompt=prompt, chat_id=update.chat_id, thread_id=topic_of(update)
        )
        job = await service.add_job(spec)
    except ScheduleError as exc:
        await _say(
            update, ctx, "cron-bad-schedule", error=schedule_error(ctx.translator, ctx.lang(update), exc)
        )
        return
    await _say(
        update,
        ctx,
        "cron-added",
        title=escape(job.title),
        id=str(job.id),
        schedule=schedule_text(ctx.translator, ctx.lang(update), job.parsed, job.zone),
        next=_when(update, ctx, job.next_run, job.zone),
    )


async def _kill(update: Update, ctx: BotContext, job_id: int) -> None:
    service = ctx.runtime.jobs
    try:
        job = await service.job(job_id, chat_id=update.chat_id)
        killed = await service.kill_job(job_id, chat_id=update.chat_id)
    except JobNotFound:
        await _say(update, ctx, "cron-not-found")
        return
    key = "cron-killed" if killed else "cron-not-running"
    await _say(update, ctx, key, title=escape(job.title), id=str(job_id))


async def _list(update: Update, ctx: BotContext) -> None:
    jobs = await ctx.runtime.jobs.list_jobs(update.chat_id)
    if not jobs:
        await _say(update, ctx, "cron-none")
        return
    await _say(update, ctx, "cron-list-header")
    for job in jobs:
        html, keyboard = _card(update, ctx, job)
        await send_html(update.get_bot(), update.chat_id, html, reply_markup=keyboard)


# --- a job's card ----------------------------------------------------------------------


def _card(update: Update, ctx: BotContext, job: Job) -> tuple[str, Keyboard]:
    """One job's card and its buttons, as listed and as re-drawn after a press."""
    state = job_state(job)
    if state is JobState.DONE:
        when = ctx.text(update, "cron-when-done")
    elif state is JobState.PAUSED:
        when = ctx.text(update, "cron-when-paused")
    else:
        when = ctx.text(update, "cron-when-next", next=_when(update, ctx, job.next_run, job.zone))
    html = ctx.text(
        update,
        "cron-item",
        state=state.value,
        title=escape(job.title),
        id=str(job.id),
        schedule=schedule_text(ctx.translator, ctx.lang(update), job.parsed, job.zone),
        when=when,
    )
    arg = str(job.id)
    row = [key_button(ctx.text(update, "btn-run-now"), ButtonAction.CRON_RUN, arg)]
    if state is not JobState.DONE:
        pause = job.enabled
        action = ButtonAction.CRON_PAUSE if pause else ButtonAction.CRON_RESUME
        row.append(key_button(ctx.text(update, "btn-pause" if pause else "btn-resume"), action, arg))
    row.append(key_button(ctx.text(update, "btn-delete"), ButtonAction.CRON_DELETE, arg))
    return html, Keyboard([row])


# --- the buttons -----------------------------------------------------------------------


def _toast_title(job: Job) -> str:
    """A job's title for a toast: plain text (toasts are not HTML), kept short."""
    title = " ".join(job.title.split())
    return title if len(title) <= TOAST_TITLE else title[: TOAST_TITLE - 1] + "…"


async def _pressed_job(update: Update, ctx: BotContext, button: Button) -> Job | None:
    """The card's job; ``None`` when it is gone — then the press is answered and the card stripped."""
    try:
        if not button.arg.isdigit():
            raise JobNotFound(-1)  # not a job id the codec would make: answered like a deleted job
        return await ctx.runtime.jobs.job(int(button.arg), chat_id=update.chat_id)
    except JobNotFound:
        await _gone(update, ctx)
        return None


async def _gone(update: Update, ctx: BotContext) -> None:
    """The card's job no longer exists: say so, and leave the card without buttons."""
    await buttons.answer(update, ctx.text(update, "cron-not-found"))
    await _edit_card(update, ctx.text(update, "cron-card-gone"), None)


async def _edit_card(update: Update, html: str, keyboard: Keyboard | None) -> None:
    """Edit the pressed card in place; no keyboard means no buttons left."""
    query = buttons.callback_query(update)
    if query.message is not None:
        await edit_html(
            update.get_bot(), update.chat_id, query.message.message_id, html, reply_markup=keyboard
        )


async def _redraw(update: Update, ctx: BotContext, job: Job) -> None:
    html, keyboard = _card(update, ctx, job)
    await _edit_card(update, html, keyboard)


async def _run_now(update: Update, ctx: BotContext, button: Button) -> None:
    job = await _pressed_job(update, ctx, button)
    if job is None:
        return
    try:
        started = await ctx.runtime.jobs.run_now(job.id, chat_id=update.chat_id)
    except JobNotFound:  # deleted in between
        await _gone(update, ctx)
        return
    key = "cron-run-started" if started else "cron-already-running"
    await buttons.answer(update, ctx.text(update, key, title=_toast_title(job)))


async def _toggle(update: Update, ctx: BotContext, button: Button) -> None:
    job = await _pressed_job(update, ctx, button)
    if job is None:
        return
    enable = button.action == ButtonAction.CRON_RESUME
    key = "cron-resumed" if enable else "cron-paused"
    try:
        job = await ctx.runtime.jobs.set_enabled(job.id, enable, chat_id=update.chat_id)
    except JobNotFound:  # deleted in between
        await _gone(update, ctx)
        return
    except JobFinished:  # a stale card's ▶️ on a one-shot that has run since
        key = "cron-finished"
    await buttons.answer(update, ctx.text(update, key, title=_toast_title(job)))
    await _redraw(update, ctx, job)


async def _delete(update: Update, ctx: BotContext, button: Button) -> None:
    """The card becomes the confirmation, naming the task."""
    job = await _pressed_job(update, ctx, button)
    if job is None:
        return
    await buttons.answer(update)
    keyboard = Keyboard(
        [
            [
                key_button(ctx.text(update, "btn-confirm"), ButtonAction.CRON_DELETE_CONFIRM, button.arg),
                key_button(ctx.text(update, "btn-cancel"), ButtonAction.CRON_DELETE_CANCEL, button.arg),
            ]
        ]
    )
    text = ctx.text(update, "cron-confirm-delete", title=escape(job.title), id=str(job.id))
    await _edit_card(update, text, keyboard)


async def _delete_confirm(update: Update, ctx: BotContext, button: Button) -> None:
    job = await _pressed_job(update, ctx, button)
    if job is None:
        return
    try:
        await ctx.runtime.jobs.delete_job(job.id, chat_id=update.chat_id)
    except JobNotFound:  # deleted in between: the card goes all the same
        pass
    await buttons.answer(update, ctx.text(update, "cron-deleted", title=_toast_title(job)))
    await _edit_card(update, ctx.text(update, "cron-card-deleted", title=escape(job.title)), None)


async def _delete_cancel(update: Update, ctx: BotContext, button: Button) -> None:
    job = await _pressed_job(update, ctx, button)
    if job is None:
        return
    await buttons.answer(update)
    await _redraw(update, ctx, job)


router = Router(
    "schedule",
    handlers=(Command("tic", tic), Command("cron", cron)),
    buttons={
        ButtonAction.CRON_RUN: _run_now,
        ButtonAction.CRON_PAUSE: _toggle,
        ButtonAction.CRON_RESUME: _toggle,
        ButtonAction.CRON_DELETE: _delete,
        ButtonAction.CRON_DELETE_CONFIRM: _delete_confirm,
        ButtonAction.CRON_DELETE_CANCEL: _delete_cancel,
    },
)
