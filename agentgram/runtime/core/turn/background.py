"""Tracked tool calls: attach, detach, and results as mail (docs/architecture/tools.md).

Every call of a tool with an OS entity (``Tool.tracked``: ``execute_cmd``)
runs as a task of :class:`BackgroundCalls`, with a ``background_calls`` row
(:mod:`runtime.storage.background_rows`). The turn stays *attached* to it
for ``tools.attach_seconds`` (per tool: ``tools.attach_overrides``): a call
done by then is an ordinary result. One still running is *detached*: its
``tool_calls`` row gets the one placeholder result the model reads
(``status: running``, ``detached: still running after 30s``) and the turn
goes on. When it ends, its final status and a ``tool_call_finished``
envelope commit in **one** transaction (``SqlMailbox.accept_with``), so a
result can be neither lost nor seen by ``get_tool_call_status`` before it is
mail. A running turn folds that mail in at its next round boundary; an idle
session is woken by it like by a message, and the agent tells the user.

**Interrupting mail** (``send_message`` with ``interrupt``, :mod:`runtime.core.peers`) detaches
an attached call at once: the turn goes on to read the mail at its next step instead of waiting
out ``attach_seconds``. Mail that came before the call attached (while the model was answering,
or the call waited for its approval) is still unread when it attaches, and detaches it as it does.

Who may detach: the root agent of an interactive or spawned session. A sub-agent's call
and a tic or cron run's stay attached until they end (nobody would read a
result mailed to a session no one talks to): they are tracked all the same,
so ``/jobs`` lists them and a button stops them.

Stopping: ``cancel`` (the model's ``cancel_tool_call``, the chat's ⏹ button)
cancels the call's task, which kills its process group; its result mail says
``cancelled``. ``/stop`` cancels every call of the session; that mail does not
wake the session (the user stopped it) and is read with the next message.
A turn stopped while attached takes its call with it.

Restarts: calls die with the process. On start, :meth:`BackgroundCalls.orphan_all`
marks every run still ``running`` ``orphaned``; a detached one also gets its
``tool_call_finished`` mail saying so, so the agent is told (never a silent
gap). An attached one is re-run by the resumed turn like any interrupted call.
A detached call whose work outlives the process — a sub-agent's task in a session of its
own (:mod:`runtime.core.task_sessions`) — is *adopted* instead (``adopt``): this process waits
for that work's end and mails its result as if it had started it.

``wait`` and the status tools (:mod:`runtime.tools.calls`) read this registry
through :class:`~runtime.tools.base.CallControl`; every accept on the mailbox
and every finished call "pulses" the session, which is what a waiting
``wait`` wakes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from agentgram.runtime.capabilities.tools.base import CallControl
from agentgram.runtime.core.mailbox import Envelope, MailKind, Priority, Sender, SenderKind, SqlMailbox
from agentgram.runtime.core.mailbox.envelope import ToolCallFinishedBody
from agentgram.runtime.core.turn import texts
from agentgram.runtime.infra.config import ToolsSettings
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import Address, CallDetached, CallFinished, EventBus
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.background_rows import BackgroundCallRow, BackgroundStore, RunStatus
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.models import ToolCallRow, ToolCallStatus, utcnow
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("background")

Performed = tuple[ToolCallStatus, str]
Work = Callable[["LiveCall"], Awaitable[Performed]]
Adopt = Callable[[BackgroundCallRow], Awaitable[tuple[Address, Work] | None]]
"""For a detached run a restart left ``running``: where it reports and the work that waits for its
end, when its work goes on without the process (else ``None``: it is orphaned)."""


async def _adopts_nothing(row: BackgroundCallRow) -> tuple[Address, Work] | None:
    return None


PROGRESS_CHARS = 2000
"""How much of a running call's newest output ``get_tool_call_status`` shows."""

_INTERRUPTING = frozenset({MailKind.AGENT_MESSAGE, MailKind.USER_MESSAGE})
"""Mail whose interrupt priority detaches the call a turn is attached to (a stop cancels it instead)."""
WAKING_MAIL = frozenset({MailKind.USER_MESSAGE, MailKind.AGENT_MESSAGE, MailKind.SCHEDULED_TURN})
"""Mail that ends a ``wait`` on calls: somebody wrote (a tool's result wakes only a wait for it)."""

_RUN_STATUS = {
    ToolCallStatus.DONE: RunStatus.COMPLETED,
    ToolCallStatus.FAILED: RunStatus.FAILED,
    ToolCallStatus.REJECTED: RunStatus.FAILED,
    ToolCallStatus.CANCELLED: RunStatus.CANCELLED,
}
_CALL_STATUS = {  # an untracked call, as get_tool_call_status reports it
    ToolCallStatus.PENDING: "pending",
    ToolCallStatus.RUNNING: "running",
    ToolCallStatus.DONE: "completed",
    ToolCallStatus.FAILED: "failed",
    ToolCallStatus.REJECTED: "failed",
    ToolCallStatus.CANCELLED: "cancelled",
    ToolCallStatus.DETACHED: "running",
}


@dataclass(slots=True, eq=False)
class LiveCall:
    """A tracked call this process runs."""

    run_id: int
    session_id: int
    call_id: str
    name: str
    summary: str
    runs_command: bool
    address: Address
    started_at: datetime = field(default_factory=utcnow)
    started: float = field(default_factory=time.monotonic)
    task: asyncio.Task[Performed] | None = None
    detached: bool = False
    detach_written: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_reason: str | None = None
    quiet: bool = False  # stopped by /stop: its mail does not wake the session
    output: Callable[[], str] | None = None  # the call's output so far (execute_cmd registers it)
    worker_session: int | None = None  # the session doing the work (execute_task's child)

    def watch(self, output: Callable[[], str]) -> None:
        """:class:`~runtime.tools.base.Progress`: where this call's output so far can be read."""
        self.output = output

    def names_session(self, session_id: int) -> None:
        self.worker_session = session_id

    def progress(self) -> str:
        return self.output()[-PROGRESS_CHARS:] if self.output is not None else ""

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass(slots=True, frozen=True)
class RunningCall:
    """A running tracked call, as ``/jobs`` and ``list_running_tool_calls`` show it."""

    run_id: int
    session_id: int
    call_id: str
    name: str
    summary: str
    detached: bool
    started_at: datetime
    elapsed: float


@dataclass(slots=True, frozen=True)
class TrackedCall:
    """A call about to run as a tracked call: where it reports, what it is, whether it may detach."""

    address: Address
    call: ToolCallRow
    summary: str
    runs_command: bool
    detachable: bool


class BackgroundCalls:
    """The process's tracked calls; also the model's :class:`~runtime.tools.base.CallControl`."""

    def __init__(
        self,
        store: BackgroundStore,
        history: HistoryStore,
        mailbox: SqlMailbox,
        bus: EventBus,
        settings: ToolsSettings,
        *,
        adopt: Adopt = _adopts_nothing,
    ) -> None:
        self._adopt = adopt
        self._store = store
        self._history = history
        self._mailbox = mailbox
        self._bus = bus
        self.settings = settings
        self._live: dict[int, LiveCall] = {}
        self._tasks = TaskSet("tracked tool calls")
        self._pulses: dict[int, asyncio.Event] = {}
        self._interrupts: dict[int, asyncio.Event] = {}
        """Set by interrupting mail for a session whose turn is attached to a call."""
        self._closing = False
        mailbox.subscribe(self._heard)

    @property
    def max_wait(self) -> float:
        return self.settings.max_wait_seconds

    @property
    def control(self) -> CallControl:
        """What the model's call tools read (``ToolContext.calls``): these calls."""
        return self

    # --- running ------------------------------------------------------------------------------------

    async def run(self, tracked: TrackedCall, work: Work) -> Performed:
        """Run ``work`` as a tracked call; its result, or the placeholder once it detached."""
        address, call, summary = tracked.address, tracked.call, tracked.summary
        runs_command, detachable = tracked.runs_command, tracked.detachable
        assert call.id is not None
        run_id = await durable(
            self._store.started(
                tool_call_id=call.id,
                session_id=address.session_id,
                call_id=call.call_id,
                name=call.name,
                summary=summary,
            )
        )
        live = LiveCall(run_id, address.session_id, call.call_id, call.name, summary, runs_command, address)
        live.task = self._tasks.spawn(self._execute(live, work), name=f"call-{run_id}", report=False)
        self._live[run_id] = live
        attach = self.settings.attach_for(call.name) if detachable else None
        interrupt = self._interrupts[address.session_id] = asyncio.Event()
        interrupted = asyncio.ensure_future(interrupt.wait()) if detachable else None
        try:
            if detachable and await self._interrupting_mail_waits(address.session_id):
                interrupt.set()  # it came before the call attached (while the model spoke, or it awaited approval)
            await asyncio.wait(
                {live.task} | ({interrupted} if interrupted else set()),
                timeout=attach,
                return_when=asyncio.FIRST_COMPLETED,
            )
        except asyncio.CancelledError:  # the turn stopped (or the process shuts down): the call with it
            await self._abandon(live)
            raise
        finally:
            if interrupted is not None:
                interrupted.cancel()
            if self._interrupts.get(address.session_id) is interrupt:
                del self._interrupts[address.session_id]
        if live.task.done():  # ended while attached: an ordinary result (a ⏹ on it: cancelled)
            self._live.pop(run_id, None)
            performed = (
                (ToolCallStatus.CANCELLED, texts.call_cancelled(live.cancel_reason))
                if live.task.cancelled()
                else live.task.result()
            )
            await durable(self._store.finish(run_id, _RUN_STATUS[performed[0]], performed[1]))
            return performed
        live.detached = True  # decided before any await: its end now goes to the mail
        placeholder = texts.detached_placeholder(call.call_id, attach or 0, session=live.worker_session)
        await durable(self._store_detached(live, call.id, placeholder))
        self._bus.emit(
            CallDetached(
                to=address,
                run_id=run_id,
                name=call.name,
                summary=summary,
                runs_command=runs_command,
                started_at=live.started_at,
            )
        )
        log.info(
            "call %s (%s) of session %s detached after %ss",
            call.call_id,
            call.name,
            address.session_id,
            attach,
        )
        return ToolCallStatus.DETACHED, placeholder

    async def _store_detached(self, live: LiveCall, tool_call_id: int, placeholder: str) -> None:
        def write(tx: Any) -> None:
            self._store.detach_in(tx, live.run_id)
            self._history.mark_call(tx, tool_call_id, ToolCallStatus.DETACHED, placeholder)

        try:
            await self._store.write(write)
        finally:
            live.detach_written.set()

    async def _abandon(self, live: LiveCall) -> None:
        """The attached turn was cancelled: stop the call and wait until its processes are gone."""
        assert live.task is not None
        live.task.cancel()
        await asyncio.gather(asyncio.shield(live.task), return_exceptions=True)
        self._live.pop(live.run_id, None)
        if not self._closing:  # at shutdown it stays running: the next start orphans it
            await durable(self._store.finish(live.run_id, RunStatus.CANCELLED, texts.CANCELLED_BY_USER))

    async def _execute(self, live: LiveCall, work: Work) -> Performed:
        try:
            performed = await work(live)
        except asyncio.CancelledError:
            if not live.detached or self._closing:
                raise
            performed = ToolCallStatus.CANCELLED, texts.call_cancelled(live.cancel_reason)
        except Exception as exc:  # work reports a tool's failure itself; this is a bug
            log.exception("tracked call %s crashed", live.call_id)
            performed = ToolCallStatus.FAILED, f"{type(exc).__name__}: {exc}"
        if live.detached:
            await live.detach_written.wait()
            await self._mail_result(live, _RUN_STATUS[performed[0]], performed[1])
        return performed

    async def _mail_result(self, live: LiveCall, status: RunStatus, result: str) -> None:
        """The final status and its ``tool_call_finished`` mail, in one transaction."""
        envelope = finished_envelope(
            live.run_id, live.session_id, live.call_id, live.name, status, result, wakes=not live.quiet
        )
        await durable(
            self._mailbox.accept_with(
                envelope, lambda tx: self._store.finish_in(tx, live.run_id, status, result)
            )
        )
        self._live.pop(live.run_id, None)
        self._pulse(live.session_id)
        self._bus.emit(
            CallFinished(
                to=live.address,
                run_id=live.run_id,
                name=live.name,
                summary=live.summary,
                runs_command=live.runs_command,
                status=status,
                started_at=live.started_at,
                finished_at=utcnow(),
            )
        )
        log.info("call %s (%s) of session %s ended %s", live.call_id, live.name, live.session_id, status)

    # --- stopping -------------------------------------------------------------------------------------

    def cancel_run(
        self, run_id: int, reason: str | None = None, *, quiet: bool = False, session_id: int | None = None
    ) -> bool:
        """Cancel one running call (its processes are killed); ``False`` if it is not running (or not
        ``session_id``'s, when given)."""
        live = self._live.get(run_id)
        if live is None or live.task is None or live.task.done():
            return False
        if session_id is not None and live.session_id != session_id:
            return False
        live.cancel_reason = live.cancel_reason or reason
        live.quiet = live.quiet or quiet
        live.task.cancel()
        return True

    def cancel_session(self, session_id: int, reason: str, *, quiet: bool = True) -> int:
        """``/stop``: every running call of the session; how many."""
        runs = [live.run_id for live in self._live.values() if live.session_id == session_id]
        return sum(self.cancel_run(run_id, reason, quiet=quiet) for run_id in runs)

    async def settled(self, session_id: int) -> None:
        """Wait until no call of the session runs any more (after a cancel)."""
        tasks = [live.task for live in self._live.values() if live.session_id == session_id and live.task]
        if tasks:
            await asyncio.gather(*(asyncio.shield(t) for t in tasks), return_exceptions=True)

    async def orphan_all(self, chat_id: int | None = None) -> int:
        """On start: what the previous process left running died with it (see the module docstring).
        In a cluster, when this instance claims a chat: what its previous owner left (``chat_id``)."""
        orphans = await self._store.running(chat_id=chat_id)
        adopted = 0
        for row in orphans:
            assert row.id is not None
            if row.detached and (found := await self._adopt(row)) is not None:
                self._adopted(row, *found)
                adopted += 1
                continue
            orphaned = partial(self._store.orphan_in, run_id=row.id, result=texts.ORPHANED)
            if row.detached:
                envelope = finished_envelope(
                    row.id,
                    row.session_id,
                    row.call_id,
                    row.name,
                    RunStatus.ORPHANED,
                    texts.ORPHANED,
                    wakes=True,
                )
                await self._mailbox.accept_with(envelope, orphaned)
            else:
                await self._store.write(orphaned)
        if len(orphans) > adopted:
            log.warning(
                "%d tracked call(s) were cut short by the previous process: orphaned",
                len(orphans) - adopted,
            )
        return len(orphans) - adopted

    def _adopted(self, row: BackgroundCallRow, address: Address, work: Work) -> None:
        """A detached run whose work goes on: waited for here, its end mailed as usual."""
        assert row.id is not None
        live = LiveCall(row.id, row.session_id, row.call_id, row.name, row.summary, False, address)
        live.detached = True
        live.detach_written.set()
        live.task = self._tasks.spawn(self._execute(live, work), name=f"call-{row.id}", report=False)
        self._live[row.id] = live
        log.info("call %s (%s) of session %s adopted after a restart", row.call_id, row.name, row.session_id)

    async def close(self) -> None:
        """Shutdown: the calls die with the process (their rows stay ``running`` until the next start)."""
        self._closing = True
        await self._tasks.close()

    def begin_close(self) -> None:
        """From here on, a cancelled call is the shutdown's, not the user's."""
        self._closing = True

    # --- what runs --------------------------------------------------------------------------------

    def running(self, session_id: int | None = None) -> list[RunningCall]:
        return [
            RunningCall(
                run_id=live.run_id,
                session_id=live.session_id,
                call_id=live.call_id,
                name=live.name,
                summary=live.summary,
                detached=live.detached,
                started_at=live.started_at,
                elapsed=live.elapsed(),
            )
            for live in self._live.values()
            if session_id is None or live.session_id == session_id
        ]

    def busy(self, session_id: int) -> bool:
        """Whether a call of the session runs."""
        return any(live.session_id == session_id for live in self._live.values())

    def live_run(self, session_id: int, call_id: str) -> LiveCall | None:
        return next(
            (c for c in self._live.values() if c.session_id == session_id and c.call_id == call_id), None
        )

    # --- CallControl: what the model's tools read ---------------------------------------------------

    async def status(self, session_id: int, call_id: str, *, wait: bool, timeout: float) -> dict[str, Any]:
        if wait:
            await self._await_calls(session_id, [call_id], min(timeout, self.max_wait), any_mail=False)
        return await self._status(session_id, call_id, mark_read=True)

    async def _status(self, session_id: int, call_id: str, *, mark_read: bool) -> dict[str, Any]:
        row = await self._store.latest(session_id, call_id)
        if row is None:
            return await self._untracked_status(session_id, call_id)
        report: dict[str, Any] = {"tool_call_id": call_id, "tool": row.name, "status": str(row.status)}
        live = self._live.get(row.id or 0)
        if row.status is RunStatus.RUNNING:
            report["running_for_seconds"] = round(live.elapsed()) if live is not None else None
            report["detached"] = row.detached
            if live is not None and live.worker_session is not None:
                report["session_id"] = live.worker_session
            if live is not None and (progress := live.progress()):
                report["recent_output"] = progress
            return report
        report["result"] = row.result or ""
        if mark_read and row.detached and not row.read_by_tool and row.id is not None:
            await durable(self._store.mark_read(row.id))  # its mail now reads "already read"
        return report

    async def _untracked_status(self, session_id: int, call_id: str) -> dict[str, Any]:
        call = await self._history.call_by_model_id(session_id, call_id)
        if call is None:
            raise ToolError(f"no tool call {call_id!r} in this session")
        status = ToolCallStatus(call.status)
        report: dict[str, Any] = {"tool_call_id": call_id, "tool": call.name, "status": _CALL_STATUS[status]}
        if status.terminal and status is not ToolCallStatus.DETACHED:
            report["result"] = call.result or ""
        return report

    async def cancel(self, session_id: int, call_id: str, reason: str | None) -> dict[str, Any]:
        row = await self._store.latest(session_id, call_id)
        if row is None:
            before = await self._untracked_status(session_id, call_id)
            return {"tool_call_id": call_id, "cancelled": False, "previous_status": before["status"]}
        live = self._live.get(row.id or 0)
        cancelled = live is not None and self.cancel_run(live.run_id, reason or "cancelled by the agent")
        if cancelled and live is not None and live.task is not None:
            await asyncio.gather(asyncio.shield(live.task), return_exceptions=True)
            if row.detached and row.id is not None:
                await durable(self._store.mark_read(row.id))  # the model knows: its mail is a notice
        return {"tool_call_id": call_id, "cancelled": cancelled, "previous_status": str(row.status)}

    async def running_report(self, session_id: int) -> list[dict[str, Any]]:
        return [
            {
                "tool_call_id": c.call_id,
                "tool": c.name,
                "summary": c.summary,
                "detached": c.detached,
                "running_for_seconds": round(c.elapsed),
            }
            for c in self.running(session_id)
        ]

    async def wait(self, session_id: int, target: list[str] | str, timeout: float) -> dict[str, Any]:
        """``wait``: until a call ends, mail arrives, or ``timeout`` (capped by ``max_wait``)."""
        timeout = min(timeout, self.max_wait)
        if target == "mail":
            return await self._await_mail(session_id, timeout)
        if target == "any-call":
            ids = [c.call_id for c in self.running(session_id)]
            if not ids:
                raise ToolError("nothing to wait for: no tool call of this session is running")
        else:
            ids = list(target)
            for call_id in ids:
                await self._status(session_id, call_id, mark_read=False)  # unknown ids are an error
        return await self._await_calls(session_id, ids, timeout, any_mail=True)

    async def _await_calls(
        self, session_id: int, ids: list[str], timeout: float, *, any_mail: bool
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            pulse = self._pulses.setdefault(session_id, asyncio.Event())
            finished = [call_id for call_id in ids if self.live_run(session_id, call_id) is None]
            if finished:
                calls = [await self._status(session_id, call_id, mark_read=True) for call_id in finished]
                still = [call_id for call_id in ids if call_id not in finished]
                return {"woken_by": "call", "calls": calls, "still_running": still}
            if any_mail and (mail := await self._new_mail(session_id, WAKING_MAIL)):
                return {"woken_by": "mail", "mail": mail, "still_running": ids}
            if not await _pulsed(pulse, deadline):
                return {"woken_by": "timeout", "still_running": ids}

    async def _await_mail(self, session_id: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            pulse = self._pulses.setdefault(session_id, asyncio.Event())
            if mail := await self._new_mail(session_id, None):
                return {"woken_by": "mail", "mail": mail}
            if not await _pulsed(pulse, deadline):
                return {"woken_by": "timeout"}

    async def _new_mail(self, session_id: int, kinds: frozenset[MailKind] | None) -> list[dict[str, Any]]:
        """Unread mail worth waking for, in short: it is folded in at the next round in full."""
        unread = await self._mailbox.unread(session_id)
        shown = [e for e in unread if e.kind is not MailKind.CONTROL and (kinds is None or e.kind in kinds)]
        return [_mail_brief(e) for e in shown]

    async def _interrupting_mail_waits(self, session_id: int) -> bool:
        """Unread interrupting mail for the session: mail that :meth:`_heard` found no call to detach."""
        unread = await self._mailbox.unread(session_id)
        return any(e.priority is Priority.INTERRUPT and e.kind in _INTERRUPTING for e in unread)

    def _heard(self, envelope: Envelope) -> None:
        self._pulse(envelope.session_id)
        if envelope.priority is Priority.INTERRUPT and envelope.kind in _INTERRUPTING:
            interrupt = self._interrupts.get(envelope.session_id)
            if interrupt is not None:
                interrupt.set()

    def _pulse(self, session_id: int) -> None:
        pulse = self._pulses.pop(session_id, None)
        if pulse is not None:
            pulse.set()


async def _pulsed(pulse: asyncio.Event, deadline: float) -> bool:
    """Whether ``pulse`` fired before ``deadline``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    try:
        await asyncio.wait_for(pulse.wait(), remaining)
    except TimeoutError:
        return False
    return True


def _mail_brief(envelope: Envelope) -> dict[str, Any]:
    body = envelope.body
    brief: dict[str, Any] = {"mail_id": envelope.id, "kind": str(envelope.kind)}
    if isinstance(body, ToolCallFinishedBody):
        brief.update(tool_call_id=body.call_id, status=body.status)
    return brief


def finished_envelope(
    run_id: int, session_id: int, call_id: str, name: str, status: RunStatus, result: str, *, wakes: bool
) -> Envelope:
    return Envelope(
        id=f"call-finished-{run_id}",
        session_id=session_id,
        sender=Sender(kind=SenderKind.TOOL_CALL, ref=call_id),
        body=ToolCallFinishedBody(call_id=call_id, status=str(status), result=result, name=name, wakes=wakes),
    )
