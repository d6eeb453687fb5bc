"""Sessions that talk to each other: spawn, mail, list (issue 29; ``session-mailbox.md`` §5).

A session may **spawn** another of any agent definition (``spawn_session``): a durable session of
:data:`~runtime.infra.storage.models.SessionSource.AGENT`, its caller's child, reporting to the chat
its root session belongs to. Its first mail is its task, from its parent, naming the parent's id;
``send_message`` then carries mail either way. Sessions are addressed by id (``"parent"`` names
the caller's parent). Mail is the mailbox's, so it is durable, ordered, capped and read at the
recipient's next round boundary like any other.

**Rules** (checked here, before the mailbox takes the mail):

* a session may always write to its parent and its children; its agent's ``mail_scope`` widens
  that to its siblings (``family``), to every session under the same root chat session (``tree``,
  the default) or to any (``all``). ``interrupt_scope`` (default ``children``) says to whom it
  may send mail marked interrupting (``Priority.INTERRUPT``, which the web view shows). A working
  turn reads all its mail at its next step anyway; an interrupting one also detaches the long
  command the turn is attached to (``runtime.core.turn.background``), so that step comes now
  rather than after ``tools.attach_seconds``. Nothing in flight is killed.
* mail carries a **hop count**: a reply (a task too) carries the count of the mail its session
  last read plus one (a user's message, a tic or a cron run count 0), and ``agent.max_mail_hops``
  refuses past it (a refused spawn makes no session).
  With the mailbox's unread cap and ``wait``'s own cap, two agents cannot ping-pong forever.
* which mail starts a turn in an idle recipient is its agent's ``wake_on`` (default user, tool,
  parent, child: a peer's mail waits for the next turn). The envelope says how the sender stands
  to the recipient (:class:`~runtime.core.mailbox.envelope.AgentMessageBody.relation`), stored
  with it, so a restart wakes by the same rule. A spawned session's task starts it whatever its
  ``wake_on`` (``AgentMessageBody.task``).

**Once only.** A tool call that a restart cut short is run again from its stored arguments
(docs/architecture/turn.md). Given that call's id (``call_id``), the mail it sends has an envelope
id of its own (``mail:<sender>:call<id>``, a task ``task:<parent>:call<id>``), so the mailbox
takes it once and a spawn run twice finds the session the first run made.

A refusal is a :class:`Refused` whose text names its cause (unknown recipient, not permitted,
mailbox full, too many hops); the tools hand it to the model as the call's error.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, col, select

from agentgram.runtime.capabilities.agents import AgentCatalog, AgentSpec
from agentgram.runtime.core.mailbox import AgentMessageBody, Envelope, Priority, Receipt, Sender, SenderKind
from agentgram.runtime.core.mailbox.mailbox import SqlMailbox
from agentgram.runtime.infra.errors import MailboxFull
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    MailKind,
    MailRow,
    SessionSource,
    session_ended,
)
from agentgram.runtime.infra.storage.sessions import SessionStore, newest_message_at

PARENT = "parent"
"""The address ``send_message`` reads as the caller's parent session."""
LISTED = 50
"""At most this many sessions in one ``list_sessions`` answer (newest first)."""
_TEXT_MAIL = (MailKind.USER_MESSAGE, MailKind.AGENT_MESSAGE, MailKind.SCHEDULED_TURN)


class Refused(Exception):
    """Mail or a spawn refused, for a reason the model can read and act on."""


class Relation(enum.StrEnum):
    """How a sender stands to the recipient of its mail (what the recipient's ``wake_on`` names)."""

    PARENT = "parent"  # the sender spawned the recipient
    CHILD = "child"  # the recipient spawned the sender
    PEER = "peer"


class ListScope(enum.StrEnum):
    CHILDREN = "children"
    TREE = "tree"
    ALL = "all"


class PeerStatus(enum.StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    WAITING_APPROVAL = "waiting for approval"
    PAUSED = "paused"
    FINISHED = "finished"


@dataclass(slots=True, frozen=True)
class PeerInfo:
    """One session as ``list_sessions`` and ``/sessions`` show it."""

    id: int
    name: str | None
    agent: str
    parent_id: int | None
    status: PeerStatus
    last_active: datetime | None
    source: str


StatusOf = Callable[[int], PeerStatus | None]
"""A session's live status from the session hub (``None``: nothing in memory: idle)."""

_LIVE = {
    "opening": PeerStatus.RUNNING,
    "running": PeerStatus.RUNNING,
    "stopping": PeerStatus.RUNNING,
    "waiting_approval": PeerStatus.WAITING_APPROVAL,
    "paused": PeerStatus.PAUSED,
}


def live_status(worker_state: str | None) -> PeerStatus | None:
    """A session worker's state (``runtime.core.sessions.state.WorkerState``) as a peer status."""
    return _LIVE.get(worker_state or "")


def root_of(session: ChatSession) -> int:
    """The chat session at the top of ``session``'s spawn tree (itself for a chat's own)."""
    assert session.id is not None
    return session.root_session_id or session.id


def relation(sender: ChatSession, recipient: ChatSession) -> Relation:
    if recipient.parent_session_id is not None and recipient.parent_session_id == sender.id:
        return Relation.PARENT
    if sender.parent_session_id is not None and sender.parent_session_id == recipient.id:
        return Relation.CHILD
    return Relation.PEER


def may_write(spec: AgentSpec, sender: ChatSession, recipient: ChatSession) -> bool:
    """Whether ``sender`` (running ``spec``) may mail ``recipient`` (module docstring)."""
    if relation(sender, recipient) is not Relation.PEER:
        return True
    return _within(spec.mail_scope, sender, recipient)


def may_interrupt(spec: AgentSpec, sender: ChatSession, recipient: ChatSession) -> bool:
    if spec.interrupt_scope == "children":
        return relation(sender, recipient) is Relation.PARENT
    if relation(sender, recipient) is not Relation.PEER:
        return True
    return _within(spec.interrupt_scope, sender, recipient)


def _within(scope: str, sender: ChatSession, recipient: ChatSession) -> bool:
    if scope == "all":
        return True
    if scope == "tree":
        return root_of(sender) == root_of(recipient)
    # family: besides parent and children, the siblings
    return sender.parent_session_id is not None and sender.parent_session_id == recipient.parent_session_id


class Peers:
    """Spawning, mail between sessions and the listing of them (module docstring)."""

    def __init__(
        self,
        db: Database,
        sessions: SessionStore,
        mailbox: SqlMailbox,
        agents: AgentCatalog,
        *,
        max_hops: int,
        status_of: StatusOf = lambda _: None,
    ) -> None:
        self._db = db
        self._sessions = sessions
        self._mailbox = mailbox
        self.agents = agents
        self.max_hops = max_hops
        self.status_of = status_of

    async def session(self, session_id: int) -> ChatSession:
        found = await self._sessions.get(session_id)
        if found is None:
            raise Refused(f"there is no session {session_id} (list_sessions shows the ones there are)")
        return found

    def spec_of(self, session: ChatSession) -> AgentSpec:
        return self.agents.get(session.agent_id) or self.agents.main

    async def spawn(
        self,
        caller_id: int,
        agent: str,
        task: str,
        name: str | None = None,
        *,
        call_id: int | None = None,
        answers_call: bool = False,
    ) -> ChatSession:
        """A new session of ``agent``, the caller's child, working on ``task`` (its first mail);
        ``call_id``: the stored tool call spawning it (module docstring, "Once only");
        ``answers_call``: its answer is that call's result (``execute_task``,
        :mod:`runtime.core.task_sessions`), not a message to the chat."""
        spec = self.agents.get(agent)
        if spec is None:
            raise Refused(f"there is no agent {agent!r} (agents: {', '.join(self.agents.names())})")
        caller = await self.session(caller_id)
        envelope_id = _envelope_id("task", caller_id, call_id)
        if call_id is not None and (spawned := await self._addressee(envelope_id)) is not None:
            return await self.session(spawned)  # the call ran before a restart: its session
        hops = await self.hops_of(caller_id) + 1
        self._check_hops(hops)  # before the session exists: a refused spawn leaves none behind
        child = await self._sessions.create(
            ChatSession(
                source=SessionSource.AGENT,
                chat_id=caller.chat_id,
                thread_id=caller.thread_id,
                user_id=caller.user_id,
                agent_id=spec.name,
                language_code=caller.language_code,
                is_interactive=False,
                active=False,
                parent_session_id=caller.id,
                root_session_id=root_of(caller),
                name=name.strip() if name and name.strip() else None,
                parent_call_id=call_id if answers_call else None,
            )
        )
        assert child.id is not None
        first = (
            (
                f"You are session {child.id}, working on a task for session {caller_id} (your "
                "parent): your final answer is its result. It may write to you while you work. "
                f"Your task:\n{task}"
            )
            if answers_call
            else (
                f"You are session {child.id}, started by session {caller_id} (your parent: write "
                f'to it with send_message to "parent"; it reads your replies as mail). Your '
                f"task:\n{task}"
            )
        )
        await self._post(caller, child, first, envelope_id=envelope_id, hops=hops, task=True)
        return child

    async def send(
        self,
        caller_id: int,
        to: str | int,
        text: str,
        *,
        interrupt: bool = False,
        call_id: int | None = None,
    ) -> Receipt:
        """Mail ``text`` from the caller to session ``to`` (an id, or ``"parent"``); ``call_id``:
        the stored tool call sending it (module docstring, "Once only")."""
        caller = await self.session(caller_id)
        recipient = await self._recipient(caller, to)
        spec = self.spec_of(caller)
        if recipient.id == caller.id:
            raise Refused("a session cannot send mail to itself")
        if recipient.closed_at is not None:
            raise Refused(f"session {recipient.id} has finished and reads no more mail")
        if not may_write(spec, caller, recipient):
            raise Refused(
                f"not permitted: agent {spec.name!r} may write to its parent, its children and "
                f"sessions within its mail_scope {spec.mail_scope!r}; session {recipient.id} is not one"
            )
        if interrupt and not may_interrupt(spec, caller, recipient):
            raise Refused(
                f"not permitted to interrupt session {recipient.id} (interrupt_scope "
                f"{spec.interrupt_scope!r}); send it without interrupt"
            )
        hops = await self.hops_of(caller_id) + 1
        self._check_hops(hops)
        envelope_id = _envelope_id("mail", caller_id, call_id)
        return await self._post(
            caller, recipient, text, envelope_id=envelope_id, hops=hops, interrupt=interrupt
        )

    async def _recipient(self, caller: ChatSession, to: str | int) -> ChatSession:
        if isinstance(to, str) and to.strip().lower() == PARENT:
            if caller.parent_session_id is None:
                raise Refused("this session has no parent: it was not spawned by another session")
            return await self.session(caller.parent_session_id)
        try:
            session_id = int(str(to).strip().lstrip("#"))
        except ValueError:
            raise Refused(f'unknown recipient {to!r}: give a session id or "parent"') from None
        found = await self._sessions.get(session_id)
        if found is None or found.source not in (
            SessionSource.CHAT,
            SessionSource.TERMINAL,
            SessionSource.AGENT,
        ):
            raise Refused(f"unknown recipient: there is no session {session_id}")
        return found

    def _check_hops(self, hops: int) -> None:
        if hops > self.max_hops:
            raise Refused(
                f"too many hops: this would be reply {hops} in a chain of mail between sessions, "
                f"over agent.max_mail_hops ({self.max_hops}); stop the exchange and answer the user"
            )

    async def _post(
        self,
        sender: ChatSession,
        recipient: ChatSession,
        text: str,
        *,
        envelope_id: str,
        hops: int,
        interrupt: bool = False,
        task: bool = False,
    ) -> Receipt:
        assert recipient.id is not None
        envelope = Envelope(
            id=envelope_id,
            session_id=recipient.id,
            sender=Sender(kind=SenderKind.SESSION, ref=str(sender.id)),
            body=AgentMessageBody(text=text, relation=relation(sender, recipient).value, task=task),
            priority=Priority.INTERRUPT if interrupt else Priority.NORMAL,
            hops=hops,
        )
        try:
            return await self._mailbox.accept(envelope)
        except MailboxFull:
            raise Refused(
                f"mailbox full: session {recipient.id} has too much unread mail; wait for it to catch up"
            ) from None

    async def _addressee(self, envelope_id: str) -> int | None:
        """The session the mail ``envelope_id`` went to, if it is stored."""

        def read(tx: Session) -> int | None:
            query = select(col(MailRow.session_id)).where(col(MailRow.envelope_id) == envelope_id)
            return tx.exec(query).first()

        return await self._db.read_sync(read)

    async def hops_of(self, session_id: int) -> int:
        """The hop count of the mail the session read last (what a reply now answers); 0 when
        that was a user's message, a scheduled run's, or nothing."""

        def read(tx: Session) -> int:
            cursor = (
                sa.select(col(ChatSession.mail_cursor))
                .where(col(ChatSession.id) == session_id)
                .scalar_subquery()
            )
            query = (
                select(col(MailRow.hops))
                .where(
                    col(MailRow.session_id) == session_id,
                    col(MailRow.seq) <= cursor,
                    col(MailRow.kind).in_(list(_TEXT_MAIL)),
                )
                .order_by(col(MailRow.seq).desc())
                .limit(1)
            )
            return int(tx.exec(query).first() or 0)

        return await self._db.read_sync(read)

    async def listed(self, caller_id: int, scope: ListScope = ListScope.TREE) -> list[PeerInfo]:
        """The caller's children, its tree (every session under its root chat session, that one
        included) or all sessions that talk (chat, terminal and spawned ones), newest first."""
        caller = await self.session(caller_id)
        talking = col(ChatSession.source).in_(
            [SessionSource.CHAT, SessionSource.TERMINAL, SessionSource.AGENT]
        )
        if scope is ListScope.CHILDREN:
            where = col(ChatSession.parent_session_id) == caller_id
        elif scope is ListScope.TREE:
            root = root_of(caller)
            where = sa.or_(col(ChatSession.id) == root, col(ChatSession.root_session_id) == root)
        else:
            where = talking
        return await self._infos(where)

    async def of_root(self, root_session_id: int, *, live_only: bool = False) -> list[PeerInfo]:
        """The sessions spawned under a chat session (``/sessions``), oldest first, at most
        :data:`LISTED`; with ``live_only`` every one not closed, however many (``/stop all``)."""
        where = col(ChatSession.root_session_id) == root_session_id
        if live_only:
            where = sa.and_(where, col(ChatSession.closed_at).is_(None))
        infos = await self._infos(where, limit=None if live_only else LISTED)
        return sorted(infos, key=lambda info: info.id)

    async def _infos(self, where: sa.ColumnElement[bool], *, limit: int | None = LISTED) -> list[PeerInfo]:
        newest = newest_message_at()
        query = select(ChatSession, newest).where(where).order_by(col(ChatSession.id).desc()).limit(limit)

        def read(tx: Session) -> list[tuple[ChatSession, datetime | None]]:
            return [(session, last) for session, last in tx.exec(query).all()]

        return [self._info(session, last) for session, last in await self._db.read_sync(read)]

    def _info(self, session: ChatSession, last: datetime | None) -> PeerInfo:
        assert session.id is not None
        if session_ended(session.source, session.active, session.closed_at):
            status = PeerStatus.FINISHED
        else:
            status = self.status_of(session.id) or PeerStatus.IDLE
        return PeerInfo(
            id=session.id,
            name=session.name,
            agent=session.agent_id,
            parent_id=session.parent_session_id,
            status=status,
            last_active=last,
            source=session.source,
        )

    async def close(self, session_id: int) -> None:
        """End a spawned session: it reads no more mail (``/sessions`` → close)."""
        await self._sessions.close_spawned(session_id)


def _envelope_id(kind: str, sender_id: int, call_id: int | None) -> str:
    """``mail:<sender>:call<id>`` for mail a stored tool call sends (the same when the call is run
    again after a restart), else a fresh one."""
    return f"{kind}:{sender_id}:" + (f"call{call_id}" if call_id is not None else uuid.uuid4().hex)


def peer_line(info: PeerInfo) -> str:
    """``#7 researcher “deploy watcher” (parent 3): running; last active 2026-12-02 10:00 UTC``."""
    named = f" “{info.name}”" if info.name else ""
    parent = f" (parent {info.parent_id})" if info.parent_id is not None else ""
    when = f"; last active {info.last_active:%Y-%m-%d %H:%M} UTC" if info.last_active else ""
    return f"#{info.id} {info.agent}{named}{parent}: {info.status}{when}"


__all__ = [
    "LISTED",
    "PARENT",
    "ListScope",
    "PeerInfo",
    "PeerStatus",
    "Peers",
    "Refused",
    "Relation",
    "live_status",
    "may_interrupt",
    "may_write",
    "peer_line",
    "relation",
    "root_of",
]
