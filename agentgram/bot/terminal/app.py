"""``agentgram chat`` on its own: the runtime and the terminal, no Telegram bot.

:func:`run_alone` is the whole life of a terminal-only process: the instance
lock (one agentgram per database, as ``agentgram run`` takes it), the runtime
composed for the terminal (its format rules; tics' home chat is the terminal's
user), the chat subscribed before the runtime starts (so a restart's re-sent
answers reach it), then the one ordered shutdown. Beside a Telegram bot,
:mod:`bot.cli` composes the bot and hands its runtime to :func:`terminal_for`
instead: one runtime, one database, both adapters subscribed.

The log: what goes to stderr would tear through the prompt, so the terminal
shows only warnings and errors, above the prompt (:func:`route_logs`), and
``--log FILE`` keeps the whole log at ``logging.level``.

The web view runs only beside the Telegram bot (its health is the bot's
polling): alone, ``web.enabled`` is ignored with one warning line rather than
serving a health probe that would report the missing poller as down.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path

from agentgram.bot.settings import BotSettings
from agentgram.bot.terminal.chat import TerminalChat
from agentgram.bot.terminal.config import ChatSettings, chat_user
from agentgram.runtime.app import AlreadyRunning, Runtime, fingerprint
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.tasks import cancel_and_wait
from agentgram.runtime.schema import take_instance_lock

log = get_logger("terminal")

TERMINAL_FORMAT_RULES = """\
Your replies are shown in a terminal, rendered from Markdown: **bold**, _italic_, `inline code`, fenced code
blocks with a language, bullet lists, headings and tables all show well. Keep answers short unless asked."""


def route_logs(log_file: Path | None) -> None:
    """Keep the console log to warnings (they print above the prompt once it is patched) and
    send the whole log to ``log_file``, with the same format and redaction."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(logging.WARNING)
    if log_file is None or not root.handlers:
        return
    console = root.handlers[0]
    to_file = logging.FileHandler(log_file, encoding="utf-8")
    to_file.setFormatter(console.formatter)
    for log_filter in console.filters:
        to_file.addFilter(log_filter)
    root.addHandler(to_file)


def terminal_for(runtime: Door, translator: Translator, settings: BotSettings | ChatSettings) -> TerminalChat:
    """The terminal chat on ``runtime``, subscribed (call before the runtime starts)."""
    chat = TerminalChat(
        runtime,
        translator,
        chat_user(settings),
        history=settings.terminal.history_shown,
        alone=settings.telegram is None,
    )
    chat.attach()
    return chat


async def run_alone(settings: ChatSettings) -> int:
    """Lock, start, chat until the user leaves, close; 2 when another agentgram holds the database."""
    try:
        lock = await take_instance_lock(settings.storage.url, fingerprint(""))
    except AlreadyRunning as error:
        print(str(error), file=sys.stderr)
        return 2
    with lock:
        if settings.web.enabled:
            log.warning("web.enabled is ignored: the web view runs only beside the Telegram bot")
        runtime = Runtime(settings, format_rules=TERMINAL_FORMAT_RULES, home_chat_id=chat_user(settings))
        chat = terminal_for(runtime, Translator(default=settings.locale.default), settings)
        try:
            await runtime.start()
            await _until_signal(chat.run())
        finally:
            await runtime.close()
    return 0


async def _until_signal(chatting: Coroutine[None, None, None]) -> None:
    """Chat until the user leaves or SIGTERM (or a SIGINT from outside) ends it, as a signal ends
    ``agentgram run``: then the runtime closes in order."""
    task = asyncio.ensure_future(chatting)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await asyncio.wait({task})
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await cancel_and_wait(task)  # done already, unless this call itself is cancelled
    if not task.cancelled():  # cancelled by a signal: a clean exit
        task.result()
