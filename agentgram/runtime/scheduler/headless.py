"""Headless scheduled turns: posting one, waiting for it, and settling what a crash left.

A run never calls the turn loop: it creates an ephemeral headless session
(source ``cron`` or ``tic``) and accepts a ``ScheduledTurnBody`` into its
mailbox; the session hub starts the turn. The outcome comes back through
the hub's finish listeners (:meth:`HeadlessTurns.resolve`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from agentgram.runtime.core.mailbox import Envelope, ScheduledTurnBody, Sender, SenderKind
from agentgram.runtime.core.turn.outcome import Failed, TurnOutcome
from agentgram.runtime.infra.storage.models import ChatSession, ToolCallStatus, TurnStatus, is_headless
from agentgram.runtime.scheduler.jobs import INTERRUPTED
from agentgram.runtime.scheduler.ports import SchedulerPorts


class HeadlessTurns:
    def __init__(self, ports: SchedulerPorts) -> None:
        self.ports = ports
        self._waiting: dict[int, asyncio.Future[TurnOutcome]] = {}

    async def run(
        self,
        session: ChatSession,
        body: ScheduledTurnBody,
        envelope_id: str,
        on_posted: Callable[[], Awaitable[None]] | None = None,
    ) -> TurnOutcome:
        """Post the scheduled mail and wait for the hub to finish the turn it starts.

        ``on_posted`` runs once the mail is in: a kill that came before it can
        only be carried out now.
        """
        assert session.id is not None
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        self._waiting[session.id] = future
        try:
            await self.ports.mailbox.accept(
                Envelope(
                    id=envelope_id,
                    session_id=session.id,
                    sender=Sender(kind=SenderKind.SYSTEM, ref=body.job),
                    body=body,
                )
            )
            if on_posted is not None:
                await on_posted()
            return await future
        finally:
            self._waiting.pop(session.id, None)

    def resolve(self, session_id: int, outcome: TurnOutcome) -> None:
        """End the wait of the run in ``session_id``, if one waits and is not answered yet."""
        future = self._waiting.get(session_id)
        if future is not None and not future.done():
            future.set_result(outcome)


async def settle_headless_leftovers(rt: SchedulerPorts) -> None:
    """Tic and cron turns a crash cut short end as failed; their unread mail is dropped."""
    for turn in await rt.sessions.open_turns():
        session = await rt.sessions.get(turn.session_id)
        if session is None or not is_headless(session.source):
            continue
        await rt.history.close_open_calls(turn.session_id, ToolCallStatus.FAILED, INTERRUPTED)
        await rt.approvals.cancel_session(turn.session_id)
        await rt.sessions.finish_turn(turn.id or 0, TurnStatus.FAILED, INTERRUPTED)
    for session_id in await rt.sessions.sessions_with_mail():
        session = await rt.sessions.get(session_id)
        if session is None or not is_headless(session.source):
            continue
        unread = await rt.mailbox.unread(session_id)
        if unread:
            await rt.mailbox.consume(session_id, max(e.seq for e in unread))


def failure(exc: Exception) -> TurnOutcome:
    """The outcome of a run that broke before or around its turn."""
    return Failed(f"{type(exc).__name__}: {exc}")
