"""Runtime events → Telegram messages, one ordered outbox per chat, or per forum topic.

The runtime's event bus calls :meth:`Delivery.__call__` synchronously; the event is put on its
place's outbox (a chat, or a forum topic of one: each topic is its own session, streaming and
working beside the others; or a session another spawned there, issue 29, which works beside the
chat's own and shows only what :mod:`.spawned_view` says) and a single task per place turns
events into sends and edits, so the runtime's output to one place leaves in order while places
do not wait for each other. A topic's outbox sends through a bot bound to the topic
(:mod:`..core.topics`), so every message for it carries its ``message_thread_id``; a topic
closed or deleted meanwhile stops its outbox
(:meth:`Delivery._gone`): what it held is dropped (durable output counted as refused for good,
so nothing retries in a loop) until the topic's next turn starts. Every call it makes
takes the chat's turn in the chat queue (:mod:`..core.chat_queue`), the one path to a chat that
handler replies take too: an acknowledgement and an answer keep the order they were sent in,
and a 429 on either pauses both.

The outbox joins four parts, each owning its own state:

- the streamed reply (:mod:`.stream`: a draft, or a message edited in place);
- the turn's tool status line (:mod:`.status_line`);
- the chat's actions, "typing…" or a file's (:mod:`.chat_actions`);
- the chat's edit pace (:class:`~.stream.EditPace`): streamed text and status line are edited
  no more often than ``telegram.stream_edit_interval``, and a pending edit is always flushed
  before anything else is sent to that chat.

A call that detaches (runs on in the background) gets a live line of its own
(:mod:`.jobs_view`): sent and closed from this outbox, its elapsed time ticked by that module's
per-chat ticker.

What a later process must still edit is recorded (:mod:`..core.records`): a status line until
its turn ends with it showing its final marks — one a restart cut short is closed on start
(:meth:`Delivery.recover`) — and a prompt until its decision is shown, so a decided prompt is
edited whichever process hears of the decision, and only once.

Files: the agent's ``send_file`` (:class:`FileOutput`, durable like a notice) is uploaded with
the file's bytes as they are when it is sent (:func:`..core.files.upload`), an
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

from agentgram.bot.shown import reaches_chat
from agentgram.bot.telegram.core.chat_queue import chat_turn
from agentgram.bot.telegram.core.files import Upload, UploadRefused, fits_caption, upload
from agentgram.bot.telegram.core.groups import (
    Speakers,
    question_key,
    requester_key,
    requester_value,
    session_question_key,
)
from agentgram.bot.telegram.core.port import BotApi, FileUpload, TelegramError, TopicGone
from agentgram.bot.telegram.core.records import ChatRecords, PromptShown, StatusLine
from agentgram.bot.telegram.core.sender import (
    BRIEF,
    ONCE,
    PERSISTENT,
    Edit,
    Retry,
    edit_html,
    send_html,
)
from agentgram.bot.telegram.core.topics import in_topic
from agentgram.bot.telegram.views import (
    agents_view,
    jobs_view,
    questions_view,
    queued_view,
    spawned_view,
    todos_view,
)
from agentgram.bot.telegram.views.chat_actions import RECORD_VOICE, UPLOAD_DOCUMENT, ChatActions
from agentgram.bot.telegram.views.drafts import DraftChats
from agentgram.bot.telegram.views.prompts import approval_prompt, decided_prompt, decision_line
from agentgram.bot.telegram.views.render import escape, markdown_to_html
from agentgram.bot.telegram.views.reports import report_html
from agentgram.bot.telegram.views.status_line import StatusView, close_left_line
from agentgram.bot.telegram.views.stream import EditPace, StreamView
from agentgram.runtime.app import ApprovalStatus, SessionSource
from agentgram.runtime.door.protocols import Door
from agentgram.runtime.door.values import SpawnedSession
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    ApprovalResolved,
    AttachmentAction,
    AttachmentActivity,
    CallDetached,
    CallFinished,
    FileOutput,
    MessagesRead,
    Notice,
    OutcomeKind,
    QuestionAsked,
    QuestionResolved,
    Report,
    RoundEnded,
    RuntimeEvent,
    StreamEnded,
    StreamReset,
    SubAgentFinished,
    SubAgentStarted,
    TextDelta,
    TodosChanged,
    ToolActivity,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.one_waiter import OneReaderQueue
from agentgram.runtime.infra.tasks import TaskSet

log = get_logger("telegram.delivery")

TYPING_EVERY = 4.0
"""Seconds between chat actions (Telegram shows one for ~5 s)."""
TYPING_AFTER = 0.4
"""Seconds a turn works before "typing…" shows."""
Place = tuple[int, int, int]
"""An outbox's place: the chat id, the forum topic (``message_thread_id``; 0: none) and the
spawned session it shows (0: the place's own sessions)."""
IDLE_EVICT = 5.0
"""Seconds a chat's outbox waits with nothing to do before its task ends and it is dropped
(the next event makes a new one); keeps memory flat however many chats and headless runs come.

Nothing to do is between turns: during one the chat shows typing, a status line or streamed
text, and the outbox is busy. An outbox with its task is ≈ 2 KB, and making one is a few objects
and a task, so it is kept only briefly: at 60 s, every chat that had talked in the last minute
held one (≈ 2 MiB at 1,000 chats, issue 31). A slower edit pace (``stream_edit_interval``) keeps it
that much longer, so a new outbox's first edit never comes sooner after its predecessor's last
than the pace allows."""
_ACTIVITY = {
    AttachmentAction.FETCHING: UPLOAD_DOCUMENT,
    AttachmentAction.TRANSCRIBING: RECORD_VOICE,
}


@dataclass(slots=True, eq=False)
class ChatOutbox:
    """One chat's (or forum topic's) events waiting to be shown, and the parts that show them."""

    chat_id: int
    thread_id: int
    bot: BotApi
    """The Bot API as this place sees it: bound to its topic, if any."""
    stream: StreamView
    status: StatusView
    actions: ChatActions
    pace: EditPace
    queue: OneReaderQueue[RuntimeEvent] = field(default_factory=OneReaderQueue)  # read by its own task alone
    ends_queued: int = 0
    """Round ends waiting in :attr:`queue`: text whose whole arrives with one is not worth a draft
    or a first message to edit (the round's message follows at once: issue 31, CPU per turn)."""
    language: str | None = None
    turn_session: int | None = None
    """The session whose turn is in progress in this chat."""
    gone: bool = False
    """The topic was closed or deleted: nothing more is sent until its next turn starts."""
    session: int = 0
    """The spawned session this outbox shows (0: it shows the place's own)."""
    spawned: SpawnedSession | None = None
    terminals: bool = False
    """The spawned session is a terminal chat's helper (``bot.terminal`` shows it, not this chat)."""
    """That session, as the chat names it (looked up with its first event)."""

    @property
    def place(self) -> Place:
        return self.chat_id, self.thread_id, self.session

    def idle(self) -> bool:
        working = self.stream.busy() or self.status.line is not None or self.actions.busy()
        return self.queue.empty() and not working


class Delivery:
    def __init__(
        self,
        bot: BotApi,
        runtime: Door,
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
        self._idle_evict = max(IDLE_EVICT, edit_interval)  # a new outbox's first edit keeps the pace
        self.upload_limit_mb = upload_limit_mb
        self.first_delay = first_delay
        self.drafts = DraftChats(enabled=drafts, interval=draft_interval)
        self.outboxes: dict[Place, ChatOutbox] = {}
        self.speakers = Speakers()
        """Each group's latest message for the agent (its prompts reply to it: :mod:`..core.groups`)."""
        self.records = ChatRecords(runtime.values)
        self._tasks = TaskSet("delivery")
        """Every task delivery runs (outboxes, typing, closing old status lines); each leaves it when done."""
        self._closing = False
        self.jobs = jobs_view.JobLines(bot, runtime, translator, job_interval)
        runtime.on_restart(self.recover)
        runtime.on_restart(self.jobs.recover)
        runtime.on_chat_claimed(self.recover_chat)  # a cluster's chat taken over from a dead instance
        runtime.on_chat_claimed(self.jobs.recover_chat)

    # --- intake (synchronous, never blocks the runtime) -------------------------

    def __call__(self, event: RuntimeEvent) -> None:
        chat_id = event.to.chat_id
        if chat_id is None or self._closing or event.to.source == SessionSource.TERMINAL:
            return  # a terminal session's output is the terminal's (bot.terminal), not this chat's
        if not reaches_chat(event):
            return  # tic and cron turns reach the chat only as reports and approval prompts
        spawned = event.to.session_id if event.to.source == SessionSource.AGENT else 0
        place = (chat_id, event.to.thread_id, spawned)  # a spawned session's output: apart
        box = self.outboxes.get(place)
        if box is None:
            box = self.outboxes[place] = self._outbox(*place)
            self._tasks.spawn(self._run(box), name=f"outbox-{chat_id}-{event.to.thread_id}-{spawned}")
        if event.to.language:
            box.language = event.to.language
        if isinstance(event, RoundEnded):
            box.ends_queued += 1
        box.queue.put_nowait(event)

    def _outbox(self, chat_id: int, thread_id: int, spawned: int) -> ChatOutbox:
        bot = in_topic(self.bot, chat_id, thread_id)
        pace = EditPace(self.edit_interval)
        stream = StreamView(bot, chat_id, self.drafts, pace, self.first_delay)
        status = StatusView(bot, chat_id, self.records)
        box: ChatOutbox

        def waits_for_user() -> bool:
            """The chat's turn is blocked on a decision — also one whose prompt a previous process
            sent, which a resumed turn waits on without a new :class:`ApprovalRequested`."""
            session = box.turn_session
            return session is not None and self.runtime.approvals.waits_for_decision(session)

        def quiet() -> bool:
            """Typing would say nothing: the turn waits for the user, or the chat shows its text
            growing, or the round's whole text is next in line."""
            return waits_for_user() or stream.showing() or box.ends_queued > 0

        actions = ChatActions(bot, chat_id, self._tasks, quiet, TYPING_AFTER, TYPING_EVERY)
        box = ChatOutbox(chat_id, thread_id, bot, stream, status, actions, pace, session=spawned)
        return box

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
            wait = self._idle_evict if timeout is None else timeout
            try:
                async with asyncio.timeout(wait):  # no task per wait
                    event = await box.queue.get()
            except TimeoutError:
                if timeout is None and box.idle():
                    del self.outboxes[box.place]  # no await since the check: nothing slips in
                    return
                await self._flush(box, force=False)
                await self._draft(box)
                continue
            try:
                if box.gone and not isinstance(event, TurnStarted):
                    await self._drop(box, event)
                elif box.session:
                    await self._handle_spawned(box, event)
                else:
                    await self._handle(box, event)
            except TopicGone:
                await self._gone(box, event)
            except asyncio.CancelledError:
                raise
            except Exception:  # a delivery failure never stops the chat's outbox
                log.exception("delivering %s to chat %s failed", event.kind, box.chat_id)
            finally:
                if isinstance(event, RoundEnded):
                    box.ends_queued -= 1
                box.queue.task_done()

    def _flush_delay(self, box: ChatOutbox) -> float | None:
        """Seconds until the next edit or draft is due; ``None`` with nothing to show."""
        due = []
        if box.status.pending() or box.stream.edit_pending():
            due.append(box.pace.due_at())
        draft_at = box.stream.draft_due_at()
        if draft_at is not None:
            due.append(draft_at)
        return max(0.0, min(due) - time.monotonic()) if due else None

    async def _flush(self, box: ChatOutbox, *, force: bool, retry: Retry = ONCE) -> bool:
        """Show the changed tool lines and streamed text; ``False`` if the text could not be shown.

        While a reply streams, one try is enough (the next edit carries newer
        text); a round's end passes :data:`PERSISTENT`, so the complete text
        always arrives.
        """
        if not force and not box.pace.ready():
            return True
        if box.status.pending():
            await box.status.flush(retry, box.language)
            box.pace.edited()
        if not box.stream.edit_pending():
            return True
        shown = await box.stream.flush(retry)
        box.pace.edited()
        return shown

    async def _draft(self, box: ChatOutbox) -> None:
        if await box.stream.show_draft():  # refused: the chat streams by edits from now on
            await self._flush(box, force=True)

    async def _handle(self, box: ChatOutbox, event: RuntimeEvent) -> None:
        match event:
            case TextDelta():
                await self._on_delta(box, event.text)
            case StreamReset():  # dirty: a retry that only calls a tool must not leave the partial text
                box.stream.restart()
            case StreamEnded() if not event.has_tool_calls:
                box.stream.complete()
            case RoundEnded():
                await self._on_round_end(box, event)
            case ToolActivity():
                if box.status.tool(event):  # the turn's first call: its line shows at once
                    await self._flush(box, force=True)
            case TurnStarted():
                box.gone = False  # someone wrote there: the topic is open again
                box.turn_session = event.to.session_id
                box.actions.start_typing()
            case TurnFinished():
                await self._on_turn_finished(box, event)
            case ApprovalRequested():
                await self._flush(box, force=True)
                await self._on_approval(box, event)
            case ApprovalResolved():
                await self._on_resolved(box, event)
            case QuestionAsked() | QuestionResolved():  # the agent's question, its buttons, its end
                await self._flush(box, force=True)
                if isinstance(event, QuestionAsked):
                    await self._note_asker(box, event)
                await self._question(box, event)
            case SubAgentStarted() | SubAgentFinished():  # "🤖 main → researcher", "✅ researcher finished"
                await self._flush(box, force=True)
                await agents_view.show(box.bot, box.chat_id, self.t, box.language, event)
            case CallDetached():  # its own live line, ticking, with a ⏹ button
                await self._flush(box, force=True)
                await self.jobs.detached(event, box.language)
            case CallFinished():  # that line's final form
                await self.jobs.finished(event)
            case TodosChanged():  # one message, edited in place
                await self._flush(box, force=True)
                await todos_view.show(box.bot, self.runtime, self.t, box.language, event)
            case MessagesRead():  # queued messages the turn folded in: their acknowledgements say so
                html = self.t.t(box.language, "queued-folded", step=event.step)
                for seq in event.seqs:
                    await queued_view.settle(self.runtime.values, box.bot, event.to.session_id, seq, html)
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
                shown = _ACTIVITY.get(event.action)
                if shown is None:
                    box.actions.stop()
                else:
                    box.actions.show(shown)

    async def _handle_spawned(self, box: ChatOutbox, event: RuntimeEvent) -> None:
        """A spawned session's event (what :func:`~bot.shown.reaches_chat` lets through): its final
        answer is one message under its name, the rest is shown as a chat's own (:meth:`_say`,
        the prompts and questions name it, by ``box.spawned``)."""
        if box.spawned is None and not box.terminals:
            box.spawned = await self.runtime.sessions.spawned(box.session, box.chat_id)
            if box.spawned is None:  # a terminal's helper: the terminal shows it, settles its prompts
                found = await self.runtime.sessions.spawned(
                    box.session, box.chat_id, source=SessionSource.TERMINAL
                )
                box.terminals = found is not None
        if box.spawned is None:  # not a session of this chat's: not shown here
            if not box.terminals:  # nobody's: its prompts expire rather than hang
                await self._drop(box, event)
        elif isinstance(event, RoundEnded):
            if event.text.strip() and not box.spawned.answers_call:  # a task's answer is its call's
                values, lang = self.runtime.values, box.language
                sent = await spawned_view.send_answer(
                    box.bot, values, self.t, lang, box.spawned, box.chat_id, event.text
                )
                if sent is None:
                    return  # not shown: a restart sends it again
            if event.row_id is not None:
                await self.runtime.chat.answer_shown(event.row_id)
        else:
            await self._handle(box, event)

    async def _gone(self, box: ChatOutbox, event: RuntimeEvent) -> None:
        """The topic was closed or deleted while ``event`` was shown: the outbox stops (told
        apart from a transient failure, which is retried), the event is dropped, and so is what
        follows until the topic's next turn starts."""
        if not box.gone:
            log.warning(
                "forum topic %s of chat %s is closed or deleted: its output is dropped until it is "
                "written in again",
                box.thread_id,
                box.chat_id,
            )
        box.gone = True
        box.actions.stop()
        box.stream.end()
        await self._drop(box, event)

    async def _drop(self, box: ChatOutbox, event: RuntimeEvent) -> None:
        """Leave ``event`` unshown in a gone topic; durable output counts as refused for good
        (a restart does not send it again), a prompt as not shown (its turn goes on)."""
        match event:
            case Notice() | Report() | FileOutput() if event.outbox_id is not None:
                await self.runtime.chat.output_shown(event.outbox_id)
            case RoundEnded() if not event.has_tool_calls and event.row_id is not None:
                await self.runtime.chat.answer_shown(event.row_id)
            case ApprovalRequested():
                await self.runtime.approvals.prompt_not_shown(event.request_id)
            case TurnFinished():
                box.turn_session = None
                await box.status.finish()
            case _:
                pass

    async def _say(
        self, box: ChatOutbox, html: str, silent: bool, outbox_id: int | None, *, reply_to: int | None = None
    ) -> None:
        """A notice or report: sent until delivered (or refused for good), then reported shown; a
        spawned session's under its name."""
        await self._flush(box, force=True)
        if box.spawned is not None:
            html = spawned_view.signed(self.t, box.language, box.spawned, html)
        await send_html(box.bot, box.chat_id, html, silent=silent, reply_to=reply_to, retry=PERSISTENT)
        if outbox_id is not None:
            await self.runtime.chat.output_shown(outbox_id)

    async def _on_delta(self, box: ChatOutbox, text: str) -> None:
        first = box.stream.add(text)
        if box.ends_queued:  # the round's whole text is next in line: no draft, no message to edit
            return
        if not first:
            await self._draft(box)
            return
        await self._flush(box, force=True)  # pending tool lines first
        if await box.stream.open():
            await self._flush(box, force=True)

    async def _on_round_end(self, box: ChatOutbox, event: RoundEnded) -> None:
        box.stream.round_text(event.text)  # the round's whole text, rendered and shown once
        shown = await self._flush(box, force=True, retry=PERSISTENT)
        box.stream.end()
        if shown and not event.has_tool_calls and event.row_id is not None:
            await self.runtime.chat.answer_shown(event.row_id)  # else a restart sends it

    async def _on_turn_finished(self, box: ChatOutbox, event: TurnFinished) -> None:
        await self._flush(box, force=True, retry=BRIEF)  # the tool lines' final ✓ / ✗
        box.actions.stop_typing()
        await box.status.finish()
        box.stream.end()
        box.turn_session = None
        text = self._turn_ending(box, event)
        if box.spawned is not None and box.spawned.answers_call:
            text = None  # a sub-agent's task: its parent's call tells how it ended
        if text is not None:
            if box.spawned is not None:  # a spawned session's failure: under its name
                text = spawned_view.signed(self.t, box.language, box.spawned, text)
            await send_html(box.bot, box.chat_id, text, retry=PERSISTENT)

    def _turn_ending(self, box: ChatOutbox, event: TurnFinished) -> str | None:
        """What the chat is told of a turn that did not end well (``None``: it did)."""
        if event.outcome == OutcomeKind.FAILED:  # one locale text per failure kind, never exception text
            failure = event.failure
            key = failure.locale_key if failure is not None else "turn-failed"
            raw = failure.params if failure is not None else {}
            params = {k: escape(v) if isinstance(v, str) else v for k, v in raw.items()}
            return self.t.t(box.language, key, **params)
        if event.outcome == OutcomeKind.EXHAUSTED:
            return self.t.t(box.language, "turn-exhausted", rounds=self.runtime.max_tool_rounds)
        return None

    # --- approvals -------------------------------------------------------------

    async def _on_approval(self, box: ChatOutbox, event: ApprovalRequested) -> None:
        if event.to.session_id == box.turn_session:
            box.actions.stop_typing()  # the turn waits for the user now
        prompt = approval_prompt(self.t, box.language, event.request_id, event.details)
        if box.spawned is not None:  # which session asks
            prompt = spawned_view.asked_by(prompt, spawned_view.asks_line(self.t, box.language, box.spawned))
        spoke = self.speakers.last(box.chat_id, box.thread_id)  # a group's: the prompt answers who asked
        sent = await send_html(
            box.bot,
            box.chat_id,
            prompt.html,
            reply_markup=prompt.keyboard,
            reply_to=spoke.message_id if spoke is not None else None,
            retry=PERSISTENT,
        )
        if sent is None:
            await self._prompt_not_shown(box, event)
            return
        if spoke is not None:
            await self.runtime.values.set_value(requester_key(event.request_id), requester_value(spoke))
        await self.records.save_prompt(PromptShown(event.request_id, sent.message_id, prompt.body))
        await self.runtime.approvals.prompt_shown(event.request_id, box.chat_id, sent.message_id)
        if prompt.attachment is not None:
            try:
                attached = FileUpload(
                    prompt.attachment.text.encode(),
                    prompt.attachment.filename,
                    reply_to_message_id=sent.message_id,
                    disable_notification=True,
                )
                await box.bot.send_file(box.chat_id, attached)
            except TelegramError as error:
                log.warning("could not attach the full diff: %s", error)

    async def _question(self, box: ChatOutbox, event: QuestionAsked | QuestionResolved) -> None:
        """The agent's question, its buttons, its end; a spawned session's names it, and a reply to
        it is that session's (a typed answer answers it: :mod:`..handlers.messages`)."""
        asker = box.spawned
        header = spawned_view.asks_line(self.t, box.language, asker) if asker is not None else None
        sent = await questions_view.show(box.bot, self.runtime, self.t, box.language, event, header=header)
        if sent is not None and asker is not None:
            await spawned_view.remember(self.runtime.values, box.chat_id, sent, asker.ref.id)

    async def _note_asker(self, box: ChatOutbox, event: QuestionAsked) -> None:
        """A group's question is the asker's to answer under ``approver: requester``: remembered
        by question (its buttons) and by session (a text answer)."""
        spoke = self.speakers.last(box.chat_id, box.thread_id)
        if spoke is None:
            return
        for key in (question_key(event.question_id), session_question_key(event.to.session_id)):
            await self.runtime.values.set_value(requester_key(key), requester_value(spoke))

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
        await self.runtime.approvals.prompt_not_shown(event.request_id)
        notice = self.t.t(box.language, "approval-not-shown", tool=escape(event.details.tool_name))
        await send_html(box.bot, box.chat_id, notice, retry=BRIEF)

    async def _on_resolved(self, box: ChatOutbox, event: ApprovalResolved) -> None:
        """Edit the prompt to its decision, once: a decision a resumed turn reports again finds
        no record (shown already), nor does one whose prompt was never shown."""
        if event.to.session_id == box.turn_session and event.status != ApprovalStatus.CANCELLED:
            box.actions.start_typing()  # the turn goes on
        prompt = await self.records.prompt(event.request_id)
        if prompt is None:
            return
        line = decision_line(self.t, box.language, event.status, event.reason)
        edited = await edit_html(box.bot, box.chat_id, prompt.message_id, decided_prompt(prompt.body, line))
        if edited != Edit.FAILED:  # a failed edit is tried again when a restart reports it again
            await self.records.drop_prompt(event.request_id)

    # --- files -----------------------------------------------------------------

    async def _on_file(self, box: ChatOutbox, event: FileOutput) -> None:
        """Upload until delivered or refused for good (then the chat is told why), then report it
        shown; a caption too long for Telegram follows as a reply to the file."""
        path = Path(event.path)
        caption = markdown_to_html(event.caption) if event.caption else None
        inline = caption if caption is not None and fits_caption(caption) else None
        box.actions.show(UPLOAD_DOCUMENT)
        try:
            content = await asyncio.to_thread(path.read_bytes)
            file = Upload(content, path.name, inline, event.as_photo, self.upload_limit_mb)
            async with chat_turn(box.bot, box.chat_id):  # its retries keep the file's place
                sent = await upload(box.bot, box.chat_id, file, PERSISTENT)
        except FileNotFoundError:
            await self._file_not_sent(box, path.name, self.t.t(box.language, "file-send-missing"))
        except OSError as error:
            await self._file_not_sent(box, path.name, error.strerror or str(error))
        except UploadRefused as error:
            await self._file_not_sent(box, path.name, str(error))
        else:
            if caption is not None and inline is None:
                await send_html(box.bot, box.chat_id, caption, reply_to=sent.message_id, retry=PERSISTENT)
        finally:
            box.actions.stop()
        if event.outbox_id is not None:
            await self.runtime.chat.output_shown(event.outbox_id)

    async def _file_not_sent(self, box: ChatOutbox, name: str, reason: str) -> None:
        text = self.t.t(box.language, "file-send-failed", name=escape(name), reason=escape(reason))
        await send_html(box.bot, box.chat_id, text, retry=PERSISTENT)

    # --- what a previous process left --------------------------------------------

    async def recover(self) -> None:
        """On start, before any turn resumes (``Runtime.restart_hooks``): the status lines a previous
        process left are read now and closed in the background, each call marked with its stored
        final status or "⚠️ interrupted" (a resumed turn shows its calls on a new line)."""
        lines = await self.records.lines()
        if lines:
            self._tasks.spawn(self._close_lines(lines), name="close-status-lines")

    async def recover_chat(self, chat_id: int) -> None:
        """:meth:`recover` for one chat, which this instance of a cluster has just claimed from
        another (``Runtime.claim_hooks``)."""
        lines = [line for line in await self.records.lines() if line.chat_id == chat_id]
        if lines:
            self._tasks.spawn(self._close_lines(lines), name=f"close-status-lines-{chat_id}")

    async def _close_lines(self, lines: list[StatusLine]) -> None:
        for line in lines:
            try:
                await close_left_line(self.bot, self.t, self.runtime, self.records, line)
            except asyncio.CancelledError:
                raise
            except Exception:  # one line must not keep the others open
                log.exception("closing the status line %s failed", line.key)


__all__ = ["IDLE_EVICT", "TYPING_AFTER", "TYPING_EVERY", "ChatOutbox", "Delivery"]
