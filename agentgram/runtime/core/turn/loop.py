"""The turn runner: one frame's rounds, from its first step to its outcome.

A :class:`TurnRunner` holds what one frame of a turn runs with — the
dependencies (:class:`~runtime.turn.deps.TurnDeps`, built once), the frame
(:class:`~runtime.turn.frame.Frame`: root or sub-agent), its mutable state
(:class:`~runtime.turn.state.TurnState`) and the turn's cancel token — and
takes the steps of :mod:`runtime.turn.graph` until one ends the turn. The
tool calls are :mod:`runtime.turn.calls`, sub-agents :mod:`runtime.turn.children`.

A /stop cancels the turn's task. :meth:`TurnRunner.run` converts only its own
cancellation (token set) into :class:`Cancelled`, after a durable clean-up:
partial text kept, then :func:`settle_cancelled` — the one way a stopped turn
ends, which the session worker uses too for a paused turn a /stop ends. A
sub-agent keeps what it streamed and hands the stop up to the root. Anything
else (shutdown) propagates and leaves the turn ``running`` so the next start
resumes it.

The turn's steps around its rounds (prefetch, open, finish) are in
:mod:`runtime.turn.steps`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from agentgram.runtime.capabilities.questions import question_resolved
from agentgram.runtime.capabilities.tools.base import Progress, ToolContext, ToolRegistry
from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.calls import activity, call_summary
from agentgram.runtime.core.turn.children import ChildSpawner
from agentgram.runtime.core.turn.deps import TurnDeps
from agentgram.runtime.core.turn.frame import ChatEcho, Frame
from agentgram.runtime.core.turn.gate import WaitHook, approval_resolved, no_wait
from agentgram.runtime.core.turn.graph import Receive, Resume, run_steps
from agentgram.runtime.core.turn.inject import Prepared
from agentgram.runtime.core.turn.outcome import Cancelled, CancelToken, Failed, TurnOutcome
from agentgram.runtime.core.turn.prefetch import Prefetch
from agentgram.runtime.core.turn.request import main_level
from agentgram.runtime.core.turn.state import TurnState
from agentgram.runtime.core.turn.subagents import Level
from agentgram.runtime.infra.errors import LLMError
from agentgram.runtime.infra.events import Address, ToolPhase
from agentgram.runtime.infra.llm.types import ChatMessage, LLMRound, ModelFallback, StreamEvent, StreamRestart
from agentgram.runtime.infra.llm.types import TextDelta as LLMTextDelta
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import durable
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    Role,
    RowStatus,
    ToolCallRow,
    ToolCallStatus,
    TurnStatus,
)

log = get_logger("turn")


@dataclass(slots=True)
class TurnRunner:
    deps: TurnDeps
    session: ChatSession
    turn_id: int
    address: Address
    frame: Frame
    state: TurnState = field(default_factory=TurnState)
    resumed: bool = (
        False  # continues a turn that already ran (restart, pause): budget and open calls carry over
    )
    token: CancelToken = field(default_factory=CancelToken)
    waiting: WaitHook = no_wait  # entered while its gate waits for the user

    @classmethod
    def root(
        cls,
        deps: TurnDeps,
        session: ChatSession,
        turn_id: int,
        address: Address,
        *,
        resumed: bool = False,
        first_mail: list[Envelope] | None = None,
        prefetch: Prefetch | None = None,
        waiting: WaitHook = no_wait,
    ) -> TurnRunner:
        """The root agent's runner of a turn (the session worker's)."""
        echo = ChatEcho(deps.bus, deps.notice, address, turn_id)
        frame = Frame.root(main_level(deps, session), echo)
        state = TurnState(first_mail=first_mail, prefetch=prefetch)
        return cls(deps, session, turn_id, address, frame, state, resumed=resumed, waiting=waiting)

    def child(self, level: Level, *, resumed: bool = False) -> TurnRunner:
        """A sub-agent's runner: its own frame and state, this turn's token (one /stop stops the
        whole tree) and approval-wait hook."""
        frame = self.frame.child(level)
        return TurnRunner(
            self.deps,
            self.session,
            self.turn_id,
            self.address,
            frame,
            resumed=resumed,
            token=self.token,
            waiting=self.waiting,
        )

    @property
    def session_id(self) -> int:
        assert self.session.id is not None
        return self.session.id

    @property
    def tools(self) -> ToolRegistry:
        """What this agent is offered: as of its latest round, its level's tools before one."""
        return self.state.offered if self.state.offered is not None else self.frame.level.tools

    async def run(self) -> TurnOutcome:
        try:
            return await run_steps(self, Resume() if self.resumed else Receive())
        except asyncio.CancelledError:
            if not self.frame.owns_turn:  # a sub-agent: its root settles the whole tree
                if self.state.partial_text:
                    await durable(self._keep_partial())
                raise
            if not self.token.cancelled:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            prefetch = self.state.prefetch
            if prefetch is not None and self.state.rounds:  # its first round ran, not yet adopting
                self.state.partial_text = prefetch.held_text()  # (a turn stopped while opened keeps none)
            await durable(self._record_cancellation())
            return Cancelled()
        except LLMError as exc:  # the user reads its kind; the log keeps the endpoint's words
            self._log_llm_error(exc)
            return Failed(str(exc), exc.failure)
        finally:
            if self.state.prefetch is not None:  # ended before its first round asked the model
                self.state.prefetch.cancel()

    async def prepare(self, mail: list[Envelope]) -> Prepared:
        """The files of the messages the round boundary folds in, fetched first (``runtime.attachments``)."""
        return await self.deps.files.prepare(mail, self.address)

    async def stored_answer(self) -> str | None:
        """The frame's final answer when it is already stored as its last row.

        A process that died between storing the final round and closing the turn leaves the
        turn ``running``; resuming it must close it, not ask the model (and the user) again.
        """
        entries = await self.deps.history.entries(self.session_id, limit=1, stack_id=self.frame.stack_id)
        if not entries:
            return None
        last = entries[-1]
        if last.turn_id != self.turn_id or last.role != Role.ASSISTANT or last.status != RowStatus.OK:
            return None
        return None if last.calls else last.content

    async def call_model(self, messages: list[ChatMessage], prefetch: Prefetch | None = None) -> LLMRound:
        """Stream one completion — the prefetched one if it asked exactly this.

        An adopted request is under way already, so ``messages`` is emptied before the wait: the
        round's context is not held while the model thinks, by this round or by the step that
        built it (``bench/README.md``, session 22).
        """
        specs = self.tools.specs()
        if prefetch is not None:
            if prefetch.asked(messages, specs):
                messages.clear()
                return await prefetch.adopt(self._stream)
            prefetch.cancel()
        llm = self.deps.models.named(self.frame.level.model) or await self.deps.models.client_for(
            self.session_id
        )
        return await llm.stream_round(messages, specs, self._stream)

    async def _stream(self, event: StreamEvent) -> None:
        if isinstance(event, LLMTextDelta):
            self.state.partial_text += event.text
        elif isinstance(event, StreamRestart | ModelFallback):
            self.state.partial_text = ""
        await self.frame.echo.stream(event)

    def tool_context(self) -> ToolContext:
        s = self.deps
        return ToolContext(
            workdir=s.context.workdir,
            session_id=self.session_id,
            source=self.session.source,
            chat_id=self.session.chat_id,
            thread_id=self.session.thread_id,
            processes=s.processes,
            protected=s.protected,
            depth=self.frame.level.depth,
            stack_id=self.frame.stack_id,
            calls=s.calls.control,
            checkpoints=s.checkpoints.for_turn(self.session_id, self.turn_id),
        )

    def call_context(self, call: ToolCallRow, progress: Progress | None = None) -> ToolContext:
        """The context of one call being run: bound to it (its questions, its sub-agent — a
        session of its own when the call is tracked, ``progress`` set)."""
        spawner = ChildSpawner(self, call, progress)
        return replace(self.tool_context(), tool_call_id=call.id, sub_agents=spawner)

    async def _keep_partial(self) -> None:
        """What streamed before a stop, kept as a cancelled row of this frame."""
        await self.deps.history.record_round(
            session_id=self.session_id,
            turn_id=self.turn_id,
            result=LLMRound(text=self.state.partial_text),
            status=RowStatus.CANCELLED,
            stack_id=self.frame.stack_id,
        )

    async def _record_cancellation(self) -> None:
        """After /stop: keep what streamed, then settle the turn (its status line marks each call)."""
        if self.state.partial_text:
            await self._keep_partial()
        await settle_cancelled(
            self.deps,
            self.address,
            self.turn_id,
            on_closed=lambda call: activity(self, call, call_summary(call), ToolPhase.CANCELLED),
        )

    def _log_llm_error(self, exc: LLMError) -> None:
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

    def log_finished(self, outcome: TurnOutcome) -> None:
        """The operator's one INFO line for this turn: facts only, never the conversation."""
        state = self.state
        took = time.monotonic() - state.started
        tools = ",".join(dict.fromkeys(state.tools_used)) or "-"
        log.info(
            "turn %s chat=%s session=%s outcome=%s rounds=%d tools=%s tokens=%d/%d took=%.2fs",
            self.turn_id,
            self.session.chat_id,
            self.session_id,
            outcome.kind,
            state.rounds,
            tools,
            state.tokens_in,
            state.tokens_out,
            took,
            extra={
                "turn": self.turn_id,
                "chat": self.session.chat_id,
                "session": self.session_id,
                "outcome": str(outcome.kind),
                "rounds": state.rounds,
                "tools": tools,
                "tokens_in": state.tokens_in,
                "tokens_out": state.tokens_out,
                "took": round(took, 3),
            },
        )


async def settle_cancelled(
    deps: TurnDeps,
    address: Address,
    turn_id: int,
    *,
    on_closed: Callable[[ToolCallRow], None] = lambda call: None,
) -> None:
    """End a stopped turn, whoever stops it: every open call closed as cancelled by the user
    (``on_closed`` told of each), every pending approval cancelled (its prompt reads
    "⏹ Cancelled"), the turn ended ``cancelled``."""
    s = deps
    closed = await s.history.close_open_calls(
        address.session_id, ToolCallStatus.CANCELLED, texts.CANCELLED_BY_USER
    )
    for call in closed:
        on_closed(call)
    for request in await s.approvals.cancel_session(address.session_id):
        s.bus.emit(approval_resolved(address, request))
    await s.frames.close_all_children(address.session_id)  # the sub-agents stop with their root
    for question in await s.questions.cancel_session(address.session_id):
        s.bus.emit(question_resolved(address, question))  # its buttons read "cancelled"
    await s.sessions.finish_turn(turn_id, TurnStatus.CANCELLED)


__all__ = ["TurnRunner", "call_summary", "settle_cancelled"]
