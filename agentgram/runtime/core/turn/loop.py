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
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from agentgram.runtime.capabilities.attachments.inbox import Inbox
from agentgram.runtime.capabilities.mcp.catalog import McpCatalog
from agentgram.runtime.capabilities.questions import QuestionManager, question_resolved
from agentgram.runtime.capabilities.tools.base import (
    ProcessLedger,
    Progress,
    ProtectedPaths,
    Tool,
    ToolArgs,
    ToolContext,
    ToolRegistry,
)
from agentgram.runtime.capabilities.tools.notes import NoteStore
from agentgram.runtime.capabilities.tools.wrappers import CallSite, Chain, HookDenied, Wrappers, execute_tool
from agentgram.runtime.core.approvals.manager import ApprovalManager
from agentgram.runtime.core.mailbox import Envelope, Mailbox
from agentgram.runtime.core.prompt import MemoryPrompt, with_memory
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.background import BackgroundCalls, Performed
from agentgram.runtime.core.turn.compaction import Compactor
from agentgram.runtime.core.turn.context import Compacted, ContextSettings, build_messages, images_needed
from agentgram.runtime.core.turn.gate import GateDeps, WaitHook, approval_resolved, run_approval_gate
from agentgram.runtime.core.turn.inject import Injected, Prepared, inject_mail
from agentgram.runtime.core.turn.outcome import (
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
from agentgram.runtime.core.turn.prefetch import Prefetch
from agentgram.runtime.core.turn.subagents import (
    EXECUTE_TASK,
    MAX_DEPTH,
    AgentBook,
    Level,
    child_level,
    is_batch,
    preview,
    reap_interrupted_parallel_batches,
    root_level,
    run_bounded,
    shared_wait,
)
from agentgram.runtime.infra.errors import LLMError, ToolError
from agentgram.runtime.infra.events import (
    Address,
    EventBus,
    Notify,
    RoundEnded,
    StreamReset,
    SubAgentFinished,
    SubAgentStarted,
    TextDelta,
    Thinking,
    ToolActivity,
    ToolPhase,
)
from agentgram.runtime.infra.llm.types import (
    LLMClient,
    LLMRound,
    ModelFallback,
    ReasoningDelta,
    StreamEvent,
    StreamRestart,
)
from agentgram.runtime.infra.llm.types import TextDelta as LLMTextDelta
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import Database, durable
from agentgram.runtime.infra.storage.frames import ChildFrame, FrameStore
from agentgram.runtime.infra.storage.grant_rows import ROOT_FRAME
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.models import (
    INTERACTIVE_SOURCES,
    ChatSession,
    Role,
    RowStatus,
    SessionSource,
    ToolCallRow,
    ToolCallStatus,
    TurnStatus,
)
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.storage.usage_rows import SessionModels
from agentgram.runtime.infra.tasks import TaskSet

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
    notes: NoteStore | None = None  # the session's scratchpad and todos, injected before the history
    questions: QuestionManager | None = None  # pending clarifying questions, cancelled by a /stop
    requests: TaskSet = field(default_factory=lambda: TaskSet("prefetched requests"))
    """Owns the requests sent before their turn opened (:mod:`runtime.turn.steps`); closed by the
    runtime after the hub, so none outlives the LLM client."""
    models: SessionModels | None = None  # the session's chosen model (/model); None: always ``llm``
    compaction: Compactor | None = None  # summarises older history (runtime.turn.compaction); None: off
    memory: MemoryPrompt | None = None  # the memory files each session's static prompt ends with
    agents: AgentBook = field(default_factory=AgentBook)  # who execute_task may start (runtime.agents)
    background: BackgroundCalls | None = None  # tracked calls (runtime.turn.background); None: all attached
    inbox: Inbox | None = None  # a message's files, fetched before its turn reads it (runtime.attachments)
    wrappers: Wrappers = field(default_factory=lambda: Wrappers((), lambda name: None))  # tools.wrappers
    mcp: McpCatalog | None = None  # the MCP tools each agent is offered (runtime.mcp.catalog); None: none
    max_parallel_subagents: int = 4  # the children of one parallel batch running at once
    frames: FrameStore = field(init=False)  # the sessions' call stacks (sub-agent frames)

    def __post_init__(self) -> None:
        self.frames = FrameStore(self.db)

    async def llm_for(self, session_id: int) -> LLMClient:
        """The client of the session's model (:mod:`runtime.storage.usage_rows`), ``llm`` by default."""
        return self.llm if self.models is None else await self.models.client_for(session_id)

    def context_for(self, session_id: int) -> ContextSettings:
        """The context settings of one session: the static prompt with its memory snapshot
        (:class:`~runtime.prompt.MemoryPrompt`, byte-identical for the whole session)."""
        memory = self.memory.for_session(session_id) if self.memory is not None else ""
        return replace(self.context, static_system=with_memory(self.context.static_system, memory))


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
    level: Level | None = None  # a sub-agent's frame; None: the root agent (runtime.turn.subagents)
    offered: ToolRegistry | None = None  # the base tools plus this agent's MCP tools, as of its last round

    @property
    def session_id(self) -> int:
        assert self.session.id is not None
        return self.session.id

    @property
    def base_tools(self) -> ToolRegistry:
        """This agent's own tools, without MCP ones: the root's, or the sub-agent's level's."""
        return (
            self.level.tools if self.level is not None else offered_tools(self.services, self.session.source)
        )

    @property
    def tools(self) -> ToolRegistry:
        """What this agent is offered: its base tools and, from :meth:`refresh_tools` on, the MCP
        tools it may call."""
        return self.offered if self.offered is not None else self.base_tools

    async def refresh_tools(self) -> None:
        """Before each round: the MCP tools as the agent's grants now stand (``activate_tools``
        in round N offers them from round N+1)."""
        if self.services.mcp is None:
            return
        agent = self.level.agent if self.level else self.session.agent_id
        frame = self.level.stack_id if self.level is not None and self.level.stack_id else ROOT_FRAME
        self.offered = await with_mcp_tools(self.services, self.base_tools, self.session_id, agent, frame)

    @property
    def depth(self) -> int:
        return self.level.depth if self.level is not None else 0

    async def run(self) -> TurnOutcome:
        try:
            return await self._run_rounds()
        except asyncio.CancelledError:
            if not self.token.cancelled:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            if self.prefetch is not None and self.rounds:  # its first round ran, not yet adopting
                self.partial_text = self.prefetch.held_text()  # (a turn stopped while opened keeps none)
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
            if self.level is None:  # resume_turn 3b, 6, 7: the sub-agents a restart cut short first
                await self._resume_children()
            if (answer := await self.stored_answer()) is not None:  # crashed before the turn was closed
                return Final(answer)
            stored = await s.sessions.turn(self.turn_id)
            self.rounds = stored.rounds if stored is not None else 0
            await self.refresh_tools()
            await self._resume_pending_tools()
        if self.level is not None:
            return await self._child_rounds()
        while True:
            if self.token.cancelled:
                raise asyncio.CancelledError
            unread, self.first_mail = self.first_mail, None
            injected = await inject_mail(
                s.db, s.mailbox, s.history, self.session_id, self.turn_id, unread, prepare=self._prepare
            )
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

    async def _prepare(self, mail: list[Envelope]) -> Prepared:
        """The files of the messages R1 folds in, fetched first (``runtime.attachments``)."""
        inbox = self.services.inbox
        return await inbox.prepare(mail, self.address) if inbox is not None else {}

    async def stored_answer(self) -> str | None:
        """The turn's final answer when it is already stored as the session's last row.

        A process that died between storing the final round and closing the turn leaves the
        turn ``running``; resuming it must close it, not ask the model (and the user) again.
        """
        stack_id = self.level.stack_id if self.level is not None else None
        entries = await self.services.history.entries(self.session_id, limit=1, stack_id=stack_id)
        if not entries:
            return None
        row = entries[-1].row
        if row.turn_id != self.turn_id or row.role != Role.ASSISTANT or row.status != RowStatus.OK:
            return None
        return None if entries[-1].calls else row.content

    async def _round(self) -> RoundStep:
        if self.level is not None:
            return await self._child_round(self.level)
        s = self.services
        context = s.context_for(self.session_id)
        compact = len(context.static_system) if self.rounds == 1 else None  # between turns only
        entries, compacted = await round_history(
            s, self.session_id, ephemeral=self.session.is_ephemeral, compact=compact
        )
        notes = await s.notes.context_text(self.session_id) if s.notes is not None else None
        await load_images(context, entries)
        await self.refresh_tools()
        prefetch, self.prefetch = self.prefetch, None  # from here on its text is streamed or void
        messages = build_messages(
            entries, context, prefetch.now if prefetch else s.clock(), notes=notes, compacted=compacted
        )
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
        await self._run_calls(entry.calls)
        return RunAgain()

    async def _call_llm(self, messages: list[Any], prefetch: Prefetch | None = None) -> LLMRound:
        """Stream one completion — the prefetched one if it asked exactly this."""
        s = self.services

        async def sink(event: StreamEvent) -> None:
            if self.level is not None and not isinstance(event, ModelFallback):
                self._child_stream(event)  # a sub-agent answers its parent, not the chat
            elif isinstance(event, LLMTextDelta):
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

        specs = self.tools.specs()
        if prefetch is not None:
            if prefetch.asked(messages, specs):
                return await prefetch.adopt(sink)
            prefetch.cancel()
        llm = await self._llm()
        return await llm.stream_round(messages, specs, sink)

    async def _llm(self) -> LLMClient:
        """A sub-agent whose definition names a configured model asks that one; the rest ask the
        session's (``/model``). A name ``llm.models`` does not list falls back to the session's."""
        s = self.services
        named = self.level.model if self.level is not None else None
        if named is not None and s.models is not None and s.models.registry.knows(named):
            return s.models.registry.client(named)
        return await s.llm_for(self.session_id)

    async def _resume_pending_tools(self) -> None:
        """Re-gate and re-run calls a previous process left unfinished (resume_pending_tools)."""
        stack_id = self.level.stack_id if self.level is not None else None
        for call in await self.services.history.open_calls(self.session_id, stack_id):
            await self._run_call(call)

    async def _run_calls(self, calls: list[ToolCallRow]) -> None:
        """A round's calls in declared order — or, for a parallel sub-agent batch, at once."""
        if is_batch(calls):
            await self._run_batch(calls)
            return
        for call in calls:
            await self._run_call(call)

    async def _run_call(self, call: ToolCallRow) -> None:
        """One call end to end; a stop while it waited for approval ends the turn cancelled."""
        if isinstance(await self._handle_tool_call(call), GateCancelled):
            self.token.cancel()
            raise asyncio.CancelledError

    async def _handle_tool_call(self, call: ToolCallRow) -> CallFlow:
        """One call end to end: announce → parse → gate → execute → record."""
        summary = self._announce(call)
        done = await self._perform(call, summary)
        if isinstance(done, tuple):
            return await self._finish(call, summary, *done)
        return done

    def _announce(self, call: ToolCallRow) -> str:
        summary = call_summary(call)
        self.tools_used.append(call.name)
        self._activity(call, summary, ToolPhase.STARTED)
        return summary

    async def _perform(self, call: ToolCallRow, summary: str) -> Performed | Rejected | GateCancelled:
        """Parse → gate → execute: what the call came to, not recorded yet (a refusal is)."""
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(self.tools.names())
            return ToolCallStatus.FAILED, texts.UNKNOWN_TOOL.format(name=call.name, names=names)
        try:
            args = tool.parse(call.arguments)
        except ToolError as exc:
            return ToolCallStatus.FAILED, str(exc)
        gate = await self._gate(call, tool, args)
        if isinstance(gate, Rejected):
            self._activity(call, summary, ToolPhase.REJECTED)
            return gate
        if isinstance(gate, GateCancelled):
            return gate
        return await self._run_tool(call, summary, tool)

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

    async def _run_tool(self, call: ToolCallRow, summary: str, tool: Tool[Any]) -> Performed:
        """Run an approved call under its wrappers (``tools.wrappers``, recorded with the call) —
        as a tracked call that may detach when the tool drives a process."""
        s = self.services
        assert call.id is not None
        chain = s.wrappers.chain(tool)
        labels = json.dumps(list(chain.labels)) if chain.labels else None
        await durable(s.history.set_call_status(call.id, ToolCallStatus.RUNNING, wrappers=labels))
        self._activity(call, summary, ToolPhase.RUNNING)
        if not tool.tracked or s.background is None:
            return await self._execute(call, tool, chain)
        return await s.background.run(
            address=self.address,
            call=call,
            summary=summary,
            runs_command=tool.runs_commands,
            detachable=self.level is None and self.session.source in INTERACTIVE_SOURCES,
            work=lambda live: self._execute(call, tool, chain, progress=live),
        )

    async def _execute(
        self, call: ToolCallRow, tool: Tool[Any], chain: Chain, progress: Progress | None = None
    ) -> Performed:
        """The wrapped execution; a tool's own failure becomes a failed result the model reads."""
        ctx = replace(self.call_context(call), progress=progress)
        site = CallSite(tool=tool, arguments=_sent_arguments(call), ctx=ctx, agent=self._here().agent)
        try:
            result = await chain.wrap(execute_tool)(site)
        except HookDenied as exc:
            return ToolCallStatus.REJECTED, str(exc)
        except ToolError as exc:
            return ToolCallStatus.FAILED, str(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug is a failed result, never a crashed turn
            log.exception("tool %s crashed", call.name)
            return ToolCallStatus.FAILED, f"{type(exc).__name__}: {exc}"
        return ToolCallStatus.DONE, result

    async def _finish(
        self, call: ToolCallRow, summary: str, status: ToolCallStatus, result: str
    ) -> ToolCallStatus:
        assert call.id is not None
        if status is not ToolCallStatus.DETACHED:  # a detached call's placeholder is stored with its run
            await durable(self.services.history.set_call_status(call.id, status, result))
        if call.name == EXECUTE_TASK:  # the child's result reached its parent: its frame is done
            await durable(self.services.frames.close_children_of(call.id))
        self._activity(call, summary, _PHASES.get(status, ToolPhase.FAILED))
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
                runs_command=self.tools.runs_commands(call.name),
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
            depth=self.depth,
            stack_id=self.level.stack_id if self.level is not None else None,
            calls=self.services.background,
        )

    def call_context(self, call: ToolCallRow) -> ToolContext:
        """The context of one call being run: bound to it (its questions, its sub-agent)."""
        return replace(self.tool_context(), tool_call_id=call.id, sub_agents=ChildSpawner(self, call))

    # --- sub-agents (runtime.turn.subagents) --------------------------------------------------------

    async def _run_batch(self, calls: list[ToolCallRow]) -> None:
        """A parallel sub-agent batch: announced in call order (their rows exist already), run at
        once (bounded), recorded in call order whatever the finishing order."""
        summaries = [self._announce(call) for call in calls]
        waiting, self.awaiting_approval = self.awaiting_approval, shared_wait(self.awaiting_approval)
        try:
            jobs = [
                partial(self._perform, call, summary) for call, summary in zip(calls, summaries, strict=True)
            ]
            outcomes = await run_bounded(jobs, self.services.max_parallel_subagents)
        finally:
            self.awaiting_approval = waiting
        for call, summary, outcome in zip(calls, summaries, outcomes, strict=True):
            if isinstance(outcome, tuple):
                await self._finish(call, summary, *outcome)
        if any(isinstance(outcome, GateCancelled) for outcome in outcomes):
            self.token.cancel()
            raise asyncio.CancelledError

    def _here(self) -> Level:
        return self.level or root_level(self.base_tools, self.session.agent_id)

    def _child(self, level: Level, *, resumed: bool = False) -> TurnRunner:
        return TurnRunner(
            self.services,
            self.session,
            self.turn_id,
            self.address,
            resumed=resumed,
            token=self.token,  # one /stop stops the whole tree
            awaiting_approval=self.awaiting_approval,
            level=level,
        )

    async def spawn_child(self, call: ToolCallRow, agent: str, task: str) -> str:
        """``execute_task``: the child's turn, inline; its final answer (or a ToolError)."""
        s = self.services
        assert call.id is not None
        spec = s.agents.spec(agent)
        here = self._here()
        if here.depth >= MAX_DEPTH:
            raise ToolError(texts.too_deep(MAX_DEPTH))
        frame = await durable(
            s.frames.open_child(
                session_id=self.session_id,
                turn_id=self.turn_id,
                parent_call_id=call.id,
                depth=here.depth + 1,
                agent=spec.name,
                task=task,
            )
        )
        return await self._run_child(call, here, frame)

    async def _run_child(
        self, call: ToolCallRow, parent: Level, frame: ChildFrame, *, resumed: bool = False
    ) -> str:
        s = self.services
        assert call.id is not None
        level = child_level(parent, s.agents.spec(frame.agent), frame.id, s.agents)
        s.bus.emit(
            SubAgentStarted(
                to=self.address,
                turn_id=self.turn_id,
                tool_call_id=call.id,
                parent=parent.agent,
                agent=level.agent,
                depth=level.depth,
            )
        )
        outcome = await self._child(level, resumed=resumed).run_as_child()
        ok = isinstance(outcome, Final)
        text = (
            outcome.text if isinstance(outcome, Final) else texts.subagent_failed(level.agent, _why(outcome))
        )
        s.bus.emit(
            SubAgentFinished(
                to=self.address,
                turn_id=self.turn_id,
                tool_call_id=call.id,
                agent=level.agent,
                ok=ok,
                preview=preview(text),
            )
        )
        if not ok:
            raise ToolError(text)
        return text

    async def run_as_child(self) -> TurnOutcome:
        """A sub-agent's turn: a stop keeps what streamed and goes on up to the root, which
        settles the whole tree; a model failure is an outcome its parent reads."""
        try:
            return await self._run_rounds()
        except asyncio.CancelledError:
            if self.partial_text:
                await durable(self._keep_partial())
            raise
        except LLMError as exc:
            return Failed(str(exc), exc.failure)

    async def _child_rounds(self) -> TurnOutcome:
        """A sub-agent's rounds: no mail is folded in (it waits for the root's next round)."""
        if self.resumed:
            self.rounds = 0  # a restarted child gets its budget again
        while True:
            if self.token.cancelled:
                raise asyncio.CancelledError
            if self.rounds >= self.services.max_rounds:
                return Exhausted(self.services.max_rounds)
            self.rounds += 1
            step = await self._round()
            if not isinstance(step, RunAgain):
                return step

    async def _child_round(self, level: Level) -> RoundStep:
        """One round in the sub-agent's own frame, with its own prompt and tools."""
        s = self.services
        limit = s.context.max_history_messages
        entries = await s.history.entries(self.session_id, limit=limit, stack_id=level.stack_id)
        memory = s.memory.for_session(self.session_id) if s.memory is not None else ""
        context = replace(
            s.context, static_system=with_memory(level.system or s.context.static_system, memory)
        )
        await load_images(context, entries)
        await self.refresh_tools()
        result = await self._call_llm(build_messages(entries, context, s.clock()))
        self.tokens_in += result.usage.input_tokens
        self.tokens_out += result.usage.output_tokens
        entry = await durable(
            s.history.record_round(
                session_id=self.session_id, turn_id=self.turn_id, result=result, stack_id=level.stack_id
            )
        )
        self.partial_text = ""
        if not result.tool_calls:
            return Final(result.text)
        await self._run_calls(entry.calls)
        return RunAgain()

    def _child_stream(self, event: StreamEvent) -> None:
        if isinstance(event, LLMTextDelta):
            self.partial_text += event.text
        elif isinstance(event, StreamRestart):
            self.partial_text = ""

    async def _keep_partial(self) -> None:
        stack_id = self.level.stack_id if self.level is not None else None
        await self.services.history.record_round(
            session_id=self.session_id,
            turn_id=self.turn_id,
            result=LLMRound(text=self.partial_text),
            status=RowStatus.CANCELLED,
            stack_id=stack_id,
        )

    async def _resume_children(self) -> None:
        """Restart recovery (resume_turn 3b, 6, 7): settle an interrupted batch, then resume the
        deepest active frame and carry its result into its parent's call, up to the root."""
        s = self.services
        await reap_interrupted_parallel_batches(s.frames, s.history, self.session_id)
        while frames := await s.frames.active_children(self.session_id):
            await self._resume_child(frames)

    async def _resume_child(self, frames: list[ChildFrame]) -> None:
        s = self.services
        deepest = frames[-1]
        call = await s.history.call(deepest.parent_tool_call_id)
        if call is None or ToolCallStatus(call.status).terminal:  # its result already landed
            await s.frames.close([deepest.id])
            return
        parent = self._here()
        try:
            for frame in frames[:-1]:  # one frame per depth once batches are reaped
                parent = child_level(parent, s.agents.spec(frame.agent), frame.id, s.agents)
            result: Performed = (
                ToolCallStatus.DONE,
                await self._run_child(call, parent, deepest, resumed=True),
            )
        except ToolError as exc:
            result = ToolCallStatus.FAILED, str(exc)
        await self._finish(call, call_summary(call), *result)

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
    await s.frames.close_all_children(address.session_id)  # the sub-agents stop with their root
    for question in await s.questions.cancel_session(address.session_id) if s.questions is not None else []:
        s.bus.emit(question_resolved(address, question))  # its buttons read "cancelled"
    await s.sessions.finish_turn(turn_id, TurnStatus.CANCELLED)


async def round_history(
    services: TurnServices, session_id: int, *, ephemeral: bool, compact: int | None = None
) -> tuple[list[HistoryEntry], Compacted | None]:
    """A round's history: the newest ``max_history_messages`` — or, under compaction, what the
    summary in force does not cover, compacted first when it is due and ``compact`` (the static
    prompt's size) is given (the prefetch only reads)."""
    s = services
    if s.compaction is None or not s.compaction.applies(ephemeral=ephemeral):
        return await s.history.entries(session_id, limit=s.context.max_history_messages), None
    if compact is None:
        view = await s.compaction.view(session_id)
    else:
        view = await s.compaction.prepared(session_id, await s.llm_for(session_id), compact)
    return view.entries, view.compacted


async def load_images(context: ContextSettings, entries: list[HistoryEntry]) -> None:
    """Read (off the event loop) the images a context shows, before its synchronous build."""
    if context.images is not None:
        await context.images.load(images_needed(entries, context))


def offered_tools(services: TurnServices, source: str) -> ToolRegistry:
    """The tools a session's model is offered: none that waits for the user in a tic or cron run."""
    headless = source in (SessionSource.TIC, SessionSource.CRON)
    return services.tools.for_headless() if headless else services.tools


async def with_mcp_tools(
    services: TurnServices, base: ToolRegistry, session_id: int, agent: str, frame: int = ROOT_FRAME
) -> ToolRegistry:
    """``base`` plus the MCP tools ``agent`` may call in ``frame`` (within its allowlist): the one
    place the prefetch and each round get them from, so the prefetched request offers the same."""
    if services.mcp is None:
        return base
    spec = services.agents.catalog.get(agent)
    return await services.mcp.extend(base, session_id, frame, spec.tools if spec is not None else None)


@dataclass(slots=True, frozen=True)
class ChildSpawner:
    """:class:`~runtime.tools.base.SubAgents` for one ``execute_task`` call of one runner."""

    runner: TurnRunner
    call: ToolCallRow

    async def run(self, agent: str, task: str) -> str:
        return await self.runner.spawn_child(self.call, agent, task)


def _why(outcome: TurnOutcome) -> str:
    """Why a sub-agent gave no answer, as its parent reads it."""
    if isinstance(outcome, Exhausted):
        return texts.exhausted(outcome.rounds)
    if isinstance(outcome, Failed):
        return outcome.error
    return str(outcome.kind)


_PHASES = {
    ToolCallStatus.DONE: ToolPhase.DONE,
    ToolCallStatus.DETACHED: ToolPhase.DETACHED,
    ToolCallStatus.REJECTED: ToolPhase.REJECTED,
}


def _sent_arguments(call: ToolCallRow) -> dict[str, Any]:
    """The arguments as the model sent them (already parsed once: a JSON object)."""
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def call_summary(call: ToolCallRow, limit: int = 60) -> str:
    """A short human hint for the status line: the path or the command."""
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return ""
    if not isinstance(args, dict):
        return ""
    value = args.get("command") or args.get("path") or args.get("agent") or ""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
