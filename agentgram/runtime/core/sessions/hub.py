"""One consumer per session: the session hub and its workers.

Every session with mail gets a :class:`SessionWorker`, a single task that
consumes the session's mailbox in order. Mail to an idle session starts a
turn; mail that arrives during a turn is folded in by the turn itself at its
next round boundary (the round-boundary receive point). Control is mail too,
and the hub's :class:`~runtime.core.sessions.control.ControlDesk` acts on it
once it is stored: ``stop`` does not queue behind anything, its handler cancels
the running turn at once; the worker consumes the stop afterwards (before any
queued message, which it drops and counts).
A stop the turn meets at a boundary first ends it the same way. A paused
turn continues on a resume anywhere in the queue.

What a worker is doing is one :data:`~runtime.sessions.state.Status` value
whose kind is a :class:`~runtime.sessions.state.WorkerState` (new, idle,
opening, running, waiting for approval, paused, stopping) and which carries
all the worker knows of it: the turn, the request being opened, the approval
awaited, and its :class:`~runtime.sessions.state.Notes` — a turn a previous
process left running (noted by :meth:`SessionHub.resume`, continued at the
first drain that finds the worker resting) and the mark that a /stop ended a
turn (kept until the stop's mail is consumed, for its report). It changes only
through ``SessionWorker._enter`` and the table in :mod:`runtime.sessions.state`;
the notes go along with every change until the worker, having acted on one,
drops it (``SessionWorker._take``). A new turn goes through the named steps of
:mod:`runtime.turn.steps`; the turn's approval gate tells the worker while it
waits (``TurnRunner.awaiting_approval``). "Is the session's latest turn
paused" has one answer, :meth:`SessionHub.paused_turn`.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import Context
from dataclasses import dataclass, replace
from typing import Any

from agentgram.runtime.capabilities.attachments.inbox import PreparationStopped
from agentgram.runtime.core.mailbox import ControlAction, ControlBody, Envelope, UserMessageBody
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.core.sessions.state import (
    BUSY,
    IDLE,
    NEW,
    PAUSED,
    RESTING,
    IllegalMove,
    LiveTurn,
    Notes,
    Opening,
    Running,
    Status,
    Stopping,
    WaitingApproval,
    WorkerState,
    allowed,
    kept,
    live_turn,
    may_enter,
)
from agentgram.runtime.core.turn import steps
from agentgram.runtime.core.turn.deps import TurnDeps
from agentgram.runtime.core.turn.inject import Prepared, control_action, mail_text, take_until_pause, wakes
from agentgram.runtime.core.turn.loop import TurnRunner, settle_cancelled
from agentgram.runtime.core.turn.outcome import Cancelled, Failed, TurnOutcome
from agentgram.runtime.core.turn.prefetch import Prefetch
from agentgram.runtime.infra.events import Address, OutcomeKind, TurnStarted
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.one_waiter import OneWaiterEvent
from agentgram.runtime.infra.storage.models import ChatSession, Turn, TurnStatus, is_headless, utcnow

log = get_logger("hub")

FinishListener = Callable[[int, int, TurnOutcome], None]
EvictListener = Callable[[int], None]

CHAT_IDLE_TIMEOUT = 300.0
"""Seconds a chat session's idle worker is kept for the next message before it is evicted.

A headless session's worker goes as soon as its turn is over: its session gets no more mail.
"""

ALBUM_WINDOW = 1.0
"""Seconds after an album's latest item the worker waits for more before it reads the album."""


def album_pending(mail: list[Envelope]) -> float:
    """How much longer to wait for more items of an album ``mail`` holds (0: read it now)."""
    groups = {
        e.body.media_group_id for e in mail if isinstance(e.body, UserMessageBody) and e.body.media_group_id
    }
    if not groups:
        return 0.0
    latest = max(
        e.sent_at for e in mail if isinstance(e.body, UserMessageBody) and e.body.media_group_id in groups
    )
    return max(0.0, ALBUM_WINDOW - (utcnow() - latest).total_seconds())


@dataclass(slots=True)
class HubOptions:
    resume_on_message: bool = False
    idle_timeout: float = CHAT_IDLE_TIMEOUT  # a chat session's idle worker is evicted after this


class SessionWorker:
    """The one consumer of a session's mailbox (docs/architecture/mailbox.md, "The session worker").

    What it is doing is :attr:`status` (its kind: :attr:`state`), changed only by :meth:`_enter`
    (the moves are listed in :mod:`runtime.sessions.state`) and, to drop a note it acted on, by
    :meth:`_take`; the turn it runs, the request of the turn it opens, the approval it waits on, a
    turn to continue after a restart and whether a stop ended a turn are data of that status.
    """

    __slots__ = ("hub", "session", "session_id", "status", "task", "wake")  # one per chat: no __dict__

    def __init__(self, hub: SessionHub, session_id: int) -> None:
        self.hub = hub
        self.session_id = session_id
        self.status: Status = NEW
        self.wake = OneWaiterEvent()  # its own task alone waits: no deque per worker
        self.session: ChatSession | None = None
        # a context of its own: the worker's writes run under its session's lease only (set when it
        # is admitted), never under that of whatever task woke it (runtime.infra.ownership)
        self.task = asyncio.create_task(self._loop(), name=f"session-{session_id}", context=Context())

    def _enter(self, target: Status) -> None:
        """Move to ``target``, the notes kept (:func:`~runtime.sessions.state.kept`); a move
        :mod:`runtime.sessions.state` does not list is a bug and raises :class:`IllegalMove`
        (nothing changes)."""
        self._move(kept(self.status, target), may_not_apply=False)

    def _enter_if_allowed(self, target: Status) -> bool:
        """Move to ``target`` where the move may rightly not apply (a stop got there first);
        ``False``, and nothing changes, when it does not."""
        return self._move(kept(self.status, target), may_not_apply=True)

    def _take(self, notes: Notes) -> None:
        """The notes left once the worker acted on one: the one change that drops a note (no
        move, the kind stays)."""
        self._move(replace(self.status, notes=notes), may_not_apply=False)

    def _move(self, target: Status, *, may_not_apply: bool) -> bool:
        if not allowed(self.status, target):
            if not may_not_apply:
                raise IllegalMove(f"session {self.session_id}: {self.state} -> {target.kind}")
            log.debug("session %s: %s -> %s refused", self.session_id, self.state, target.kind)
            return False
        log.debug("session %s: %s -> %s", self.session_id, self.state, target.kind)
        self.status = target
        return True

    def _may_enter(self, target: WorkerState) -> bool:
        return may_enter(self.state, target)

    @property
    def state(self) -> WorkerState:
        return self.status.kind

    @property
    def turn(self) -> LiveTurn | None:
        """The turn it runs (running, waiting, stopping)."""
        return live_turn(self.status)

    @property
    def awaited(self) -> str | None:
        """The approval request its turn waits on, if it does."""
        return self.status.request_id if isinstance(self.status, WaitingApproval) else None

    @property
    def busy(self) -> bool:
        return self.state in BUSY

    @property
    def knows_not_paused(self) -> bool:
        """The session has no paused turn, and the worker knows it without a query (only it
        ends the session's turns)."""
        return self.state not in (WorkerState.NEW, WorkerState.PAUSED)

    def learned_no_turns(self) -> None:
        """The session was created just now: it has no turn, paused or otherwise."""
        if self._may_enter(WorkerState.IDLE):
            self._enter(IDLE)

    def cancel_turn(self) -> bool:
        """Cancel the turn being opened or run, at once (sticky token + task cancel), once.

        A turn still being opened starts cancelled instead; a second /stop must not cut the
        first one's clean-up short.
        """
        if self.state is WorkerState.STOPPING:
            return True
        prefetch = self.status.prefetch if isinstance(self.status, Opening) else None
        turn = self.turn
        if not self._enter_if_allowed(Stopping(turn, prefetch, Notes(stopped=True))):  # nothing to stop
            return False
        if prefetch is not None:
            prefetch.cancel()
        if turn is not None and not turn.runner.token.cancelled:
            turn.cancel()
        return True

    def note_resume(self, turn_id: int) -> None:
        """Continue ``turn_id``, a turn a previous process left running, at the first drain that
        finds the worker resting (mail may have started another turn first)."""
        self._enter(replace(self.status, notes=Notes(resume=turn_id)))

    @contextmanager
    def _awaiting_approval(self, request_id: str) -> Iterator[None]:
        """Around the wait of the turn's approval gate (``TurnRunner.waiting``)."""
        turn = self.turn
        if turn is not None:
            self._enter_if_allowed(WaitingApproval(turn, request_id))  # not when the turn was stopped
        try:
            yield
        finally:
            if (turn := self.turn) is not None:
                self._enter_if_allowed(Running(turn))  # not when the turn was stopped meanwhile

    @property
    def idle(self) -> bool:
        """Nothing to do that lives only in memory: the worker may go (see the module docstring).

        Its state then is a copy of the database (``new``, ``idle``, ``paused``), as is the
        session row, unless it has a turn to continue; its stop mark matters only until the stop
        mail that always follows it is consumed (a new worker tells from the turn's end instead,
        ``_ended_by``).
        """
        resting = self.state in RESTING and self.status.notes.resume is None
        return resting and not self.wake.is_set()

    def _take_resume(self) -> int | None:
        """The turn a previous process left running, if one is noted; the note is dropped."""
        notes = self.status.notes
        if notes.resume is not None:
            self._take(replace(notes, resume=None))
        return notes.resume

    def _take_stop_mark(self) -> bool:
        """Whether a /stop ended a turn since the last stop mail was consumed; the mark is dropped."""
        notes = self.status.notes
        if notes.stopped:
            self._take(replace(notes, stopped=False))
        return notes.stopped

    async def _loop(self) -> None:
        if not await self._admitted():
            self.hub.dismiss(self)
            return
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
                self._start_over()

    async def _admitted(self) -> bool:
        """Whether this process runs the session (in a cluster another instance may own its chat:
        ``TurnDeps.owners``); from here on the task's writes are fenced by the session's lease."""
        try:
            return await self.hub.deps.owners.admit(await self._session())
        except asyncio.CancelledError:
            raise
        except Exception:  # the database away: the session's next mail (or a scan) tries again
            log.exception("session %s: could not tell whether this instance runs it", self.session_id)
            return False

    def _start_over(self) -> None:
        """After a failure the worker holds no live turn; it reads again what it knows."""
        prefetch = self.status.prefetch if isinstance(self.status, Opening | Stopping) else None
        if prefetch is not None:
            prefetch.cancel()
        self._enter(NEW)

    def _idle_timeout(self) -> float:
        """How long to wait for mail once idle; a session not read yet counts as a chat."""
        headless = self.session is not None and is_headless(self.session.source)
        return 0.0 if headless else self.hub.options.idle_timeout

    async def _mail_within(self, timeout: float) -> bool:
        if not self.wake.is_set() and timeout > 0:
            try:
                async with asyncio.timeout(timeout):  # not wait_for: no second task per idle chat
                    await self.wake.wait()
            except TimeoutError:
                pass
        return self.wake.is_set()

    async def _drain(self) -> None:
        while True:
            unread = await self.hub.deps.mailbox.unread(self.session_id)
            stops = [e for e in unread if control_action(e) == ControlAction.STOP]
            if stops:  # a double-tapped /stop settles as one
                await self._consume_stop(unread, stops)
                continue
            if (turn_id := self._take_resume()) is not None:
                await self._run_turn(turn_id, restarted=True)
                continue
            if not unread:
                return
            if not await self._dispatch(unread):
                return

    async def _dispatch(self, unread: list[Envelope]) -> bool:
        """Act on the oldest unread mail; ``False`` means wait for more mail.

        The turn consumes the mail that starts or resumes it (at its first
        the round-boundary receive point), so the user row and the cursor move commit together.
        """
        paused = await self._paused_turn()
        if paused is not None:
            return await self._dispatch_paused(paused, unread)
        head = unread[0]
        if mail_text(head) is None:  # control or a decision with no turn to act on: settled
            await self._consume([head])
            return True
        taken, pause = take_until_pause(unread)
        wake_on = self.hub.deps.agents.wake_on((await self._session()).agent_id)
        if not pause and not any(wakes(e, wake_on) for e in taken):  # e.g. results of calls /stop cancelled
            return False  # they are read with the next mail that wakes the session
        if (wait := album_pending(taken)) > 0:  # an album's items arrive one by one: read them as one
            asyncio.get_running_loop().call_later(wait, self.wake.set)
            return False
        # the round-boundary receive point meets the pause
        await self._start_turn(taken[:-1] if pause else taken, pause_queued=pause)
        return True

    async def _start_turn(self, mail: list[Envelope], *, pause_queued: bool) -> None:
        """A new turn's steps in order: prefetch → open → run → finish (:mod:`runtime.turn.steps`).

        The worker is busy (``opening``) from the first step: a message meanwhile is "noted",
        and a /stop closes the request and starts the turn cancelled.
        """
        s = self.hub.deps
        self._enter(Opening())
        prefetch: Prefetch | None = None
        try:
            prepared = await self._prepare(mail)
            if prepared is None:  # a /stop cancelled the fetch: the stop settles the mail
                self._enter(IDLE)
                return
            if not pause_queued and not prepared:  # nothing first: a turn that pauses, a file to show
                prefetch = await steps.prefetch(s, await self._session(), mail)
                if isinstance(self.status, Opening):  # a stop meanwhile: the turn starts cancelled
                    self._enter(Opening(prefetch))
                await prefetch.under_way(steps.PREFETCH_PATIENCE)
            turn_id = await steps.open_turn(s, self.session_id, mail, prepared)
        except BaseException:
            if prefetch is not None:
                prefetch.cancel()
            self._enter(IDLE)  # a stop meanwhile: its mail still settles it
            raise
        # the turn's first receive point has nothing new to read unless a /pause is queued
        await self._run_turn(
            turn_id, restarted=False, first_mail=None if pause_queued else [], prefetch=prefetch
        )

    async def _prepare(self, mail: list[Envelope]) -> Prepared | None:
        """The files of the mail that starts a turn, fetched (``runtime.attachments``); ``None``
        when a /stop cancelled that."""
        try:
            return await self.hub.deps.files.prepare(mail, Address.of(await self._session()))
        except PreparationStopped:
            return None

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

    async def _session(self) -> ChatSession:
        """The session row, read once; the runtime hands in changes (language) via the hub."""
        if self.session is None:
            self.session = await self.hub.deps.sessions.get(self.session_id)
        assert self.session is not None
        return self.session

    async def _paused_turn(self) -> Turn | None:
        paused = await self.hub.paused_turn(self.session_id)
        if self.state is WorkerState.NEW:
            self._enter(IDLE if paused is None else PAUSED)
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
        """Steps run and finish: the turn's task, then its end."""
        s = self.hub.deps
        session = await self._session()
        if restarted or resumed:
            await s.sessions.set_turn_status(turn_id, TurnStatus.RUNNING)
        address = Address.of(session)
        runner = TurnRunner.root(
            s,
            session,
            turn_id,
            address,
            resumed=restarted or resumed,
            first_mail=first_mail,
            prefetch=prefetch,
            waiting=self._awaiting_approval,
        )
        if restarted and await runner.stored_answer() is None:  # else nothing is left to continue
            # the notice points at the prompt the resumed turn waits on
            shown = [r.message_id for r in await s.approvals.pending(self.session_id) if r.message_id]
            await s.notice(address, "restarted-continuing", {}, refers_to_message=next(iter(shown), None))
        live = LiveTurn(runner, asyncio.create_task(runner.run(), name=f"turn-{turn_id}"))
        if isinstance(self.status, Stopping):  # stopped while it was opened: it starts cancelled
            runner.token.cancel()
            self._enter(Stopping(live))
        else:
            self._enter(Running(live))
        s.bus.emit(TurnStarted(to=address, turn_id=turn_id, resumed=restarted))
        outcome = await self._await_turn(live)
        # done and awaited: an idle worker holds no turn; a stop the turn met ended it, cancelled
        rest = PAUSED if outcome.kind == OutcomeKind.PAUSED else IDLE
        self._enter(replace(rest, notes=Notes(stopped=isinstance(outcome, Cancelled))))
        await self._finish(runner, outcome)

    async def _await_turn(self, turn: LiveTurn) -> TurnOutcome:
        """The turn's outcome; only the worker's own cancellation (shutdown) propagates."""
        try:
            return await turn.task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                turn.task.cancel()
                raise
            if turn.runner.token.cancelled:  # stopped twice: the clean-up still landed
                return Cancelled()
            return Failed("the turn was cancelled unexpectedly")
        except Exception as exc:  # a bug in the loop ends the turn, not the worker
            log.exception("turn %s crashed", turn.runner.turn_id)
            return Failed(f"{type(exc).__name__}: {exc}")

    async def _finish(self, runner: TurnRunner, outcome: TurnOutcome) -> None:
        await steps.finish(runner, outcome)
        for listener in list(self.hub.finish_listeners):
            listener(self.session_id, runner.turn_id, outcome)

    async def _consume(self, mail: list[Envelope]) -> None:
        await self.hub.deps.mailbox.consume(self.session_id, max(e.seq for e in mail))

    async def _consume_stop(self, unread: list[Envelope], stops: list[Envelope]) -> None:
        """Drop queued mail up to the last stop, settle a paused/interrupted turn, report."""
        s = self.hub.deps
        upto = [e for e in unread if e.seq <= stops[-1].seq]
        dropped = sum(1 for e in upto if mail_text(e) is not None)
        session = await self._session()
        address = Address.of(session)
        settled = await self._settle_unfinished_turn(address) or await self._ended_by(stops[0])
        await self._consume(upto)
        s.approvals.bypasses.clear(self.session_id)
        stopped_work = any(isinstance(e.body, ControlBody) and e.body.stops_work for e in stops)
        stopped = self._take_stop_mark() or settled or stopped_work
        quiet = all(isinstance(e.body, ControlBody) and e.body.quiet for e in stops)
        if not quiet:
            await self._report_stop(address, stopped=stopped, dropped=dropped)

    async def _ended_by(self, stop: Envelope) -> bool:
        """The latest turn was cancelled after this stop was sent (e.g. by a process that
        died before it consumed the stop): the stop did stop something."""
        latest = await self.hub.deps.sessions.latest_turn(self.session_id)
        if latest is None or latest.status != TurnStatus.CANCELLED or latest.ended_at is None:
            return False
        return latest.ended_at >= stop.sent_at

    async def _report_stop(self, address: Address, *, stopped: bool, dropped: int) -> None:
        notice = self.hub.deps.notice
        if dropped:
            await notice(address, "stopped-dropped", {"count": dropped})
        elif stopped:
            await notice(address, "stopped", {})
        else:
            await notice(address, "nothing-to-stop", {})

    async def _settle_unfinished_turn(self, address: Address) -> bool:
        """A paused turn, or one a crash left running, ends as cancelled on /stop."""
        s = self.hub.deps
        latest = await s.sessions.latest_turn(self.session_id)
        if latest is None or latest.status not in (TurnStatus.PAUSED, TurnStatus.RUNNING) or self.busy:
            return False
        self._take_resume()
        await settle_cancelled(s, address, latest.id or 0)
        self._enter(IDLE)
        return True


class SessionHub:
    def __init__(self, deps: TurnDeps, options: HubOptions | None = None) -> None:
        self.deps = deps
        self.options = options or HubOptions()
        self.workers: dict[int, SessionWorker] = {}
        self.finish_listeners: list[FinishListener] = []
        self.evict_listeners: list[EvictListener] = []
        """Told the session id after its worker was evicted (the session is idle)."""
        deps.mailbox.subscribe(self._on_mail)
        self.desk = ControlDesk(deps.mailbox)
        """Acts on control mail once stored; the composition adds the handlers beyond the turn's
        (``runtime.core.sessions.control_handlers``)."""
        self.desk.handle(
            ControlAction.STOP, lambda envelope, _replayed: self.cancel_turn(envelope.session_id)
        )
        self.desk.handle(ControlAction.PAUSE, lambda _envelope, _replayed: True)  # the turn reads it
        self.desk.handle(ControlAction.RESUME, lambda _envelope, _replayed: True)  # the worker reads it

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
        self.dismiss(worker)
        for listener in list(self.evict_listeners):
            try:
                listener(session_id)
            except Exception:  # the worker is gone either way
                log.exception("evict listener failed for session %s", session_id)
        return True

    def dismiss(self, worker: SessionWorker) -> None:
        """Drop a worker and its session's in-memory views, idle or not: :meth:`evict`'s removal,
        and the whole of it for a worker whose session this process does not run (another
        instance owns it; its mail stays unread for the owner)."""
        if self.workers.get(worker.session_id) is worker:
            del self.workers[worker.session_id]
        self.deps.mailbox.forget(worker.session_id)
        self.deps.history.forget(worker.session_id)
        self.deps.notes.forget(worker.session_id)

    def _on_mail(self, envelope: Envelope) -> None:
        self.wake(envelope.session_id)

    def wake(self, session_id: int) -> None:
        self._worker(session_id).wake.set()

    def resume(self, session_id: int, turn_id: int) -> None:
        """Continue a turn a previous process left running (crash recovery)."""
        worker = self._worker(session_id)
        worker.note_resume(turn_id)
        worker.wake.set()

    def session_changed(self, session: ChatSession, *, created: bool = False) -> None:
        """A session row changed (e.g. the user's language): the worker's copy follows.

        A session ``created`` just now has no mail, no history and no turn: its
        worker and the in-memory views start from that instead of reading it back.
        """
        assert session.id is not None
        if created:
            self.deps.mailbox.known_empty(session.id)
            self.deps.history.known_empty(session.id)
            self.deps.notes.known_empty(session.id)
            self._worker(session.id).learned_no_turns()
        worker = self.workers.get(session.id)
        if worker is not None:
            worker.session = session

    async def paused_turn(self, session_id: int) -> Turn | None:
        """The session's latest turn if it is paused: the one place that asks.

        The session's worker answers without a query when it knows; else the database does.
        """
        worker = self.workers.get(session_id)
        if worker is not None and worker.knows_not_paused:
            return None
        latest = await self.deps.sessions.latest_turn(session_id)
        return latest if latest is not None and latest.status == TurnStatus.PAUSED else None

    def state(self, session_id: int) -> WorkerState | None:
        """What the session's worker is doing; ``None`` when it has none (nothing in memory)."""
        worker = self.workers.get(session_id)
        return worker.state if worker is not None else None

    def awaited(self, session_id: int) -> str | None:
        """The approval request the session's turn waits on right now, if any: the one source
        (the worker's :class:`~runtime.sessions.state.WaitingApproval`)."""
        worker = self.workers.get(session_id)
        return worker.awaited if worker is not None else None

    def is_busy(self, session_id: int) -> bool:
        worker = self.workers.get(session_id)
        return worker is not None and worker.busy

    async def pause_pending(self, session_id: int) -> bool:
        """A /pause is queued for the running turn (it has not reached its next step yet)."""
        if not self.is_busy(session_id):
            return False
        unread = await self.deps.mailbox.unread(session_id)
        return any(control_action(e) == ControlAction.PAUSE for e in unread)

    def cancel_turn(self, session_id: int) -> bool:
        """The stop handler's act (``desk``): only control mail calls it."""
        worker = self.workers.get(session_id)
        return worker.cancel_turn() if worker is not None else False

    async def stop(self, envelope: Envelope) -> bool:
        """Store the stop mail ``envelope``; whether it stopped a turn."""
        return await self.desk.send(envelope, bool)

    async def shutdown(self) -> None:
        """Stop consumers without marking turns cancelled: a restart resumes them."""
        tasks: list[asyncio.Task[Any]] = []
        for worker in self.workers.values():
            worker.task.cancel()
            tasks.append(worker.task)
            if worker.turn is not None and not worker.turn.task.done():
                worker.turn.task.cancel()
                tasks.append(worker.turn.task)
        await asyncio.gather(*tasks, return_exceptions=True)
        self.workers.clear()
        await self.desk.close()


__all__ = [
    "CHAT_IDLE_TIMEOUT",
    "EvictListener",
    "FinishListener",
    "HubOptions",
    "LiveTurn",
    "SessionHub",
    "SessionWorker",
]
