"""One consumer per session: the session hub and its workers.

Every session with mail gets a :class:`SessionWorker`, a single task that
consumes the session's mailbox in order. Mail to an idle session starts a
turn; mail that arrives during a turn is folded in by the turn itself at its
next round boundary (R1). ``stop`` does not queue behind anything: its mail
is stored, then the running turn is cancelled directly; the worker consumes
the stop afterwards (before any queued message, which it drops and counts).
A stop the turn meets at a boundary first ends it the same way. A paused
turn continues on a resume anywhere in the queue.

Workers live only while they are needed (an in-memory map that only grows is
a leak: every tic and cron run opens a fresh session). A worker that has
nothing to do — no turn running or being opened, no turn to resume, no mail
it has not looked at — is evicted: at once for a headless (tic/cron) session,
after :data:`CHAT_IDLE_TIMEOUT` for a chat; the session's in-memory views go
with it. Nothing it held is lost: the paused turn, the unread mail and the
history are in the database, which is all a worker starts from after a
restart too, and the next mail makes the session a new worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from agentgram.runtime.events import Address, ApprovalResolved, OutcomeKind, TurnFinished, TurnStarted
from agentgram.runtime.log import get_logger
from agentgram.runtime.mailbox import ControlAction, ControlBody, Envelope
from agentgram.runtime.storage.models import ChatSession, SessionSource, ToolCallStatus, Turn, TurnStatus
from agentgram.runtime.turn import texts
from agentgram.runtime.turn.inject import control_action, fold_into_turn, mail_text, take_until_pause
from agentgram.runtime.turn.loop import TurnRunner, TurnServices
from agentgram.runtime.turn.outcome import Cancelled, Exhausted, Failed, Final, TurnOutcome
from agentgram.runtime.turn.prefetch import Prefetch, provisional_messages

log = get_logger("hub")

FinishListener = Callable[[int, int, TurnOutcome], None]
EvictListener = Callable[[int], None]

PREFETCH_PATIENCE = 0.2
"""How long a new turn's opening waits for its prefetched request to be under way."""

CHAT_IDLE_TIMEOUT = 300.0
"""Seconds a chat session's idle worker is kept for the next message before it is evicted.

A headless session's worker goes as soon as its turn is over: its session gets no more mail.
"""

_HEADLESS = (SessionSource.TIC, SessionSource.CRON)

_STATUS = {
    OutcomeKind.FINAL: TurnStatus.FINAL,
    OutcomeKind.CANCELLED: TurnStatus.CANCELLED,
    OutcomeKind.EXHAUSTED: TurnStatus.EXHAUSTED,
    OutcomeKind.FAILED: TurnStatus.FAILED,
    OutcomeKind.PAUSED: TurnStatus.PAUSED,
}


def _naive_utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back without their zone; they were stored as UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def address_of(session: ChatSession) -> Address:
    assert session.id is not None
    return Address(
        session_id=session.id, source=session.source, chat_id=session.chat_id, language=session.language_code
    )


@dataclass(slots=True)
class HubOptions:
    resume_on_message: bool = False
    idle_timeout: float = CHAT_IDLE_TIMEOUT  # a chat session's idle worker is evicted after this


class SessionWorker:
    """The one consumer of a session's mailbox (the spec's ChatHub consumer)."""

    def __init__(self, hub: SessionHub, session_id: int) -> None:
        self.hub = hub
        self.session_id = session_id
        self.wake = asyncio.Event()
        self.runner: TurnRunner | None = None
        self.turn_task: asyncio.Task[TurnOutcome] | None = None
        self.resume_turn_id: int | None = None
        self.cancelled_something = False
        self.not_paused = False  # True once this worker knows the session has no paused turn
        self.opening = False  # a turn is being opened: busy already, its task not yet started
        self.stopped_while_opening = False
        self.prefetch: Prefetch | None = None  # the request of the turn being opened
        self.session: ChatSession | None = None
        self.task = asyncio.create_task(self._loop(), name=f"session-{session_id}")

    @property
    def busy(self) -> bool:
        return self.opening or self._running()

    def _running(self) -> bool:
        return self.turn_task is not None and not self.turn_task.done()

    def cancel_turn(self) -> bool:
        """Cancel the running turn at once (sticky token + task cancel), once.

        A turn still being opened starts cancelled instead.
        """
        if self.opening:
            self.stopped_while_opening = self.cancelled_something = True
            if self.prefetch is not None:
                self.prefetch.cancel()
            return True
        if self.runner is None or not self._running():
            return False
        assert self.turn_task is not None
        if not self.runner.token.cancelled:  # a second /stop must not cut the clean-up short
            self.runner.token.cancel()
            self.turn_task.cancel()
        self.cancelled_something = True
        return True

    @property
    def idle(self) -> bool:
        """Nothing to do that lives only in memory: the worker may go (see the module docstring).

        The rest of its state is a copy of the database (the session row, "no paused turn")
        or matters only until the stop mail that always follows it is consumed
        (``cancelled_something``; a new worker tells from the turn's end instead, ``_ended_by``).
        """
        return not self.busy and self.resume_turn_id is None and not self.wake.is_set()

    async def _loop(self) -> None:
        while True:
            if not await self._mail_within(self._idle_timeout()):
                if self.hub.evict(self):
                    return
                continue
            self.wake.clear()
            try:
                await self._drain()
            except asyncio.CancelledError:
                raise
            except Exception:  # one session's failure must not end its consumer
                log.exception("session %s: consumer failed", self.session_id)

    def _idle_timeout(self) -> float:
        """How long to wait for mail once idle; a session not read yet counts as a chat."""
        headless = self.session is not None and self.session.source in _HEADLESS
        return 0.0 if headless else self.hub.options.idle_timeout

    async def _mail_within(self, timeout: float) -> bool:
        if not self.wake.is_set() and timeout > 0:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
            except TimeoutError:
                pass
        return self.wake.is_set()

    async def _drain(self) -> None:
        while True:
            unread = await self.hub.services.mailbox.unread(self.session_id)
            stops = [e for e in unread if control_action(e) == ControlAction.STOP]
            if stops:  # a double-tapped /stop settles as one
                await self._consume_stop(unread, stops)
                continue
            if self.resume_turn_id is not None:
                turn_id, self.resume_turn_id = self.resume_turn_id, None
                await self._run_turn(turn_id, restarted=True)
                continue
            if not unread:
                return
            if not await self._dispatch(unread):
                return

    async def _dispatch(self, unread: list[Envelope]) -> bool:
        """Act on the oldest unread mail; ``False`` means wait for more mail.

        The turn consumes the mail that starts or resumes it (at its first
        R1), so the user row and the cursor move commit together.
        """
        paused = await self._paused_turn()
        if paused is not None:
            return await self._dispatch_paused(paused, unread)
        head = unread[0]
        if mail_text(head) is None:  # control or a decision with no turn to act on: settled
            await self._consume([head])
            return True
        taken, pause = take_until_pause(unread)
        await self._start_turn(taken[:-1] if pause else taken, pause_queued=pause)  # R1 meets the pause
        return True

    async def _start_turn(self, mail: list[Envelope], *, pause_queued: bool) -> None:
        """Ask the model, open the turn with ``mail`` folded in, run it — in that order.

        The worker is busy from the first step: a message meanwhile is "noted",
        and a /stop closes the request and starts the turn cancelled.
        """
        self.opening = True
        try:
            self.prefetch = None if pause_queued else await self._prefetch(mail)
            if self.prefetch is not None:
                await self.prefetch.under_way(PREFETCH_PATIENCE)
            turn_id = await self._open_turn(mail)
        except BaseException:
            self.opening = self.stopped_while_opening = False  # the stop mail still settles the stop
            if self.prefetch is not None:
                self.prefetch.cancel()
            self.prefetch = None
            raise
        prefetch, self.prefetch = self.prefetch, None
        # the turn's first receive point has nothing new to read unless a /pause is queued
        await self._run_turn(
            turn_id, restarted=False, first_mail=None if pause_queued else [], prefetch=prefetch
        )

    async def _prefetch(self, mail: list[Envelope]) -> Prefetch:
        """Send the new turn's first request now; it is opened meanwhile (see runtime/turn/prefetch.py).

        The history comes from memory, or is read here instead of in the first round.
        """
        s = self.hub.services
        entries = await s.history.entries(self.session_id, limit=s.context.max_history_messages)
        now = s.clock()
        return Prefetch(s.llm, provisional_messages(entries, mail, s.context, now), s.tools.specs(), now)

    async def _dispatch_paused(self, paused: Turn, unread: list[Envelope]) -> bool:
        """A paused turn continues on /resume (anywhere in the queue) or, if configured, any message."""
        resume = any(control_action(e) == ControlAction.RESUME for e in unread)
        if not resume and self.hub.options.resume_on_message:
            resume = any(mail_text(e) is not None for e in unread)
        if resume:
            await self._run_turn(paused.id or 0, restarted=False, resumed=True)
            return True
        if mail_text(unread[0]) is None:  # e.g. a second /pause: settled, nothing to do
            await self._consume([unread[0]])
            return True
        return False  # messages wait for /resume

    async def _open_turn(self, mail: list[Envelope]) -> int:
        """One transaction: settle orphans, open the turn, fold in the mail that starts it."""
        s = self.hub.services

        def open_turn(tx: Connection) -> int:
            s.history.mark_orphans_failed(tx, self.session_id)
            turn_id = s.sessions.open_turn(tx, self.session_id)
            fold_into_turn(tx, s.mailbox, s.history, self.session_id, turn_id, mail)
            return turn_id

        return await s.db.write_sync(open_turn)

    async def _session(self) -> ChatSession:
        """The session row, read once; the runtime hands in changes (language) via the hub."""
        if self.session is None:
            self.session = await self.hub.services.sessions.get(self.session_id)
        assert self.session is not None
        return self.session

    async def _paused_turn(self) -> Turn | None:
        if self.not_paused:  # saves a query per message: only this worker ends turns of its session
            return None
        latest = await self.hub.services.sessions.latest_turn(self.session_id)
        paused = latest if latest is not None and latest.status == TurnStatus.PAUSED else None
        self.not_paused = paused is None
        return paused

    async def _run_turn(
        self,
        turn_id: int,
        *,
        restarted: bool,
        resumed: bool = False,
        first_mail: list[Envelope] | None = None,
        prefetch: Prefetch | None = None,
    ) -> None:
        s = self.hub.services
        session = await self._session()
        if restarted or resumed:
            await s.sessions.set_turn_status(turn_id, TurnStatus.RUNNING)
        address = address_of(session)
        self.runner = TurnRunner(
            s,
            session,
            turn_id,
            address,
            resumed=restarted or resumed,
            first_mail=first_mail,
            prefetch=prefetch,
        )
        if restarted and await self.runner.stored_answer() is None:  # else nothing is left to continue
            # the notice points at the prompt the resumed turn waits on
            shown = [r.message_id for r in await s.approvals.pending(self.session_id) if r.message_id]
            await s.notice(address, "restarted-continuing", {}, refers_to_message=next(iter(shown), None))
        if self.stopped_while_opening:
            self.stopped_while_opening = False
            self.runner.token.cancel()
        s.bus.emit(TurnStarted(to=address, turn_id=turn_id, resumed=restarted))
        self.turn_task = asyncio.create_task(self.runner.run(), name=f"turn-{turn_id}")
        self.opening = False
        await self._finish(address, turn_id, await self._await_turn(turn_id))
        self.runner = self.turn_task = None  # done and awaited: an idle worker holds no turn

    async def _await_turn(self, turn_id: int) -> TurnOutcome:
        """The turn's outcome; only the worker's own cancellation (shutdown) propagates."""
        assert self.turn_task is not None and self.runner is not None
        try:
            return await self.turn_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                self.turn_task.cancel()
                raise
            if self.runner.token.cancelled:  # stopped twice: the clean-up still landed
                return Cancelled()
            return Failed("the turn was cancelled unexpectedly")
        except Exception as exc:  # a bug in the loop ends the turn, not the worker
            log.exception("turn %s crashed", turn_id)
            return Failed(f"{type(exc).__name__}: {exc}")

    async def _finish(self, address: Address, turn_id: int, outcome: TurnOutcome) -> None:
        s = self.hub.services
        error = None
        if isinstance(outcome, Exhausted):
            error = texts.exhausted(outcome.rounds)
        elif isinstance(outcome, Failed):
            error = outcome.error
        elif isinstance(outcome, Cancelled):
            self.cancelled_something = True
        if not (isinstance(outcome, Final) and outcome.closed):
            await s.sessions.finish_turn(turn_id, _STATUS[outcome.kind], error)
        self.not_paused = outcome.kind != OutcomeKind.PAUSED
        text = outcome.text if isinstance(outcome, Final) else ""
        failure = outcome.failure if isinstance(outcome, Failed) else None
        if self.runner is not None:
            self.runner.log_finished(outcome)
        s.bus.emit(
            TurnFinished(to=address, turn_id=turn_id, outcome=outcome.kind, text=text, failure=failure)
        )
        for listener in list(self.hub.finish_listeners):
            listener(self.session_id, turn_id, outcome)

    async def _consume(self, mail: list[Envelope]) -> None:
        await self.hub.services.mailbox.consume(self.session_id, max(e.seq for e in mail))

    async def _consume_stop(self, unread: list[Envelope], stops: list[Envelope]) -> None:
        """Drop queued mail up to the last stop, settle a paused/interrupted turn, report."""
        s = self.hub.services
        upto = [e for e in unread if e.seq <= stops[-1].seq]
        dropped = sum(1 for e in upto if mail_text(e) is not None)
        session = await self._session()
        address = address_of(session)
        settled = await self._settle_unfinished_turn(address) or await self._ended_by(stops[0])
        await self._consume(upto)
        s.approvals.bypasses.clear(self.session_id)
        stopped, self.cancelled_something = self.cancelled_something or settled, False
        quiet = all(isinstance(e.body, ControlBody) and e.body.quiet for e in stops)
        if not quiet:
            await self._report_stop(address, stopped=stopped, dropped=dropped)

    async def _ended_by(self, stop: Envelope) -> bool:
        """The latest turn was cancelled after this stop was sent (e.g. by a process that
        died before it consumed the stop): the stop did stop something."""
        latest = await self.hub.services.sessions.latest_turn(self.session_id)
        if latest is None or latest.status != TurnStatus.CANCELLED or latest.ended_at is None:
            return False
        return _naive_utc(latest.ended_at) >= _naive_utc(stop.sent_at)

    async def _report_stop(self, address: Address, *, stopped: bool, dropped: int) -> None:
        notice = self.hub.services.notice
        if dropped:
            await notice(address, "stopped-dropped", {"count": dropped})
        elif stopped:
            await notice(address, "stopped", {})
        else:
            await notice(address, "nothing-to-stop", {})

    async def _settle_unfinished_turn(self, address: Address) -> bool:
        """A paused turn, or one a crash left running, ends as cancelled on /stop."""
        s = self.hub.services
        latest = await s.sessions.latest_turn(self.session_id)
        if latest is None or latest.status not in (TurnStatus.PAUSED, TurnStatus.RUNNING) or self.busy:
            return False
        self.resume_turn_id = None
        await s.history.close_open_calls(self.session_id, ToolCallStatus.CANCELLED, texts.CANCELLED_BY_USER)
        for request in await s.approvals.cancel_session(self.session_id):  # prompts read "⏹ Cancelled"
            resolved = ApprovalResolved(
                to=address,
                request_id=request.id,
                status=request.status,
                reason=None,
                message_id=request.message_id,
            )
            s.bus.emit(resolved)
        await s.sessions.finish_turn(latest.id or 0, TurnStatus.CANCELLED)
        self.not_paused = True
        return True


class SessionHub:
    def __init__(self, services: TurnServices, options: HubOptions | None = None) -> None:
        self.services = services
        self.options = options or HubOptions()
        self.workers: dict[int, SessionWorker] = {}
        self.finish_listeners: list[FinishListener] = []
        self.evict_listeners: list[EvictListener] = []
        """Told the session id after its worker was evicted (the session is idle)."""
        services.mailbox.subscribe(self._on_mail)

    def _worker(self, session_id: int) -> SessionWorker:
        worker = self.workers.get(session_id)
        if worker is None:
            worker = SessionWorker(self, session_id)
            self.workers[session_id] = worker
        return worker

    def evict(self, worker: SessionWorker) -> bool:
        """Drop an idle worker and its session's in-memory views; ``False`` if it is not idle.

        Called by the worker's own task, which then ends: nothing else of it runs (its turn
        task is done and awaited, it holds no prefetch), so there is nothing to cancel. No
        await lies between the check and the removal, so mail cannot slip in between; mail
        after it makes a new worker (``_worker``).
        """
        if not worker.idle:
            return False
        session_id = worker.session_id
        if self.workers.get(session_id) is worker:
            del self.workers[session_id]
        self.services.mailbox.forget(session_id)
        self.services.history.forget(session_id)
        for listener in list(self.evict_listeners):
            try:
                listener(session_id)
            except Exception:  # the worker is gone either way
                log.exception("evict listener failed for session %s", session_id)
        return True

    def _on_mail(self, envelope: Envelope) -> None:
        self.wake(envelope.session_id)

    def wake(self, session_id: int) -> None:
        self._worker(session_id).wake.set()

    def resume(self, session_id: int, turn_id: int) -> None:
        """Continue a turn a previous process left running (crash recovery)."""
        worker = self._worker(session_id)
        worker.resume_turn_id = turn_id
        worker.wake.set()

    def session_changed(self, session: ChatSession, *, created: bool = False) -> None:
        """A session row changed (e.g. the user's language): the worker's copy follows.

        A session ``created`` just now has no mail, no history and no turn: its
        worker and the in-memory views start from that instead of reading it back.
        """
        assert session.id is not None
        if created:
            self.services.mailbox.known_empty(session.id)
            self.services.history.known_empty(session.id)
            self._worker(session.id).not_paused = True
        worker = self.workers.get(session.id)
        if worker is not None:
            worker.session = session

    def known_not_paused(self, session_id: int) -> bool:
        """The session's worker knows it has no paused turn (no query needed)."""
        worker = self.workers.get(session_id)
        return worker is not None and worker.not_paused

    def is_busy(self, session_id: int) -> bool:
        worker = self.workers.get(session_id)
        return worker is not None and worker.busy

    async def pause_pending(self, session_id: int) -> bool:
        """A /pause is queued for the running turn (it has not reached its next step yet)."""
        if not self.is_busy(session_id):
            return False
        unread = await self.services.mailbox.unread(session_id)
        return any(control_action(e) == ControlAction.PAUSE for e in unread)

    def cancel_turn(self, session_id: int) -> bool:
        worker = self.workers.get(session_id)
        return worker.cancel_turn() if worker is not None else False

    async def shutdown(self) -> None:
        """Stop consumers without marking turns cancelled: a restart resumes them."""
        tasks: list[asyncio.Task[Any]] = []
        for worker in self.workers.values():
            worker.task.cancel()
            tasks.append(worker.task)
            if worker.turn_task is not None and not worker.turn_task.done():
                worker.turn_task.cancel()
                tasks.append(worker.turn_task)
        await asyncio.gather(*tasks, return_exceptions=True)
        self.workers.clear()


__all__ = [
    "CHAT_IDLE_TIMEOUT",
    "EvictListener",
    "FinishListener",
    "HubOptions",
    "SessionHub",
    "SessionWorker",
]
