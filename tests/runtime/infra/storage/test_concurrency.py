"""Concurrency is the database's (issue 26 item 2): many writers at once through one pooled
:class:`Database`, on SQLite (one writer, serialized) and on a real PostgreSQL server (no
process lock: each write its own transaction from the pool). Whatever the interleaving: one
session per chat, seqs gap-free per session, duplicates detected, exactly one decision or
answer applied, and never an exception for a race."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from alembic import command
from sqlmodel import col, select

from agentgram.runtime.capabilities.questions.manager import QuestionManager
from agentgram.runtime.core.approvals.manager import ApprovalManager, DecidedBy
from agentgram.runtime.core.mailbox import Envelope, Sender, SenderKind, SqlMailbox, UserMessageBody
from agentgram.runtime.core.mailbox.envelope import Checkpoint, Receipt
from agentgram.runtime.infra.config import ApprovalSettings
from agentgram.runtime.infra.events import QuestionStatus
from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.grant_rows import GrantStore
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import alembic_config, migrate
from agentgram.runtime.infra.storage.models import ApprovalStatus, ChatSession, MailRow, StackFrame
from agentgram.runtime.infra.storage.prepared_rows import PreparedStore
from agentgram.runtime.infra.storage.question_rows import QuestionRow
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.storage.usage_rows import UsageStore

WRITERS = 120
"""Concurrent coroutines per test: several times the pool (``pool_size`` 5, as many again in overflow)."""


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url, pool_size=5)
    await migrate(database)
    try:
        yield database
    finally:
        await database.close()


async def _all(*calls: object) -> list[object]:
    """Run the coroutines at once; every one must succeed (no race surfaces as an exception)."""
    return list(await asyncio.gather(*calls))  # type: ignore[call-overload]


# --- sessions and key-value facts -----------------------------------------------------------


async def test_concurrent_first_messages_of_a_chat_share_one_session(db: Database) -> None:
    store = SessionStore(db)
    chats = [1_000 + i % 6 for i in range(WRITERS)]
    opened = await asyncio.gather(
        *(store.find_or_open(chat, user_id=chat, language="en", look_first=False) for chat in chats)
    )

    by_chat: dict[int, set[int]] = defaultdict(set)
    created: dict[int, int] = defaultdict(int)
    for chat, (session, fresh) in zip(chats, opened, strict=True):
        assert session.id is not None
        by_chat[chat].add(session.id)
        created[chat] += fresh
    assert all(len(ids) == 1 for ids in by_chat.values())
    assert set(created.values()) == {1}  # each chat opened exactly once
    sessions = await db.read_sync(lambda tx: list(tx.exec(select(ChatSession)).all()))
    frames = await db.read_sync(lambda tx: list(tx.exec(select(StackFrame)).all()))
    assert sorted(s.chat_id or 0 for s in sessions) == sorted(by_chat)
    assert sorted(f.session_id for f in frames) == sorted(s.id or 0 for s in sessions)  # one root frame each


async def test_concurrent_new_and_first_messages_leave_one_active_session_per_chat(db: Database) -> None:
    store = SessionStore(db)
    calls = [
        store.open_new(7, user_id=7, language=None)
        if i % 3 == 0
        else store.find_or_open(7, user_id=7, language=None, look_first=i % 2 == 0)
        for i in range(60)
    ]
    await _all(*calls)

    active = await db.read_sync(
        lambda tx: list(
            tx.exec(
                select(ChatSession).where(ChatSession.chat_id == 7, col(ChatSession.active).is_(True))
            ).all()
        )
    )
    assert len(active) == 1
    assert (await store.find_or_open(7, user_id=7, language=None))[0].id == active[0].id


async def test_concurrent_sets_of_a_key_never_collide_and_one_value_wins(db: Database) -> None:
    store = SessionStore(db)
    writes = [(f"offset:{i % 4}", str(i)) for i in range(WRITERS)]
    await _all(*(store.set_value(key, value) for key, value in writes), store.delete_value("offset:0"))

    for key in {key for key, _ in writes} - {"offset:0"}:
        assert await store.get_value(key) in {value for k, value in writes if k == key}


async def test_the_migration_closes_all_but_the_newest_of_a_chats_active_sessions(database_url: str) -> None:
    """A database an older release raced into three active sessions for a chat upgrades cleanly."""
    db = Database(database_url)
    try:
        await migrate(db)

        def race_then_upgrade(conn: sa.Connection) -> None:
            command.downgrade(alembic_config(conn), "0007")
            for _ in range(3):
                conn.execute(
                    sa.text(
                        "INSERT INTO sessions (source, chat_id, agent_id, is_interactive, is_ephemeral,"
                        " auto_deny_approvals, active, mail_cursor, created_at)"
                        " VALUES ('chat', 5, 'main', true, false, false, true, 0, CURRENT_TIMESTAMP)"
                    )
                )
            command.upgrade(alembic_config(conn), "head")

        async with db.write() as tx:
            await (await tx.connection()).run_sync(race_then_upgrade)
        sessions = await db.read_sync(
            lambda tx: list(tx.exec(select(ChatSession).order_by(col(ChatSession.id))))
        )
        assert [(s.active, s.closed_at is None) for s in sessions] == [
            (False, False),
            (False, False),
            (True, True),
        ]
    finally:
        await db.close()


# --- the mailbox -----------------------------------------------------------------------------


def _mail(envelope_id: str, session_id: int) -> Envelope:
    return Envelope(
        id=envelope_id,
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER, ref="1"),
        body=UserMessageBody(text=envelope_id),
    )


async def test_concurrent_accepts_get_gap_free_seqs_in_commit_order_and_duplicates_their_receipt(
    db: Database,
) -> None:
    """Several mailboxes on one database (as several processes would be), every envelope sent
    twice through different ones, some ids into two sessions at once."""
    store = SessionStore(db)
    sessions = [(await store.open_new(chat, user_id=None, language=None)).id or 0 for chat in (1, 2, 3)]
    boxes = [SqlMailbox(db, max_unread=10_000) for _ in range(4)]
    heard: list[list[Envelope]] = [[] for _ in boxes]
    for box, log in zip(boxes, heard, strict=True):
        box.subscribe(log.append)
    sends: list[tuple[SqlMailbox, Envelope]] = []
    for n in range(WRITERS // 2):
        envelope = _mail(f"e{n:03d}", sessions[n % 3])
        sends += [(boxes[n % 4], envelope), (boxes[(n + 1) % 4], envelope)]
        if n % 10 == 0:  # the same id into another session, concurrently
            sends.append((boxes[(n + 2) % 4], _mail(envelope.id, sessions[(n + 1) % 3])))
    random.Random(26).shuffle(sends)
    checkpoint = itertools.count()
    receipts = await asyncio.gather(
        *(box.accept(e, Checkpoint(key="source:offset", value=str(next(checkpoint)))) for box, e in sends)
    )

    first: dict[str, int] = {}
    for receipt in receipts:
        assert isinstance(receipt, Receipt) and receipt.checkpoint_stored
        if not receipt.duplicate:
            assert receipt.id not in first  # accepted once
            first[receipt.id] = receipt.seq
    assert sorted(first) == sorted({e.id for _, e in sends})
    for receipt in receipts:
        assert receipt.seq == first[receipt.id]  # a duplicate gets the first receipt
    rows = await db.read_sync(lambda tx: list(tx.exec(select(MailRow)).all()))
    assert sorted(r.envelope_id for r in rows) == sorted(first)
    for session_id in sessions:
        seqs = sorted(r.seq for r in rows if r.session_id == session_id)
        assert seqs == list(range(1, len(seqs) + 1))  # gap-free
    for log in heard:  # each mailbox hears its commits in commit order: seqs only grow per session
        for session_id in sessions:
            seqs = [e.seq for e in log if e.session_id == session_id]
            assert seqs == sorted(seqs)
    assert await store.get_value("source:offset") is not None
    for box in boxes:
        await box.close()


# --- approvals and questions -----------------------------------------------------------------


@dataclass
class Calls:
    session_id: int
    call_ids: list[int]


async def _calls(db: Database, count: int) -> Calls:
    session = (await SessionStore(db).find_or_open(1001, user_id=1001, language="en"))[0]
    assert session.id is not None
    turn_id = await db.write_sync(lambda tx: SessionStore.open_turn(tx, session.id or 0))
    requests = [ToolCallRequest(id=f"c{i}", name="execute_cmd", arguments="{}") for i in range(count)]
    entry = await HistoryStore(db).record_round(
        session_id=session.id, turn_id=turn_id, result=LLMRound(tool_calls=requests)
    )
    return Calls(session.id, [c.id or 0 for c in entry.calls])


async def test_exactly_one_of_concurrent_decisions_applies(db: Database) -> None:
    calls = await _calls(db, 1)
    manager = ApprovalManager(db, ApprovalSettings())
    opened = await _all(
        *(manager.request_for_call(calls.session_id, calls.call_ids[0], 1001) for _ in range(20))
    )
    assert len({request.id for request, _ in opened}) == 1  # type: ignore[union-attr]
    assert sum(fresh for _, fresh in opened) == 1  # type: ignore[misc]
    request_id = opened[0][0].id  # type: ignore[index]

    decisions = [
        manager.decide(request_id, approved=i % 2 == 0, how=DecidedBy.BUTTON)
        if i % 5
        else manager.expire(request_id)
        for i in range(WRITERS)
    ]
    results = await _all(*decisions)

    applied = [r for r in results if r.applied]  # type: ignore[attr-defined]
    assert len(applied) == 1
    stored = await manager.get(request_id)
    assert stored is not None and stored.status == applied[0].status  # type: ignore[attr-defined]
    assert all(r.status == stored.status for r in results)  # type: ignore[attr-defined]
    assert stored.status != ApprovalStatus.PENDING


async def test_exactly_one_of_concurrent_answers_applies_and_asks_leave_one_pending(db: Database) -> None:
    calls = await _calls(db, 12)
    questions = QuestionManager(db)
    asked = await _all(
        *(
            questions.ask(calls.session_id, call_id, 1001, f"question {i}?", ["yes", "no"])
            for i, call_id in enumerate(calls.call_ids)
        ),
        *(questions.ask(calls.session_id, calls.call_ids[0], 1001, "again?", []) for _ in range(5)),
    )
    rows = await db.read_sync(lambda tx: list(tx.exec(select(QuestionRow)).all()))
    pending = [r for r in rows if r.status == QuestionStatus.PENDING]
    assert len(rows) == len(calls.call_ids)  # one per call, however often it asked
    assert len(pending) == 1 and questions.pending_in(calls.session_id) == pending[0].id
    assert len(asked) == len(calls.call_ids) + 5

    answers = await _all(*(questions.answer(pending[0].id, f"answer {i}") for i in range(WRITERS)))
    applied = [s for s in answers if s.applied]  # type: ignore[attr-defined]
    assert len(applied) == 1
    stored = await questions.get(pending[0].id)
    assert stored is not None and stored.status == QuestionStatus.ANSWERED
    assert stored.answer == applied[0].row.answer  # type: ignore[attr-defined]
    assert questions.pending_in(calls.session_id) is None


# --- the smaller stores -------------------------------------------------------------------------


async def test_concurrent_grants_choices_and_prepared_files_never_collide(db: Database) -> None:
    session = (await SessionStore(db).open_new(9, user_id=None, language=None)).id or 0
    grants, usage, prepared = GrantStore(db), UsageStore(db), PreparedStore(db)
    await _all(
        *(GrantStore(db).grant(session, 0, ["github", f"server{i % 3}"]) for i in range(40)),
        *(UsageStore(db).choose(session, f"model-{i % 4}") for i in range(40)),
        *(prepared.put("u1", session, [{"n": i}]) for i in range(40)),
    )

    assert await GrantStore(db).granted(session, 0) == {"github", "server0", "server1", "server2"}
    assert await UsageStore(db).chosen(session) in {f"model-{i}" for i in range(4)}
    stored = await prepared.get("u1")
    assert stored is not None and len(stored) == 1
    await usage.choose(session, None)
    assert await UsageStore(db).chosen(session) is None
    assert await grants.granted(session, 0) == {"github", "server0", "server1", "server2"}
