"""Spawn trees and mail between sessions written straight through the storage layer, for the web view.

The sessions are stored as ``spawn_session`` stores them (:meth:`SessionStore.create`), the mail
as the mailbox stores an ``AgentMessageBody`` envelope, already read (the recipient's cursor moved
past it): nothing wakes, and no turn runs that the test did not script.
"""

from __future__ import annotations

import uuid
from typing import Literal

import sqlalchemy as sa
from sqlmodel import Session, col, select

from agentgram.runtime.core.mailbox import AgentMessageBody
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    MailKind,
    MailRow,
    Priority,
    SenderKind,
    SessionSource,
    utcnow,
)
from agentgram.runtime.infra.storage.sessions import SessionStore


async def spawn(
    store: SessionStore, parent_id: int, agent: str, name: str | None = None, *, closed: bool = False
) -> int:
    """A session ``parent_id`` spawned (``closed``: ended since); its id."""
    parent = await store.get(parent_id)
    assert parent is not None and parent.id is not None
    child = await store.create(
        ChatSession(
            source=SessionSource.AGENT,
            chat_id=parent.chat_id,
            user_id=parent.user_id,
            agent_id=agent,
            is_interactive=False,
            active=False,
            parent_session_id=parent.id,
            root_session_id=parent.root_session_id or parent.id,
            name=name,
        )
    )
    assert child.id is not None
    if closed:
        await store.close_spawned(child.id)
    return child.id


async def mail(
    db: Database,
    sender: int,
    recipient: int,
    text: str,
    *,
    relation: Literal["parent", "child", "peer"],
    hops: int,
    interrupt: bool = False,
) -> None:
    """One piece of mail from session ``sender`` to ``recipient``, already read."""
    body = AgentMessageBody(text=text, relation=relation).model_dump(mode="json")

    def write(tx: Session) -> None:
        last = tx.exec(
            select(sa.func.max(col(MailRow.seq))).where(col(MailRow.session_id) == recipient)
        ).one()
        seq = (last or 0) + 1
        tx.add(
            MailRow(
                envelope_id=f"test-mail:{uuid.uuid4().hex}",
                session_id=recipient,
                seq=seq,
                sender_kind=SenderKind.SESSION,
                sender_ref=str(sender),
                priority=Priority.INTERRUPT if interrupt else Priority.NORMAL,
                hops=hops,
                kind=MailKind.AGENT_MESSAGE,
                body=body,
                sent_at=utcnow(),
            )
        )
        session = tx.get(ChatSession, recipient)
        assert session is not None
        session.mail_cursor = max(session.mail_cursor, seq)
        tx.add(session)

    await db.write_orm(write)
