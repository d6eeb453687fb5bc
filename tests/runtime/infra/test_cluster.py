"""Instances and fenced leases (issue 27 item 5) on SQLite and a real PostgreSQL server: a claim is
one compare-and-set, the epoch grows with every change of holder, a dead holder's lease is taken
and its fence fails, a graceful stop frees its leases at once, and of concurrent claimants exactly
one wins. Heartbeats are made old with an UPDATE in the database's time, never by waiting."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import sqlalchemy as sa
from sqlmodel import Session, select

from agentgram.runtime.infra.cluster import (
    InstanceRegistry,
    LeaseKind,
    Leases,
    Liveness,
    database_ago,
)
from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.storage.cluster_rows import InstanceRow
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import KeyValue
from tests.backends import pg_database

TTL = 10.0
SESSION = LeaseKind.SESSION
CLAIMERS = 20


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await migrate(database)
    try:
        yield database
    finally:
        await database.close()


async def _instance(db: Database, name: str) -> tuple[InstanceRegistry, Leases]:
    registry = InstanceRegistry(db, name, "host-a", 100, ttl=TTL)
    return registry, Leases(db, await registry.register(), TTL)


async def _expire(db: Database, registry: InstanceRegistry) -> None:
    """Set the instance's heartbeat a minute back, in the database's time (as if it froze)."""

    def back(conn: sa.Connection) -> None:
        table = InstanceRow.__table__  # type: ignore[attr-defined]
        conn.execute(
            sa.update(table).where(table.c.id == registry.id).values(heartbeat_at=database_ago(conn, 60))
        )

    await db.write_sync(back)


async def eventually(probe: Callable[[], Awaitable[object]], timeout: float = 10.0) -> None:
    """Poll an async probe until its value is truthy (database state has no change event)."""
    deadline = time.monotonic() + timeout
    while not await probe():
        assert time.monotonic() < deadline, f"not true after {timeout} s"
        await asyncio.sleep(0.01)


def _fenced_write(leases: Leases, epoch: int, value: str) -> Callable[[Session], bool]:
    """A worker's write: the fence and the write in one transaction; whether it was written."""

    def write(tx: Session) -> bool:
        if not leases.holds(tx, SESSION, 7, epoch):
            return False
        tx.merge(KeyValue(key="session:7", value=value))
        return True

    return write


# --- instances -------------------------------------------------------------------------------


async def test_an_instance_registers_beats_and_stops(db: Database) -> None:
    registry, _ = await _instance(db, "a")
    [seen] = await registry.live()
    assert (seen.id, seen.name, seen.host, seen.pid) == (registry.id, "a", "host-a", 100)
    assert seen.started_at.tzinfo is not None and seen.heartbeat_at >= seen.started_at

    assert await registry.beat() is True
    assert await registry.stop() == 0
    assert await registry.live() == []
    assert await registry.beat() is False
    assert await registry.check() is Liveness.GONE


async def test_a_lapsed_instance_is_told_so_and_beats_again(db: Database) -> None:
    registry, _ = await _instance(db, "a")
    other, _ = await _instance(db, "b")
    await _expire(db, registry)
    assert [i.name for i in await other.live()] == ["b"]

    assert await registry.beat() is False  # lapsed: others may have taken its leases
    assert [i.name for i in await other.live()] == ["a", "b"]
    assert await registry.check() is Liveness.LIVE


async def test_the_heartbeat_task_keeps_an_instance_live_and_ends_when_it_stops(db: Database) -> None:
    registry, _ = await _instance(db, "a")
    task = asyncio.create_task(registry.run_heartbeat(0.02))
    try:
        await _expire(db, registry)
        await eventually(registry.live)  # the next beat makes it live again
        await registry.stop()
        async with asyncio.timeout(10):
            await task  # the beat after the stop finds it gone
    finally:
        task.cancel()


def test_this_process_is_named_by_host_and_pid_unless_configured() -> None:
    db = Database("sqlite+aiosqlite://")
    registry = InstanceRegistry.of_this_process(db, ClusterSettings(lease_ttl=6, heartbeat=2))
    assert (registry.name, registry.host, registry.pid) == (
        f"{socket.gethostname()}-{os.getpid()}",
        socket.gethostname(),
        os.getpid(),
    )
    assert registry.ttl == 6.0
    assert InstanceRegistry.of_this_process(db, ClusterSettings(instance_name="blue")).name == "blue"


# --- leases ----------------------------------------------------------------------------------


async def test_a_free_lease_is_claimed_at_epoch_1_and_the_holders_reclaim_keeps_it(db: Database) -> None:
    registry, leases = await _instance(db, "a")
    assert await leases.claim(SESSION, 7) == 1
    assert await leases.claim(SESSION, 7) == 1
    assert await leases.claim(LeaseKind.POLLER, 0) == 1  # another kind, another lease
    holder = await leases.holder(SESSION, 7)
    assert holder is not None and (holder.instance_id, holder.epoch, holder.live) == (registry.id, 1, True)
    assert await leases.holder(SESSION, 8) is None


async def test_a_live_holder_keeps_its_lease(db: Database) -> None:
    _, first = await _instance(db, "a")
    _, second = await _instance(db, "b")
    assert await first.claim(SESSION, 7) == 1
    assert await second.claim(SESSION, 7) is None
    assert await second.expired(SESSION) == []
    assert await db.write_orm(_fenced_write(first, 1, "a")) is True
    assert await db.write_orm(_fenced_write(second, 1, "b")) is False


async def test_an_expired_holder_is_taken_over_at_the_next_epoch_and_its_fence_fails(db: Database) -> None:
    old, first = await _instance(db, "a")
    new, second = await _instance(db, "b")
    assert await first.claim(SESSION, 7) == 1
    await _expire(db, old)
    assert await second.expired(SESSION) == [7]

    assert await second.claim(SESSION, 7) == 2
    assert await db.write_orm(_fenced_write(first, 1, "stale")) is False  # the paused former owner
    assert await db.write_orm(_fenced_write(second, 2, "fresh")) is True
    assert await first.claim(SESSION, 7) is None  # b is live
    holder = await first.holder(SESSION, 7)
    assert holder is not None and (holder.instance_id, holder.epoch, holder.live) == (new.id, 2, True)
    stored = await db.read_sync(lambda tx: tx.exec(select(KeyValue.value)).all())
    assert stored == ["fresh"]


async def test_the_fence_works_on_a_core_connection_too(db: Database) -> None:
    old, first = await _instance(db, "a")
    _, second = await _instance(db, "b")
    await first.claim(SESSION, 7)
    assert await db.write_sync(lambda conn: first.holds(conn, SESSION, 7, 1)) is True
    assert await db.write_sync(lambda conn: first.holds(conn, SESSION, 7, 2)) is False  # not its epoch
    await _expire(db, old)
    await second.claim(SESSION, 7)
    assert await db.write_sync(lambda conn: first.holds(conn, SESSION, 7, 1)) is False


async def test_a_graceful_stop_releases_at_once_and_the_next_holder_gets_the_next_epoch(db: Database) -> None:
    registry, first = await _instance(db, "a")
    _, second = await _instance(db, "b")
    await first.claim(SESSION, 1)
    await first.claim(LeaseKind.POLLER, 0)
    assert await second.claim(LeaseKind.POLLER, 0) is None

    assert await registry.stop() == 2
    assert await second.claim(LeaseKind.POLLER, 0) == 2  # at once, not after the ttl
    assert await first.holder(SESSION, 1) is None
    assert await second.expired(SESSION) == [1]  # released: free for a takeover scan


async def test_a_release_keeps_the_epoch_growing(db: Database) -> None:
    _, leases = await _instance(db, "a")
    assert await leases.claim(LeaseKind.SCHEDULER, 0) == 1
    assert await leases.release(LeaseKind.SCHEDULER, 0) is True
    assert await leases.release(LeaseKind.SCHEDULER, 0) is False
    assert await leases.claim(LeaseKind.SCHEDULER, 0) == 2  # a fence of the first claim never passes again
    assert await leases.release_all() == 1


async def test_of_concurrent_claimants_exactly_one_wins(db: Database) -> None:
    claimants = [await _instance(db, f"i{n}") for n in range(CLAIMERS)]
    won = await asyncio.gather(*(leases.claim(SESSION, 7) for _, leases in claimants))
    assert sorted(won, key=lambda epoch: epoch or 0) == [None] * (CLAIMERS - 1) + [1]

    winner = won.index(1)
    await _expire(db, claimants[winner][0])
    others = [leases for n, (_, leases) in enumerate(claimants) if n != winner]  # the holder froze
    again = await asyncio.gather(*(leases.claim(SESSION, 7) for leases in others))
    assert sorted(again, key=lambda epoch: epoch or 0) == [None] * (CLAIMERS - 2) + [2]


async def test_on_postgresql_a_takeover_waits_for_a_fenced_write_in_flight() -> None:
    """``holds`` takes FOR SHARE, so the claim waits for the write's commit; the former holder's
    next fence check then fails. (SQLite runs one write transaction at a time: nothing to wait for.)"""
    async with pg_database() as url:
        db = Database(url)
        try:
            await migrate(db)
            await _takeover_while_a_write_is_in_flight(db)
        finally:
            await db.close()


async def _takeover_while_a_write_is_in_flight(db: Database) -> None:
    old, first = await _instance(db, "a")
    _, second = await _instance(db, "b")
    await first.claim(SESSION, 7)
    await _expire(db, old)
    async with db.engine.connect() as conn, conn.begin():
        assert await conn.run_sync(lambda c: first.holds(c, SESSION, 7, 1))
        claim = asyncio.create_task(second.claim(SESSION, 7))
        await eventually(lambda: _waiting_on_a_lock(db))
        assert not claim.done()
    assert await claim == 2
    assert await db.write_sync(lambda c: first.holds(c, SESSION, 7, 1)) is False


async def _waiting_on_a_lock(db: Database) -> bool:
    async with db.engine.connect() as conn:
        waiting = await conn.scalar(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        )
    return bool(waiting)


async def test_the_live_holder_is_named_with_its_relay_address_until_it_dies(db: Database) -> None:
    old, first = await _instance(db, "a")
    assert await first.live_holder(LeaseKind.LEAD, 0) is None, "nobody holds it yet"
    relay = InstanceRegistry(db, "b", "host-b", 200, ttl=TTL)
    relay.relay_url = "http://10.0.0.2:8443/telegram/webhook"
    second = Leases(db, await relay.register(), TTL)
    assert await second.claim(LeaseKind.LEAD, 0) == 1
    holder = await first.live_holder(LeaseKind.LEAD, 0)
    assert holder is not None
    assert (holder.id, holder.name, holder.relay_url) == (
        relay.id,
        "b",
        "http://10.0.0.2:8443/telegram/webhook",
    )
    await _expire(db, relay)
    assert await first.live_holder(LeaseKind.LEAD, 0) is None, "a dead holder is nobody to relay to"
    assert await first.claim(LeaseKind.LEAD, 0) == 2
    holder = await second.live_holder(LeaseKind.LEAD, 0)
    assert holder is not None and (holder.id, holder.relay_url) == (old.id, None)
