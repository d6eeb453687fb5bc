"""What a chat shows while nothing is said: "typing…", or a file's action.

A typing action is shown once a turn has worked for ``typing_after`` (a reply that is complete
sooner needs none, and Telegram would keep showing "typing…" for 5 s after it), then re-sent
every ``every`` seconds while the turn works — never while there is nothing to show it for
(``quiet``: the turn waits for the user's decision on a prompt, or the chat shows the round's
text growing in a draft or a message, or that text is about to be sent whole), nor while a
file's action (``upload_document``, ``record_voice``) says more. Skipping it beside shown text
saves a Bot API request a turn when the bot is busy and every turn passes ``typing_after`` in a
queue (issue 31, CPU per turn). A file's action is sent the same way until it is stopped, at most
:data:`ACTION_LIMIT` seconds.

Each chat has one :class:`ChatActions`; it owns its two tasks (spawned in the delivery's task
set, so they are cancelled and awaited on close). Their calls take the chat's turn in its
queue (:mod:`..core.chat_queue`) like every other call, so a 429 pauses them too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentgram.bot.telegram.core.port import BotApi, TelegramError
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("telegram.delivery")

ACTION_LIMIT = 600.0
"""Seconds a fetch's or transcription's chat action is shown at most, should its end never come."""
TYPING = "typing"
UPLOAD_DOCUMENT = "upload_document"
RECORD_VOICE = "record_voice"


@dataclass(slots=True, eq=False)
class ChatActions:
    """One chat's typing indicator and file action."""

    _bot: BotApi
    _chat_id: int
    _tasks: TaskSet
    _quiet: Callable[[], bool]
    """Nothing to show typing for now (the turn waits for the user, or its text shows already)."""
    _typing_after: float
    _every: float
    typing: asyncio.Task[None] | None = None
    action: asyncio.Task[None] | None = None
    """A file's chat action (fetching, transcribing, sending), while it is shown."""

    def busy(self) -> bool:
        return self.typing is not None or self.action is not None

    def start_typing(self) -> None:
        if self.typing is None or self.typing.done():
            self.typing = self._tasks.spawn(self._type(), name=f"typing-{self._chat_id}")

    def stop_typing(self) -> None:
        if self.typing is not None:
            self.typing.cancel()
            self.typing = None

    def show(self, action: str) -> None:
        """Show a file's ``action`` (instead of typing) until :meth:`stop`."""
        self.stop()
        self.action = self._tasks.spawn(self._show(action), name=f"action-{self._chat_id}")

    def stop(self) -> None:
        if self.action is not None:
            self.action.cancel()
            self.action = None

    async def _show(self, action: str) -> None:
        """Telegram shows an action for ~5 s: sent again every ``every`` s, until stopped (or the limit)."""
        until = time.monotonic() + ACTION_LIMIT
        while time.monotonic() < until:
            await self._send(action)
            await asyncio.sleep(self._every)
        self.action = None

    async def _type(self) -> None:
        await asyncio.sleep(self._typing_after)
        while True:
            if not self._quiet() and self.action is None:  # a file's action says more
                await self._send(TYPING)
            await asyncio.sleep(self._every)

    async def _send(self, action: str) -> None:
        try:
            await self._bot.send_chat_action(self._chat_id, action)
        except TelegramError as error:
            log.debug("%s action failed: %s", action, error)


__all__ = ["ACTION_LIMIT", "RECORD_VOICE", "TYPING", "UPLOAD_DOCUMENT", "ChatActions"]
