"""/tic and /cron, and the buttons under each listed cron job.

``/tic`` shows whether check-ins run, how often, when next and how the last
one went; ``/tic now``, ``/tic on|off`` and ``/tic every 45m`` act on the
scheduler service. ``/cron`` lists the chat's jobs, one message each with
▶️ run now, ⏸ pause / ▶️ resume and 🗑 delete (confirmed first);
``/cron add <schedule> <prompt>`` schedules one; ``/cron kill <id>`` stops a
running one at once (the /stop path). Everything here only ever touches the
jobs of the chat it is typed in. The buttons are registered with the one
button dispatch in :mod:`bot.telegram.handlers.buttons`.
"""

from __future__ import annotations

import re
from datetime import datetime

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.ext import BaseHandler, CommandHandler, ContextTypes

from bot.telegram.callback_data import Button, ButtonAction, encode
from bot.telegram.context import BotContext, bot_context
from bot.telegram.handlers import buttons
from bot.telegram.render import escape
from bot.telegram.sender import edit_html, send_html
from runtime.scheduler.commands import split_schedule
from runtime.scheduler.jobs import JobNotFound, job_zone, schedule_of
from runtime.scheduler.models import ScheduledJob, TicRun, TicRunStatus
from runtime.scheduler.plan import TicPlan
from runtime.scheduler.schedule import IntervalSchedule, ScheduleError, describe
from runtime.scheduler.service import SchedulerService
from runtime.scheduler.tic import DeferBusy, Run, SkipNothingToDo

_ADD = re.compile(r"^\s*/cron(?:@\w+)?\s+add\b(.*)$", re.DOTALL | re.IGNORECASE)


def _chat_id(update: Update) -> int:
    chat = update.effective_chat
    assert chat is not None
    return chat.id


async def _say(update: Update, ctx: BotContext, key: str, **params: str | int) -> None:
    await send_html(update.get_bot(), _chat_id(update), ctx.text(update, key, **params))


def _when(ctx: BotContext, moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return f"{moment.astimezone(ctx.runtime.timezone):%Y-%m-%d %H:%M}"


# --- /tic ------------------------------------------------------------------------------


async def tic(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    service = ctx.runtime.scheduler
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
            await _say(update, ctx, "tic-bad-interval", error=escape(str(exc)))
            return
        await _say(update, ctx, "tic-interval-set", interval=escape(_every(plan)))
    else:
        await _say(update, ctx, "tic-usage")


def _every(plan: TicPlan) -> str:
    text = describe(plan.schedule)
    return text.removeprefix("every ") if isinstance(plan.schedule, IntervalSchedule) else text


async def _tic_status(update: Update, ctx: BotContext, service: SchedulerService) -> None:
    status = await service.tic_status()
    last = ctx.text(update, "tic-never")
    if status.last is not None:
        when = _when(ctx, status.last.started_at) or ""
        last = ctx.text(update, "tic-last", when=when, result=_tic_result(update, ctx, status.last))
    await _say(
        update,
        ctx,
        "tic-status",
        enabled=ctx.text(update, "state-on" if status.plan.enabled else "state-off"),
        interval=escape(describe(status.plan.schedule)),
        next=(_when(ctx, status.next_run) if status.plan.enabled else None)
        or ctx.text(update, "cron-next-none"),
        last=last,
    )


def _tic_result(update: Update, ctx: BotContext, row: TicRun) -> str:
    match row.status:
        case TicRunStatus.RAN if row.ended_at is None:
            return ctx.text(update, "tic-result-running")
        case TicRunStatus.RAN:
            return ctx.text(update, "tic-result-reported" if row.delivered else "tic-result-silent")
        case TicRunStatus.SKIPPED:
            return ctx.text(update, "tic-result-skipped", reason=escape(row.reason or ""))
        case TicRunStatus.DEFERRED:
            return ctx.text(update, "tic-result-deferred")
        case _:
            return ctx.text(update, "tic-result-failed")


# --- /cron -----------------------------------------------------------------------------


async def cron(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    ctx = bot_context(context)
    args = context.args or []
    sub = args[0].lower() if args else ""
    if not sub:
        await _list(update, ctx)
    elif sub == "add":
        message = update.effective_message
        match = _ADD.match(message.text or "") if message is not None else None
        await _add(update, ctx, match.group(1) if match else "")
    elif sub == "kill" and len(args) == 2 and args[1].lstrip("#").isdigit():
        await _kill(update, ctx, int(args[1].lstrip("#")))
    else:
        await _say(update, ctx, "cron-usage")


async def _add(update: Update, ctx: BotContext, text: str) -> None:
    service = ctx.runtime.scheduler
    try:
        schedule, prompt = split_schedule(text, ctx.runtime.timezone, service.clock.now())
        job = await service.add_job(title="", schedule=schedule, prompt=prompt, chat_id=_chat_id(update))
    except ScheduleError as exc:
        await _say(update, ctx, "cron-bad-schedule", error=escape(str(exc)))
        return
    upcoming = _when(ctx, service.next_run(job)) or ctx.text(update, "cron-next-none")
    await _say(update, ctx, "cron-added", id=str(job.id), next=upcoming)


async def _kill(update: Update, ctx: BotContext, job_id: int) -> None:
    try:
        killed = await ctx.runtime.scheduler.kill(job_id, chat_id=_chat_id(update))
    except JobNotFound:
        await _say(update, ctx, "cron-not-found")
        return
    await _say(update, ctx, "cron-killed" if killed else "cron-not-running", id=str(job_id))


async def _list(update: Update, ctx: BotContext) -> None:
    jobs = await ctx.runtime.scheduler.list_jobs(_chat_id(update))
    if not jobs:
        await _say(update, ctx, "cron-none")
        return
    await _say(update, ctx, "cron-list-header")
    for job in jobs:
        html, keyboard = _item(update, ctx, job)
        await send_html(update.get_bot(), _chat_id(update), html, reply_markup=keyboard)


def _item(update: Update, ctx: BotContext, job: ScheduledJob) -> tuple[str, InlineKeyboardMarkup]:
    """One job's message and its buttons, as listed and as re-drawn after pause/resume."""
    service = ctx.runtime.scheduler
    assert job.id is not None
    state = "⏳" if service.is_running(job.id) else ("⏰" if job.enabled else "⏸")
    html = ctx.text(
        update,
        "cron-item",
        state=state,
        title=escape(job.title),
        id=str(job.id),
        schedule=f"<code>{escape(describe(schedule_of(job), job_zone(job)))}</code>",
        next=_when(ctx, service.next_run(job)) or ctx.text(update, "cron-next-none"),
    )
    arg = str(job.id)
    toggle = (
        (ButtonAction.CRON_PAUSE, "btn-pause") if job.enabled else (ButtonAction.CRON_RESUME, "btn-resume")
    )
    row = [
        InlineKeyboardButton(
            ctx.text(update, "btn-run-now"), callback_data=encode(Button(ButtonAction.CRON_RUN, arg))
        ),
        InlineKeyboardButton(ctx.text(update, toggle[1]), callback_data=encode(Button(toggle[0], arg))),
        InlineKeyboardButton(
            ctx.text(update, "btn-delete"), callback_data=encode(Button(ButtonAction.CRON_DELETE, arg))
        ),
    ]
    return html, InlineKeyboardMarkup([row])


# --- the buttons -----------------------------------------------------------------------


def _job_id(button: Button) -> int | None:
    return int(button.arg) if button.arg.isdigit() else None


async def _answer(update: Update, text: str | None = None) -> None:
    await buttons.answer(update, text)


async def _run_now(update: Update, ctx: BotContext, button: Button) -> None:
    job_id = _job_id(button)
    try:
        started = job_id is not None and await ctx.runtime.scheduler.run_now(job_id, chat_id=_chat_id(update))
    except JobNotFound:
        await _answer(update, ctx.text(update, "cron-not-found"))
        return
    await _answer(update, ctx.text(update, "cron-run-started" if started else "cron-already-running"))


async def _toggle(update: Update, ctx: BotContext, button: Button) -> None:
    job_id = _job_id(button)
    enable = button.action == ButtonAction.CRON_RESUME
    try:
        if job_id is None:
            raise JobNotFound(-1)  # not a job id the codec would make: answered like a deleted job
        job = await ctx.runtime.scheduler.set_enabled(job_id, enable, chat_id=_chat_id(update))
    except JobNotFound:
        await _answer(update, ctx.text(update, "cron-not-found"))
        return
    await _answer(update, ctx.text(update, "cron-resumed" if enable else "cron-paused"))
    query = update.callback_query
    if query is not None and query.message is not None:
        html, keyboard = _item(update, ctx, job)
        await edit_html(
            update.get_bot(), _chat_id(update), query.message.message_id, html, reply_markup=keyboard
        )


async def _delete(update: Update, ctx: BotContext, button: Button) -> None:
    await _answer(update)
    keyboard = InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(
                    ctx.text(update, "btn-confirm"),
                    callback_data=encode(Button(ButtonAction.CRON_DELETE_CONFIRM, button.arg)),
                ),
                InlineKeyboardButton(
                    ctx.text(update, "btn-cancel"),
                    callback_data=encode(Button(ButtonAction.CRON_DELETE_CANCEL, button.arg)),
                ),
            ]
        ]
    )
    await send_html(
        update.get_bot(), _chat_id(update), ctx.text(update, "cron-confirm-delete"), reply_markup=keyboard
    )


async def _delete_confirm(update: Update, ctx: BotContext, button: Button) -> None:
    job_id = _job_id(button)
    try:
        if job_id is None:
            raise JobNotFound(-1)
        await ctx.runtime.scheduler.delete_job(job_id, chat_id=_chat_id(update))
    except JobNotFound:
        await _answer(update, ctx.text(update, "cron-not-found"))
        return
    await _answer(update, ctx.text(update, "cron-deleted"))
    query = update.callback_query
    if query is not None and query.message is not None:
        await edit_html(
            update.get_bot(), _chat_id(update), query.message.message_id, ctx.text(update, "cron-deleted")
        )


async def _delete_cancel(update: Update, ctx: BotContext, button: Button) -> None:
    await _answer(update)
    query = update.callback_query
    if query is not None and query.message is not None:
        await query.delete_message()


buttons.register(
    {
        ButtonAction.CRON_RUN: _run_now,
        ButtonAction.CRON_PAUSE: _toggle,
        ButtonAction.CRON_RESUME: _toggle,
        ButtonAction.CRON_DELETE: _delete,
        ButtonAction.CRON_DELETE_CONFIRM: _delete_confirm,
        ButtonAction.CRON_DELETE_CANCEL: _delete_cancel,
    }
)


def handlers() -> list[BaseHandler[Update, ContextTypes.DEFAULT_TYPE, None]]:
    return [CommandHandler("tic", tic), CommandHandler("cron", cron)]
