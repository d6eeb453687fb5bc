"""A detached call's live status line in the chat: sent when it detaches, ticking, closed once.

When a tracked call outlives its attach window (:class:`~runtime.events.CallDetached`) the chat
gets ONE message for it — "⚙️ <code>pytest -x</code> running · 2 min 10 s" with a ⏹ button
(:attr:`~bot.telegram.callback_data.ButtonAction.CALL_CANCEL`, handled in
:mod:`bot.telegram.handlers.jobs`) — edited in place while its time ticks and, when it ends
(:class:`~runtime.events.CallFinished`), once more to its final form, without the button.
Detaching and finishing reach here from the chat's outbox (:mod:`bot.telegram.delivery`), so
the line keeps its place among the turn's other output.

**Ticking**: one ticker task per chat that has live lines. Each round edits the chat's lines
one after another — one request in flight per chat, each through the driver's rate limiter, which
waits out a 429's ``retry_after`` — then sleeps ``telegram.job_status_interval``: no line is
edited more than once per interval however many run, and a slow or throttled round only pushes
the next one out. A lost tick is not retried (the next one shows a later time). The ticker ends
once the chat's last line is final, and the chat is forgotten. A per-chat lock keeps a tick
from landing after the final edit.

**Restarts**: each line's message is kept in the runtime's key-value store
(``telegram.job.<run id>``, JSON) until its final form is shown. On start (a restart hook, after
the runtime marked the previous process's calls orphaned) every line left behind is edited to
what its run reads now: "⚠️ … interrupted by a restart".
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from agentgram.bot.telegram.core.callback_data import Button, ButtonAction, encode
from agentgram.bot.telegram.core.port import BotApi, Keyboard, KeyButton
from agentgram.bot.telegram.core.sender import BRIEF, ONCE, Edit, edit_html, send_html
from agentgram.bot.telegram.core.topics import in_topic
from agentgram.bot.telegram.views.render import escape
from agentgram.bot.telegram.views.wording import span_text
from agentgram.runtime.app import CallRun
from agentgram.runtime.infra.events import CallDetached, CallFinished
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("telegram.jobs")

JOB = "telegram.job."
_ENDED = {
    "completed": "jobs-finished",
    "failed": "jobs-failed",
    "cancelled": "jobs-cancelled",
    "orphaned": "jobs-orphaned",
}
"""A run's final status → its line's final wording; any other status after a restart: orphaned."""


class KeyValues(Protocol):
    async def set_value(self, key: str, value: str) -> None: ...
    async def delete_value(self, key: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]: ...


class Runs(Protocol):
    """A tracked call's run as it stands (the door's ``calls`` part has it)."""

    async def call_run(self, run_id: int) -> CallRun | None: ...


class JobsRuntime(Protocol):
    """What the lines need of the runtime: its key-value store and a run as it stands."""

    @property
    def values(self) -> KeyValues: ...
    @property
    def calls(self) -> Runs: ...


# --- wording (the one place a tracked call reads in the chat) -----------------------------------


def command_html(summary: str, name: str) -> str:
    return f"<code>{escape(summary or name)}</code>"


def elapsed_text(t: Translator, lang: str | None, started_at: datetime, until: datetime | None = None) -> str:
    seconds = ((until or datetime.now(UTC)) - started_at).total_seconds()
    return span_text(t, lang, max(0.0, seconds))


def stop_keyboard(t: Translator, lang: str | None, run_id: int, label_key: str = "jobs-stop") -> Keyboard:
    data = encode(Button(ButtonAction.CALL_CANCEL, str(run_id)))
    return Keyboard([[KeyButton(t.t(lang, label_key), callback_data=data)]])


def ended_html(t: Translator, lang: str | None, command: str, status: str, elapsed: str) -> str:
    return t.t(lang, _ENDED.get(status, "jobs-orphaned"), command=command, elapsed=elapsed)


# --- the live lines ---------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class JobLine:
    """One detached call's message, as this process shows it."""

    run_id: int
    chat_id: int
    message_id: int
    command: str  # HTML
    started_at: datetime
    language: str | None
    gone: bool = False  # Telegram will not edit the message any more (deleted): nothing to tick


@dataclass(slots=True, eq=False)
class ChatJobs:
    """A chat's live lines, its ticker, and the lock that orders ticks before the final edit."""

    chat_id: int
    lines: dict[int, JobLine] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class JobLines:
    """Every chat's live job lines; owns the tickers (closed with delivery)."""

    def __init__(self, bot: BotApi, runtime: JobsRuntime, translator: Translator, interval: float) -> None:
        self.bot = bot
        self.runtime = runtime
        self.t = translator
        self.interval = interval
        self._chats: dict[int, ChatJobs] = {}
        self._tasks = TaskSet("job lines")

    def running_html(self, line: JobLine) -> str:
        elapsed = elapsed_text(self.t, line.language, line.started_at)
        return self.t.t(line.language, "jobs-running", command=line.command, elapsed=elapsed)

    async def detached(self, event: CallDetached, language: str | None) -> None:
        """Send the call's line with its ⏹ button, remember it, and let the chat's ticker edit it."""
        chat_id = event.to.chat_id
        assert chat_id is not None
        command = command_html(event.summary, event.name)
        line = JobLine(event.run_id, chat_id, 0, command, event.started_at, language)
        keyboard = stop_keyboard(self.t, language, event.run_id)
        bot = in_topic(self.bot, chat_id, event.to.thread_id)  # a forum topic's line shows there
        sent = await send_html(
            bot, chat_id, self.running_html(line), reply_markup=keyboard, silent=True, retry=BRIEF
        )
        if sent is None:
            return  # not shown: its end has nothing to edit (the agent's report still comes)
        line.message_id = sent.message_id
        await self._remember(line)
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = ChatJobs(chat_id)
            self._tasks.spawn(self._tick(chat), name=f"job-ticker-{chat_id}")
        chat.lines[line.run_id] = line

    async def finished(self, event: CallFinished) -> None:
        """Edit the call's line to its final form, without the button; then it is forgotten."""
        chat = self._chats.get(event.to.chat_id or 0)
        line = chat.lines.pop(event.run_id, None) if chat is not None else None
        if chat is None or line is None:
            return  # never shown by this process
        elapsed = elapsed_text(self.t, line.language, line.started_at, event.finished_at)
        html = ended_html(self.t, line.language, line.command, event.status, elapsed)
        async with chat.lock:  # after a tick in flight, never before it
            edited = (
                Edit.GONE if line.gone else await edit_html(self.bot, line.chat_id, line.message_id, html)
            )
        if edited is not Edit.FAILED:  # else the next start closes it
            await self.runtime.values.delete_value(f"{JOB}{line.run_id}")

    async def _tick(self, chat: ChatJobs) -> None:
        while chat.lines:  # no await between the last check and the eviction: nothing slips in
            await asyncio.sleep(self.interval)
            for line in list(chat.lines.values()):
                async with chat.lock:
                    if chat.lines.get(line.run_id) is line and not line.gone:
                        await self._show_running(line)
        if self._chats.get(chat.chat_id) is chat:
            del self._chats[chat.chat_id]

    async def _show_running(self, line: JobLine) -> None:
        keyboard = stop_keyboard(self.t, line.language, line.run_id)
        html = self.running_html(line)
        edited = await edit_html(
            self.bot, line.chat_id, line.message_id, html, reply_markup=keyboard, retry=ONCE
        )
        line.gone = edited is Edit.GONE

    async def _remember(self, line: JobLine) -> None:
        value = {
            "chat": line.chat_id,
            "message": line.message_id,
            "command": line.command,
            "language": line.language,
        }
        await self.runtime.values.set_value(f"{JOB}{line.run_id}", json.dumps(value, ensure_ascii=False))

    async def close(self) -> None:
        await self._tasks.close()
        self._chats.clear()

    # --- what a previous process left ------------------------------------------------------

    async def recover(self) -> None:
        """On start: the lines a previous process left are read now and closed in the background."""
        left = await self.runtime.values.values_with_prefix(JOB)
        if left:
            self._tasks.spawn(self._close_left(left), name="close-job-lines")

    async def recover_chat(self, chat_id: int) -> None:
        """:meth:`recover` for the lines of one chat a cluster's instance has just claimed."""
        left = {
            key: raw
            for key, raw in (await self.runtime.values.values_with_prefix(JOB)).items()
            if (record := _parse(key, raw)) is not None and record[1] == chat_id
        }
        if left:
            self._tasks.spawn(self._close_left(left), name=f"close-job-lines-{chat_id}")

    async def _close_left(self, left: dict[str, str]) -> None:
        for key, raw in left.items():
            try:
                await self._close_one(key, raw)
            except asyncio.CancelledError:
                raise
            except Exception:  # one line must not keep the others open
                log.exception("closing the job line %s failed", key)

    async def _close_one(self, key: str, raw: str) -> None:
        record = _parse(key, raw)
        if record is None:
            log.warning("dropping a malformed job-line record %s", key)
            await self.runtime.values.delete_value(key)
            return
        run_id, chat_id, message_id, command, lang = record
        run = await self.runtime.calls.call_run(run_id)
        if run is None or run.finished_at is None or run.status not in _ENDED:
            html = ended_html(self.t, lang, command, "orphaned", "")
        else:
            html = ended_html(
                self.t, lang, command, run.status, elapsed_text(self.t, lang, run.started_at, run.finished_at)
            )
        if await edit_html(self.bot, chat_id, message_id, html, retry=BRIEF) is not Edit.FAILED:
            await self.runtime.values.delete_value(key)


def _parse(key: str, raw: str) -> tuple[int, int, int, str, str | None] | None:
    """A record as (run id, chat, message, command HTML, language); ``None`` when malformed."""
    run = key.removeprefix(JOB)
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not run.isdigit() or not isinstance(value, dict):
        return None
    chat, message, command, lang = (value.get(k) for k in ("chat", "message", "command", "language"))
    if not isinstance(chat, int) or not isinstance(message, int) or not isinstance(command, str):
        return None
    if lang is not None and not isinstance(lang, str):
        return None
    return int(run), chat, message, command, lang


__all__ = [
    "JOB",
    "JobLine",
    "JobLines",
    "command_html",
    "elapsed_text",
    "ended_html",
    "stop_keyboard",
]
