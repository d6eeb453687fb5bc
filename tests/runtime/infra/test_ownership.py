"""Chats owned one by one (``runtime.infra.ownership``) on a real PostgreSQL server: two or three
instances, each its own database engine and :class:`Lead`, sharing the chats (``spread``).

A chat is claimed by the first instance that needs it (its claim hooks run once) and placed there
by the others; a dead owner's chat is claimed elsewhere at a higher epoch; the writes of a task
admitted to a chat are fenced by that chat's lease, and nothing else is; headless sessions run on
the leader only; mail accepted on one instance wakes the owner through ``NOTIFY``; the scan claims
orphaned chats with work, the poll wakes held sessions with unread mail, and a lapsed instance
learns it lost a chat. Heartbeats are made old with an UPDATE in the database's time, never by
waiting; notifications are awaited on a deadline (they have no other event to wait for)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from agentgram.runtime.core.mailbox import Envelope, Sender, SenderKind, SqlMailbox, UserMessageBody
from agentgram.runtime.infra.cluster import Instance, database_ago
from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.lead import Lead, LeadLost
from agentgram.runtime.infra.ownership import HERE, Ownership
from agentgram.runtime.infra.storage.cluster_rows import InstanceRow
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ChatSession, KeyValue, SessionSource
from agentgram.runtime.infra.storage.notify import CHANNEL, Listener
from agentgram.runtime.infra.storage.sessions import SessionStore
from tests.backends import pg_database

SETTINGS = ClusterSettings(enabled=True, lease_ttl=1.0, heartbeat=0.2)
CHAT = -1001234567890
"""A supergroup's id: wider than 32 bits, as chat ids are."""
OTHER = 4242
THIRD = 777
RELAY = "http://10.0.0.1:8443/telegram/webhook"
WAKE = 1.0
"""Mail announced on one instance reaches the owner's hook within this many seconds."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def migrated() -> AsyncIterator[str]:
    """One migrated database, the template of each test's (migrating costs a second a database)."""
    async with pg_database() as database_url:
        db = Database(database_url)
        await migrate(db)
        await db.close()
        yield database_url


@pytest.fixture
async def url(migrated: str) -> AsyncIterator[str]:
    """A database of the test's own, a copy of the migrated template; dropped after."""
    template = make_url(migrated)
    name = f"{template.database}_{uuid.uuid4().hex[:8]}"
    server = template.set(drivername="postgresql").render_as_string(hide_password=False)
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template.database}"')
    finally:
        await admin.close()
    try:
        yield template.set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


class Node:
    """One instance: its own engine (as its own process has), its lead and its ownership, every
    write of its database fenced by the ownership; what its hooks were told, recorded."""

    def __init__(self, url: str, name: str, *, spread: bool, relay_url: str | None) -> None:
        self.db = Database(url)
        self.lost: list[str] = []
        self.lead = Lead(
            self.db, SETTINGS.model_copy(update={"instance_name": name}), on_lost=self.lost.append
        )
        self.lead.relay_url = relay_url
        self.own = Ownership(self.lead, self.db)
        if spread:
            self.own.spread()
        self.db.fence = self.own.fence
        self.claimed: list[int] = []
        self.recovering = asyncio.Event()
        self.gate: asyncio.Event | None = None
        """Set by a test: each claim's recovery waits for it."""
        self.mail: list[tuple[int, str | None]] = []
        self.polls = 0
        self.own.on_claimed(self._claimed)
        self.own.on_mail(self._mail)
        self.own.on_poll(self._polled)

    async def _claimed(self, chat_id: int) -> None:
        self.recovering.set()
        if self.gate is not None:
            await self.gate.wait()
        self.claimed.append(chat_id)

    async def _mail(self, session_id: int, envelope_id: str | None) -> None:
        self.mail.append((session_id, envelope_id))

    async def _polled(self) -> None:
        self.polls += 1

    def notified(self) -> list[tuple[int, str | None]]:
        """The mail hook's calls a notification caused (the poll's name no envelope)."""
        return [(session, envelope) for session, envelope in self.mail if envelope is not None]

    async def write(self, value: str) -> None:
        async with self.db.write() as tx:
            await tx.merge(KeyValue(key="written", value=value))

    async def freeze(self) -> None:
        """No more heartbeats, and the last one a minute old, as if the process had been stopped."""
        assert self.lead._beating is not None
        self.lead._beating.cancel()
        instance_id = self.lead.instance_id

        def back(conn: sa.Connection) -> None:
            table = InstanceRow.__table__  # type: ignore[attr-defined]
            conn.execute(
                sa.update(table).where(table.c.id == instance_id).values(heartbeat_at=database_ago(conn, 60))
            )

        await self.db.write_sync(back)

    async def close(self) -> None:
        await self.own.close()
        await self.lead.release()
        await self.db.close()


Make = Callable[..., Awaitable[Node]]


@pytest.fixture
async def node(url: str) -> AsyncIterator[Make]:
    """Makes registered instances (``lead.join()``), closed after the test."""
    made: list[Node] = []

    async def make(name: str, *, spread: bool = True, relay_url: str | None = None) -> Node:
        instance = Node(url, name, spread=spread, relay_url=relay_url)
        made.append(instance)
        await instance.lead.join()
        return instance

    yield make
    for instance in reversed(made):
        await instance.close()


async def eventually(probe: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"not true after {timeout} s"
        await asyncio.sleep(0.01)


async def chat_session(db: Database, chat_id: int) -> ChatSession:
    session, _ = await SessionStore(db).find_or_open(chat_id, user_id=chat_id, language="en")
    return session


def sid(session: ChatSession) -> int:
    assert session.id is not None
    return session.id


async def mail(db: Database, session: ChatSession, envelope_id: str) -> None:
    """Unread mail for the session, accepted as the runtime accepts it (no announce)."""
    mailbox = SqlMailbox(db)
    try:
        await mailbox.accept(letter(session, envelope_id))
    finally:
        await mailbox.close()


def letter(session: ChatSession, envelope_id: str) -> Envelope:
    return Envelope(
        id=envelope_id,
        session_id=sid(session),
        sender=Sender(kind=SenderKind.USER, ref=str(session.chat_id)),
        body=UserMessageBody(text=f"text of {envelope_id}"),
    )


async def admitted(own: Ownership, session: ChatSession) -> bool:
    """``admit`` in a task of its own (the lease it sets stays in that task's context)."""
    return await asyncio.create_task(own.admit(session))


# --- claiming and placing -----------------------------------------------------------------------


async def test_the_first_place_claims_the_chat_and_runs_the_claim_hooks_once(node: Make) -> None:
    a = await node("a", relay_url=RELAY)
    assert await a.own.place(CHAT) == HERE
    assert a.claimed == [CHAT]
    assert a.own.owns(CHAT) and a.own.chats == [CHAT]
    assert await a.own.place(CHAT) == HERE
    assert await a.own.enter(CHAT) == 1
    assert a.claimed == [CHAT], "a re-claim by the holder runs no recovery"


async def test_another_instance_places_the_chat_at_its_owner_with_its_relay_url(node: Make) -> None:
    a, b = await node("a", relay_url=RELAY), await node("b")
    assert await a.own.place(CHAT) == HERE
    owner = await b.own.place(CHAT)
    assert isinstance(owner, Instance)
    assert (owner.id, owner.name, owner.relay_url) == (a.lead.instance_id, "a", RELAY)
    assert not b.own.owns(CHAT) and b.claimed == []
    assert await b.own.enter(CHAT) is None


async def test_concurrent_enters_on_one_instance_run_one_claim(node: Make) -> None:
    a = await node("a")
    a.gate = asyncio.Event()
    callers = [asyncio.create_task(a.own.enter(CHAT)) for _ in range(8)]
    await asyncio.wait_for(a.recovering.wait(), 5.0)
    assert not any(task.done() for task in callers), "the callers wait for the one claim's recovery"
    a.gate.set()
    assert await asyncio.gather(*callers) == [1] * 8
    assert a.claimed == [CHAT]


async def test_a_dead_owners_chat_is_claimed_by_another_instance_at_a_higher_epoch(node: Make) -> None:
    a, b = await node("a"), await node("b")
    old = await a.own.enter(CHAT)
    assert old is not None
    assert isinstance(await b.own.place(CHAT), Instance)
    await a.freeze()
    b.own.forget_place(CHAT)  # the relay to the dead owner failed
    assert await b.own.place(CHAT) == HERE
    new = await b.own.enter(CHAT)
    assert new is not None and new > old
    assert b.claimed == [CHAT]


# --- the fence --------------------------------------------------------------------------------


async def test_an_admitted_tasks_write_is_refused_once_another_instance_took_the_chat(node: Make) -> None:
    a, b = await node("a"), await node("b")
    session = await chat_session(a.db, CHAT)
    wrote, taken = asyncio.Event(), asyncio.Event()

    async def worker() -> None:
        assert await a.own.admit(session)
        await a.write("a runs the chat")  # its lease holds: written
        wrote.set()
        await taken.wait()
        await a.write("a woke up")

    running = asyncio.create_task(worker())
    await asyncio.wait_for(wrote.wait(), 5.0)
    assert a.lost == []
    await a.freeze()
    assert await b.own.place(CHAT) == HERE
    taken.set()
    with pytest.raises(LeadLost):
        await running
    assert len(a.lost) == 1 and f"took chat {CHAT}" in a.lost[0], a.lost
    async with a.db.read() as tx:
        stored = await tx.get(KeyValue, "written")
    assert stored is not None and stored.value == "a runs the chat", "the refused write rolled back"
    assert b.lost == []


async def test_a_write_in_a_task_never_admitted_is_not_fenced(node: Make) -> None:
    a, b = await node("a"), await node("b")
    session = await chat_session(a.db, CHAT)
    assert await admitted(a.own, session)  # another task's lease
    await a.freeze()
    assert await b.own.place(CHAT) == HERE
    await asyncio.create_task(a.write("not a worker's"))
    async with a.db.read() as tx:
        stored = await tx.get(KeyValue, "written")
    assert stored is not None and stored.value == "not a worker's"
    assert a.lost == []


# --- headless sessions ------------------------------------------------------------------------


async def test_a_headless_session_is_admitted_only_on_the_leader(node: Make) -> None:
    a, b = await node("a"), await node("b")
    await a.lead.take()
    store = SessionStore(a.db)
    tic = await store.create_headless(SessionSource.TIC, CHAT)
    cron = await store.create_headless(SessionSource.CRON, None)
    assert await admitted(a.own, tic) and await admitted(a.own, cron)
    assert not await admitted(b.own, tic) and not await admitted(b.own, cron)
    assert a.own.chats == [] and b.own.chats == [], "a headless session claims no chat"


async def test_without_spread_every_session_is_admitted(node: Make) -> None:
    a, b = await node("a", spread=False), await node("b", spread=False)
    await a.lead.take()
    tic = await SessionStore(a.db).create_headless(SessionSource.TIC, CHAT)
    session = await chat_session(a.db, CHAT)
    for instance in (a, b):
        assert await admitted(instance.own, tic) and await admitted(instance.own, session)
        assert instance.own.chats == []
    await asyncio.create_task(b.write("b writes unfenced"))


# --- mail between instances -------------------------------------------------------------------


class Mail:
    """Two started instances, ``b`` owning ``CHAT`` and ``a`` owning ``OTHER``, each with a mailbox
    that announces; a listener of the test's own hears every notification sent."""

    def __init__(self, a: Node, b: Node) -> None:
        self.a, self.b = a, b
        self.mailbox = SqlMailbox(a.db)
        self.mailbox.announce = a.own.announce
        self.b_mailbox = SqlMailbox(b.db)
        self.b_mailbox.announce = b.own.announce
        self.sent: list[str] = []
        self.listener = Listener(a.db, [CHANNEL], lambda _channel, payload: self._heard(payload))

    def _heard(self, payload: str) -> None:
        said = json.loads(payload)
        self.sent.append(f"{said['e']} from {'a' if said['i'] == self.a.lead.instance_id else said['i']}")

    async def accept(self, session: ChatSession, envelope_id: str) -> None:
        await self.mailbox.accept(letter(session, envelope_id))


@pytest.fixture
async def between(node: Make) -> AsyncIterator[Mail]:
    a, b = await node("a"), await node("b")
    assert await b.own.place(CHAT) == HERE
    assert await a.own.place(OTHER) == HERE
    await a.own.start()
    await b.own.start()
    wire = Mail(a, b)
    await wire.listener.start()
    try:
        yield wire
    finally:
        await wire.mailbox.close()
        await wire.b_mailbox.close()
        await wire.listener.close()


async def test_an_announce_reaches_the_owners_mail_hook_within_a_second(between: Mail) -> None:
    session = await chat_session(between.a.db, CHAT)
    await between.accept(session, "m1")
    await eventually(lambda: (sid(session), "m1") in between.b.mail, WAKE)
    assert between.b.notified() == [(sid(session), "m1")]
    assert between.a.notified() == []


async def test_the_announcing_instance_ignores_its_own_notifications(between: Mail) -> None:
    session = await chat_session(between.a.db, OTHER)  # a's chat, the session not admitted there
    await between.accept(session, "m2")
    await between.b_mailbox.accept(letter(session, "marker"))  # b announces after a did
    await eventually(lambda: (sid(session), "marker") in between.a.mail, WAKE)  # a heard both by now
    assert between.sent[:1] == ["m2 from a"], "a announced its mail"
    assert between.a.notified() == [(sid(session), "marker")], "a heard its own notification"
    assert between.b.notified() == [], "b does not run the chat"


async def test_mail_for_a_session_the_announcer_admitted_is_not_announced(between: Mail) -> None:
    own = await chat_session(between.a.db, OTHER)
    elsewhere = await chat_session(between.a.db, CHAT)
    assert await admitted(between.a.own, own)
    await between.accept(own, "m3")  # the admitted session's worker hears its own mailbox
    await between.accept(elsewhere, "m4")  # delivered in commit order: after m3 had it been sent
    await eventually(lambda: "m4 from a" in between.sent, WAKE)
    assert between.sent == ["m4 from a"]
    await eventually(lambda: (sid(elsewhere), "m4") in between.b.mail, WAKE)
    assert between.b.notified() == [(sid(elsewhere), "m4")]


# --- scan, poll, lapse ------------------------------------------------------------------------


async def test_scan_claims_a_chat_with_unread_mail_that_nobody_live_holds(node: Make) -> None:
    a, b = await node("a"), await node("b")
    orphan = await chat_session(a.db, CHAT)
    await mail(a.db, orphan, "to the orphan")
    held = await chat_session(a.db, OTHER)
    await mail(a.db, held, "to b's chat")
    await chat_session(a.db, THIRD)  # no work: nobody needs it claimed
    assert await b.own.place(OTHER) == HERE

    await a.own.scan()
    assert a.own.chats == [CHAT] and a.claimed == [CHAT]
    assert b.own.chats == [OTHER]

    await b.freeze()
    await a.own.scan()
    assert a.own.chats == [CHAT, OTHER], "a dead holder's chat with work is taken"
    assert a.claimed == [CHAT, OTHER]


async def test_poll_wakes_the_held_sessions_with_unread_mail_and_runs_the_poll_hooks(node: Make) -> None:
    a, b = await node("a"), await node("b")
    unread = await chat_session(a.db, CHAT)
    await mail(a.db, unread, "unread")
    quiet = await chat_session(a.db, THIRD)
    theirs = await chat_session(a.db, OTHER)
    await mail(a.db, theirs, "b's")
    assert await a.own.place(CHAT) == HERE and await a.own.place(THIRD) == HERE
    assert await b.own.place(OTHER) == HERE

    await a.own.poll()
    assert a.mail == [(sid(unread), None)]
    assert a.polls == 1
    assert sid(quiet) not in [session for session, _ in a.mail]


async def test_poll_runs_the_poll_hooks_when_no_chat_is_held(node: Make) -> None:
    a = await node("a")
    await a.own.poll()
    assert (a.polls, a.mail) == (1, [])


async def test_still_holds_is_false_and_the_instance_lost_once_a_held_chat_was_taken(node: Make) -> None:
    a, b = await node("a"), await node("b")
    assert await a.own.place(CHAT) == HERE
    assert await a.own.still_holds() is True and a.lost == []
    await a.freeze()
    assert await b.own.place(CHAT) == HERE
    assert await a.own.still_holds() is False
    assert len(a.lost) == 1 and str(CHAT) in a.lost[0], a.lost


async def test_a_place_during_the_recovery_waits_for_it(node: Make) -> None:
    a = await node("a")
    a.gate = asyncio.Event()
    first = asyncio.create_task(a.own.place(CHAT))
    await asyncio.wait_for(a.recovering.wait(), 5.0)
    later = asyncio.create_task(a.own.place(CHAT))  # a second update while the recovery runs
    await asyncio.sleep(0.05)
    assert not later.done(), "placed HERE before the chat's recovery finished"
    a.gate.set()
    assert await first == HERE and await later == HERE


async def test_a_workers_mail_is_fenced_even_in_a_batch_of_its_own_task(node: Make) -> None:
    """The mailbox writes in a group-commit task of its own; the submitting worker's lease is still
    checked inside the batch's transaction, and an accept outside any worker is not fenced."""
    a, b = await node("a"), await node("b")
    mine = await chat_session(a.db, CHAT)
    other = await chat_session(a.db, OTHER)
    mailbox = SqlMailbox(a.db)
    mailbox.leases = a.own
    go = asyncio.Event()

    async def worker() -> None:
        assert await a.own.admit(mine)
        await go.wait()
        await mailbox.accept(letter(mine, "worker's"))

    running = asyncio.create_task(worker())
    try:
        await asyncio.sleep(0.3)
        await mailbox.accept(letter(other, "adapter's, before"))  # outside any worker: lands
        await a.freeze()
        assert await b.own.place(CHAT) == HERE
        go.set()
        with pytest.raises(LeadLost):
            await running
        assert a.lost, "the instance that lost the chat is told"
        await mailbox.accept(letter(other, "adapter's, after"))  # alone in its batch: not fenced
    finally:
        await mailbox.close()
