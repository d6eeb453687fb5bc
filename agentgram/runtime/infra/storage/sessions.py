"""Sessions, turns and small key-value facts.

One interactive session per chat and source (a chat platform's chat, the terminal)
is *active*, or per forum topic of a chat (``thread_id``, 0 for none); ``/new`` closes it
and opens a fresh one. Headless sessions (tic, cron) are ephemeral and never active.
What the adapter tells of a session's place (:class:`About`: its name, the agent that answers
there, what its prompt adds) is kept on the row and follows the adapter when it changes.

"One active session per chat" is the database's rule, not this module's: a partial
unique index on ``(source, chat_id, thread_id) WHERE active`` (revisions 0008, 0014). Opening a chat's
session is one ``INSERT … ON CONFLICT DO NOTHING``; whoever loses a race reads the
winner's row, so concurrent first messages of a chat (or several processes on one
PostgreSQL) share one session. Key-value facts are upserts (:mod:`.concurrency`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, insert, update
from sqlmodel import Session, col, select

from agentgram.runtime.infra.errors import StorageError
from agentgram.runtime.infra.storage.concurrency import insert_for, upsert
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    HEADLESS_SOURCES,
    INTERACTIVE_SOURCES,
    ChatSession,
    DeadLetter,
    KeyValue,
    SessionSource,
    StackFrame,
    Turn,
    TurnStatus,
    utcnow,
)
from agentgram.runtime.infra.storage.rows import insert_row, insert_values, row_values, table_of

_SESSIONS = table_of(ChatSession)
_TURNS = table_of(Turn)
_VALUES = table_of(KeyValue)
_DEAD = table_of(DeadLetter)


MAIN_AGENT = "main"
"""The agent a session runs unless its place names another (``runtime.capabilities.agents.MAIN``)."""

ChatKey = tuple[SessionSource, int, int]
"""An interactive session's place: its source, chat id (the terminal shares the user's chat id)
and forum topic (0: none)."""


def chat_key(session: ChatSession) -> ChatKey:
    assert session.chat_id is not None
    return session.source, session.chat_id, session.thread_id


@dataclass(slots=True, frozen=True)
class About:
    """What the adapter tells of a chat session's place, kept on its row: the chat's name (a
    group's, with its topic's; ``None``: not known now, keep the stored one), the agent that
    answers there (``None``: the main agent), and what the place adds to its prompt (a forum
    topic's configured instructions). A session whose row says otherwise is brought up to date
    when the adapter next names it (a renamed group, a changed config)."""

    title: str | None = None
    agent: str | None = None
    instructions: str | None = None

    def fields(self) -> dict[str, Any]:
        """The row's columns as this says they should be."""
        told = {"agent_id": self.agent or MAIN_AGENT, "instructions": self.instructions}
        return told if self.title is None else {"title": self.title, **told}

    def changes(self, session: ChatSession) -> dict[str, Any]:
        """The row's columns that differ from what this says."""
        return {name: value for name, value in self.fields().items() if getattr(session, name) != value}


def of_chat(chat_id: int) -> tuple[sa.ColumnElement[bool], ...]:
    """The conditions on ``sessions`` that pick one chat's sessions (not the headless runs that
    report to it: those are the scheduler's)."""
    return (
        col(ChatSession.chat_id) == chat_id,
        col(ChatSession.source).not_in(list(HEADLESS_SOURCES)),
    )


class ChatSessionCache:
    """Each recent chat's active session, in memory (only this process opens chat sessions),
    keyed by :data:`ChatKey`.

    It is *complete* while it holds every active chat session the database has:
    filled at start with fewer than its capacity, and nothing dropped since. A chat
    it does not hold is then a new one, whose first message can go straight to the
    one write that opens its session instead of reading first.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.complete = False
        self._sessions: OrderedDict[ChatKey, ChatSession] = OrderedDict()

    def get(
        self,
        chat_id: int,
        language: str | None,
        source: SessionSource = SessionSource.CHAT,
        *,
        thread_id: int = 0,
        about: About | None = None,
    ) -> ChatSession | None:
        """The chat's (or topic's) session, unless the user's language or what the adapter tells
        of it changed (the row must follow)."""
        key = (source, chat_id, thread_id)
        cached = self._sessions.get(key)
        if cached is None or (language is not None and cached.language_code != language):
            return None
        if about is not None and about.changes(cached):
            return None
        self._sessions.move_to_end(key)
        return cached

    def keep(self, session: ChatSession) -> None:
        key = chat_key(session)
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > self.capacity:
            self._sessions.popitem(last=False)
            self.complete = False

    def forget_chat(self, chat_id: int) -> None:
        """Another process may have changed the chat's session (a cluster's instance that ran the
        chat before this one): read it again, and the cache no longer knows every chat."""
        for key in [key for key in self._sessions if key[1] == chat_id]:
            del self._sessions[key]
        self.complete = False

    def fill(self, newest_first: list[ChatSession]) -> None:
        """Start-up: the active chat sessions as :meth:`SessionStore.active_chats` reads them."""
        for session in newest_first:  # each older one in front: least recently used
            if session.chat_id is not None and chat_key(session) not in self._sessions:
                self._sessions[chat_key(session)] = session
                self._sessions.move_to_end(chat_key(session), last=False)
        self.complete = len(newest_first) < self.capacity and len(self._sessions) <= self.capacity
        while len(self._sessions) > self.capacity:
            self._sessions.popitem(last=False)


class SessionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, session_id: int) -> ChatSession | None:
        return await self._db.read_sync(lambda tx: tx.get(ChatSession, session_id))

    async def find_or_open(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        look_first: bool = True,
        source: SessionSource = SessionSource.CHAT,
        thread_id: int = 0,
        about: About | None = None,
    ) -> tuple[ChatSession, bool]:
        """The chat's (or its topic's) active session, created on first contact (language and
        ``about`` kept fresh), and whether it was created just now.

        ``look_first`` reads before writing, so a known chat costs no write; a caller that
        expects the chat to be new passes ``False`` and goes straight to the one write
        transaction, which finds the session just the same if the chat has one.
        """
        if look_first:
            query = _active_query(chat_id, source, thread_id)
            found = await self._db.read_sync(lambda tx: tx.exec(query).first())
            if found is not None and (language is None or found.language_code == language):
                if about is None or not about.changes(found):
                    return found, False
        place = {"source": source, "chat_id": chat_id, "thread_id": thread_id, "user_id": user_id}
        return await self._db.write_sync(lambda tx: _find_or_create(tx, place, language, about))

    async def active_chats(self, limit: int) -> list[ChatSession]:
        """The active chat sessions, newest first (at most ``limit``): the runtime's cache at start."""
        query = (
            select(ChatSession)
            .where(col(ChatSession.source).in_(INTERACTIVE_SOURCES), col(ChatSession.active).is_(True))
            .order_by(col(ChatSession.id).desc())
            .limit(limit)
        )
        return await self._db.read_sync(lambda tx: list(tx.exec(query).all()))

    async def open_new(
        self,
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        source: SessionSource = SessionSource.CHAT,
        thread_id: int = 0,
        about: About | None = None,
    ) -> ChatSession:
        """Close the chat's (or topic's) active session and open a fresh one (``/new``)."""

        def reopen(tx: Connection) -> ChatSession:
            fresh = ChatSession(
                source=source,
                chat_id=chat_id,
                thread_id=thread_id,
                user_id=user_id,
                language_code=language,
                **(about.fields() if about is not None else {}),
            )
            for _ in range(_ATTEMPTS):  # a concurrent /new opened one meanwhile: close that too
                tx.execute(
                    update(_SESSIONS)
                    .where(*_active_chat(source, chat_id, thread_id))
                    .values(active=False, closed_at=utcnow())
                )
                if _insert_active(tx, fresh):
                    return fresh
            raise StorageError(f"chat {chat_id} kept opening sessions while /new closed them")

        return await self._db.write_sync(reopen)

    async def create(self, session: ChatSession) -> ChatSession:
        """Store ``session`` as given, with its root stack frame (a spawned session)."""
        return await self._db.write_orm(lambda tx: _create(tx, session))

    async def close_spawned(self, session_id: int) -> None:
        """End a spawned session (``closed_at``): it reads no more mail."""
        await self._db.write_sync(
            lambda tx: tx.execute(
                update(_SESSIONS)
                .where(_SESSIONS.c.id == session_id, _SESSIONS.c.closed_at.is_(None))
                .values(closed_at=utcnow())
            )
        )

    async def create_headless(
        self, source: SessionSource, chat_id: int | None, *, auto_deny: bool = True, thread_id: int = 0
    ) -> ChatSession:
        """An ephemeral tic or cron session; ``thread_id``: the forum topic its output goes to."""
        session = ChatSession(
            source=source,
            chat_id=chat_id,
            thread_id=thread_id,
            is_interactive=False,
            is_ephemeral=True,
            auto_deny_approvals=auto_deny,
            active=False,
        )
        return await self._db.write_orm(lambda tx: _create(tx, session))

    # --- turns -------------------------------------------------------------

    async def turn(self, turn_id: int) -> Turn | None:
        return await self._db.read_sync(lambda tx: tx.get(Turn, turn_id))

    async def finish_turn(self, turn_id: int, status: TurnStatus, error: str | None = None) -> None:
        ended_at = None if status == TurnStatus.PAUSED else utcnow()
        finish = (
            update(_TURNS).where(_TURNS.c.id == turn_id).values(status=status, error=error, ended_at=ended_at)
        )
        await self._db.write_sync(lambda tx: tx.execute(finish))

    @staticmethod
    def open_turn(tx: Connection, session_id: int) -> int:
        """A new running turn, inside the caller's transaction (its columns as :class:`Turn`'s
        defaults make them, without building one: every turn opens here)."""
        return insert_values(
            tx,
            _TURNS,
            {"session_id": session_id, "status": TurnStatus.RUNNING, "rounds": 0, "started_at": utcnow()},
        )

    async def set_turn_status(self, turn_id: int, status: TurnStatus) -> None:
        change = update(_TURNS).where(_TURNS.c.id == turn_id).values(status=status)
        await self._db.write_sync(lambda tx: tx.execute(change))

    async def open_turns(self, chat_id: int | None = None) -> list[Turn]:
        """Turns a previous process left running or paused (of one chat's sessions: ``chat_id``)."""
        query = select(Turn).where(col(Turn.status).in_([TurnStatus.RUNNING, TurnStatus.PAUSED]))
        if chat_id is not None:
            query = query.join(ChatSession, col(ChatSession.id) == col(Turn.session_id)).where(
                *of_chat(chat_id)
            )
        async with self._db.read() as tx:
            rows = await tx.exec(query.order_by(col(Turn.id)))
            return list(rows.all())

    async def latest_turn(self, session_id: int) -> Turn | None:
        query = select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id).desc()).limit(1)
        return await self._db.read_sync(lambda tx: tx.exec(query).first())

    async def sessions_with_mail(self, chat_id: int | None = None) -> list[int]:
        """Sessions whose mailbox holds mail past their cursor (of one chat: ``chat_id``)."""
        from agentgram.runtime.infra.storage.models import MailRow

        query = (
            select(MailRow.session_id)
            .join(ChatSession, col(ChatSession.id) == col(MailRow.session_id))
            .where(col(MailRow.seq) > col(ChatSession.mail_cursor))
        )
        if chat_id is not None:
            query = query.where(*of_chat(chat_id))
        async with self._db.read() as tx:
            rows = await tx.exec(query.distinct())
            return [int(r) for r in rows.all()]

    # --- key/value ---------------------------------------------------------

    async def delete_value(self, key: str) -> None:
        await self._db.write_sync(lambda tx: tx.execute(sa.delete(_VALUES).where(_VALUES.c.key == key)))

    async def values_with_prefix(self, prefix: str) -> dict[str, str]:
        async with self._db.read() as tx:
            rows = await tx.exec(select(KeyValue).where(col(KeyValue.key).startswith(prefix)))
            return {row.key: row.value for row in rows.all()}

    async def get_value(self, key: str) -> str | None:
        async with self._db.read() as tx:
            row = await tx.get(KeyValue, key)
            return None if row is None else row.value

    async def set_value(self, key: str, value: str) -> None:
        await self._db.write_sync(lambda tx: upsert_value(tx, key, value))

    async def dead_letter(self, letter: DeadLetter, *, position: tuple[str, str] | None = None) -> None:
        """Keep an input nobody could parse and set the source's position past it (a key and its
        value, if given), in one transaction."""
        row = {k: v for k, v in letter.model_dump().items() if k != "id"}

        def store(tx: Connection) -> None:
            tx.execute(insert(_DEAD).values(row))
            if position is not None:
                upsert_value(tx, *position)

        await self._db.write_sync(store)

    async def dead_letters(self) -> list[DeadLetter]:
        def read(tx: Session) -> list[DeadLetter]:
            return list(tx.exec(select(DeadLetter).order_by(col(DeadLetter.id))))

        return await self._db.read_sync(read)

    # --- a chat's places ---------------------------------------------------

    async def active_of_chat(
        self, chat_id: int, source: SessionSource = SessionSource.CHAT
    ) -> list[tuple[ChatSession, datetime | None]]:
        """The chat's active sessions of ``source`` (``/sessions``): its one, or in a forum one
        per topic that has been spoken in, the General topic (0) first, then by thread; each
        with when its newest message was written (``None``: none yet), read through the
        history's ``(session_id, id)`` index."""
        newest = newest_message_at()
        query = (
            select(ChatSession, newest)
            .where(
                col(ChatSession.source) == source,
                col(ChatSession.chat_id) == chat_id,
                col(ChatSession.active).is_(True),
            )
            .order_by(col(ChatSession.thread_id), col(ChatSession.id))
        )

        def read(tx: Session) -> list[tuple[ChatSession, datetime | None]]:
            return [(session, last) for session, last in tx.exec(query).all()]

        return await self._db.read_sync(read)


def newest_message_at() -> sa.ScalarSelect[datetime]:
    """When the session of the enclosing query on ``sessions`` last had a message written (its
    newest history row), read through the history's ``(session_id, id)`` index."""
    from agentgram.runtime.infra.storage.models import HistoryRow

    return (
        select(col(HistoryRow.created_at))
        .where(col(HistoryRow.session_id) == col(ChatSession.id))
        .order_by(col(HistoryRow.id).desc())
        .limit(1)
        .correlate(ChatSession)
        .scalar_subquery()
    )


def upsert_value(tx: Connection, key: str, value: str) -> None:
    """Set a key/value fact inside the caller's transaction (one statement: concurrent sets of a
    key never collide; the last to commit wins)."""
    values = {"key": key, "value": value, "updated_at": utcnow()}
    upsert(tx, _VALUES, values, keys=["key"], update=["value", "updated_at"])


_ATTEMPTS = 8
"""How often opening a chat's session retries when a concurrent /new keeps moving the active one."""


def _active_chat(source: SessionSource, chat_id: int, thread_id: int) -> tuple[sa.ColumnElement[bool], ...]:
    return (
        _SESSIONS.c.source == source,
        _SESSIONS.c.chat_id == chat_id,
        _SESSIONS.c.thread_id == thread_id,
        _ACTIVE,
    )


_ACTIVE = _SESSIONS.c.active
"""The predicate of the partial unique index ``ux_sessions_active_chat``, word for word (an
``ON CONFLICT`` names the index by its columns and this predicate)."""


def _insert_active(tx: Connection, session: ChatSession) -> bool:
    """Insert ``session`` as its chat's active one with its root frame, unless the chat has one."""
    values = {k: v for k, v in row_values(session).items() if k != "id"}
    statement = (
        insert_for(tx, _SESSIONS)
        .values(values)
        .on_conflict_do_nothing(index_elements=["source", "chat_id", "thread_id"], index_where=_ACTIVE)
        .returning(_SESSIONS.c.id)
    )
    session_id = tx.execute(statement).scalar()
    if session_id is None:
        return False
    session.id = int(session_id)
    insert_row(tx, StackFrame(session_id=session.id, depth=0, agent_id=session.agent_id))
    return True


def _active_query(chat_id: int, source: SessionSource = SessionSource.CHAT, thread_id: int = 0):  # type: ignore[no-untyped-def]
    """The chat's (or topic's) active session: only an interactive chat has one."""
    return (
        select(ChatSession)
        .where(
            ChatSession.source == source,
            ChatSession.chat_id == chat_id,
            ChatSession.thread_id == thread_id,
            col(ChatSession.active).is_(True),
        )
        .order_by(col(ChatSession.id).desc())
    )


def _find_or_create(
    tx: Connection, place: dict[str, Any], language: str | None, about: About | None
) -> tuple[ChatSession, bool]:
    """The active session of ``place``'s chat (or topic), created if it has none, its language
    and ``about`` brought up to date: one transaction of Core statements (the ORM's unit of work
    costs as much again, on a first message's path).

    The insert goes first and the unique index decides: a chat that has a session (or gets one
    from a concurrent writer) costs a conflict and a read, a new chat one insert."""
    where = _active_chat(place["source"], place["chat_id"], place["thread_id"])
    told = about.fields() if about is not None else {}
    for _ in range(_ATTEMPTS):  # the active session may be closed (/new) between insert and read
        session = ChatSession(**place, language_code=language, **told)
        if _insert_active(tx, session):
            return session, True
        row = tx.execute(sa.select(_SESSIONS).where(*where)).first()
        if row is not None:
            break
    else:
        raise StorageError(f"chat {place['chat_id']} has no active session and none can be opened")
    session = ChatSession(**row._mapping)
    changes = about.changes(session) if about is not None else {}
    if language is not None and session.language_code != language:
        changes["language_code"] = language
    if changes:
        tx.execute(update(_SESSIONS).where(_SESSIONS.c.id == session.id).values(**changes))
        for name, value in changes.items():
            setattr(session, name, value)
    return session, False


def _create(tx: Session, session: ChatSession) -> ChatSession:
    """Add ``session`` with its root stack frame, inside the caller's transaction."""
    tx.add(session)
    tx.flush()
    assert session.id is not None
    tx.add(StackFrame(session_id=session.id, depth=0, agent_id=session.agent_id))
    return session
