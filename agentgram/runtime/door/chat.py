"""The chat part of the door (``rt.chat``): a chat's session, its mail in, control of its turn
(and of the sessions spawned under it: ``/stop all``, ``/sessions``' buttons), and what the chat
reports back as shown.

:class:`Chat` takes the parts it needs (keyword arguments); :class:`~runtime.app.Runtime` builds
it before the scheduler, which opens headless and home-chat sessions through
:meth:`Chat.chat_session` too. ``post_user_message`` is here for tests and tools that need only
the result; adapters use :meth:`Chat.accept_user_message` (the :class:`~.protocols.ChatDoor`
lists only what adapters use).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from agentgram.runtime.capabilities.attachments.inbox import Inbox
from agentgram.runtime.capabilities.mcp.catalog import McpCatalog
from agentgram.runtime.capabilities.tools.notes import NoteStore
from agentgram.runtime.core.approvals.manager import ApprovalManager
from agentgram.runtime.core.mailbox import (
    Checkpoint,
    ControlAction,
    ControlBody,
    Envelope,
    Receipt,
    Sender,
    SenderKind,
    SqlMailbox,
    Steer,
    Steered,
    UserMessageBody,
)
from agentgram.runtime.core.mailbox.envelope import Attachment
from agentgram.runtime.core.peers import Peers, PeerStatus
from agentgram.runtime.core.sessions.control import ControlDesk
from agentgram.runtime.core.sessions.hub import SessionHub
from agentgram.runtime.core.turn.background import BackgroundCalls
from agentgram.runtime.core.turn.compaction import CompactionReport, Compactor, ContextUsage
from agentgram.runtime.core.turn.context import ContextSettings
from agentgram.runtime.door.control import control_mail
from agentgram.runtime.door.values import (
    PastExchange,
    Posted,
    PostResult,
    SessionRef,
    SteerResult,
    StopResult,
)
from agentgram.runtime.infra.errors import MailboxFull
from agentgram.runtime.infra.events import Address, TodoItem
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.models import ChatSession, Role, SessionSource, utcnow
from agentgram.runtime.infra.storage.outbox import OutboxStore
from agentgram.runtime.infra.storage.search import Exchange, HistorySearch, SearchHit
from agentgram.runtime.infra.storage.sessions import About, ChatSessionCache, SessionStore
from agentgram.runtime.infra.storage.usage_rows import UsageStore

RECENT_ROWS_READ = 200
"""History rows :meth:`Chat.recent_exchanges` looks through for the last few exchanges."""


def past_exchanges(entries: Sequence[HistoryEntry], limit: int) -> list[PastExchange]:
    """Each message the user wrote (not mail the runtime wrote for them) with the last text the
    agent answered it with before the next one; the newest ``limit``, oldest first."""
    found: list[PastExchange] = []
    answering = False  # mail the runtime wrote ends the exchange: what follows answers that mail
    for entry in entries:
        if entry.role == Role.USER:
            answering = not entry.is_synthetic
            if answering:
                found.append(PastExchange(entry.content, "", None))
        elif entry.role == Role.ASSISTANT and entry.content.strip() and answering:
            found[-1] = PastExchange(found[-1].question, entry.content, entry.id)
    return found[-limit:] if limit > 0 else []


class Chat:
    def __init__(
        self,
        *,
        session_store: SessionStore,
        chat_sessions: ChatSessionCache,
        history: HistoryStore,
        outbox: OutboxStore,
        mailbox: SqlMailbox,
        hub: SessionHub,
        desk: ControlDesk,
        inbox: Inbox,
        background: BackgroundCalls,
        approval_manager: ApprovalManager,
        mcp_catalog: McpCatalog,
        usage: UsageStore,
        notes: NoteStore,
        compactor: Compactor,
        context_for: Callable[[ChatSession], ContextSettings],
        search: HistorySearch,
        peers: Peers,
        resume_on_message: bool,
        queued_default: Steer | None = None,
    ) -> None:
        self.session_store = session_store
        self.chat_sessions = chat_sessions
        self.history = history
        self.outbox = outbox
        self.mailbox = mailbox
        self.hub = hub
        self.desk = desk
        self.inbox = inbox
        self.background = background
        self.approval_manager = approval_manager
        self.mcp_catalog = mcp_catalog
        self.usage = usage
        self.notes = notes
        self.compactor = compactor
        self.context_for = context_for
        self.search = search
        self.peers = peers
        self.resume_on_message = resume_on_message
        self.queued_default = queued_default
        """``agent.queued_default``: ``None`` folds a message sent while a turn runs into it;
        :attr:`Steer.AFTER` keeps it for the next turn, until the user chooses otherwise."""

    async def chat_session(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        source: SessionSource = SessionSource.CHAT,
        thread_id: int = 0,
        about: About | None = None,
    ) -> SessionRef:
        """The active session of the chat, or of its forum topic ``thread_id`` (opened if it has
        none); ``about``: what the adapter tells of the place (a group's name, a topic's agent and
        instructions), kept on the session for its prompt and views; ``None`` keeps what it has."""
        session = await self._chat_session(
            chat_id, user_id=user_id, language=language, source=source, thread_id=thread_id, about=about
        )
        return SessionRef.of(session)

    async def _chat_session(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        source: SessionSource,
        thread_id: int = 0,
        about: About | None = None,
    ) -> ChatSession:
        """Kept in memory (filled at start); a chat the cache does not know, when it knows them
        all, is new: one write opens its session, with no read before it."""
        cached = self.chat_sessions.get(chat_id, language, source, thread_id=thread_id, about=about)
        if cached is not None:
            return cached
        session, created = await self.session_store.find_or_open(
            chat_id,
            user_id=user_id,
            language=language,
            look_first=not self.chat_sessions.complete,
            source=source,
            thread_id=thread_id,
            about=about,
        )
        self.chat_sessions.keep(session)
        self.hub.session_changed(session, created=created)
        return session

    async def new_session(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        envelope_id: str,
        source: SessionSource = SessionSource.CHAT,
        thread_id: int = 0,
        about: About | None = None,
    ) -> SessionRef:
        """``/new``: stop whatever runs in the current session (the chat's, or its topic's), then
        open a fresh one in the same place."""
        current = await self._chat_session(
            chat_id, user_id=user_id, language=language, source=source, thread_id=thread_id, about=about
        )
        ref = SessionRef.of(current)
        await self.stop(ref, envelope_id, quiet=True)
        self.approval_manager.bypasses.clear(ref.id)
        await self.mcp_catalog.grants.forget(ref.id)  # the new session activates its own servers
        kept = About(title=current.title, agent=current.agent_id, instructions=current.instructions)
        fresh = await self.session_store.open_new(
            chat_id, user_id=user_id, language=language, source=source, thread_id=thread_id, about=kept
        )
        await self._carry_model(ref.id, fresh)
        self.chat_sessions.keep(fresh)
        self.hub.session_changed(fresh, created=True)
        return SessionRef.of(fresh)

    async def _carry_model(self, old_session_id: int, fresh: ChatSession) -> None:
        """``/new`` keeps the chat on the model it chose (its usage starts again at zero)."""
        chosen = await self.usage.chosen(old_session_id)
        if chosen is not None and fresh.id is not None:
            await self.usage.choose(fresh.id, chosen)

    async def recent_exchanges(self, session: SessionRef, limit: int) -> list[PastExchange]:
        """The session's last ``limit`` exchanges, oldest first: what a chat shows again on start."""
        return past_exchanges(await self.history.entries(session.id, RECENT_ROWS_READ), limit)

    async def post_user_message(
        self,
        session: SessionRef,
        text: str,
        *,
        envelope_id: str,
        chat_message_id: int | None = None,
        user_ref: str | None = None,
    ) -> PostResult:
        """Accept a user's message as mail."""
        posted = await self.accept_user_message(
            session, text, envelope_id=envelope_id, chat_message_id=chat_message_id, user_ref=user_ref
        )
        return posted.result

    async def accept_user_message(
        self,
        session: SessionRef,
        text: str,
        *,
        envelope_id: str,
        chat_message_id: int | None = None,
        user_ref: str | None = None,
        checkpoint: Checkpoint | None = None,
        attachments: Sequence[Attachment] = (),
        media_group_id: str | None = None,
    ) -> Posted:
        """:meth:`post_user_message`, with the source's ``checkpoint`` stored in the mail's own
        transaction; says whether it was (not when the mailbox refused the message).

        ``attachments`` get their workspace paths before the mail is stored and are fetched as soon
        as it is (:mod:`runtime.attachments.inbox`), off this call's path."""
        busy = self.hub.is_busy(session.id)
        envelope = Envelope(
            id=envelope_id,
            session_id=session.id,
            sender=Sender(kind=SenderKind.USER, ref=user_ref),
            body=UserMessageBody(
                text=text,
                chat_message_id=chat_message_id,
                attachments=self.inbox.assign(attachments, utcnow()),
                media_group_id=media_group_id,
            ),
            steer=self.queued_default if busy else None,
        )
        try:
            receipt = await self.mailbox.accept(envelope, checkpoint)
        except MailboxFull:
            return Posted(PostResult.FULL, checkpoint_stored=False)
        if attachments and not receipt.duplicate:
            self.inbox.start(envelope, Address.of(session))
        result = await self._post_result(session, receipt, busy)
        return Posted(result, receipt.checkpoint_stored, receipt.seq)

    async def _post_result(self, session: SessionRef, receipt: Receipt, busy: bool) -> PostResult:
        """What became of accepted mail: ``busy`` is whether a turn ran before it was accepted."""
        if receipt.duplicate:
            return PostResult.DUPLICATE
        if busy:
            if self.queued_default is Steer.AFTER:
                return PostResult.QUEUED_AFTER
            return PostResult.WAITING_APPROVAL if self.hub.awaited(session.id) else PostResult.QUEUED
        paused = await self.hub.paused_turn(session.id) is not None
        if paused and not self.resume_on_message:
            return PostResult.PAUSED
        return PostResult.STARTED

    async def stop(self, session: SessionRef, envelope_id: str, *, quiet: bool = False) -> StopResult:
        """Stop at once: the stop mail is stored, and its handler cancels the running turn, the
        session's running tool calls and file fetches (``runtime.core.sessions.control``).

        The worker, once the turn ends, finds the stop before any queued message (which it then
        drops instead of starting a turn).
        """
        return await self._stop(session.id, envelope_id, quiet=quiet)

    async def _stop(self, session_id: int, envelope_id: str, *, quiet: bool) -> StopResult:
        work = self.background.busy(session_id) or self.inbox.busy(session_id)
        body = ControlBody(action=ControlAction.STOP, quiet=quiet, stops_work=work)
        running = await self.desk.send(control_mail(session_id, body, envelope_id), bool)
        return StopResult(was_running=running or work)

    async def steer(self, session: SessionRef, seq: int, choice: Steer, envelope_id: str) -> SteerResult:
        """The user's choice for message ``seq``, queued behind a running turn (issue 30): stored
        with it by its control mail's handler (``now`` also stops the turn, which the worker then
        opens again with the message). A message read already, or dropped, keeps what it was; the
        result says so, with the step that read it."""
        body = ControlBody(action=ControlAction.STEER, steer=choice, target_seq=seq)
        outcome = await self.desk.send(control_mail(session.id, body, envelope_id), Steered)
        step = await self.history.step_that_read(session.id, seq) if outcome is Steered.READ else None
        return SteerResult(outcome, step)

    async def stop_spawned(self, root_session_id: int, envelope_id: str) -> int:
        """``/stop all``: stop every session spawned under the chat session ``root_session_id``
        that has not finished, quietly (the chat's answer counts them); how many were working.
        Each stop mail's id is ``envelope_id`` and the session's, so a redelivered command stops
        nothing twice."""
        stopped = 0
        for info in await self.peers.of_root(root_session_id, live_only=True):
            if info.status is not PeerStatus.FINISHED:
                result = await self._stop(info.id, f"{envelope_id}:{info.id}", quiet=True)
                stopped += result.was_running
        return stopped

    async def close_spawned(self, session: SessionRef, envelope_id: str) -> None:
        """End a spawned session (``/sessions``' ✖️): what it does is stopped, quietly, then it is
        closed and reads no more mail."""
        await self._stop(session.id, envelope_id, quiet=True)
        await self.peers.close(session.id)

    async def last_answer(self, session: SessionRef) -> str | None:
        """The session's newest final answer (an answer that called no tool), ``None`` if none
        among its last :data:`RECENT_ROWS_READ` rows: what ``/sessions``' 📖 shows again."""
        for entry in reversed(await self.history.entries(session.id, RECENT_ROWS_READ)):
            if entry.role == Role.ASSISTANT and not entry.calls and entry.content.strip():
                return entry.content
        return None

    async def pause(self, session: SessionRef, envelope_id: str) -> bool:
        running = self.hub.is_busy(session.id)
        if running:
            body = ControlBody(action=ControlAction.PAUSE)
            await self.desk.send(control_mail(session.id, body, envelope_id), bool)
        return running

    async def resume(self, session: SessionRef, envelope_id: str) -> bool:
        paused = await self.hub.paused_turn(session.id) is not None
        if not paused and not await self.hub.pause_pending(session.id):
            return False
        body = ControlBody(action=ControlAction.RESUME)
        return await self.desk.send(control_mail(session.id, body, envelope_id), bool)

    async def todos(self, session: SessionRef) -> tuple[TodoItem, ...]:
        """The session's todo list (``/todos``), in the model's order."""
        return await self.notes.todos(session.id)

    async def compact(self, session: SessionRef) -> CompactionReport:
        """``/compact``: summarise the session's older history now (not while a turn runs: it
        compacts by itself when it must)."""
        body = ControlBody(action=ControlAction.COMPACT)
        envelope_id = f"compact:{session.id}:{uuid.uuid4().hex}"
        return await self.desk.send(control_mail(session.id, body, envelope_id), CompactionReport)

    async def context_usage(self, session: SessionRef) -> ContextUsage:
        """``/context``: how big the next request is, the threshold, what the summary covers."""
        compactor = self.compactor
        row = await self.session_store.get(session.id)
        assert row is not None
        static = len(self.context_for(row).static_system)
        return compactor.usage(await compactor.view(session.id), static)

    async def search_history(self, chat_id: int, query: str, limit: int = 10) -> list[SearchHit]:
        """``/search``: the chat's past messages (ended sessions too) that match ``query``."""
        return await self.search.search(chat_id, query, limit)

    async def exchange(self, chat_id: int, row_id: int) -> Exchange | None:
        """The user's message and the answer a search hit belongs to (``None``: not this chat's)."""
        return await self.search.exchange(chat_id, row_id)

    async def answer_shown(self, row_id: int) -> None:
        """The chat shows this final answer (``RoundEnded.row_id``): a restart need not send it."""
        await self.history.mark_delivered(row_id)

    async def output_shown(self, outbox_id: int) -> None:
        """The chat shows this notice or report (``outbox_id``): a restart need not send it."""
        await self.outbox.shown(outbox_id)
