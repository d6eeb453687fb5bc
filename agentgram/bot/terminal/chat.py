"""The terminal chat: one user's session of source ``terminal``, through the runtime's facade.

It does what the Telegram adapter does, on prompt_toolkit and Rich: the
user's lines become mail (:meth:`Runtime.accept_user_message`), commands the
facade's calls, and the runtime's events output. Events addressed to another
source are not its business (the Telegram adapter ignores the terminal's in
turn); running alone, it also shows what tic and cron runs address to its
user's chat (reports and their approval prompts), which nobody else would.
The helpers its agent spawns (issue 29) are its business too: of each it shows
what a Telegram chat shows of its own (:func:`~bot.shown.reaches_chat`), each
answer or failure under the helper's name, each prompt or question under a line
naming who asks, and answered here as the terminal's own are.

Design choices where the issue is silent:

* While a reply streams, its last lines show live above the input line (in
  the prompt's message, with the running calls), and the finished round is
  printed once, rendered as Markdown: text printed above a prompt_toolkit
  prompt cannot be rewritten, so printing the stream and then its rendering
  would show every answer twice.
* A pending approval or question takes the input line: the next line answers
  it (``/commands`` still work); a line that is no answer asks again.
* Ctrl-C is ``/stop``; a second one within :data:`EXIT_WINDOW` seconds exits;
  Ctrl-D exits too. Leaving stops nothing: like a Telegram bot's restart, a
  turn still running is resumed by the next start.
* The user's language is ``locale.default`` (a terminal has no client language).
* A line whose handling fails is logged and reported in one line; the chat reads on
  (one odd line must not end a chat, nor the bot beside it).
* ``prompt_async`` runs with ``handle_sigint=False``: prompt_toolkit would otherwise remove
  the process's SIGINT handler (the bot's, or :func:`bot.terminal.app.run_alone`'s) after the
  first prompt; Ctrl-C typed at the prompt still arrives, as a key.
* Which helpers are the terminal's is the door's rule (:meth:`SessionsDoor.spawned` with
  ``source=TERMINAL``: spawned under a terminal session of this user, an earlier one's after
  ``/new`` too, so their prompts do not hang); beside the bot, a private chat's helpers, which
  carry the same chat id, are the bot's. The answer is kept per session id, the last
  :data:`HELPERS_KEPT`.
* ``/rollback`` is a dialog of its own (:mod:`bot.terminal.rollback`): while it asks, the next
  line answers it (after a pending approval, which a running turn would ask first).
* An approval restored from the history (the start-up's pending list) does not offer
  ``always``: whether a rule can express the call is known only from the request's event.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console, Group, RenderableType
from rich.text import Text

from agentgram.bot.shown import STEERABLE, ack_key, decision_key, reaches_chat
from agentgram.bot.terminal import view
from agentgram.bot.terminal.answers import (
    Command,
    CommandName,
    UnknownCommand,
    Verdict,
    number,
    option_chosen,
    parse_approval,
    parse_command,
)
from agentgram.bot.terminal.rollback import RollbackDialog
from agentgram.runtime.app import SessionRef, SessionSource, Steer, Steered, is_headless
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.door.values import SpawnedSession
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    ApprovalResolved,
    CallDetached,
    CallFinished,
    CronResult,
    Digest,
    FileOutput,
    LocaleText,
    MessagesRead,
    ModelText,
    Notice,
    OutcomeKind,
    QuestionAsked,
    QuestionResolved,
    Report,
    ReportBody,
    RoundEnded,
    RuntimeEvent,
    StreamReset,
    SubAgentStarted,
    TextDelta,
    TodosChanged,
    ToolActivity,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.tasks import cancel_and_wait

log = get_logger("terminal")

EXIT_WINDOW = 2.0
"""Seconds within which a second Ctrl-C exits instead of stopping again."""
LIVE_LINES = 3
"""Lines of a streaming reply shown live above the input line."""
HELPERS_KEPT = 64
"""Spawned sessions whose membership (the terminal's helper or not) the chat remembers."""


def follow_stderr() -> None:
    """Point the console log at ``sys.stderr`` as it is now: inside ``patch_stdout`` its lines
    print above the prompt instead of through it."""
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:
            handler.setStream(sys.stderr)


def envelope_id() -> str:
    """Each line typed is its own mail; nothing redelivers it, so a fresh id suffices."""
    return f"terminal-{uuid.uuid4().hex}"


_STEERS = {CommandName.NOW: Steer.NOW, CommandName.AFTER: Steer.AFTER, CommandName.CANCEL: Steer.CANCEL}
_STEERED = {Steer.NOW: "queued-now", Steer.AFTER: "queued-after", Steer.CANCEL: "queued-cancelled"}


@dataclass(slots=True)
class PendingApproval:
    request_id: str
    tool: str
    can_always: bool


@dataclass(slots=True)
class Screen:
    """What shows live above the input line, and what the next line answers."""

    stream: str = ""
    tools: dict[int, Text] = field(default_factory=dict)
    working: bool = False
    approvals: list[PendingApproval] = field(default_factory=list)
    question: QuestionAsked | None = None
    shown_answers: set[int] = field(default_factory=set)  # rows the history showed on start


class TerminalChat:
    """Subscribe it (:meth:`attach`) before the runtime starts, so the answers a restart re-sends
    reach it; :meth:`run` reads lines until the user leaves."""

    def __init__(
        self, runtime: Door, translator: Translator, user_id: int, *, history: int, alone: bool
    ) -> None:
        self.runtime = runtime
        self.t = translator
        self.user_id = user_id
        self.history = history
        self.alone = alone
        self.console = Console(highlight=False)  # writes to sys.stdout as it is then (patched)
        self.screen = Screen()
        self.events: asyncio.Queue[RuntimeEvent] = asyncio.Queue()
        self.prompt: PromptSession[str] = PromptSession()
        self._session: SessionRef | None = None
        self._queued: int | None = None
        """The last message queued behind a running turn (its mail seq), until it is read or chosen for."""
        self._last_interrupt = 0.0
        self._unsubscribe: Callable[[], None] | None = None
        self._helpers: dict[int, SpawnedSession | None] = {}
        self.rollback = RollbackDialog(runtime, translator, self.print)

    # --- intake (synchronous: the runtime's bus must never wait) ---------------------

    def attach(self) -> None:
        self._unsubscribe = self.runtime.subscribe(self)

    def __call__(self, event: RuntimeEvent) -> None:
        if event.to.chat_id != self.user_id:
            return
        source = event.to.source
        headless = is_headless(source) and self.alone and reaches_chat(event)
        helper = source == SessionSource.AGENT and reaches_chat(event)  # whose: asked on output
        if source == SessionSource.TERMINAL or headless or helper:
            self.events.put_nowait(event)

    # --- the chat ---------------------------------------------------------------

    async def session(self) -> SessionRef:
        if self._session is None:
            self._session = await self.runtime.chat.chat_session(
                self.user_id, user_id=self.user_id, language=None, source=SessionSource.TERMINAL
            )
        return self._session

    async def run(self) -> None:
        """Show the history, then read lines until Ctrl-D, ``/exit`` or a second Ctrl-C."""
        try:
            with patch_stdout(raw=True):
                follow_stderr()
                await self._greet()
                output = asyncio.create_task(self._show_events(), name="terminal-output")
                try:
                    await self._read_lines()
                finally:
                    await cancel_and_wait(output)
                    if self._unsubscribe is not None:
                        self._unsubscribe()
                    self.print(view.worded(self.t, "terminal-bye"))
        finally:
            follow_stderr()  # the real stderr again, however the chat ended

    def print(self, renderable: RenderableType) -> None:
        self.console.print(renderable)

    async def _greet(self) -> None:
        self.print(view.worded(self.t, "terminal-welcome"))
        session = await self.session()
        past = await self.runtime.chat.recent_exchanges(session, self.history)
        if past:
            self.print(view.worded(self.t, "terminal-history"))
        for exchange in past:
            self.print(view.you(exchange.question))
            if exchange.answer:
                self.print(view.answer(exchange.answer))
            if exchange.answer_row_id is not None:
                self.screen.shown_answers.add(exchange.answer_row_id)
        for request in await self.runtime.approvals.pending_approvals(session):
            self._await_decision(request.request_id, request.tool, can_always=False)
            self.print(
                view.worded(self.t, "terminal-approval-waiting", tool=request.tool, summary=request.summary)
            )

    async def _read_lines(self) -> None:
        while True:
            try:
                line = await self.prompt.prompt_async(self._prompt_text, handle_sigint=False)
            except KeyboardInterrupt:
                if time.monotonic() - self._last_interrupt < EXIT_WINDOW:
                    return
                self._last_interrupt = time.monotonic()
                await self._stop(interrupted=True)
                continue
            except EOFError:
                return
            if await self._on_line_guarded(line.strip()) is CommandName.EXIT:
                return

    async def _on_line_guarded(self, line: str) -> CommandName | None:
        try:
            return await self._on_line(line)
        except Exception:  # one line that cannot be handled must not end the chat
            log.exception("handling a typed line failed")
            self.print(view.worded(self.t, "terminal-line-failed"))
            return None

    def _prompt_text(self) -> FormattedText:
        """The live lines (running calls, the reply streaming in), then the prompt proper: in the
        prompt's own message, so they show in any terminal (a bottom bar needs cursor reports)."""
        live = [("ansibrightblack", line + "\n") for line in self._live_lines()]
        if self.screen.approvals:
            marker = ("bold ansiyellow", self.t.t(None, "terminal-approval-prompt") + " ")
        elif self.rollback.asked is not None:
            marker = ("bold ansiyellow", self.t.t(None, "terminal-rollback-prompt") + " ")
        elif self.screen.question is not None:
            marker = ("bold ansicyan", self.t.t(None, "terminal-question-prompt") + " ")
        else:
            marker = ("bold ansigreen", "› ")
        return FormattedText([*live, marker])

    def _live_lines(self) -> list[str]:
        screen = self.screen
        lines = [line.plain for line in screen.tools.values()]
        if screen.stream.strip():
            lines += view.clean(screen.stream).rstrip().splitlines()[-LIVE_LINES:]
        elif screen.working and not lines:
            lines.append(self.t.t(None, "terminal-working"))
        return lines

    def _refresh(self) -> None:
        self.prompt.app.invalidate()

    # --- lines typed ------------------------------------------------------------

    async def _on_line(self, line: str) -> CommandName | None:
        if not line:
            return None
        command = parse_command(line)
        if isinstance(command, UnknownCommand):
            self.print(view.worded(self.t, "terminal-unknown-command"))
            self.print(view.worded(self.t, "terminal-help"))
            return None
        if command is not None:
            await self._command(command)
            return command.name
        asked = self.screen.question
        if self.screen.approvals:
            await self._decide(line)
        elif self.rollback.asked is not None:
            await self.rollback.answer(await self.session(), line)
        elif asked is not None and (asked.options or asked.to.source == SessionSource.AGENT):
            await self._answer(line, asked)
        else:
            await self._post(line)
        return None

    async def _post(self, text: str) -> None:
        session = await self.session()
        if await self.runtime.approvals.answer_pending_question(session, text, envelope_id=envelope_id()):
            return  # the agent asked: this line is the answer
        posted = await self.runtime.chat.accept_user_message(
            session, text, envelope_id=envelope_id(), user_ref=str(self.user_id)
        )
        key = ack_key(posted.result)
        if key is not None:
            self.print(view.worded(self.t, key))
        if posted.result in STEERABLE and posted.seq is not None:
            self._queued = posted.seq  # what /now, /after and /cancel apply to (issue 30)
            self.print(view.worded(self.t, "terminal-queued-hint"))

    async def _answer(self, line: str, asked: QuestionAsked) -> None:
        """An option's number, or the user's own words: a helper's question takes them as its
        answer; the terminal's own agent's takes them through :meth:`_post`, as any line."""
        option = option_chosen(line, len(asked.options))
        if option is None and asked.to.source != SessionSource.AGENT:
            await self._post(line)
            return
        result = await self.runtime.approvals.answer_question(
            asked.question_id, option=option, text=line, envelope_id=envelope_id()
        )
        if not result.applied:
            self.print(view.worded(self.t, "question-toast-stale"))

    async def _decide(self, line: str) -> None:
        pending = self.screen.approvals[0]
        minutes = self.runtime.approvals.trust_minutes
        answer = parse_approval(line, minutes, can_always=pending.can_always)
        if answer is None:
            unclear = (
                "terminal-approval-unclear" if pending.can_always else "terminal-approval-unclear-no-always"
            )
            self.print(view.worded(self.t, unclear, minutes=minutes))
            return
        request, eid = pending.request_id, envelope_id()
        if answer.verdict is Verdict.TRUST_WHILE:
            result, minutes, scope = await self.runtime.approvals.trust_for_a_while(request, envelope_id=eid)
            if result.applied:
                self.print(view.worded(self.t, "terminal-trusted", minutes=minutes, scope=scope))
        elif answer.verdict is Verdict.ALWAYS:
            result, rule = await self.runtime.approvals.trust_always(request, envelope_id=eid)
            if rule is not None:
                self.print(view.worded(self.t, "terminal-always-saved", tool=rule.tool))
        else:
            approved = answer.verdict is Verdict.APPROVE
            result = await self.runtime.approvals.decide(
                request, approved=approved, reason=answer.reason, envelope_id=eid
            )
        self._decided(request)
        if not result.applied:
            self.print(view.worded(self.t, "approval-stale"))

    async def _command(self, command: Command) -> None:
        session, eid = await self.session(), envelope_id()
        match command.name:
            case CommandName.STOP:
                await self._stop(interrupted=False)
            case CommandName.NEW:
                self._session = await self.runtime.chat.new_session(
                    self.user_id,
                    user_id=self.user_id,
                    language=None,
                    envelope_id=eid,
                    source=SessionSource.TERMINAL,
                )
                self.screen.approvals.clear()
                self.screen.question = None
                self.print(view.worded(self.t, "new-session"))
            case CommandName.PAUSE:
                paused = await self.runtime.chat.pause(session, eid)
                self.print(view.worded(self.t, "pausing" if paused else "nothing-to-pause"))
            case CommandName.RESUME:
                resumed = await self.runtime.chat.resume(session, eid)
                self.print(view.worded(self.t, "resumed" if resumed else "nothing-to-resume"))
            case CommandName.APPROVALS:
                await self._list_approvals(session)
            case CommandName.CRON:
                await self._cron(command.args)
            case CommandName.ROLLBACK:
                await self.rollback.command(session, command.args)
            case CommandName.NOW | CommandName.AFTER | CommandName.CANCEL:
                await self._steer(session, _STEERS[command.name], eid)
            case CommandName.HELP:
                self.print(view.worded(self.t, "terminal-help"))
            case CommandName.EXIT:
                pass

    async def _steer(self, session: SessionRef, choice: Steer, eid: str) -> None:
        """``/now``, ``/after``, ``/cancel``: the choice for the last message queued behind the
        running turn, as the bot's buttons make it."""
        if self._queued is None:
            self.print(view.worded(self.t, "terminal-nothing-queued"))
            return
        result = await self.runtime.chat.steer(session, self._queued, choice, eid)
        self._queued = None
        if result.outcome is Steered.APPLIED:
            self.print(view.worded(self.t, _STEERED[choice]))
        elif result.outcome is Steered.READ and result.step is not None:
            self.print(view.worded(self.t, "queued-already-read", step=result.step))
        elif result.outcome is Steered.CANCELLED:
            self.print(view.worded(self.t, "queued-already-cancelled"))
        else:
            self.print(view.worded(self.t, "terminal-nothing-queued"))

    async def _stop(self, *, interrupted: bool) -> None:
        result = await self.runtime.chat.stop(await self.session(), envelope_id())
        if interrupted:
            key = "terminal-stopping" if result.was_running else "terminal-interrupt-idle"
            self.print(view.worded(self.t, key))
        elif not result.was_running:
            self.print(view.worded(self.t, "nothing-to-stop"))

    async def _list_approvals(self, session: SessionRef) -> None:
        pending = await self.runtime.approvals.pending_approvals(session)
        if not pending:
            self.print(view.worded(self.t, "approvals-none"))
            return
        self.print(view.worded(self.t, "approvals-list-header"))
        for request in pending:
            self.print(
                view.worded(self.t, "terminal-approval-waiting", tool=request.tool, summary=request.summary)
            )

    async def _cron(self, args: tuple[str, ...]) -> None:
        """``/cron`` lists the user's jobs; ``/cron kill <id>`` stops a running one."""
        jobs = {job.id: job for job in await self.runtime.jobs.list_jobs(self.user_id)}
        job_id = number(args[1]) if len(args) == 2 and args[0] == "kill" else None
        if job_id is not None:
            job = jobs.get(job_id)
            if job is None:
                self.print(view.worded(self.t, "cron-not-found"))
                return
            killed = await self.runtime.jobs.kill_job(job.id)
            key = "cron-killed" if killed else "cron-not-running"
            self.print(view.worded(self.t, key, title=job.title, id=str(job.id)))
        elif args:
            self.print(view.worded(self.t, "terminal-cron-usage"))
        else:
            self.print(view.worded(self.t, "cron-list-header" if jobs else "cron-none"))
            for job in jobs.values():
                self.print(view.cron_item(self.t, job))

    # --- events out ---------------------------------------------------------------

    async def _show_events(self) -> None:
        while True:
            event = await self.events.get()
            try:
                if event.to.source == SessionSource.AGENT:
                    await self._show_helper(event)
                else:
                    await self._show(event)
            except Exception:  # one event that cannot be shown must not stop the output
                log.exception("showing %s in the terminal failed", event.kind)
            self._refresh()

    async def _show(self, event: RuntimeEvent) -> None:
        screen = self.screen
        match event:
            case TurnStarted():
                screen.working = True
            case TextDelta():
                screen.stream += event.text
            case StreamReset():
                screen.stream = ""
            case RoundEnded():
                await self._round_ended(event)
            case ToolActivity():
                self._tool(event)
            case TurnFinished():
                self._turn_finished(event)
            case ApprovalRequested():
                self.print(view.approval_prompt(self.t, event.details, self.runtime.approvals.trust_minutes))
                self._await_decision(
                    event.request_id, event.details.tool_name, can_always=event.details.can_always
                )
            case ApprovalResolved():
                self._resolved(event)
            case QuestionAsked():
                screen.question = event
                self.print(view.question(self.t, event))
            case QuestionResolved():
                if screen.question is not None and screen.question.question_id == event.question_id:
                    screen.question = None
            case Notice():
                self.print(view.worded(self.t, event.key, **event.params))
                await self._shown(event.outbox_id)
            case Report():
                self._report(event)
                await self._shown(event.outbox_id)
            case FileOutput():
                self.print(view.worded(self.t, "terminal-file", path=event.path, caption=event.caption or ""))
                await self._shown(event.outbox_id)
            case CallDetached():
                self.print(
                    view.worded(self.t, "terminal-call-detached", tool=event.name, summary=event.summary)
                )
            case CallFinished():
                self.print(
                    view.worded(
                        self.t,
                        "terminal-call-finished",
                        tool=event.name,
                        summary=event.summary,
                        status=event.status,
                    )
                )
            case TodosChanged():
                marks = {"pending": "☐", "in_progress": "▶", "done": "☑"}
                lines = (f"{marks[item.status]} {view.clean(item.text)}" for item in event.items)
                self.print(Text("\n".join(lines)))
            case MessagesRead():
                if self._queued in event.seqs:
                    self._queued = None
                    self.print(view.worded(self.t, "queued-folded", step=event.step))
            case SubAgentStarted():
                self.print(Text(view.clean(f"🤖 {event.parent} → {event.agent}"), style="dim"))
            case _:  # thinking, a sub-agent's end, attachment activity: nothing to show
                pass

    async def _helper(self, session_id: int) -> SpawnedSession | None:
        """The spawned session ``session_id`` if it is the terminal's helper (``None``: not
        ours), asked of the door once per session."""
        if session_id not in self._helpers:
            found = await self.runtime.sessions.spawned(
                session_id, self.user_id, source=SessionSource.TERMINAL
            )
            if len(self._helpers) >= HELPERS_KEPT:
                del self._helpers[next(iter(self._helpers))]  # the oldest asked
            self._helpers[session_id] = found
        return self._helpers[session_id]

    async def _show_helper(self, event: RuntimeEvent) -> None:
        """A helper's event (what :func:`~bot.shown.reaches_chat` let through): its answer and a
        turn that ended badly under its name, its prompts and questions under who asks, the rest
        as the terminal's own; never the terminal's stream or tool lines."""
        helper = await self._helper(event.to.session_id)
        if helper is None:
            return  # a Telegram chat's helper beside the bot: the bot shows it
        label = view.helper_label(self.t, helper.name, helper.ref.id)
        match event:
            case RoundEnded():
                if event.text.strip() and not helper.answers_call:  # a task's answer is its call's
                    self.print(Group(label, view.answer(event.text)))
                if event.row_id is not None:
                    await self.runtime.chat.answer_shown(event.row_id)
            case TurnFinished():
                ending = None if helper.answers_call else self._ending(event)
                if ending is not None:
                    self.print(label.append(" ").append_text(ending))
            case ApprovalRequested() | QuestionAsked():
                self.print(view.helper_asks(self.t, helper.name, helper.ref.id))
                await self._show(event)
            case Notice() | Report() | FileOutput():
                self.print(label)
                await self._show(event)
            case _:
                await self._show(event)

    async def _round_ended(self, event: RoundEnded) -> None:
        self.screen.stream = ""
        repeated = event.row_id is not None and event.row_id in self.screen.shown_answers
        if event.text.strip() and not repeated:
            self.print(view.answer(event.text))
        if not event.has_tool_calls and event.row_id is not None:
            await self.runtime.chat.answer_shown(event.row_id)  # else a restart shows it again

    def _tool(self, event: ToolActivity) -> None:
        line = view.tool_line(event.name, event.summary, event.phase, event.runs_command)
        if event.phase in view.ENDED:
            self.screen.tools.pop(event.tool_call_id, None)
            self.print(line)
        else:
            self.screen.tools[event.tool_call_id] = line

    def _turn_finished(self, event: TurnFinished) -> None:
        screen = self.screen
        screen.working, screen.stream = False, ""
        for line in screen.tools.values():
            self.print(line)
        screen.tools.clear()
        ending = self._ending(event)
        if ending is not None:
            self.print(ending)

    def _ending(self, event: TurnFinished) -> Text | None:
        """What the user is told of a turn that did not end well (``None``: it did)."""
        if event.outcome == OutcomeKind.FAILED:
            failure = event.failure
            key = failure.locale_key if failure is not None else "turn-failed"
            return view.worded(self.t, key, **(failure.params if failure is not None else {}))
        if event.outcome == OutcomeKind.EXHAUSTED:
            return view.worded(self.t, "turn-exhausted", rounds=self.runtime.max_tool_rounds)
        return None

    def _await_decision(self, request_id: str, tool: str, *, can_always: bool) -> None:
        if all(p.request_id != request_id for p in self.screen.approvals):
            self.screen.approvals.append(PendingApproval(request_id, tool, can_always))

    def _decided(self, request_id: str) -> None:
        self.screen.approvals = [p for p in self.screen.approvals if p.request_id != request_id]

    def _resolved(self, event: ApprovalResolved) -> None:
        self._decided(event.request_id)
        key = decision_key(event.status, event.reason)
        self.print(view.worded(self.t, key, reason=event.reason or ""))

    def _report(self, event: Report) -> None:
        content = event.content
        items = content.items if isinstance(content, Digest) else (content,)
        for item in items:
            if isinstance(item, CronResult):
                self.print(view.worded(self.t, "terminal-cron-result", title=item.title))
            self.print(self._body(item.body))

    def _body(self, body: ReportBody) -> RenderableType:
        if isinstance(body, ModelText):
            return view.answer(body.text)
        assert isinstance(body, LocaleText)
        return view.worded(self.t, body.key, **body.params)

    async def _shown(self, outbox_id: int | None) -> None:
        if outbox_id is not None:
            await self.runtime.chat.output_shown(outbox_id)
