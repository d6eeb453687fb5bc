"""The turn loop: rounds of LLM calls and tool calls until a final answer.

Each round reads like the spec's named steps (session-handler spec,
"run_agent_turn Inner Loop"):

1. stop if the turn's token is cancelled;
2. receive point R1 — fold unread mail into the conversation (mid-turn
   injection), or pause;
3. build the context from stored history;
4. stream one completion (cancellable: /stop closes the HTTP stream);
5. persist the round — the assistant row and its calls as ``pending``;
6. a text-only round is the final answer; otherwise gate and run each call
   in declared order, then go round again.

A /stop cancels the turn's task. :meth:`TurnRunner.run` converts only its own
cancellation (token set) into :class:`Cancelled`, after a durable clean-up:
partial text kept, then :func:`settle_cancelled` — the one way a stopped turn
ends, which the session worker uses too for a paused turn a /stop ends.
Anything else (shutdown) propagates and leaves the turn ``running`` so the
next start resumes it.

The turn's steps around its rounds (prefetch, open, finish) are in
:mod:`runtime.turn.steps`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentgram.runtime.approvals.manager import ApprovalManager
from agentgram.runtime.errors import LLMError, ToolError
from agentgram.runtime.events import (
    Address,
    EventBus,
    Notify,
    RoundEnded,
    StreamReset,
    TextDelta,
    Thinking,
    ToolActivity,
    ToolPhase,
)
from agentgram.runtime.llm.types import (
    LLMClient,
    LLMRound,
    ModelFallback,
    ReasoningDelta,
    StreamEvent,
    StreamRestart,
)
from agentgram.runtime.llm.types import TextDelta as LLMTextDelta
from agentgram.runtime.log import get_logger
from agentgram.runtime.mailbox import Envelope, Mailbox
from agentgram.runtime.storage.db import Database, durable
from agentgram.runtime.storage.history import HistoryStore
from agentgram.runtime.storage.models import (
    ChatSession,
    Role,
    RowStatus,
    ToolCallRow,
    ToolCallStatus,
    TurnStatus,
)
from agentgram.runtime.storage.sessions import SessionStore
from agentgram.runtime.tasks import TaskSet
from agentgram.runtime.tools.base import (
    ProcessLedger,
    ProtectedPaths,
    Tool,
    ToolArgs,
    ToolContext,
    ToolRegistry,
)
from agentgram.runtime.turn import texts
from agentgram.runtime.turn.context import ContextSettings, build_messages
from agentgram.runtime.turn.gate import GateDeps, WaitHook, approval_resolved, run_approval_gate
from agentgram.runtime.turn.inject import Injected, inject_mail
from agentgram.runtime.turn.outcome import (
    Cancelled,
    CancelToken,
    Exhausted,
    Failed,
    Final,
    GateCancelled,
    GateOutcome,
    Paused,
    Rejected,
    RoundStep,
    RunAgain,
    TurnOutcome,
)
from agentgram.runtime.turn.prefetch import Prefetch

log = get_logger("turn")

CallFlow = ToolCallStatus | Rejected | GateCancelled
"""How one tool call ended: a recorded status, a refusal, or a stop while it waited."""


@dataclass(slots=True)
class TurnServices:
    """Everything a turn needs, built once by the runtime."""

    db: Database
    sessions: SessionStore
    history: HistoryStore
    mailbox: Mailbox
    llm: LLMClient
    tools: ToolRegistry
    approvals: ApprovalManager
    bus: EventBus
    context: ContextSettings
    max_rounds: int
    clock: Callable[[], datetime]
    notice: Notify
    processes: ProcessLedger | None = None
    protected: ProtectedPaths = field(default_factory=ProtectedPaths)  # no file tool touches these
    requests: TaskSet = field(default_factory=lambda: TaskSet("prefetched requests"))
    """Owns the requests sent before their turn opened (:mod:`runtime.turn.steps`); closed by the
    runtime after the hub, so none outlives the LLM client."""


@dataclass(slots=True)
class TurnRunner:
    services: TurnServices
    session: ChatSession
    turn_id: int
    address: Address
    resumed: bool = (
        False  # continues a turn that already ran (restart, pause): budget and open calls carry over
    )
    token: CancelToken = field(default_factory=CancelToken)
    partial_text: str = ""
    rounds: int = 0
    first_mail: list[Envelope] | None = None  # the unread mail that started the turn, already read
    prefetch: Prefetch | None = None  # the first round's request, sent while the turn was opened
    awaiting_approval: WaitHook = nullcontext  # entered while its gate waits for the user
    tools_used: list[str] = field(default_factory=list)  # for the turn's log line, in call order
    tokens_in: int = 0
    tokens_out: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def session_id(self) -> int:
        assert self.session.id is not None
        return self.session.id

    async def run(self) -> TurnOutcome:
        try:
            return await self._run_rounds()
        except asyncio.CancelledError:
            if not self.token.cancelled:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await durable(self._record_cancellation())
            return Cancelled()
        except LLMError as exc:  # the user reads its kind; the log keeps the endpoint's words
            log.warning(
                "llm error turn=%s kind=%s status=%s model=%s: %s",
                self.turn_id,
                exc.kind,
                exc.status,
                exc.model,
                exc,
                extra={
                    "turn": self.turn_id,
                    "session": self.session_id,
                    "kind": str(exc.kind),
                    "status": exc.status,
                },
            )
            return Failed(str(exc), exc.failure)
        finally:
            if self.prefetch is not None:  # ended before its first round asked the model
                self.prefetch.cancel()

    async def _run_rounds(self) -> TurnOutcome:
        s = self.services
        if self.resumed:
            if (answer := await self.stored_answer()) is not None:  # crashed before the turn was closed
                return Final(answer)
            stored = await s.sessions.turn(self.turn_id)
            self.rounds = stored.rounds if stored is not None else 0
            await self._resume_pending_tools()
        while True:
            if self.token.cancelled:
                raise asyncio.CancelledError
            unread, self.first_mail = self.first_mail, None
            injected = await inject_mail(s.db, s.mailbox, s.history, self.session_id, self.turn_id, unread)
            if injected is Injected.PAUSE:
                return Paused()
            if injected is Injected.STOP:  # a /stop landed before the hub could cancel us
                self.token.cancel()
                raise asyncio.CancelledError
            if self.rounds >= s.max_rounds:
                return Exhausted(s.max_rounds)
            self.rounds += 1
            step = await self._round()
            if not isinstance(step, RunAgain):
                return step

    async def stored_answer(self) -> str | None:
        """The turn's final answer when it is already stored as the session's last row.

        A process that died between storing the final round and closing the turn leaves the
        turn ``running``; resuming it must close it, not ask the model (and the user) again.
        """
        entries = await self.services.history.entries(self.session_id, limit=1)
        if not entries:
            return None
        row = entries[-1].row
        if row.turn_id != self.turn_id or row.role != Role.ASSISTANT or row.status != RowStatus.OK:
            return None
        return None if entries[-1].calls else row.content

    async def _round(self) -> RoundStep:
        s = self.services
        entries = await s.history.entries(self.session_id, limit=s.context.max_history_messages)
        prefetch, self.prefetch = self.prefetch, None
        messages = build_messages(entries, s.context, prefetch.now if prefetch else s.clock())
        result = await self._call_llm(messages, prefetch)
        self.tokens_in += result.usage.input_tokens
        self.tokens_out += result.usage.output_tokens
        final = not result.tool_calls
        entry = await durable(
            s.history.record_round(
                session_id=self.session_id, turn_id=self.turn_id, result=result, closes_turn=final
            )
        )
        self.partial_text = ""
        s.bus.emit(
            RoundEnded(
                to=self.address,
                turn_id=self.turn_id,
                text=result.text,
                has_tool_calls=bool(entry.calls),
                row_id=entry.row.id,
            )
        )
        if final:
            return Final(result.text, closed=True)
        for call in entry.calls:
            await self._run_call(call)
        return RunAgain()

    async def _call_llm(self, messages: list[Any], prefetch: Prefetch | None = None) -> LLMRound:
        """Stream one completion — the prefetched one if it asked exactly this."""
        s = self.services

        async def sink(event: StreamEvent) -> None:
            if isinstance(event, LLMTextDelta):
                self.partial_text += event.text
                s.bus.emit(TextDelta(to=self.address, turn_id=self.turn_id, text=event.text))
            elif isinstance(event, ReasoningDelta):
                s.bus.emit(Thinking(to=self.address, turn_id=self.turn_id, text=event.text))
            elif isinstance(event, StreamRestart):  # the same model again: nothing to announce
                self.partial_text = ""
                s.bus.emit(StreamReset(to=self.address, turn_id=self.turn_id))
            elif isinstance(event, ModelFallback):
                self.partial_text = ""
                s.bus.emit(StreamReset(to=self.address, turn_id=self.turn_id))
                await s.notice(
                    self.address, "model-fallback", {"failed": event.failed_model, "next": event.next_model}
                )

        if prefetch is not None:
            if prefetch.messages == messages:
                return await prefetch.adopt(sink)
            prefetch.cancel()
        return await s.llm.stream_round(messages, s.tools.specs(), sink)

    async def _resume_pending_tools(self) -> None:
        """Re-gate and re-run calls a previous process left unfinished (resume_pending_tools)."""
        for call in await self.services.history.open_calls(self.session_id):
            await self._run_call(call)

    async def _run_call(self, call: ToolCallRow) -> None:
        """One call end to end; a stop while it waited for approval ends the turn cancelled."""
        if isinstance(await self._handle_tool_call(call), GateCancelled):
            self.token.cancel()
            raise asyncio.CancelledError

    async def _handle_tool_call(self, call: ToolCallRow) -> CallFlow:
        """One call end to end: announce → parse → gate → execute → record."""
        summary = call_summary(call)
        self.tools_used.append(call.name)
        self._activity(call, summary, ToolPhase.STARTED)
        tool = self.services.tools.get(call.name)
        if tool is None:
            names = ", ".join(self.services.tools.names())
            unknown = texts.UNKNOWN_TOOL.format(name=call.name, names=names)
            return await self._finish(call, summary, ToolCallStatus.FAILED, unknown)
        try:
            args = tool.parse(call.arguments)
        except ToolError as exc:
            return await self._finish(call, summary, ToolCallStatus.FAILED, str(exc))
        gate = await self._gate(call, tool, args)
        if isinstance(gate, Rejected):
            self._activity(call, summary, ToolPhase.REJECTED)
            return gate
        if isinstance(gate, GateCancelled):
            return gate
        return await self._execute(call, summary, tool, args)

    async def _gate(self, call: ToolCallRow, tool: Tool[Any], args: ToolArgs) -> GateOutcome:
        s = self.services
        return await run_approval_gate(
            GateDeps(s.approvals, s.history, s.bus, waiting=self.awaiting_approval),
            session=self.session,
            address=self.address,
            call=call,
            tool=tool,
            args=args,
            ctx=self.tool_context(),
        )

    async def _execute(
        self, call: ToolCallRow, summary: str, tool: Tool[Any], args: ToolArgs
    ) -> ToolCallStatus:
        """Run an approved call; its own failure becomes a failed result the model reads."""
        assert call.id is not None
        await durable(self.services.history.set_call_status(call.id, ToolCallStatus.RUNNING))
        self._activity(call, summary, ToolPhase.RUNNING)
        try:
            result = await tool.execute(args, self.tool_context())
        except ToolError as exc:
            return await self._finish(call, summary, ToolCallStatus.FAILED, str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug is a failed result, never a crashed turn
            log.exception("tool %s crashed", call.name)
            return await self._finish(call, summary, ToolCallStatus.FAILED, f"{type(exc).__name__}: {exc}")
        return await self._finish(call, summary, ToolCallStatus.DONE, result)

    async def _finish(
        self, call: ToolCallRow, summary: str, status: ToolCallStatus, result: str
    ) -> ToolCallStatus:
        assert call.id is not None
        await durable(self.services.history.set_call_status(call.id, status, result))
        self._activity(call, summary, ToolPhase.DONE if status == ToolCallStatus.DONE else ToolPhase.FAILED)
        return status

    def _activity(self, call: ToolCallRow, summary: str, phase: ToolPhase) -> None:
        assert call.id is not None
        self.services.bus.emit(
            ToolActivity(
                to=self.address,
                turn_id=self.turn_id,
                tool_call_id=call.id,
                name=call.name,
                summary=summary,
                phase=phase,
                runs_command=self.services.tools.runs_commands(call.name),
            )
        )

    def log_finished(self, outcome: TurnOutcome) -> None:
        """The operator's one INFO line for this turn: facts only, never the conversation."""
        took = time.monotonic() - self.started
        tools = ",".join(dict.fromkeys(self.tools_used)) or "-"
        log.info(
            "turn %s chat=%s session=%s outcome=%s rounds=%d tools=%s tokens=%d/%d took=%.2fs",
            self.turn_id,
            self.session.chat_id,
            self.session_id,
            outcome.kind,
            self.rounds,
            tools,
            self.tokens_in,
            self.tokens_out,
            took,
            extra={
                "turn": self.turn_id,
                "chat": self.session.chat_id,
                "session": self.session_id,
                "outcome": str(outcome.kind),
                "rounds": self.rounds,
                "tools": tools,
                "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out,
                "took": round(took, 3),
            },
        )

    def tool_context(self) -> ToolContext:
        return ToolContext(
            workdir=self.services.context.workdir,
            session_id=self.session_id,
            source=self.session.source,
            chat_id=self.session.chat_id,
            processes=self.services.processes,
            protected=self.services.protected,
        )

    async def _record_cancellation(self) -> None:
        """After /stop: keep what streamed, then settle the turn (its status line marks each call)."""
        s = self.services
        if self.partial_text:
            await s.history.record_round(
                session_id=self.session_id,
                turn_id=self.turn_id,
                result=LLMRound(text=self.partial_text),
                status=RowStatus.CANCELLED,
            )
        await settle_cancelled(
            s,
            self.address,
            self.turn_id,
            on_closed=lambda call: self._activity(call, call_summary(call), ToolPhase.CANCELLED),
        )


async def settle_cancelled(
    services: TurnServices,
    address: Address,
    turn_id: int,
    *,
    on_closed: Callable[[ToolCallRow], None] | None = None,
) -> None:
    """End a stopped turn, whoever stops it: every open call closed as cancelled by the user
    (``on_closed`` told of each), every pending approval cancelled (its prompt reads
    "⏹ Cancelled"), the turn ended ``cancelled``."""
    s = services
    closed = await s.history.close_open_calls(
        address.session_id, ToolCallStatus.CANCELLED, texts.CANCELLED_BY_USER
    )
    for call in closed:
        if on_closed is not None:
            on_closed(call)
    for request in await s.approvals.cancel_session(address.session_id):
        s.bus.emit(approval_resolved(address, request))
    await s.sessions.finish_turn(turn_id, TurnStatus.CANCELLED)


def call_summary(call: ToolCallRow, limit: int = 60) -> str:
    """A short human hint for the status line: the path or the command."""
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return ""
    if not isinstance(args, dict):
        return ""
    value = args.get("command") or args.get("path") or ""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
