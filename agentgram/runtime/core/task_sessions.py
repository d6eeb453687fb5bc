"""A sub-agent's task run as a session of its own, so that its call may detach (issue 29, req. 3).

``execute_task`` called by the root agent of a session someone talks to (a chat, the terminal, a
spawned session) runs its sub-agent as a **spawned session** that answers the call
(``sessions.parent_call_id``, revision 0016), not as a stack frame inside the parent's turn. The
call is tracked like a long command (:mod:`runtime.core.turn.background`):

* while it is attached (``tools.attach_seconds``, per tool ``tools.attach_overrides``) the parent's
  turn waits for the child's first turn to end, and its final answer is the call's result — what
  the frame gave before, and the chat sees the same "🤖 main → researcher" and "✅ researcher
  finished" lines (:class:`~runtime.infra.events.SubAgentStarted` / ``SubAgentFinished``);
* once it outlives that, it **detaches**: the placeholder and ``get_tool_call_status`` name the
  child's ``session_id``, so the parent may ``send_message`` to the child while it works (the
  child folds that mail in at its next step), and the child's final answer arrives as
  ``tool_call_finished`` mail.

The child is a sub-agent in all but where it runs: its prompt is its agent's without the chat's
format rules, its tools are a sub-agent's (:func:`~runtime.core.turn.subagents.task_level`), its
tool calls go through the approval gate and its prompts reach the chat under its name, and its
answer is not a message to the chat (the adapters show it as the sub-agent's end). It is closed
once its answer is the call's: a task is call-and-return.

**Stopping.** The call's task cancelled (/stop on the parent, ⏹ on the call, ``cancel_tool_call``)
stores a quiet stop for the child and closes it. ``/stop all`` stops the child by itself; its turn
then ends cancelled and the call fails saying so.

**Restarts.** The spawn is once only (:meth:`~runtime.core.peers.Peers.spawn` with the call's id):
a call that a restart cut short while attached is run again by the resumed turn, finds the child
the first run made, and waits for it (the child's own turn resumes as any session's does). A
detached call's run is not orphaned as a command's is: the next start *adopts* it
(:meth:`TaskSessions.adopt`, ``BackgroundCalls.orphan_all``) and waits for the child's answer,
which arrives as mail as if nothing had happened. Either way the answer is read from the store —
the child's newest ended turn and its final row — so a child that finished while nobody waited
still gives its answer.

Parallel batches, sub-agents below the root and tic or cron runs keep the inline frame
(:mod:`runtime.core.turn.children`): their calls may not detach.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sqlmodel import Session, col, select

from agentgram.runtime.capabilities.tools.base import Progress
from agentgram.runtime.core.mailbox import ControlAction, ControlBody, Envelope, Priority, Sender, SenderKind
from agentgram.runtime.core.mailbox.mailbox import SqlMailbox
from agentgram.runtime.core.peers import Peers, Refused
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.background import LiveCall, Performed, Work
from agentgram.runtime.core.turn.deps import TaskCall
from agentgram.runtime.core.turn.subagents import EXECUTE_TASK, preview
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import (
    Address,
    EventBus,
    RuntimeEvent,
    SubAgentFinished,
    SubAgentStarted,
    TurnFinished,
)
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.background_rows import BackgroundCallRow
from agentgram.runtime.infra.storage.db import Database, durable
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    HistoryRow,
    Role,
    RowStatus,
    ToolCallStatus,
    Turn,
    TurnStatus,
)

log = get_logger("turn")

POLL_SECONDS = 5.0
"""How often a waiting call looks at the store besides hearing the child's turn end (a child run
by another instance, a notification lost)."""

_OPEN = (TurnStatus.RUNNING, TurnStatus.PAUSED)
_WHY = {
    TurnStatus.FAILED: "it failed",
    TurnStatus.EXHAUSTED: "it ran out of rounds",
    TurnStatus.CANCELLED: "it was stopped",
}


@dataclass(slots=True, frozen=True)
class Answer:
    ok: bool
    text: str


class TaskSessions:
    """Runs ``execute_task`` as a spawned session and waits for its answer (module docstring)."""

    def __init__(
        self,
        db: Database,
        peers: Peers,
        mailbox: SqlMailbox,
        bus: EventBus,
        *,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self._db = db
        self._peers = peers
        self._mailbox = mailbox
        self._bus = bus
        self._poll = poll_seconds

    async def run(self, call: TaskCall, agent: str, task: str, progress: Progress | None) -> str:
        """The child's final answer, or a :class:`ToolError` saying why there is none."""
        ended = asyncio.Event()
        watched: set[int] = set()

        def heard(event: RuntimeEvent) -> None:
            if isinstance(event, TurnFinished) and event.to.session_id in watched:
                ended.set()

        unsubscribe = self._bus.subscribe(heard)  # before the spawn: its turn may end at once
        try:
            try:
                child = await self._peers.spawn(
                    call.parent.session_id, agent, task, call_id=call.call_id, answers_call=True
                )
            except Refused as exc:
                raise ToolError(str(exc)) from None
            assert child.id is not None
            watched.add(child.id)
            if progress is not None:
                progress.names_session(child.id)
            self._started(call, child.agent_id)
            answer = await self._awaited(call, child.id, ended)
        finally:
            unsubscribe()
        return await self._settled(call, child.id, child.agent_id, answer)

    async def adopt(self, row: BackgroundCallRow) -> tuple[Address, Work] | None:
        """A detached ``execute_task`` run a restart left ``running``: the parent's address and the
        work that waits for its child's answer (``None``: not a task a session of its own works on,
        or that session was closed)."""
        if row.name != EXECUTE_TASK:
            return None

        def read(tx: Session) -> tuple[ChatSession, ChatSession] | None:
            child = tx.exec(
                select(ChatSession).where(col(ChatSession.parent_call_id) == row.tool_call_id)
            ).first()
            parent = tx.get(ChatSession, row.session_id)
            if child is None or child.closed_at is not None or parent is None:
                return None
            return parent, child

        found = await self._db.read_sync(read)
        if found is None:
            return None
        parent, child = found
        assert child.id is not None
        call = TaskCall(Address.of(parent), 0, row.tool_call_id, parent.agent_id)
        child_id, agent = child.id, child.agent_id

        async def work(live: LiveCall) -> Performed:
            live.names_session(child_id)
            try:
                return ToolCallStatus.DONE, await self._answered(call, child_id, agent)
            except ToolError as exc:
                return ToolCallStatus.FAILED, str(exc)

        return call.parent, work

    async def _answered(self, call: TaskCall, child_id: int, agent: str) -> str:
        """Wait for an adopted child's answer (it runs already)."""
        ended = asyncio.Event()

        def heard(event: RuntimeEvent) -> None:
            if isinstance(event, TurnFinished) and event.to.session_id == child_id:
                ended.set()

        unsubscribe = self._bus.subscribe(heard)
        try:
            answer = await self._awaited(call, child_id, ended)
        finally:
            unsubscribe()
        return await self._settled(call, child_id, agent, answer)

    async def _settled(self, call: TaskCall, child_id: int, agent: str, answer: Answer) -> str:
        """The child answered: it is closed, the chat told, and its answer (or why none) given."""
        await durable(self._peers.close(child_id))
        self._finished(call, agent, answer)
        if not answer.ok:
            raise ToolError(texts.subagent_failed(agent, answer.text))
        return answer.text

    async def _awaited(self, call: TaskCall, child_id: int, ended: asyncio.Event) -> Answer:
        try:
            while True:
                ended.clear()
                answer = await self._db.read_sync(lambda tx: _answer(tx, child_id))
                if answer is not None:
                    return answer
                try:
                    await asyncio.wait_for(ended.wait(), self._poll)
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(call, child_id))
            raise

    async def _stop(self, call: TaskCall, child_id: int) -> None:
        """The call was stopped: so is its child (quietly: the parent's stop is what the chat
        hears of), and it reads no more mail."""
        stop = Envelope(
            id=f"task-stop:{call.call_id}",
            session_id=child_id,
            sender=Sender(kind=SenderKind.SESSION, ref=str(call.parent.session_id)),
            priority=Priority.INTERRUPT,
            body=ControlBody(action=ControlAction.STOP, quiet=True, stops_work=True),
        )
        try:
            await durable(self._mailbox.accept(stop))
            await durable(self._peers.close(child_id))
        except Exception:  # the parent's stop goes on whatever happens to the child's
            log.exception("could not stop session %d, which answers call %d", child_id, call.call_id)

    def _started(self, call: TaskCall, agent: str) -> None:
        self._bus.emit(
            SubAgentStarted(
                to=call.parent,
                turn_id=call.turn_id,
                tool_call_id=call.call_id,
                parent=call.parent_agent,
                agent=agent,
                depth=1,
            )
        )

    def _finished(self, call: TaskCall, agent: str, answer: Answer) -> None:
        shown = answer.text if answer.ok else texts.subagent_failed(agent, answer.text)
        self._bus.emit(
            SubAgentFinished(
                to=call.parent,
                turn_id=call.turn_id,
                tool_call_id=call.call_id,
                agent=agent,
                ok=answer.ok,
                preview=preview(shown),
            )
        )


def _answer(tx: Session, child_id: int) -> Answer | None:
    """The child's answer once its turn ended (its newest one, no turn open): ``None`` before."""
    turns = tx.exec(
        select(Turn).where(col(Turn.session_id) == child_id).order_by(col(Turn.id).desc()).limit(1)
    ).first()
    if turns is None or turns.status in _OPEN:
        return None
    if turns.status != TurnStatus.FINAL:
        why = _WHY.get(turns.status, str(turns.status))
        return Answer(False, f"{why}: {turns.error}" if turns.error else why)
    final = tx.exec(
        select(col(HistoryRow.content))
        .where(
            col(HistoryRow.session_id) == child_id,
            col(HistoryRow.turn_id) == turns.id,
            col(HistoryRow.role) == Role.ASSISTANT,
            col(HistoryRow.status) == RowStatus.OK,
        )
        .order_by(col(HistoryRow.id).desc())
        .limit(1)
    ).first()
    return Answer(True, final or "")


__all__ = ["POLL_SECONDS", "TaskSessions"]
