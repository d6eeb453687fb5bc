"""What one chat's previous owner left, read (or settled) for that chat alone.

In a cluster in webhook mode an instance that claims a chat (:mod:`runtime.infra.ownership`)
recovers only that chat: its open turns, its unread mail, its unshown output and answers, the
tracked calls its previous owner ran. Each read takes a ``chat_id`` for that and must return the
chat's own sessions' rows only: not another chat's, and not the tic and cron runs that report to
the chat (headless sessions with the chat's id: the leader's scheduler runs them). The chat's
session cache is told to forget the chat (:meth:`ChatSessionCache.forget_chat`), since another
process may have changed its session.

The world below holds two chats, each with a current chat session; chat 7 also has an older
session (``/new`` while a turn ran) and a tic and a cron run reporting to it; chat 8 a cron run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
import sqlalchemy as sa

from agentgram.runtime.core.mailbox import SqlMailbox
from agentgram.runtime.core.turn.background import BackgroundCalls
from agentgram.runtime.infra.config import ToolsSettings
from agentgram.runtime.infra.events import Address, EventBus, Notice
from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.background_rows import BackgroundStore, RunStatus
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import (
    ChatSession,
    MailKind,
    MailRow,
    SenderKind,
    SessionSource,
    Turn,
    TurnStatus,
    utcnow,
)
from agentgram.runtime.infra.storage.outbox import OutboxStore
from agentgram.runtime.infra.storage.sessions import ChatSessionCache, SessionStore

A, B = 7, 8
SESSIONS = ("a_old", "a_chat", "a_tic", "a_cron", "b_chat", "b_cron")


@dataclass
class World:
    db: Database
    ids: dict[str, int]
    """Each session's id by name (see :data:`SESSIONS`)."""

    def names(self, session_ids: list[int]) -> list[str]:
        by_id = {session_id: name for name, session_id in self.ids.items()}
        return [by_id[session_id] for session_id in session_ids]


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[World]:
    db = Database(database_url)
    await migrate(db)
    store = SessionStore(db)
    old, _ = await store.find_or_open(A, user_id=A, language="en")
    current = await store.open_new(A, user_id=A, language="en")
    b_chat, _ = await store.find_or_open(B, user_id=B, language="en")
    rows = {
        "a_old": old,
        "a_chat": current,
        "a_tic": await store.create_headless(SessionSource.TIC, A),
        "a_cron": await store.create_headless(SessionSource.CRON, A),
        "b_chat": b_chat,
        "b_cron": await store.create_headless(SessionSource.CRON, B),
    }
    try:
        yield World(db, {name: row.id or 0 for name, row in rows.items()})
    finally:
        await db.close()


async def open_turn(world: World, name: str, status: TurnStatus = TurnStatus.RUNNING) -> int:
    async with world.db.write() as tx:
        turn = Turn(session_id=world.ids[name], status=status)
        tx.add(turn)
        await tx.flush()
        return turn.id or 0


async def mail(world: World, name: str, *, read: bool = False) -> None:
    """A message in the session's mailbox; ``read``: its cursor is past it."""
    session_id = world.ids[name]
    row = MailRow(
        envelope_id=f"mail-{name}",
        session_id=session_id,
        seq=1,
        sender_kind=SenderKind.USER,
        kind=MailKind.USER_MESSAGE,
        body={"text": "hi"},
    )
    await world.db.write_orm(lambda tx: tx.add(row))
    if read:
        sessions = ChatSession.__table__  # type: ignore[attr-defined]
        advance = sa.update(sessions).where(sessions.c.id == session_id).values(mail_cursor=1)
        await world.db.write_sync(lambda tx: tx.execute(advance))


async def tracked_call(world: World, name: str) -> int:
    """A tracked call recorded running in the session (its turn and tool call rows too)."""
    session_id = world.ids[name]
    turn_id = await open_turn(world, name, TurnStatus.FINAL)
    request = ToolCallRequest(id=f"call_{name}", name="execute_cmd", arguments='{"command": "sleep 9"}')
    entry = await HistoryStore(world.db).record_round(
        session_id=session_id, turn_id=turn_id, result=LLMRound(tool_calls=[request])
    )
    return await BackgroundStore(world.db).started(
        tool_call_id=entry.calls[0].id or 0,
        session_id=session_id,
        call_id=request.id,
        name=request.name,
        summary="sleep 9",
    )


# --- the chat session cache -----------------------------------------------------------------


def _session(chat_id: int, source: SessionSource = SessionSource.CHAT) -> ChatSession:
    return ChatSession(id=chat_id * 10 + len(source), source=source, chat_id=chat_id)


def test_forget_chat_drops_every_session_of_the_chat_and_no_other() -> None:
    cache = ChatSessionCache(capacity=5)
    cache.fill([_session(A), _session(A, SessionSource.TERMINAL), _session(B)])
    assert cache.complete
    kept = cache.get(B, None)

    cache.forget_chat(A)

    assert cache.get(A, None) is None and cache.get(A, None, SessionSource.TERMINAL) is None
    assert cache.get(B, None) is kept
    assert not cache.complete, "a chat it no longer holds is not a new one: it must be read"


def test_forgetting_a_chat_the_cache_never_held_still_makes_it_incomplete() -> None:
    cache = ChatSessionCache(capacity=5)
    cache.fill([_session(B)])
    cache.forget_chat(A)
    assert not cache.complete and cache.get(B, None) is not None


# --- turns and mail -------------------------------------------------------------------------


async def test_open_turns_of_a_chat_are_its_chat_sessions_running_or_paused_turns(world: World) -> None:
    old_running = await open_turn(world, "a_old")
    paused = await open_turn(world, "a_chat", TurnStatus.PAUSED)
    await open_turn(world, "a_chat", TurnStatus.FINAL)
    await open_turn(world, "a_chat", TurnStatus.CANCELLED)
    for name in ("a_tic", "a_cron", "b_chat", "b_cron"):
        await open_turn(world, name)
    store = SessionStore(world.db)

    assert [t.id for t in await store.open_turns(chat_id=A)] == [old_running, paused]
    assert world.names([t.session_id for t in await store.open_turns(chat_id=B)]) == ["b_chat"]
    assert await store.open_turns(chat_id=9) == []
    everyone = await store.open_turns()
    assert sorted(world.names([t.session_id for t in everyone])) == sorted(
        ["a_old", "a_chat", "a_tic", "a_cron", "b_chat", "b_cron"]
    ), "without a chat: every open turn, headless ones too"


async def test_sessions_with_mail_of_a_chat_are_its_chat_sessions_with_unread_mail(world: World) -> None:
    await mail(world, "a_old", read=True)
    for name in ("a_chat", "a_tic", "a_cron", "b_chat", "b_cron"):
        await mail(world, name)
    store = SessionStore(world.db)

    assert world.names(await store.sessions_with_mail(chat_id=A)) == ["a_chat"]
    assert world.names(await store.sessions_with_mail(chat_id=B)) == ["b_chat"]
    assert await store.sessions_with_mail(chat_id=9) == []
    assert sorted(world.names(await store.sessions_with_mail())) == sorted(
        ["a_chat", "a_tic", "a_cron", "b_chat", "b_cron"]
    )


# --- output the chat never showed -----------------------------------------------------------


async def test_unshown_output_of_a_chat_is_what_is_addressed_to_it(world: World) -> None:
    outbox = OutboxStore(world.db)

    async def notice(name: str, chat_id: int, key: str) -> int:
        source = SessionSource.CRON if name.endswith("cron") else SessionSource.CHAT
        to = Address(session_id=world.ids[name], source=source, chat_id=chat_id)
        recorded = await outbox.record(Notice(to=to, key=key))
        assert recorded.outbox_id is not None
        return recorded.outbox_id

    since = utcnow() - timedelta(minutes=1)
    stopped = await notice("a_chat", A, "stopped")
    shown = await notice("a_chat", A, "restarted")
    await outbox.shown(shown)
    report = await notice("a_cron", A, "cron-run-failed")  # what a run reports to the chat is the chat's
    other = await notice("b_chat", B, "stopped")

    assert [e.outbox_id for e in await outbox.unshown(since, chat_id=A)] == [stopped, report]
    assert [e.outbox_id for e in await outbox.unshown(since, chat_id=B)] == [other]
    assert await outbox.unshown(since, chat_id=9) == []
    assert [e.outbox_id for e in await outbox.unshown(since)] == [stopped, report, other]
    assert await outbox.unshown(utcnow() + timedelta(seconds=1), chat_id=A) == []
    # in a cluster a chat's owner resends its sessions' output, the leader the runs' reports
    assert [e.outbox_id for e in await outbox.unshown(since, chat_id=A, headless=False)] == [stopped]
    assert [e.outbox_id for e in await outbox.unshown(since, headless=True)] == [report]


async def test_undelivered_answers_of_a_chat_are_its_active_sessions_final_answers(world: World) -> None:
    history = HistoryStore(world.db)

    async def answer(name: str, text: str) -> int:
        turn_id = await open_turn(world, name)
        entry = await history.record_round(
            session_id=world.ids[name], turn_id=turn_id, result=LLMRound(text=text), closes_turn=True
        )
        return entry.id or 0

    since = utcnow() - timedelta(minutes=1)
    mine = await answer("a_chat", "the answer for chat 7")
    await history.mark_delivered(await answer("a_chat", "shown already"))
    await answer("a_old", "of the session /new replaced")
    await answer("a_cron", "a cron run's reply")
    theirs = await answer("b_chat", "the answer for chat 8")

    assert [r.id for r in await history.undelivered_answers(since, chat_id=A)] == [mine]
    assert [r.id for r in await history.undelivered_answers(since, chat_id=B)] == [theirs]
    assert await history.undelivered_answers(since, chat_id=9) == []
    assert [r.id for r in await history.undelivered_answers(since)] == [mine, theirs]


# --- tracked calls --------------------------------------------------------------------------


async def test_answers_shown_at_once_in_several_chats_are_marked_in_one_transaction(world: World) -> None:
    """``mark_delivered`` is group-committed: the chats that show an answer at once share one
    transaction (and those that come while it is written, the next), and every answer is marked."""
    history = HistoryStore(world.db)
    answers = []
    for name in ("a_chat", "b_chat", "a_chat", "b_chat", "a_chat"):
        turn_id = await open_turn(world, name)
        entry = await history.record_round(
            session_id=world.ids[name], turn_id=turn_id, result=LLMRound(text=f"to {name}"), closes_turn=True
        )
        answers.append(entry.id or 0)
    commits = []

    def committed(_conn: object) -> None:
        commits.append(1)

    sa.event.listen(sa.Engine, "commit", committed)
    try:
        await asyncio.gather(*(history.mark_delivered(row_id) for row_id in answers))
    finally:
        sa.event.remove(sa.Engine, "commit", committed)
    await history.close()
    assert await history.undelivered_answers(utcnow() - timedelta(minutes=1)) == []
    assert len(commits) == 1


async def test_running_calls_of_a_chat_are_its_sessions_and_orphan_all_settles_only_those(
    world: World,
) -> None:
    old = await tracked_call(world, "a_old")
    current = await tracked_call(world, "a_chat")
    theirs = await tracked_call(world, "b_chat")
    store = BackgroundStore(world.db)

    assert [r.id for r in await store.running(chat_id=A)] == [old, current]
    assert [r.id for r in await store.running(chat_id=B)] == [theirs]
    assert await store.running(chat_id=9) == []
    assert [r.id for r in await store.running(world.ids["a_chat"], chat_id=A)] == [current]
    assert await store.running(world.ids["b_chat"], chat_id=A) == []

    mailbox = SqlMailbox(world.db)
    calls = BackgroundCalls(store, HistoryStore(world.db), mailbox, EventBus(), ToolsSettings())
    try:
        assert await calls.orphan_all(chat_id=A) == 2
        assert await calls.orphan_all(chat_id=A) == 0, "settled once"
    finally:
        await mailbox.close()
    statuses = {run_id: (await store.get(run_id)) for run_id in (old, current, theirs)}
    assert {run_id: row.status for run_id, row in statuses.items() if row is not None} == {
        old: RunStatus.ORPHANED,
        current: RunStatus.ORPHANED,
        theirs: RunStatus.RUNNING,
    }
    assert [r.id for r in await store.running()] == [theirs]


async def test_running_calls_of_a_chat_leave_out_the_headless_runs_reporting_to_it(world: World) -> None:
    current = await tracked_call(world, "a_chat")
    cron = await tracked_call(world, "a_cron")  # a cron run's command, running on the leader
    store = BackgroundStore(world.db)
    assert [r.id for r in await store.running(chat_id=A)] == [current]
    mailbox = SqlMailbox(world.db)
    calls = BackgroundCalls(store, HistoryStore(world.db), mailbox, EventBus(), ToolsSettings())
    try:
        assert await calls.orphan_all(chat_id=A) == 1
    finally:
        await mailbox.close()
    row = await store.get(cron)
    assert row is not None and row.status == RunStatus.RUNNING
