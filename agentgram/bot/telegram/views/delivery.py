"""Runtime events → Telegram messages, one ordered outbox per chat.

The runtime's event bus calls :meth:`Delivery.__call__` synchronously; the
event is put on its chat's queue and a single task per chat turns events
into sends and edits, so messages to one chat leave in order while chats do
not wait for each other. In a private chat streamed text is shown as a draft
(:mod:`bot.telegram.drafts`: the first text at once, the round's end sends it
as messages). Elsewhere, or where drafts are off or refused, streamed text is
a message edited in place; it and the per-turn tool status line are edited no
more often than ``telegram.stream_edit_interval``; such a reply's first text
waits ``telegram.stream_first_delay``, so a quick reply is sent once,
complete, instead of as a message and an edit right after it; a pending edit
is always flushed before anything else is sent to that chat. A call that
detaches (runs on in the background) gets a live line of its own
(:mod:`bot.telegram.jobs_view`): sent and closed from this outbox, its elapsed
time ticked by that module's per-chat ticker.
A typing action is shown once a turn has worked for ``TYPING_AFTER`` (a
reply that is complete sooner needs none, and Telegram would keep showing
"typing…" for 5 s after it), then re-sent every 4 s while the turn works —
never while it waits for the user's decision on a prompt.

What a later process must still edit is recorded (:mod:`bot.telegram.records`):
a status line until its turn ends with it showing its final marks — one a
restart cut short is closed on start (:meth:`Delivery.recover`) — and a prompt
until its decision is shown, so a decided prompt is edited whichever process
hears of the decision, and only once.

Files: the agent's ``send_file`` (:class:`FileOutput`, durable like a notice) is uploaded with
the file's bytes as they are when it is sent (:func:`bot.telegram.files.upload`), an
``upload_document`` action showing meanwhile; a file gone by then, or one Telegram refuses for
good, is explained in the chat instead. While the runtime fetches or transcribes a message's
files (:class:`AttachmentActivity`) the chat shows ``upload_document`` or ``record_voice``
(instead of typing) until it says it is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentgram.bot.shown import PHASE_MARK, reaches_chat
from agentgram.bot.telegram.core.files import Upload, UploadRefused, fits_caption, upload
from agentgram.bot.telegram.core.port import FileUpload, TelegramError
from agentgram.bot.telegram.core.records import ChatRecords, PromptShown, StatusLine
from agentgram.bot.telegram.core.sender import (
    BRIEF,
    ONCE,
    PERSISTENT,
    Draft,
    Edit,
    MessageGroup,
    Retry,
    edit_html,
    send_html,
)
from agentgram.bot.telegram.views import agents_view, jobs_view, questions_view, todos_view
from agentgram.bot.telegram.views.drafts import DraftChats, DraftStream
from agentgram.bot.telegram.views.prompts import approval_prompt, decided_prompt, decision_line
from agentgram.bot.telegram.views.render import escape, markdown_to_html
from agentgram.bot.telegram.views.reports import report_html
from agentgram.bot.telegram.views.split import split_html
from agentgram.runtime.app import ApprovalStatus, SessionSource, ToolCallStatus
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    ApprovalResolved,
    AttachmentAction,
    AttachmentActivity,
    CallDetached,
    CallFinished,
    FileOutput,
    Notice,
    OutcomeKind,
    QuestionAsked,
    QuestionResolved,
    Report,
    RoundEnded,
    RuntimeEvent,
    StreamReset,
    SubAgentFinished,
    SubAgentStarted,
    TextDelta,
    TodosChanged,
    ToolActivity,
    ToolPhase,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("telegram.delivery")

TYPING_EVERY = 4.0
TYPING_AFTER = 0.4
IDLE_EVICT = 60.0
"""Seconds a chat's outbox waits with nothing to do before its task ends and it is dropped
(the next event makes a new one); keeps memory flat however many chats and headless runs come."""
ACTION_LIMIT = 600.0
"""Seconds a fetch's or transcription's chat action is shown at most, should its end never come."""
TYPING = "typing"
UPLOAD_DOCUMENT = "upload_document"
RECORD_VOICE = "record_voice"
_ACTIVITY = {
    AttachmentAction.FETCHING: UPLOAD_DOCUMENT,
    AttachmentAction.TRANSCRIBING: RECORD_VOICE,
}
_CLOSED_PHASE = {
    ToolCallStatus.DONE: ToolPhase.DONE,
    ToolCallStatus.FAILED: ToolPhase.FAILED,
    ToolCallStatus.REJECTED: ToolPhase.REJECTED,
    ToolCallStatus.CANCELLED: ToolPhase.CANCELLED,
    ToolCallStatus.DETACHED: ToolPhase.DETACHED,
}
"""A stored call's final status as its status line marks it; any other status was interrupted."""


@dataclass(slots=True)
class ToolLine:
    name: str
    summary: str
    phase: ToolPhase
    runs_command: bool = False

    def html(self, mark: str | None = None) -> str:
        icon = "⚙️" if self.runs_command else "🔧"
        summary = f" · <code>{escape(self.summary)}</code>" if self.summary else ""
        return f"{icon} {escape(self.name)}{summary} {mark or PHASE_MARK[self.phase]}"


@dataclass(slots=True)
class ChatOutbox:
    chat_id: int
    queue: asyncio.Queue[RuntimeEvent] = field(default_factory=asyncio.Queue)
    language: str | None = None
    stream: MessageGroup | None = None
    stream_text: str = ""
    stream_dirty: bool = False
    draft: DraftStream | None = None  # the round streams into this draft instead of ``stream``
    tools: dict[int, ToolLine] = field(default_factory=dict)
    tools_group: MessageGroup | None = None
    tools_dirty: bool = False
    tools_turn: int | None = None
    tools_line: StatusLine | None = None  # the status line as last recorded
    turn_session: int | None = None  # the session whose turn is in progress in this chat
    last_edit: float = 0.0
    typing: asyncio.Task[None] | None = None
    action: asyncio.Task[None] | None = None  # a file's chat action (fetching, transcribing, sending)


class Delivery:
    def __init__(  # type: ignore[no-untyped-def]
        self,
        bot,
        runtime,
        translator: Translator,
        edit_interval: float,
        *,
        first_delay: float = 0.0,
        drafts: bool = False,
        draft_interval: float = 0.3,
        job_interval: float = 5.0,
        upload_limit_mb: int = 50,
    ) -> None:
        self.bot = bot
        self.runtime = runtime
        self.t = translator
        self.edit_interval = edit_interval
        self.upload_limit_mb = upload_limit_mb
        self.first_delay = first_delay
        self.drafts = DraftChats(enabled=drafts, interval=draft_interval)
        self.outboxes: dict[int, ChatOutbox] = {}
        self.records = ChatRecords(runtime.values)
        self._tasks = TaskSet("delivery")
        """Every task delivery runs (outboxes, typing, closing old status lines); each leaves it when done."""
        self._closing = False
        self.jobs = jobs_view.JobLines(bot, runtime, translator, job_interval)
        runtime.on_restart(self.recover)
        runtime.on_restart(self.jobs.recover)

    # --- intake (synchronous, never blocks the runtime) -------------------------

    def __call__(self, event: RuntimeEvent) -> None:
        chat_id = event.to.chat_id
        if chat_id is None or self._closing or event.to.source == SessionSource.TERMINAL:
            return  # a terminal session's output is the terminal's (bot.terminal), not this chat's
        if not reaches_chat(event):
            return  # tic and cron turns reach the chat only as reports and approval prompts
        box = self.outboxes.get(chat_id)
        if box is None:
            box = ChatOutbox(chat_id)
            self.outboxes[chat_id] = box
            self._tasks.spawn(self._run(box), name=f"outbox-{chat_id}")
        if event.to.language:
            box.language = event.to.language
        box.queue.put_nowait(event)

    async def close(self) -> None:
        """Deliver what is queued (briefly), then cancel and await every task; idempotent."""
        self._closing = True
        for box in list(self.outboxes.values()):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(box.queue.join(), 2.0)
        await self._tasks.close()
        await self.jobs.close()

    async def idle(self) -> None:
        for box in list(self.outboxes.values()):
            await box.queue.join()

    def queued(self) -> int:
        """Events waiting in the chats' outboxes (``agentgram_telegram_outbox_depth``)."""
        return sum(box.queue.qsize() for box in self.outboxes.values())

    # --- the per-chat worker ---------------------------------------------------

    async def _run(self, box: ChatOutbox) -> None:
        while True:
            timeout = self._flush_delay(box)
            try:
                async with asyncio.timeout(IDLE_EVICT if timeout is None else timeout):  # no task per wait
                    event = await box.queue.get()
            except TimeoutError:
                if timeout is None and self._idle(box):
                    del self.outboxes[box.chat_id]  # no await since the check: nothing slips in
                    return
                await self._flush(box, force=False)
                await self._draft(box)
                continue
            try:
                await self._handle(box, event)
            except asyncio.CancelledError:
                raise
            except Exception:  # a delivery failure never stops the chat's outbox
                log.exception("delivering %s to chat %s failed", event.kind, box.chat_id)
            finally:
                box.queue.task_done()

    @staticmethod
    def _idle(box: ChatOutbox) -> bool:
        working = (box.stream, box.draft, box.tools_group, box.typing, box.action) != (None,) * 5
        return box.queue.empty() and not working

    def _flush_delay(self, box: ChatOutbox) -> float | None:
        """Seconds until the next edit or draft is due; ``None`` with nothing to show."""
        due = []
        if (box.tools_dirty and box.tools_group is not None) or (box.stream_dirty and box.stream is not None):
            due.append(box.last_edit + self.edit_interval)
        if box.stream_dirty and box.draft is not None:
            due.append(box.draft.next_at)
        return max(0.0, min(due) - time.monotonic()) if due else None

    async def _flush(self, box: ChatOutbox, *, force: bool, retry: Retry = ONCE) -> bool:
        """Show the changed tool lines and streamed text; ``False`` if the text could not be shown.

        While a reply streams, one try is enough (the next edit carries newer
        text); a round's end passes :data:`PERSISTENT`, so the complete text
        always arrives.
        """
        if not force and time.monotonic() - box.last_edit < self.edit_interval:
            return True
        if box.tools_dirty and box.tools_group is not None:
            box.tools_dirty = False
            lines = "\n".join(line.html() for line in box.tools.values())
            box.tools_dirty = not await box.tools_group.show(self.bot, lines, retry=min_retry(retry))
            box.last_edit = time.monotonic()
            await self._record_line(box)
        shown = True
        if box.stream_dirty and box.stream is not None:
            box.stream_dirty = False
            shown = await box.stream.show(self.bot, markdown_to_html(box.stream_text), retry=retry)
            box.stream_dirty = not shown
            box.last_edit = time.monotonic()
        return shown

    async def _handle(self, box: ChatOutbox, event: RuntimeEvent) -> None:
        match event:
            case TextDelta():
                await self._on_delta(box, event.text)
            case StreamReset():  # dirty: a retry that only calls a tool must not leave the partial text
                box.stream_text, box.stream_dirty = "", True
            case RoundEnded():
                await self._on_round_end(box, event)
            case ToolActivity():
                await self._on_tool(box, event)
            case TurnStarted():
                box.turn_session = event.to.session_id
                self._start_typing(box)
            case TurnFinished():
                await self._on_turn_finished(box, event)
            case ApprovalRequested():
                await self._flush(box, force=True)
                await self._on_approval(box, event)
            case ApprovalResolved():
                await self._on_resolved(box, event)
            case QuestionAsked() | QuestionResolved():  # the agent's question, its buttons, its end
                await self._flush(box, force=True)
                await questions_view.show(self.bot, self.runtime, self.t, box.language, event)
            case SubAgentStarted() | SubAgentFinished():  # "🤖 main → researcher", "✅ researcher finished"
                await self._flush(box, force=True)
                await agents_view.show(self.bot, box.chat_id, self.t, box.language, event)
            case CallDetached():  # its own live line, ticking, with a ⏹ button
                await self._flush(box, force=True)
                await self.jobs.detached(event, box.language)
            case CallFinished():  # that line's final form
                await self.jobs.finished(event)
            case TodosChanged():  # one message, edited in place
                await self._flush(box, force=True)
                await todos_view.show(self.bot, self.runtime, self.t, box.language, event)
            case Notice():
                params = {k: escape(str(v)) if isinstance(v, str) else v for k, v in event.params.items()}
                text = self.t.t(box.language, event.key, **params)
                await self._say(box, text, event.silent, event.outbox_id, reply_to=event.refers_to_message)
            case Report():
                html = report_html(self.t, box.language, event.content)
                await self._say(box, html, event.silent, event.outbox_id)
            case FileOutput():
                await self._flush(box, force=True)
                await self._on_file(box, event)
            case AttachmentActivity():
                self._on_activity(box, event.action)

    async def _say(
        self, box: ChatOutbox, html: str, silent: bool, outbox_id: int | None, *, reply_to: int | None = None
    ) -> None:
        """A notice or report: sent until delivered (or refused for good), then reported shown."""
        await self._flush(box, force=True)
        await send_html(self.bot, box.chat_id, html, silent=silent, reply_to=reply_to, retry=PERSISTENT)
        if outbox_id is not None:
            await self.runtime.output_shown(outbox_id)

    async def _on_delta(self, box: ChatOutbox, text: str) -> None:
        box.stream_text += text
        box.stream_dirty = True
        if box.draft is not None:
            await self._draft(box)
        elif box.stream is None and box.stream_text.strip():
            await self._flush(box, force=True)  # pending tool lines first
            if self.drafts.offered(box.chat_id):
                box.draft = self.drafts.open(box.chat_id)
                await self._draft(box)  # due at once: the first text shows as it arrives
            else:
                await self._start_edits(box)

    async def _start_edits(self, box: ChatOutbox) -> None:
        box.stream = MessageGroup(box.chat_id)
        box.stream_dirty = True
        # the first text is due after first_delay (the round's end shows it sooner)
        box.last_edit = time.monotonic() + self.first_delay - self.edit_interval
        if self.first_delay <= 0:
            await self._flush(box, force=True)

    async def _draft(self, box: ChatOutbox) -> None:
        """Show the streamed text as the round's draft once one is due; a refused draft turns
        the chat to edits, this round from now on and later ones from their start."""
        draft = box.draft
        if draft is None or not box.stream_dirty or not draft.due():
            return
        box.stream_dirty = False
        outcome = await draft.show(self.bot, markdown_to_html(box.stream_text), self.drafts.interval)
        box.stream_dirty = outcome is Draft.SKIPPED  # tried again when the next one is due
        if outcome is Draft.REFUSED:
            self.drafts.refused(box.chat_id)
            box.draft = None
            await self._start_edits(box)

    async def _on_round_end(self, box: ChatOutbox, event: RoundEnded) -> None:
        box.draft = None  # its text is sent as messages now, which replace it
        if event.text.strip():  # the round's whole text, rendered and shown once
            box.stream = box.stream or MessageGroup(box.chat_id)
            box.stream_text, box.stream_dirty = event.text, True
        shown = await self._flush(box, force=True, retry=PERSISTENT)
        box.stream, box.stream_text, box.stream_dirty = None, "", False
        if shown and not event.has_tool_calls and event.row_id is not None:
            await self.runtime.answer_shown(event.row_id)  # else a restart sends it

    async def _on_tool(self, box: ChatOutbox, event: ToolActivity) -> None:
        line = box.tools.get(event.tool_call_id)
        if line is None:
            box.tools[event.tool_call_id] = ToolLine(
                event.name, event.summary, event.phase, event.runs_command
            )
        else:
            line.phase = event.phase
        box.tools_dirty = True
        if box.tools_group is None:
            box.tools_group = MessageGroup(box.chat_id, silent=True)
            box.tools_turn = event.turn_id
            await self._flush(box, force=True)

    async def _record_line(self, box: ChatOutbox) -> None:
        """Keep the status line's messages and calls durable whenever they change (a restart closes it)."""
        group = box.tools_group
        if group is None or not group.pieces or box.tools_turn is None:
            return
        messages, calls = tuple(piece.message_id for piece in group.pieces), tuple(box.tools)
        known = box.tools_line
        if known is not None and (known.message_ids, known.call_ids) == (messages, calls):
            return
        key = known.key if known is not None else self.records.line_key(box.chat_id, messages[0])
        box.tools_line = StatusLine(box.chat_id, box.tools_turn, messages, calls, box.language, key)
        await self.records.save_line(box.tools_line)

    async def _on_turn_finished(self, box: ChatOutbox, event: TurnFinished) -> None:
        await self._flush(box, force=True, retry=BRIEF)  # the tool lines' final ✓ / ✗
        self._stop_typing(box)
        if box.tools_line is not None and not box.tools_dirty:  # else the next start closes it
            await self.records.drop_line(box.tools_line)
        box.tools, box.tools_group, box.tools_dirty = {}, None, False
        box.tools_turn, box.tools_line, box.turn_session = None, None, None
        box.stream, box.stream_text, box.stream_dirty, box.draft = None, "", False, None
        if event.outcome == OutcomeKind.FAILED:  # one locale text per failure kind, never exception text
            failure = event.failure
            key = failure.locale_key if failure is not None else "turn-failed"
            raw = failure.params if failure is not None else {}
            params = {k: escape(v) if isinstance(v, str) else v for k, v in raw.items()}
            await send_html(self.bot, box.chat_id, self.t.t(box.language, key, **params), retry=PERSISTENT)
        elif event.outcome == OutcomeKind.EXHAUSTED:
            rounds = self.runtime.max_tool_rounds
            text = self.t.t(box.language, "turn-exhausted", rounds=rounds)
            await send_html(self.bot, box.chat_id, text, retry=PERSISTENT)

    async def _on_approval(self, box: ChatOutbox, event: ApprovalRequested) -> None:
        if event.to.session_id == box.turn_session:
            self._stop_typing(box)  # the turn waits for the user now
        prompt = approval_prompt(self.t, box.language, event.request_id, event.details)
        sent = await send_html(
            self.bot, box.chat_id, prompt.html, reply_markup=prompt.keyboard, retry=PERSISTENT
        )
        if sent is None:
            await self._prompt_not_shown(box, event)
            return
        await self.records.save_prompt(PromptShown(event.request_id, sent.message_id, prompt.body))
        await self.runtime.prompt_shown(event.request_id, box.chat_id, sent.message_id)
        if prompt.attachment is not None:
            try:
                attached = FileUpload(
                    prompt.attachment.text.encode(),
                    prompt.attachment.filename,
                    reply_to_message_id=sent.message_id,
                    disable_notification=True,
                )
                await self.bot.send_file(box.chat_id, attached)
            except TelegramError as error:
                log.warning("could not attach the full diff: %s", error)

    async def _prompt_not_shown(self, box: ChatOutbox, event: ApprovalRequested) -> None:
        """Settle a request nobody can see at once, so the turn goes on instead of hanging.

        The request expires (the model reads that no approval came) and the
        chat is told, best effort — the same sends may keep failing.
        """
        log.warning(
            "approval prompt for request %s could not be shown in chat %s; expiring it",
            event.request_id,
            box.chat_id,
        )
        await self.runtime.prompt_not_shown(event.request_id)
        notice = self.t.t(box.language, "approval-not-shown", tool=escape(event.details.tool_name))
        await send_html(self.bot, box.chat_id, notice, retry=BRIEF)

    async def _on_resolved(self, box: ChatOutbox, event: ApprovalResolved) -> None:
        """Edit the prompt to its decision, once: a decision a resumed turn reports again finds
        no record (shown already), nor does one whose prompt was never shown."""
        if event.to.session_id == box.turn_session and event.status != ApprovalStatus.CANCELLED:
            self._start_typing(box)  # the turn goes on
        prompt = await self.records.prompt(event.request_id)
        if prompt is None:
            return
        line = decision_line(self.t, box.language, event.status, event.reason)
        edited = await edit_html(self.bot, box.chat_id, prompt.message_id, decided_prompt(prompt.body, line))
        if edited != Edit.FAILED:  # a failed edit is tried again when a restart reports it again
            await self.records.drop_prompt(event.request_id)

    # --- files -----------------------------------------------------------------

    async def _on_file(self, box: ChatOutbox, event: FileOutput) -> None:
        """Upload until delivered or refused for good (then the chat is told why), then report it
        shown; a caption too long for Telegram follows as a reply to the file."""
        path = Path(event.path)
        caption = markdown_to_html(event.caption) if event.caption else None
        inline = caption if caption is not None and fits_caption(caption) else None
        self._start_action(box, UPLOAD_DOCUMENT)
        try:
            content = await asyncio.to_thread(path.read_bytes)
            file = Upload(content, path.name, inline, event.as_photo, self.upload_limit_mb)
            sent = await upload(self.bot, box.chat_id, file, PERSISTENT)
        except FileNotFoundError:
            await self._file_not_sent(box, path.name, self.t.t(box.language, "file-send-missing"))
        except OSError as error:
            await self._file_not_sent(box, path.name, error.strerror or str(error))
        except UploadRefused as error:
            await self._file_not_sent(box, path.name, str(error))
        else:
            if caption is not None and inline is None:
                await send_html(self.bot, box.chat_id, caption, reply_to=sent.message_id, retry=PERSISTENT)
        finally:
            self._stop_action(box)
        if event.outbox_id is not None:
            await self.runtime.output_shown(event.outbox_id)

    async def _file_not_sent(self, box: ChatOutbox, name: str, reason: str) -> None:
        text = self.t.t(box.language, "file-send-failed", name=escape(name), reason=escape(reason))
        await send_html(self.bot, box.chat_id, text, retry=PERSISTENT)

    def _on_activity(self, box: ChatOutbox, action: AttachmentAction) -> None:
        shown = _ACTIVITY.get(action)
        if shown is None:
            self._stop_action(box)
        else:
            self._start_action(box, shown)

    def _start_action(self, box: ChatOutbox, action: str) -> None:
        self._stop_action(box)
        box.action = self._tasks.spawn(self._show_action(box, action), name=f"action-{box.chat_id}")

    def _stop_action(self, box: ChatOutbox) -> None:
        if box.action is not None:
            box.action.cancel()
            box.action = None

    async def _show_action(self, box: ChatOutbox, action: str) -> None:
        """Telegram shows an action for ~5 s: sent again every 4 s, until stopped (or the limit)."""
        until = time.monotonic() + ACTION_LIMIT
        while time.monotonic() < until:
            try:
                await self.bot.send_chat_action(box.chat_id, action)
            except TelegramError as error:
                log.debug("%s action failed: %s", action, error)
            await asyncio.sleep(TYPING_EVERY)
        box.action = None

    # --- typing ----------------------------------------------------------------

    def _start_typing(self, box: ChatOutbox) -> None:
        if box.typing is None or box.typing.done():
            box.typing = self._tasks.spawn(self._typing(box), name=f"typing-{box.chat_id}")

    def _stop_typing(self, box: ChatOutbox) -> None:
        if box.typing is not None:
            box.typing.cancel()
            box.typing = None

    async def _typing(self, box: ChatOutbox) -> None:
        await asyncio.sleep(TYPING_AFTER)
        while True:
            if not self._waits_for_user(box) and box.action is None:  # a file's action says more
                try:
                    await self.bot.send_chat_action(box.chat_id, TYPING)
                except TelegramError as error:
                    log.debug("typing action failed: %s", error)
            await asyncio.sleep(TYPING_EVERY)

    def _waits_for_user(self, box: ChatOutbox) -> bool:
        """The chat's turn is blocked on a decision — also one whose prompt a previous process sent,
        which a resumed turn waits on without a new :class:`ApprovalRequested`."""
        session = box.turn_session
        return session is not None and self.runtime.waits_for_decision(session)

    # --- what a previous process left --------------------------------------------

    async def recover(self) -> None:
        """On start, before any turn resumes (``Runtime.restart_hooks``): the status lines a previous
        process left are read now and closed in the background, each call marked with its stored
        final status or "⚠️ interrupted" (a resumed turn shows its calls on a new line)."""
        lines = await self.records.lines()
        if lines:
            self._tasks.spawn(self._close_lines(lines), name="close-status-lines")

    async def _close_lines(self, lines: list[StatusLine]) -> None:
        for line in lines:
            try:
                await self._close_line(line)
            except asyncio.CancelledError:
                raise
            except Exception:  # one line must not keep the others open
                log.exception("closing the status line %s failed", line.key)

    async def _close_line(self, line: StatusLine) -> None:
        interrupted = self.t.t(line.language, "tool-interrupted")
        rows = []
        for call in await self.runtime.call_states(line.call_ids):
            phase = _CLOSED_PHASE.get(call.status)
            shown = ToolLine(call.name, call.summary, phase or ToolPhase.RUNNING, call.runs_command)
            rows.append(shown.html(None if phase else interrupted))
        parts = split_html("\n".join(rows)) if rows else []
        edits = [  # a line grown past its messages (a longer mark) keeps its tail unshown
            await edit_html(self.bot, line.chat_id, message_id, part, retry=BRIEF)
            for message_id, part in zip(line.message_ids, parts, strict=False)
        ]
        if Edit.FAILED not in edits:  # shown (or the message is gone): else the next start tries again
            await self.records.drop_line(line)


def min_retry(retry: Retry) -> Retry:
    """Tool status lines are worth a few tries at most, never an outage's wait."""
    return BRIEF if retry is PERSISTENT else retry
