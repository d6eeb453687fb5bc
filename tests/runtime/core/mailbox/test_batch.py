"""Group commit (``runtime/infra/storage/group_commit.py``): concurrent accepts share one write transaction,
yet every envelope is decided as a one-at-a-time accept would be: contiguous seqs per session,
the first receipt for a duplicate, ``MailboxFull`` for the over-limit caller only, and a failed
transaction fails every caller in it and stores nothing."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import Connection, text
from sqlmodel.ext.asyncio.session import AsyncSession

from agentgram.runtime.core.mailbox import (
    ControlAction,
    ControlBody,
    Envelope,
    MailBody,
    Receipt,
    Sender,
    SenderKind,
    SqlMailbox,
    UserMessageBody,
)
from agentgram.runtime.infra.errors import MailboxFull, StorageError
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.group_commit import Batcher
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore

T = TypeVar("T")


class CountingDatabase(Database):
    """The real database, counting its write transactions."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.writes = 0
        self.sync_write_called = asyncio.Event()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        self.writes += 1
        async with super().write() as tx:
            yield tx

    async def write_sync(self, fn: Callable[[Connection], T]) -> T:
        self.writes += 1
        self.sync_write_called.set()
        return await super().write_sync(fn)


@dataclass
class Rig:
    db: CountingDatabase
    mailbox: SqlMailbox
    path: Path
    chats: itertools.count[int]

    async def new_session(self) -> int:
        session = await SessionStore(self.db).open_new(next(self.chats), user_id=None, language=None)
        assert session.id is not None
        return session.id

    async def together(self, *envelopes: Envelope) -> list[Receipt | BaseException]:
        """Accept concurrently; asserts they were written in one transaction."""
        before = self.db.writes
        outcomes = await asyncio.gather(*(self.mailbox.accept(e) for e in envelopes), return_exceptions=True)
        assert self.db.writes == before + 1, "the concurrent accepts share one transaction"
        return outcomes


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    path = tmp_path / "mail.db"
    db = CountingDatabase(f"sqlite+aiosqlite:///{path}")
    await migrate(db)
    yield Rig(db, SqlMailbox(db, max_unread=4), path, itertools.count(1))
    await db.close()


def mail(envelope_id: str, session_id: int, body: MailBody | None = None) -> Envelope:
    return Envelope(
        id=envelope_id,
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER, ref="1001"),
        body=body or UserMessageBody(text=f"text of {envelope_id}"),
    )


def receipt(outcome: Receipt | BaseException) -> Receipt:
    assert isinstance(outcome, Receipt), outcome
    return outcome


async def test_many_concurrent_senders_get_distinct_contiguous_seqs_per_session(rig: Rig) -> None:
    mailbox = SqlMailbox(rig.db, max_unread=1000)
    sessions = [await rig.new_session() for _ in range(3)]
    got: dict[str, Receipt] = {}

    async def sender(session: int, name: str) -> None:
        for n in range(8):
            envelope_id = f"{session}/{name}/{n}"
            got[envelope_id] = await mailbox.accept(mail(envelope_id, session))

    before = rig.db.writes
    await asyncio.gather(*(sender(s, f"sender{k}") for s in sessions for k in range(6)))

    assert rig.db.writes - before < len(got) // 4, "accepts arriving together were group-committed"
    for session in sessions:
        mine = {i: r for i, r in got.items() if i.startswith(f"{session}/")}
        assert sorted(r.seq for r in mine.values()) == list(range(1, 6 * 8 + 1))
        assert not any(r.duplicate for r in mine.values())
        by_seq = sorted(mine.items(), key=lambda item: item[1].seq)
        assert [(e.id, e.seq) for e in await mailbox.unread(session)] == [(i, r.seq) for i, r in by_seq]
        for k in range(6):  # each sender's own mail keeps its order
            seqs = [mine[f"{session}/sender{k}/{n}"].seq for n in range(8)]
            assert seqs == sorted(seqs)


async def test_a_duplicate_inside_one_batch_gets_the_first_receipt(rig: Rig) -> None:
    session = await rig.new_session()
    woken: list[str] = []
    rig.mailbox.subscribe(lambda e: woken.append(e.id))
    first, other, again = await rig.together(
        mail("tg:1", session),
        mail("tg:2", session),
        mail("tg:1", session, UserMessageBody(text="redelivered")),
    )
    assert (receipt(first).seq, receipt(first).duplicate) == (1, False)
    assert (receipt(other).seq, receipt(other).duplicate) == (2, False)
    assert (receipt(again).id, receipt(again).seq, receipt(again).duplicate) == ("tg:1", 1, True)
    unread = await rig.mailbox.unread(session)
    assert [(e.id, e.seq) for e in unread] == [("tg:1", 1), ("tg:2", 2)]
    assert isinstance(unread[0].body, UserMessageBody) and unread[0].body.text == "text of tg:1"
    assert woken == ["tg:1", "tg:2"], "the duplicate wakes nobody"


async def test_a_duplicate_of_stored_mail_inside_a_batch_gets_the_stored_receipt(rig: Rig) -> None:
    session = await rig.new_session()
    stored = await rig.mailbox.accept(mail("tg:1", session))
    again, fresh = await rig.together(mail("tg:1", session), mail("tg:2", session))
    assert receipt(again) == Receipt(id="tg:1", seq=stored.seq, duplicate=True)
    assert receipt(fresh) == Receipt(id="tg:2", seq=2)


async def test_mailbox_full_hits_only_the_over_limit_callers(rig: Rig) -> None:
    full, other = await rig.new_session(), await rig.new_session()
    stop = ControlBody(action=ControlAction.STOP)
    outcomes = await rig.together(
        *(mail(f"m{i}", full) for i in range(6)),
        mail("stop", full, stop),
        mail("elsewhere", other),
    )
    assert [receipt(o).seq for o in outcomes[:4]] == [1, 2, 3, 4]
    assert all(isinstance(o, MailboxFull) for o in outcomes[4:6]), outcomes[4:6]
    assert receipt(outcomes[6]).seq == 5, "control mail is exempt from the bound"
    assert receipt(outcomes[7]).seq == 1, "the bound is per session"
    assert [e.id for e in await rig.mailbox.unread(full)] == ["m0", "m1", "m2", "m3", "stop"]
    assert [e.id for e in await rig.mailbox.unread(other)] == ["elsewhere"]


async def test_a_refused_envelope_resent_in_the_same_batch_is_refused_again_not_a_duplicate(rig: Rig) -> None:
    session = await rig.new_session()
    outcomes = await rig.together(*(mail(f"m{i}", session) for i in range(5)), mail("m4", session))
    assert isinstance(outcomes[4], MailboxFull) and isinstance(outcomes[5], MailboxFull)
    assert len(await rig.mailbox.unread(session)) == 4


async def test_mail_for_an_unknown_session_fails_alone(rig: Rig) -> None:
    session = await rig.new_session()
    unknown, known = await rig.together(mail("lost", session + 1000), mail("kept", session))
    assert isinstance(unknown, StorageError) and "no session" in str(unknown)
    assert receipt(known).seq == 1
    assert [e.id for e in await rig.mailbox.unread(session)] == ["kept"]


async def test_a_failed_batch_transaction_fails_every_caller_and_stores_nothing(rig: Rig) -> None:
    one, two = await rig.new_session(), await rig.new_session()
    async with rig.db.write() as tx:
        await tx.exec(  # type: ignore[call-overload]
            text(
                "CREATE TRIGGER poison BEFORE INSERT ON session_mail WHEN NEW.envelope_id = 'poison' "
                "BEGIN SELECT RAISE(ABORT, 'poisoned envelope'); END"
            )
        )
    woken: list[str] = []
    rig.mailbox.subscribe(lambda e: woken.append(e.id))

    outcomes = await rig.together(mail("ok-1", one), mail("poison", one), mail("ok-2", two))

    assert all(isinstance(o, Exception) and "poisoned envelope" in str(o) for o in outcomes), outcomes
    assert await rig.mailbox.unread(one) == [] and await rig.mailbox.unread(two) == []
    assert woken == [], "nobody is woken for mail that was not committed"
    retried = await rig.mailbox.accept(mail("ok-1", one))
    assert (retried.seq, retried.duplicate) == (1, False), "nothing of the failed batch was kept"


async def test_listeners_hear_of_an_envelope_only_after_its_batch_committed(rig: Rig) -> None:
    session = await rig.new_session()
    visible: list[tuple[str, bool]] = []

    def listener(envelope: Envelope) -> None:
        with sqlite3.connect(rig.path) as other_connection:  # sees committed data only
            row = other_connection.execute(
                "SELECT 1 FROM session_mail WHERE envelope_id = ?", (envelope.id,)
            ).fetchone()
        visible.append((envelope.id, row is not None))

    rig.mailbox.subscribe(listener)
    await rig.together(mail("a", session), mail("b", session))
    assert visible == [("a", True), ("b", True)]


async def test_a_caller_cancelled_while_its_batch_is_written_still_has_its_envelope_stored(rig: Rig) -> None:
    session = await rig.new_session()
    rig.db.sync_write_called.clear()  # opening the session wrote too
    held, release = asyncio.Event(), asyncio.Event()

    async def hold_the_write_lock() -> None:
        async with rig.db.write():
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold_the_write_lock())
    await held.wait()
    caller = asyncio.create_task(rig.mailbox.accept(mail("cancelled", session)))
    await rig.db.sync_write_called.wait()  # its batch was taken and waits for the write lock
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    await holder
    retried = await rig.mailbox.accept(mail("cancelled", session))
    assert (retried.seq, retried.duplicate) == (1, True), "the cancelled caller's envelope was written"
    assert [e.id for e in await rig.mailbox.unread(session)] == ["cancelled"]


async def test_the_sqlite_accept_runs_off_the_event_loop_thread(rig: Rig) -> None:
    session = await rig.new_session()
    threads: list[int] = []
    original = rig.mailbox._store_in

    def spy(conn: Connection, batch: list[Envelope]) -> tuple[list[Receipt | Exception], list[Envelope]]:
        threads.append(threading.get_ident())
        return original(conn, batch)

    rig.mailbox._store_in = spy  # type: ignore[method-assign]
    assert (await rig.mailbox.accept(mail("a", session))).seq == 1
    assert threads and threads[0] != threading.get_ident()


# --- the batcher on its own ------------------------------------------------------------------


class Gate:
    """A flush that records its batches and holds each one until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def flush(self, items: list[str]) -> list[str | Exception]:
        self.batches.append(items)
        self.started.set()
        await self.release.wait()
        return [ValueError(item) if item.startswith("bad") else item.upper() for item in items]


async def queued(batcher: Batcher[str, str], item: str) -> asyncio.Task[str]:
    """A task that has submitted ``item`` (and waits for its outcome) by the time this returns."""
    submitting = asyncio.Event()

    async def submit() -> str:
        submitting.set()  # the submit below queues the item before this task yields
        return await batcher.submit(item)

    task = asyncio.create_task(submit())
    await submitting.wait()
    return task


async def test_items_arriving_during_a_flush_form_the_next_batch() -> None:
    gate = Gate()
    batcher: Batcher[str, str] = Batcher(gate.flush)
    first = await queued(batcher, "a")
    await gate.started.wait()
    later = [await queued(batcher, item) for item in ("b", "bad-c", "d")]
    gate.release.set()
    assert await first == "A"
    assert await later[0] == "B"
    with pytest.raises(ValueError, match="bad-c"):
        await later[1]
    assert await later[2] == "D"
    assert gate.batches == [["a"], ["b", "bad-c", "d"]]


async def test_a_flush_that_raises_fails_every_caller_of_that_batch_only() -> None:
    calls = 0

    async def flush(items: list[str]) -> list[str | Exception]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("transaction failed")
        return list(items)

    batcher: Batcher[str, str] = Batcher(flush)
    outcomes = await asyncio.gather(*(batcher.submit(i) for i in "xyz"), return_exceptions=True)
    assert [str(o) for o in outcomes] == ["transaction failed"] * 3
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert await batcher.submit("next") == "next", "the batcher keeps working after a failed batch"


async def test_a_caller_cancelled_before_its_batch_is_dropped_and_after_it_still_written() -> None:
    gate = Gate()
    batcher: Batcher[str, str] = Batcher(gate.flush)
    in_flight = await queued(batcher, "in-flight")
    await gate.started.wait()
    waiting = await queued(batcher, "waiting")
    kept = await queued(batcher, "kept")
    in_flight.cancel()
    waiting.cancel()
    gate.release.set()
    assert await kept == "KEPT"
    for task in (in_flight, waiting):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert gate.batches == [["in-flight"], ["kept"]]


async def test_batches_are_capped_at_max_batch() -> None:
    seen: list[list[int]] = []

    async def flush(items: list[int]) -> list[int | Exception]:
        seen.append(items)
        return [i * 10 for i in items]

    batcher: Batcher[int, int] = Batcher(flush, max_batch=3)
    assert await asyncio.gather(*(batcher.submit(i) for i in range(7))) == [i * 10 for i in range(7)]
    assert seen == [[0, 1, 2], [3, 4, 5], [6]]
