"""``/rollback`` in the terminal chat (issue 30): the Telegram dialog, with typed answers.

``/rollback`` lists the session's newest turns that changed files (the wording is
:mod:`bot.rollback_words`, shared with Telegram); ``/rollback <turn>`` shows what undoing that
turn would undo, its diff (the first :data:`DIFF_LINES` lines), and takes the input line: ``y``
undoes it, ``n`` keeps the files. When the user changed files since, the files are named and the
line asks again; only a second ``y`` overwrites them (it carries the door's token for exactly
those files). A refusal (a turn or a command runs, the turn is gone) is said and ends the dialog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from rich.console import RenderableType
from rich.text import Text

from agentgram.bot import rollback_words as words
from agentgram.bot.terminal import view
from agentgram.bot.terminal.answers import number
from agentgram.runtime.app import SessionRef
from agentgram.runtime.capabilities.checkpoints import RollbackStatus
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.infra.i18n import Translator

DIFF_LINES = 200
"""Diff lines printed under the question; the rest is counted."""
_YES = frozenset({"y", "yes"})
_NO = frozenset({"n", "no"})


@dataclass(slots=True, frozen=True)
class _Asked:
    """The question the input line answers: undo ``turn_id`` (``confirm``: the token of the
    files changed since that the user is asked to overwrite)."""

    turn_id: int
    confirm: str = ""


class RollbackDialog:
    def __init__(self, runtime: Door, t: Translator, show: Callable[[RenderableType], None]) -> None:
        self.runtime = runtime
        self.t = t
        self.show = show
        self.asked: _Asked | None = None

    def _say(self, html: str) -> None:
        self.show(view.html_text(html))

    async def command(self, session: SessionRef, args: tuple[str, ...]) -> None:
        self.asked = None
        if not args:
            await self._list(session)
            return
        turn_id = number(args[0]) if len(args) == 1 else None
        if turn_id is None:
            self.show(view.worded(self.t, "terminal-rollback-usage"))
            return
        preview = await self.runtime.rollback.rollback_preview(session, turn_id)
        if preview is None:
            self.show(view.worded(self.t, "rollback-gone"))
            return
        self._say(words.preview_text(self.t, None, preview))
        lines = preview.diff.splitlines()
        if lines:
            self.show(Text("\n".join(lines[:DIFF_LINES]), style="bright_black"))
        if len(lines) > DIFF_LINES:
            self.show(view.worded(self.t, "terminal-rollback-diff-cut", count=len(lines) - DIFF_LINES))
        self.show(view.worded(self.t, "terminal-rollback-answer"))
        self.asked = _Asked(turn_id)

    async def _list(self, session: SessionRef) -> None:
        turns = await self.runtime.rollback.changed_turns(session)
        if not turns:
            self.show(view.worded(self.t, "rollback-none"))
            return
        self.show(view.worded(self.t, "rollback-title"))
        for turn in turns:
            self._say(words.turn_item(self.t, None, turn, _when(turn.started_at, self.runtime)))
        self.show(view.worded(self.t, "terminal-rollback-choose"))

    async def answer(self, session: SessionRef, line: str) -> None:
        """The typed answer to the question asked (``y`` or ``n``; anything else asks again)."""
        asked = self.asked
        assert asked is not None
        word = line.strip().lower()
        if word in _NO:
            self.asked = None
            self.show(view.worded(self.t, "rollback-cancelled"))
            return
        if word not in _YES:
            self.show(view.worded(self.t, "terminal-rollback-answer"))
            return
        self.asked = None
        outcome = await self.runtime.rollback.roll_back(session, asked.turn_id, confirm=asked.confirm)
        refused = words.refusal_text(self.t, None, outcome)
        if refused is not None:
            self._say(refused)
        elif outcome.status is RollbackStatus.CHANGED_SINCE:
            self._say(words.changed_since_text(self.t, None, asked.turn_id, outcome))
            self.show(view.worded(self.t, "terminal-rollback-answer"))
            self.asked = _Asked(asked.turn_id, outcome.confirm)
        else:
            self._say(words.done_text(self.t, None, outcome))


def _when(moment: datetime, runtime: Door) -> str:
    """When a turn started, in the agent's zone."""
    return f"{moment.astimezone(runtime.timezone):%Y-%m-%d %H:%M}"
