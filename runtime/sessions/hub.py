"""One consumer per session: the session hub and its workers.

Every session with mail gets a :class:`SessionWorker`, a single task that
consumes the session's mailbox in order. Mail to an idle session starts a
turn; mail that arrives during a turn is folded in by the turn itself at its
next round boundary (R1). ``stop`` does not queue behind anything: it cancels
the running turn directly and leaves a durable stop mail that the worker
consumes afterwards, dropping (and counting) what was still queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.events import Address, Notice, OutcomeKind, TurnFinished, TurnStarted
from runtime.log import get_logger
from runtime.mailbox import ControlAction, ControlBody, Envelope, MailKind
from runtime.storage.models import ChatSession, ToolCallStatus, Turn, TurnStatus
from runtime.turn import texts
from runtime.turn.inject import mail_text
from runtime.turn.loop import TurnRunner, TurnServices
from runtime.turn.outcome import Cancelled, Exhausted, Failed, Final, Paused, TurnOutcome

log = get_logger("hub")

FinishListener = Callable[[int, int, TurnOutcome], None]

_STATUS = {
    OutcomeKind.FINAL: TurnStatus.FINAL,
    OutcomeKind.CANCELLED: TurnStatus.CANCELLED,
    OutcomeKind.EXHAUSTED: TurnStatus.EXHAUSTED,
    OutcomeKind.FAILED: TurnStatus.FAILED,
    OutcomeKind.PAUSED: TurnStatus.PAUSED,
}


def control_action(envelope: Envelope) -> ControlAction | None:
    if envelope.kind == MailKind.CONTROL and isinstance(envelope.body, ControlBody):
        return envelope.body.action
    return None


def address_of(session: ChatSession) -> Address:
    assert session.id is not None
    return Address(
        session_id=session.id, source=session.source, chat_id=session.chat_id, language=session.language_code
    )


@dataclass(slots=True)
class HubOptions:
    resume_on_message: bool = False


class SessionWorker:
    def __init__(self, hub: SessionHub, session_id: int) -> None:
        self.hub = hub
        self.session_id = session_id
        self.wake = asyncio.Event()
        self.runner: TurnRunner | None = None
        self.turn_task: asyncio.Task[TurnOutcome] | None = None
        self.resume_turn_id: int | None = None
        self.cancelled_something = False
        self.task = asyncio.create_task(self._loop(), name=f"session-{session_id}")

    @property
    def busy(self) -> bool:
        return self.turn_task is not None and not self.turn_task.done()

    def cancel_turn(self) -> bool:
        """Cancel the running turn at once (sticky token + task cancel)."""
        if self.runner is None or not self.busy:
            return False
        assert self.turn_task is not None
        self.runner.token.cancel()
        self.turn_task.cancel()
        self.cancelled_something = True
        return True

    async def _loop(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            try:
                await self._drain()
            except asyncio.CancelledError:
                raise
            except Exception:  # one session's failure must not end its consumer
                log.exception("session %s: consumer failed", self.session_id)

    async def _drain(self) -> None:
        s = self.hub.services
        while True:
            unread = await s.mailbox.unread(self.session_id)
            stop = next((e for e in unread if control_action(e) == ControlAction.STOP), None)
            if stop is not None:
                await self._consume_stop(unread, stop)
                continue
            if self.resume_turn_id is not None:
                turn_id, self.resume_turn_id = self.resume_turn_id, None
                await self._run_turn(turn_id, restarted=True)
                continue
            if not unread:
                return
            if not await self._dispatch(unread[0]):
                return

    async def _dispatch(self, head: Envelope) -> bool:
        """Act on the oldest unread mail; ``False`` means wait for more mail."""
        paused = await self._paused_turn()
        action = control_action(head)
        if action is not None or mail_text(head) is None:
            await self._consume([head])
            if action == ControlAction.RESUME and paused is not None:
                await self._run_turn(paused.id or 0, restarted=False)
            return True
        if paused is not None:
            if not self.hub.options.resume_on_message:
                return False
            await self._run_turn(paused.id or 0, restarted=False)
            return True
        await self._run_turn(await self._open_turn(), restarted=False)
        return True

    async def _open_turn(self) -> int:
        from runtime.storage.history import HistoryStore

        async with self.hub.services.db.write() as tx:
            await HistoryStore.mark_orphans_failed(tx, self.session_id)
            turn = Turn(session_id=self.session_id)
            tx.add(turn)
            await tx.flush()
            assert turn.id is not None
            return turn.id

    async def _paused_turn(self) -> Turn | None:
        latest = await self.hub.services.sessions.latest_turn(self.session_id)
        return latest if latest is not None and latest.status == TurnStatus.PAUSED else None

    async def _run_turn(self, turn_id: int, *, restarted: bool) -> None:
        s = self.hub.services
        session = await s.sessions.get(self.session_id)
        assert session is not None
        await s.sessions.set_turn_status(turn_id, TurnStatus.RUNNING)
        address = address_of(session)
        if restarted:
            s.notice(address, "restarted-continuing", {})
        self.runner = TurnRunner(s, session, turn_id, address)
        s.bus.emit(TurnStarted(to=address, turn_id=turn_id, resumed=restarted))
        self.turn_task = asyncio.create_task(self.runner.run(), name=f"turn-{turn_id}")
        try:
            outcome = await self.turn_task
        except asyncio.CancelledError:
            self.turn_task.cancel()
            raise
        except Exception as exc:  # a bug in the loop ends the turn, not the worker
            log.exception("turn %s crashed", turn_id)
            outcome = Failed(f"{type(exc).__name__}: {exc}")
        await self._finish(address, turn_id, outcome)

    async def _finish(self, address: Address, turn_id: int, outcome: TurnOutcome) -> None:
        s = self.hub.services
        error = None
        if isinstance(outcome, Exhausted):
            error = texts.exhausted(outcome.rounds)
        elif isinstance(outcome, Failed):
            error = outcome.error
        await s.sessions.finish_turn(turn_id, _STATUS[outcome.kind], error)
        text = outcome.text if isinstance(outcome, Final) else ""
        s.bus.emit(TurnFinished(to=address, turn_id=turn_id, outcome=outcome.kind, text=text, error=error))
        for listener in list(self.hub.finish_listeners):
            listener(self.session_id, turn_id, outcome)

    async def _consume(self, mail: list[Envelope]) -> None:
        s = self.hub.services
        async with s.db.write() as tx:
            await s.mailbox.advance(tx, self.session_id, max(e.seq for e in mail))

    async def _consume_stop(self, unread: list[Envelope], stop: Envelope) -> None:
        """Drop queued mail up to the stop, settle a paused/interrupted turn, report."""
        s = self.hub.services
        upto = [e for e in unread if e.seq <= stop.seq]
        dropped = sum(1 for e in upto if mail_text(e) is not None)
        settled = await self._settle_unfinished_turn()
        await self._consume(upto)
        s.approvals.bypasses.clear(self.session_id)
        session = await s.sessions.get(self.session_id)
        assert session is not None
        address = address_of(session)
        if self.cancelled_something or settled:
            s.notice(address, "stopped", {})
        elif not dropped:
            s.notice(address, "nothing-to-stop", {})
        if dropped:
            s.notice(address, "stopped-dropped", {"count": dropped})
        self.cancelled_something = False

    async def _settle_unfinished_turn(self) -> bool:
        """A paused turn, or one a crash left running, ends as cancelled on /stop."""
        s = self.hub.services
        latest = await s.sessions.latest_turn(self.session_id)
        if latest is None or latest.status not in (TurnStatus.PAUSED, TurnStatus.RUNNING) or self.busy:
            return False
        self.resume_turn_id = None
        await s.history.close_open_calls(self.session_id, ToolCallStatus.CANCELLED, texts.CANCELLED_BY_USER)
        await s.approvals.cancel_session(self.session_id)
        await s.sessions.finish_turn(latest.id or 0, TurnStatus.CANCELLED)
        return True


class SessionHub:
    def __init__(self, services: TurnServices, options: HubOptions | None = None) -> None:
        self.services = services
        self.options = options or HubOptions()
        self.workers: dict[int, SessionWorker] = {}
        self.finish_listeners: list[FinishListener] = []
        services.mailbox.subscribe(self._on_mail)

    def _worker(self, session_id: int) -> SessionWorker:
        worker = self.workers.get(session_id)
        if worker is None:
            worker = SessionWorker(self, session_id)
            self.workers[session_id] = worker
        return worker

    def _on_mail(self, envelope: Envelope) -> None:
        self.wake(envelope.session_id)

    def wake(self, session_id: int) -> None:
        self._worker(session_id).wake.set()

    def resume(self, session_id: int, turn_id: int) -> None:
        """Continue a turn a previous process left running (crash recovery)."""
        worker = self._worker(session_id)
        worker.resume_turn_id = turn_id
        worker.wake.set()

    def is_busy(self, session_id: int) -> bool:
        worker = self.workers.get(session_id)
        return worker is not None and worker.busy

    def cancel_turn(self, session_id: int) -> bool:
        worker = self.workers.get(session_id)
        return worker.cancel_turn() if worker is not None else False

    def runner(self, session_id: int) -> TurnRunner | None:
        worker = self.workers.get(session_id)
        return worker.runner if worker is not None and worker.busy else None

    async def shutdown(self) -> None:
        """Stop consumers without marking turns cancelled: a restart resumes them."""
        tasks: list[asyncio.Task[Any]] = []
        for worker in self.workers.values():
            if worker.turn_task is not None and not worker.turn_task.done():
                worker.turn_task.cancel()
                tasks.append(worker.turn_task)
            worker.task.cancel()
            tasks.append(worker.task)
        await asyncio.gather(*tasks, return_exceptions=True)
        self.workers.clear()


__all__ = ["Cancelled", "FinishListener", "HubOptions", "Notice", "Paused", "SessionHub", "SessionWorker"]
