"""In-memory views in front of the database (``runtime/storage/views.py``): the mailbox's
unread mail and the history's tail always equal what a fresh read of the database says —
after accepts, cursor moves, rounds, call results, rolled-back transactions and reads that
overlap a commit — and a hot session's round reads neither back."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

from agentgram.runtime.core.mailbox import Envelope, Sender, SenderKind, SqlMailbox, UserMessageBody
from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryEntry, HistoryStore
from agentgram.runtime.infra.storage.history_tail import BUDGET, KEEP, HistoryTails, cost_of
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ToolCallStatus
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.storage.views import SessionViews

# --- the rules ---------------------------------------------------------------------------------


def test_a_fill_is_honoured_only_if_nothing_changed_since_its_ticket() -> None:
    views: SessionViews[list[int]] = SessionViews(capacity=4)
    ticket = views.ticket(1)
    views.changed(1)  # a commit landed while the read ran
    views.fill(1, [1], ticket)
    assert views.get(1) is None
    views.fill(1, [1, 2], views.ticket(1))
    assert views.get(1) == [1, 2]


def test_changes_reach_the_cached_view_and_forget_drops_it() -> None:
    views: SessionViews[list[int]] = SessionViews(capacity=4)
    views.fill(1, [], views.ticket(1))
    view = views.changed(1)
    assert view is not None
    view.append(7)
    assert views.get(1) == [7]
    assert views.changed(2) is None, "an uncached session has nothing to update"
    views.forget(1)
    assert views.get(1) is None


def test_the_least_recently_used_session_goes_first() -> None:
    views: SessionViews[str] = SessionViews(capacity=2)
    for session in (1, 2):
        views.fill(session, f"s{session}", views.ticket(session))
    views.get(1)
    views.fill(3, "s3", views.ticket(3))
    assert (views.get(1), views.get(2), views.get(3)) == ("s1", None, "s3")


def test_pruning_the_change_stamps_voids_every_ticket_out() -> None:
    views: SessionViews[str] = SessionViews(capacity=1)
    ticket = views.ticket(1)
    for session in range(2, 12):  # more changed sessions than 8 × capacity
        views.changed(session)
    views.fill(1, "stale?", ticket)
    assert views.get(1) is None


class Weighed(SessionViews[list[int]]):
    def weigh(self, view: list[int]) -> int:
        return len(view)


def test_views_that_weigh_more_than_the_budget_go_least_recently_used_first() -> None:
    views = Weighed(capacity=10, budget=5)
    views.fill(1, [1, 1], views.ticket(1))
    views.fill(2, [2, 2], views.ticket(2))
    views.get(1)
    views.fill(3, [3, 3], views.ticket(3))  # 6 > 5: session 2, the least recently read, goes
    assert (views.get(1), views.get(2), views.get(3)) == ([1, 1], None, [3, 3])
    assert views.weight == 4
    view = views.changed(3)
    assert view is not None
    view.append(3)  # grown in place, and told
    views.resized(1)
    assert views.weight == 5 and views.get(1) == [1, 1]
    views.forget(1)
    assert views.weight == 3
    views.fill(3, [3] * 9, views.ticket(3))  # refilled alone over the budget: the newest stays
    assert views.get(3) == [3] * 9 and views.weight == 9


# --- a database to work on ---------------------------------------------------------------------


class Store:
    def __init__(self, db: Database, keep: int = KEEP, budget: int = BUDGET) -> None:
        self.db = db
        self.mailbox = SqlMailbox(db)
        self.history = HistoryStore(db, HistoryTails(keep=keep, budget=budget))
        self.sessions = SessionStore(db)
        self.ids = itertools.count(1)

    async def new_session(self) -> int:
        session = await self.sessions.open_new(next(self.ids), user_id=None, language=None)
        assert session.id is not None
        return session.id

    async def new_turn(self, session_id: int) -> int:
        return await self.db.write_sync(lambda tx: self.sessions.open_turn(tx, session_id))

    def fresh(self) -> tuple[SqlMailbox, HistoryStore]:
        """Stores with empty views: what they return comes from the database."""
        return SqlMailbox(self.db), HistoryStore(self.db)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    """Stores over a migrated database, once per backend."""
    db = Database(database_url)
    await migrate(db)
    try:
        yield Store(db)
    finally:
        await db.close()


def message(envelope_id: str, session_id: int) -> Envelope:
    return Envelope(
        id=envelope_id,
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER),
        body=UserMessageBody(text=f"text {envelope_id}"),
    )


def shape(entries: list[HistoryEntry]) -> list[tuple[Any, ...]]:
    return [
        (
            e.id,
            e.role,
            e.content,
            e.status,
            tuple((c.id, c.call_id, c.status, c.result) for c in e.calls),
        )
        for e in entries
    ]


async def no_reads(db: Database) -> Callable[[], None]:
    """Make the database refuse reads; returns the undo."""
    original = db.read_sync

    async def refuse(fn: Any) -> Any:
        raise AssertionError("read from the database although the view holds the session")

    db.read_sync = refuse  # type: ignore[method-assign]

    def undo() -> None:
        db.read_sync = original  # type: ignore[method-assign]

    return undo


# --- the mailbox's unread mail -----------------------------------------------------------------


async def test_a_woken_consumer_reads_its_new_mail_without_a_query(store: Store) -> None:
    session = await store.new_session()
    assert await store.mailbox.unread(session) == []  # the first read fills the view
    undo = await no_reads(store.db)
    await store.mailbox.accept(message("tg:1", session))
    await store.mailbox.accept(message("tg:2", session))
    assert [e.seq for e in await store.mailbox.unread(session)] == [1, 2]
    await store.mailbox.consume(session, 1)
    assert [e.id for e in await store.mailbox.unread(session)] == ["tg:2"]
    undo()


async def test_a_rolled_back_cursor_move_leaves_the_view(store: Store) -> None:
    session = await store.new_session()
    await store.mailbox.accept(message("tg:1", session))
    assert len(await store.mailbox.unread(session)) == 1

    def consume_then_fail(tx: Connection) -> None:
        store.mailbox.advance(tx, session, 1)
        raise OSError("disk gone before the commit")

    with pytest.raises(OSError):
        await store.db.write_sync(consume_then_fail)
    assert [e.id for e in await store.mailbox.unread(session)] == ["tg:1"]


async def test_a_read_that_overlaps_a_commit_does_not_fill_a_stale_view(store: Store) -> None:
    session = await store.new_session()
    await store.mailbox.accept(message("tg:1", session))
    read_done, go_on = asyncio.Event(), asyncio.Event()
    original = store.db.read_sync

    async def slow_read(fn: Any) -> Any:
        result = await original(fn)  # the snapshot is taken here ...
        read_done.set()
        await go_on.wait()  # ... and handed back after the next accept committed
        return result

    store.db.read_sync = slow_read  # type: ignore[method-assign]
    reading = asyncio.create_task(store.mailbox.unread(session))
    await read_done.wait()
    await store.mailbox.accept(message("tg:2", session))
    go_on.set()
    assert [e.id for e in await reading] == ["tg:1"]  # the read's own snapshot
    store.db.read_sync = original  # type: ignore[method-assign]
    assert [e.id for e in await store.mailbox.unread(session)] == ["tg:1", "tg:2"]


_mail_ops = st.lists(
    st.one_of(
        st.tuples(st.just("accept"), st.integers(0, 1)),
        st.tuples(st.just("consume"), st.integers(0, 1)),
        st.tuples(st.just("read"), st.integers(0, 1)),
    ),
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_mail_ops)
async def test_property_unread_mail_always_equals_the_database(tmp_path: Path, ops: list[Any]) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / f'mail-{id(ops)}.db'}")
    await migrate(db)
    try:
        store = Store(db)
        sessions = [await store.new_session(), await store.new_session()]
        counter = itertools.count()
        for op, which in ops:
            session = sessions[which]
            if op == "accept":
                await store.mailbox.accept(message(f"m{next(counter)}", session))
            elif op == "consume":
                unread = await store.mailbox.unread(session)
                if unread:
                    await store.mailbox.consume(session, unread[len(unread) // 2].seq)
            fresh, _ = store.fresh()
            for each in sessions:
                assert await store.mailbox.unread(each) == await fresh.unread(each)
    finally:
        await db.close()


# --- the history's tail ------------------------------------------------------------------------


async def fold(store: Store, session: int, turn: int, text: str) -> None:
    await store.db.write_sync(
        lambda tx: store.history.add_user_row(tx, session_id=session, turn_id=turn, content=text)
    )


def tool_round(*names: str) -> LLMRound:
    calls = [ToolCallRequest(id=f"call_{i}", name=name, arguments="{}") for i, name in enumerate(names)]
    return LLMRound(text="", tool_calls=calls)


async def test_a_round_reads_what_the_previous_round_wrote_without_a_query(store: Store) -> None:
    session = await store.new_session()
    turn = await store.new_turn(session)
    assert await store.history.entries(session, limit=200) == []
    undo = await no_reads(store.db)
    await fold(store, session, turn, "list my files")
    entry = await store.history.record_round(session_id=session, turn_id=turn, result=tool_round("list_dir"))
    await store.history.set_call_status(entry.calls[0].id or 0, ToolCallStatus.DONE, "a.txt")
    cached = await store.history.entries(session, limit=200)
    undo()
    _, fresh = store.fresh()
    assert shape(cached) == shape(await fresh.entries(session, limit=200))
    assert cached[-1].calls[0].result == "a.txt"


async def test_a_tail_never_holds_more_than_it_keeps(store: Store) -> None:
    small = Store(store.db, keep=5)
    session = await small.new_session()
    turn = await small.new_turn(session)
    assert await small.history.entries(session, limit=3) == []
    for n in range(30):
        await fold(small, session, turn, f"message {n}")
        result = tool_round("read_file") if n % 3 == 0 else LLMRound(text=f"answer {n}")
        await small.history.record_round(session_id=session, turn_id=turn, result=result)
        if n % 10 == 9:  # an ask beyond the tail fills it from a longer read
            assert len(await small.history.entries(session, limit=40)) == min(40, 2 * n + 2)
        tail = small.history.tails.get(session)
        assert tail is not None
        assert len(tail.entries) == min(5, 2 * n + 2)
        assert set(tail.calls) == {call.id for entry in tail.entries for call in entry.calls}


async def test_a_tail_keeps_of_a_rows_meta_only_the_attachments_a_round_reads(store: Store) -> None:
    session = await store.new_session()
    turn = await store.new_turn(session)
    photo = {"kind": "photo", "path": "inbox/a.jpg"}
    metas = [{"envelope_id": "e1", "chat_message_id": 7}, {"envelope_id": "e2", "attachments": [photo]}]

    def add(meta: dict[str, Any]) -> Callable[[Connection], object]:
        return lambda tx: store.history.add_user_row(
            tx, session_id=session, turn_id=turn, content="hi", meta=meta
        )

    await store.db.write_sync(add(metas[0]))
    assert [e.meta for e in await store.history.entries(session, limit=200)] == [{}]  # filled by a read
    await store.db.write_sync(add(metas[1]))  # appended after its commit
    await store.history.record_round(session_id=session, turn_id=turn, result=LLMRound(text="ok"))
    tail = store.history.tails.get(session)
    assert tail is not None
    assert [e.meta for e in tail.entries] == [{}, {"attachments": [photo]}, {}]
    assert tail.entries[0].meta is tail.entries[2].meta  # one shared empty dict
    assert tail.entries[0].calls is tail.entries[1].calls == ()  # and one empty tuple of calls
    assert [row.meta for row in await store.history.all_rows(session)] == [*metas, {}]  # stored whole
    _, fresh = store.fresh()
    read = await fresh.entries(session, limit=200)  # a miss: the same, read from the database
    assert [e.meta for e in read] == [{}, {"attachments": [photo]}, {}]
    assert read[0].meta is read[2].meta


async def test_an_ask_beyond_the_tail_is_read_from_the_database(store: Store) -> None:
    small = Store(store.db, keep=4)
    session = await small.new_session()
    turn = await small.new_turn(session)
    await small.history.entries(session, limit=4)
    for n in range(12):
        await fold(small, session, turn, f"message {n}")
        await small.history.record_round(session_id=session, turn_id=turn, result=tool_round("list_dir"))
    _, fresh = store.fresh()
    for limit in (3, 4, 5, 24, 100):
        assert shape(await small.history.entries(session, limit=limit)) == shape(
            await fresh.entries(session, limit=limit)
        )
    everything = await fresh.entries(session, limit=100)
    for after in (0, everything[5].id or 0, everything[-3].id or 0):
        for limit in (2, 100):
            assert shape(await small.history.entries_after(session, after, limit)) == shape(
                await fresh.entries_after(session, after, limit)
            )
    undo = await no_reads(store.db)
    assert len(await small.history.entries(session, limit=4)) == 4  # a round's read stays in memory
    undo()


async def test_the_tails_together_weigh_no_more_than_their_budget(store: Store) -> None:
    """Long tool results fill the budget: the least recently read sessions leave memory, what is
    left is weighed exactly, and a session that left is read back whole from the database."""
    small = Store(store.db, budget=20_000)
    sessions = [await small.new_session() for _ in range(4)]
    for round_ in range(6):
        for session in sessions:
            turn = await small.new_turn(session)
            await small.history.entries(session, limit=KEEP)
            await fold(small, session, turn, f"read it {round_}")
            await small.history.record_round(session_id=session, turn_id=turn, result=tool_round("read_file"))
            for call in await small.history.open_calls(session):
                await small.history.set_call_status(call.id or 0, ToolCallStatus.DONE, "x" * 1500)
            await small.history.record_round(session_id=session, turn_id=turn, result=LLMRound(text="done"))
            tails = small.history.tails
            held = [tail for s in sessions if (tail := tails._views.get(s)) is not None]
            assert tails.weight == sum(cost_of(e) for tail in held for e in tail.entries)
            assert all(tail.size == sum(map(cost_of, tail.entries)) for tail in held)
            assert tails.weight <= 20_000 or len(held) == 1
    assert small.history.tails.get(sessions[0]) is None, "the least recently read left memory"
    _, fresh = store.fresh()
    for session in sessions:
        assert shape(await small.history.entries(session, limit=KEEP)) == shape(
            await fresh.entries(session, limit=KEEP)
        )


_history_ops = st.lists(
    st.sampled_from(["user", "text_round", "tool_round", "finish_calls", "stop", "orphans", "report"]),
    max_size=20,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_history_ops, limit=st.integers(1, 8), keep=st.sampled_from([2, 5, KEEP]))
async def test_property_the_tail_always_equals_the_database(
    tmp_path: Path, ops: list[str], limit: int, keep: int
) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / f'history-{id(ops)}-{limit}-{keep}.db'}")
    await migrate(db)
    try:
        store = Store(db, keep)
        session = await store.new_session()
        turn = await store.new_turn(session)
        actions: dict[str, Callable[[], Awaitable[object]]] = {
            "user": lambda: fold(store, session, turn, "hello"),
            "text_round": lambda: store.history.record_round(
                session_id=session, turn_id=turn, result=LLMRound(text="answer")
            ),
            "tool_round": lambda: store.history.record_round(
                session_id=session, turn_id=turn, result=tool_round("read_file", "list_dir")
            ),
            "finish_calls": lambda: finish_open_calls(store, session),
            "stop": lambda: store.history.close_open_calls(session, ToolCallStatus.CANCELLED, "Cancelled."),
            "orphans": lambda: store.db.write_sync(lambda tx: store.history.mark_orphans_failed(tx, session)),
            "report": lambda: store.history.append_assistant(session_id=session, content="tic report"),
        }
        for op in ops:
            await actions[op]()
            _, fresh = store.fresh()
            for each in (limit, 200):
                assert shape(await store.history.entries(session, limit=each)) == shape(
                    await fresh.entries(session, limit=each)
                )
            tail = store.history.tails.get(session)
            assert tail is None or len(tail.entries) <= keep
            assert store.history.tails.weight == (0 if tail is None else sum(map(cost_of, tail.entries)))
    finally:
        await db.close()


async def finish_open_calls(store: Store, session: int) -> None:
    for call in await store.history.open_calls(session):
        await store.history.set_call_status(call.id or 0, ToolCallStatus.DONE, f"result of {call.name}")
