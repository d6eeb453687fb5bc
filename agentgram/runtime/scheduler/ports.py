"""What the scheduler is given to work with: narrow services, never the whole runtime.

:class:`SchedulerPorts` is built once by the runtime (``runtime/app.py``) and
handed to :class:`~runtime.scheduler.service.SchedulerService`; a test builds
one from the stores and a stand-in hub, with no ``Runtime`` at all. Each
Protocol here names only what the scheduler calls, so a part of the runtime
can change behind it without the scheduler noticing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

from agentgram.runtime.core.mailbox import Envelope, Mailbox
from agentgram.runtime.core.turn.outcome import TurnOutcome
from agentgram.runtime.infra.config import QuietHoursSettings, SchedulerSettings, TicSettings
from agentgram.runtime.infra.events import DurableOutput
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.sessions import SessionStore

FinishListener = Callable[[int, int, TurnOutcome], None]
"""``(session_id, turn_id, outcome)``, told when a session's turn ends."""


class Turns(Protocol):
    """What the scheduler needs of the session hub."""

    @property
    def finish_listeners(self) -> list[FinishListener]:
        """Told when a turn ends; the scheduler adds itself on start and goes on stop."""
        ...

    def is_busy(self, session_id: int) -> bool: ...

    async def stop(self, envelope: Envelope) -> bool:
        """Store the stop mail ``envelope`` (its handler cancels the session's turn); whether a
        turn was running."""
        ...


class ChatSessionView(Protocol):
    """The little a run needs of a chat's session: its id, its chat, its user's language."""

    @property
    def id(self) -> int | None: ...

    @property
    def chat_id(self) -> int | None: ...

    @property
    def language_code(self) -> str | None: ...


class ChatSessionOf(Protocol):
    """The chat's active session (opened if it has none), as the chat itself would find it."""

    def __call__(
        self, chat_id: int, *, user_id: int | None, language: str | None, thread_id: int = 0
    ) -> Awaitable[ChatSessionView]: ...


class ApprovalCancel(Protocol):
    async def cancel_session(self, session_id: int) -> object:
        """Cancel every pending approval of the session (a headless turn a crash cut short)."""
        ...


Publish = Callable[[DurableOutput], Awaitable[None]]
"""Record a report, then emit it (``Runtime.publish``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerPorts:
    db: Database
    sessions: SessionStore
    history: HistoryStore
    mailbox: Mailbox
    approvals: ApprovalCancel
    turns: Turns
    publish: Publish
    chat_session: ChatSessionOf
    timezone: ZoneInfo
    timezone_name: str
    workdir: Path
    scheduler: SchedulerSettings
    tic: TicSettings
    quiet_hours: QuietHoursSettings
    home_chat_id: int | None = None
    """Where tics report when ``tic.chat_id`` is not set; the adapter names it (a chat bot's:
    the first allowed user). With neither, there is no home chat and a tic is a configuration error."""
