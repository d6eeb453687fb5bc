"""Sessions, turns and small key-value facts.

One interactive session per chat is *active*; ``/new`` closes it and opens a
fresh one. Headless sessions (tic, cron) are ephemeral and never active.
"""

from __future__ import annotations

from sqlalchemy import Connection, insert, update
from sqlmodel import Session, col, select

from agentgram.runtime.storage.db import Database
from agentgram.runtime.storage.models import (
    ChatSession,
    DeadLetter,
    KeyValue,
    SessionSource,
    StackFrame,
    Turn,
    TurnStatus,
    utcnow,
)
from agentgram.runtime.storage.rows import insert_row, table_of

_TURNS = table_of(Turn)
_VALUES = table_of(KeyValue)
_DEAD = table_of(DeadLetter)


class SessionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, session_id: int) -> ChatSession | None:
        return await self._db.read_sync(lambda tx: tx.get(ChatSession, session_id))

    async def find_or_open(
        self, chat_id: int, *, user_id: int | None, language: str | None
    ) -> tuple[ChatSession, bool]:
        """The chat's active session, created on first contact (language kept fresh), and whether
        it was created just now."""
        found = await self._db.read_sync(lambda tx: tx.exec(_active_query(chat_id)).first())
        if found is not None and (language is None or found.language_code == language):
            return found, False

        def find_or_create(tx: Session) -> tuple[ChatSession, bool]:
            found = tx.exec(_active_query(chat_id)).first()
            created = found is None
            if found is None:
                found = _create(tx, ChatSession(source=SessionSource.CHAT, chat_id=chat_id, user_id=user_id))
            found.language_code = language or found.language_code
            tx.add(found)
            return found, created

        return await self._db.write_orm(find_or_create)

    async def open_new(self, chat_id: int, *, user_id: int | None, language: str | None) -> ChatSession:
        """Close the chat's active session and open a fresh one (``/new``)."""

        def reopen(tx: Session) -> ChatSession:
            for old in tx.exec(_active_query(chat_id)).all():
                old.active = False
                old.closed_at = utcnow()
                tx.add(old)
            fresh = ChatSession(
                source=SessionSource.CHAT, chat_id=chat_id, user_id=user_id, language_code=language
            )
            return _create(tx, fresh)

        return await self._db.write_orm(reopen)

    async def create_headless(
        self, source: SessionSource, chat_id: int | None, *, auto_deny: bool = True
    ) -> ChatSession:
        session = ChatSession(
            source=source,
            chat_id=chat_id,
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
        """A new running turn, inside the caller's transaction."""
        return insert_row(tx, Turn(session_id=session_id))

    async def set_turn_status(self, turn_id: int, status: TurnStatus) -> None:
        async with self._db.write() as tx:
            turn = await tx.get(Turn, turn_id)
            if turn is not None:
                turn.status = status
                tx.add(turn)

    async def open_turns(self) -> list[Turn]:
        """Turns a previous process left running or paused."""
        async with self._db.read() as tx:
            rows = await tx.exec(
                select(Turn)
                .where(col(Turn.status).in_([TurnStatus.RUNNING, TurnStatus.PAUSED]))
                .order_by(col(Turn.id))
            )
            return list(rows.all())

    async def latest_turn(self, session_id: int) -> Turn | None:
        query = select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id).desc()).limit(1)
        return await self._db.read_sync(lambda tx: tx.exec(query).first())

    async def sessions_with_mail(self) -> list[int]:
        """Sessions whose mailbox holds mail past their cursor."""
        from agentgram.runtime.storage.models import MailRow

        async with self._db.read() as tx:
            rows = await tx.exec(
                select(MailRow.session_id)
                .join(ChatSession, col(ChatSession.id) == col(MailRow.session_id))
                .where(col(MailRow.seq) > col(ChatSession.mail_cursor))
                .distinct()
            )
            return [int(r) for r in rows.all()]

    # --- key/value ---------------------------------------------------------

    async def delete_value(self, key: str) -> None:
        async with self._db.write() as tx:
            row = await tx.get(KeyValue, key)
            if row is not None:
                await tx.delete(row)

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

    async def dead_letter(self, letter: DeadLetter, *, key: str, value: str) -> None:
        """Keep an input nobody could parse and set the source's position past it, in one transaction."""
        row = {k: v for k, v in letter.model_dump().items() if k != "id"}

        def store(tx: Connection) -> None:
            tx.execute(insert(_DEAD).values(row))
            upsert_value(tx, key, value)

        await self._db.write_sync(store)

    async def dead_letters(self) -> list[DeadLetter]:
        def read(tx: Session) -> list[DeadLetter]:
            return list(tx.exec(select(DeadLetter).order_by(col(DeadLetter.id))))

        return await self._db.read_sync(read)


def upsert_value(tx: Connection, key: str, value: str) -> None:
    """Set a key/value fact inside the caller's transaction."""
    now = utcnow()
    changed = tx.execute(update(_VALUES).where(_VALUES.c.key == key).values(value=value, updated_at=now))
    if changed.rowcount == 0:
        tx.execute(insert(_VALUES).values(key=key, value=value, updated_at=now))


def _active_query(chat_id: int):  # type: ignore[no-untyped-def]
    """The chat's active session: only an interactive chat has one."""
    return (
        select(ChatSession)
        .where(
            ChatSession.source == SessionSource.CHAT,
            ChatSession.chat_id == chat_id,
            col(ChatSession.active).is_(True),
        )
        .order_by(col(ChatSession.id).desc())
    )


def _create(tx: Session, session: ChatSession) -> ChatSession:
    """Add ``session`` with its root stack frame, inside the caller's transaction."""
    tx.add(session)
    tx.flush()
    assert session.id is not None
    tx.add(StackFrame(session_id=session.id, depth=0, agent_id=session.agent_id))
    return session
