"""History writes: a final round ends its turn in the same transaction, a tool round leaves
it running with its calls pending."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Connection

from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ToolCallStatus, TurnStatus
from agentgram.runtime.infra.storage.sessions import SessionStore


@dataclass
class Stores:
    db: Database
    sessions: SessionStore
    history: HistoryStore
    session_id: int


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[Stores]:
    """A migrated database with one new chat session."""
    db = Database(database_url)
    await migrate(db)
    try:
        sessions = SessionStore(db)
        session = await sessions.open_new(1, user_id=None, language=None)
        assert session.id is not None
        yield Stores(db, sessions, HistoryStore(db), session.id)
    finally:
        await db.close()


async def test_a_final_round_ends_its_turn_in_the_same_transaction(stores: Stores) -> None:
    db, sessions, history, session_id = stores.db, stores.sessions, stores.history, stores.session_id
    turn_id = await db.write_sync(lambda tx: sessions.open_turn(tx, session_id))

    call = ToolCallRequest(id="call_1", name="list_dir", arguments="{}")
    entry = await history.record_round(
        session_id=session_id, turn_id=turn_id, result=LLMRound(text="", tool_calls=[call])
    )
    turn = await sessions.turn(turn_id)
    assert turn is not None and (turn.status, turn.rounds, turn.ended_at) == (TurnStatus.RUNNING, 1, None)
    assert [c.status for c in entry.calls] == [ToolCallStatus.PENDING]

    await history.record_round(
        session_id=session_id, turn_id=turn_id, result=LLMRound(text="Done."), closes_turn=True
    )
    turn = await sessions.turn(turn_id)
    assert turn is not None and (turn.status, turn.rounds) == (TurnStatus.FINAL, 2)
    assert turn.ended_at is not None


async def test_the_orphan_check_is_skipped_only_when_the_tail_in_memory_ends_in_an_answer(
    stores: Stores,
) -> None:
    """``may_end_unanswered``: unknown (no tail in memory) and a trailing user row mean the check
    runs; a tail that ends in an answer means it has nothing to find, and the check agrees."""
    db, sessions, history, session_id = stores.db, stores.sessions, stores.history, stores.session_id
    assert history.may_end_unanswered(session_id)  # nothing in memory yet
    await history.entries(session_id)  # a round reads the history: its tail is in memory
    assert not history.may_end_unanswered(session_id)  # the whole history, empty

    def ask(tx: Connection) -> int:
        turn_id = sessions.open_turn(tx, session_id)
        history.add_user_row(tx, session_id=session_id, turn_id=turn_id, content="hi")
        return turn_id

    turn_id = await db.write_sync(ask)
    assert history.may_end_unanswered(session_id)  # a user row no answer follows yet
    await history.record_round(
        session_id=session_id, turn_id=turn_id, result=LLMRound(text="Hello."), closes_turn=True
    )
    assert not history.may_end_unanswered(session_id)
    assert await db.write_sync(lambda tx: history.mark_orphans_failed(tx, session_id)) == 0

    await db.write_sync(lambda tx: history.add_user_row(tx, session_id=session_id, turn_id=None, content="x"))
    assert history.may_end_unanswered(session_id)
    assert await db.write_sync(lambda tx: history.mark_orphans_failed(tx, session_id)) == 1
    history.forget(session_id)
    assert history.may_end_unanswered(session_id)
