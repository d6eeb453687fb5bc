"""Control reaches a session as stored mail; the control desk acts on it.

/stop, /pause, /resume, an approval decision, "trust for a while", a question's answer, /compact,
/model, a job kill and a running call's ⏹ are all envelopes. The door stores each in the session's
mailbox and waits for what it achieved (:meth:`ControlDesk.send`); nothing calls into a session's
worker. The desk listens to the mailbox: whoever stored the mail (the door, the scheduler, a test,
another adapter), once it is accepted the desk runs the handler registered for it and hands the
outcome to whoever waits. So the process that owns a session's mailbox is the one that acts on its
control, which is the seam that lets another process own the session later.

What each handler does, and when the worker sees the mail:

- **stop**: cancels the session's turn (or the one being opened), at once; the composition adds
  its running calls and file fetches. The worker consumes the stop at its next look at the mail,
  before any queued message, which it drops (:mod:`runtime.core.sessions.hub`).
- **pause**, **resume**: nothing at once; the turn meets a pause at its next step, and the worker
  continues a paused turn on a resume.
- **decision**, **answer**: applied once (compare-and-set in the store), which wakes the turn that
  waits on it. A decision may carry the scope to trust for a while, granted before it applies.
- **cancel calls**, **compact**, **model**: act on the session's calls, history and chosen model.

A handler that returns a coroutine runs as a task the desk owns; its result or error goes to the
waiter. Mail whose id was stored before (a redelivered update) is a duplicate: no listener hears
it, so :meth:`ControlDesk.send` applies it again itself, which each handler tolerates (a second
decision is refused by the store, a second stop finds the turn stopping). After a restart,
:meth:`ControlDesk.replay` applies decisions, answers and model choices that were stored but whose
effect the previous process may not have reached.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from agentgram.runtime.core.mailbox import ControlAction, ControlBody, Envelope, Receipt
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.models import MailKind
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("control")

ControlKey = MailKind | ControlAction
"""What picks a handler: the action of a control body, or the kind of any other body."""

Handler = Callable[[Envelope, bool], object]
"""Acts on one control envelope (the flag: replayed at start); its outcome, or a coroutine that
makes it."""

REPLAYED: frozenset[ControlKey] = frozenset(
    {MailKind.APPROVAL_DECISION, MailKind.QUESTION_ANSWER, ControlAction.MODEL, ControlAction.STEER}
)
"""Control whose stored effect a restart applies again when its mail is still unread."""

T = TypeVar("T")


class MailIn(Protocol):
    """What the desk needs of the mailbox: storing mail, and hearing what was stored."""

    async def accept(self, envelope: Envelope) -> Receipt: ...

    def subscribe(self, listener: Callable[[Envelope], None]) -> None: ...


def control_key(envelope: Envelope) -> ControlKey:
    body = envelope.body
    return body.action if isinstance(body, ControlBody) else MailKind(body.kind)


class ControlDesk:
    """The handlers of control mail, run when the mail is stored."""

    def __init__(self, mailbox: MailIn) -> None:
        self._mailbox = mailbox
        self._handlers: dict[ControlKey, Handler] = {}
        self._waiting: dict[str, asyncio.Future[object]] = {}
        self._tasks = TaskSet("control desk")
        mailbox.subscribe(self._on_mail)

    def handle(self, key: ControlKey, handler: Handler) -> None:
        """``handler`` acts on control mail of ``key`` (one per key: a second replaces it)."""
        self._handlers[key] = handler

    async def send(self, envelope: Envelope, expect: type[T]) -> T:
        """Store ``envelope`` and wait until its handler acted: what it achieved (an ``expect``)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[envelope.id] = waiter
        try:
            receipt = await self._mailbox.accept(envelope)
            outcome = await (self._apply(envelope) if receipt.duplicate else waiter)
        finally:
            self._waiting.pop(envelope.id, None)
        if not isinstance(outcome, expect):
            raise TypeError(f"control {control_key(envelope)} gave {outcome!r}, not {expect.__name__}")
        return outcome

    async def replay(self, envelope: Envelope) -> None:
        """Apply stored, unread control again at start (only what :data:`REPLAYED` lists)."""
        if control_key(envelope) in REPLAYED:
            await self._apply(envelope, replayed=True)

    def act(self, envelope: Envelope) -> None:
        """Act on control mail another process stored (a cluster's instance that does not run the
        session), as if this process had stored it."""
        self._on_mail(envelope)

    def _on_mail(self, envelope: Envelope) -> None:
        """The mailbox stored ``envelope``: act on it now if it is control."""
        handler = self._handlers.get(control_key(envelope))
        if handler is None:
            return
        waiter = self._waiting.get(envelope.id)
        try:
            outcome = handler(envelope, False)
        except Exception as exc:  # the mail is stored: a handler's bug must not undo its receipt
            log.exception("control %s of session %s failed", control_key(envelope), envelope.session_id)
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if inspect.isawaitable(outcome):
            task = self._tasks.spawn(_awaited(outcome), name=f"control-{envelope.id}", report=waiter is None)
            if waiter is not None:
                task.add_done_callback(lambda done: _settle(waiter, done))
        elif waiter is not None and not waiter.done():
            waiter.set_result(outcome)

    async def _apply(self, envelope: Envelope, *, replayed: bool = False) -> object:
        handler = self._handlers.get(control_key(envelope))
        if handler is None:
            return None
        outcome = handler(envelope, replayed)
        return await outcome if inspect.isawaitable(outcome) else outcome

    async def close(self) -> None:
        """Handlers still running end (the runtime closes the stores after this)."""
        await self._tasks.close()


async def _awaited(outcome: Awaitable[object]) -> object:
    return await outcome


def _settle(waiter: asyncio.Future[object], done: asyncio.Task[object]) -> None:
    if waiter.done():
        return
    if done.cancelled():
        waiter.cancel()
    elif (exc := done.exception()) is not None:
        waiter.set_exception(exc)
    else:
        waiter.set_result(done.result())


__all__ = ["REPLAYED", "ControlDesk", "ControlKey", "Handler", "MailIn", "control_key"]
