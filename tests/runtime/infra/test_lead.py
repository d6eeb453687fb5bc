"""The lead of an active/standby cluster (issue 27 items 4–6), on a real PostgreSQL server: one
instance leads, a standby waits and takes over once the leader stopped (at once) or its heartbeat
is older than the ttl; a former leader's writes are refused by the fence, and its own heartbeat
tells it that it lost the lead (once). Heartbeats are made old with an UPDATE in the database's time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from agentgram.runtime.infra.cluster import LeaseKind, database_ago
from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.lead import LEAD_KEY, Lead, LeadLost
from agentgram.runtime.infra.storage.cluster_rows import InstanceRow
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import KeyValue
from tests.backends import pg_database

SETTINGS = ClusterSettings(enabled=True, lease_ttl=3.0, heartbeat=0.2)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with pg_database() as database_url:
        db = Database(database_url)
        await migrate(db)
        await db.close()
        yield database_url


class Node:
    """One instance: its own database engine (as its own process has) and its lead."""

    def __init__(self, url: str, name: str) -> None:
        self.db = Database(url)
        self.lost: list[str] = []
        self.told = asyncio.Event()
        self.lead = Lead(self.db, SETTINGS.model_copy(update={"instance_name": name}), on_lost=self._lost)

    def _lost(self, reason: str) -> None:
        self.lost.append(reason)
        self.told.set()

    async def take(self) -> int:
        epoch = await self.lead.take()
        self.db.fence = self.lead.fence
        return epoch

    async def write(self, value: str) -> None:
        async with self.db.write() as tx:
            await tx.merge(KeyValue(key="written", value=value))

    async def close(self) -> None:
        await self.lead.release()
        await self.db.close()


async def _freeze(node: Node) -> None:
    """The node's heartbeat a minute old, as if its process had been stopped that long."""
    node.lead._beating.cancel()  # type: ignore[union-attr]  # a stopped process beats no more

    def back(conn: sa.Connection) -> None:
        table = InstanceRow.__table__  # type: ignore[attr-defined]
        conn.execute(
            sa.update(table)
            .where(table.c.id == node.lead.instance_id)
            .values(heartbeat_at=database_ago(conn, 60))
        )

    await node.db.write_sync(back)


async def test_one_leads_and_a_standby_takes_over_at_once_when_it_stops(url: str) -> None:
    a, b = Node(url, "a"), Node(url, "b")
    try:
        assert await a.take() == 1
        standby = asyncio.create_task(b.take())
        await asyncio.sleep(1.5)
        assert not standby.done(), "the standby waits while the leader lives"
        await a.close()
        assert await asyncio.wait_for(standby, 2.0) == 2, "a graceful stop hands the lead over at once"
        await b.write("b leads")
        assert not a.lost and not b.lost
    finally:
        await b.close()


async def test_a_dead_leaders_lead_is_taken_and_its_writes_are_refused(url: str) -> None:
    a, b = Node(url, "a"), Node(url, "b")
    try:
        await a.take()
        await a.write("a leads")
        await _freeze(a)
        assert await asyncio.wait_for(b.take(), 5.0) == 2
        with pytest.raises(LeadLost):
            await a.write("a woke up")
        assert a.lost and "another instance took the lead" in a.lost[0]
        await b.write("b leads")
        holder = await b.lead._leases.holder(LeaseKind.LEAD, LEAD_KEY)  # type: ignore[union-attr]
        assert holder is not None and holder.instance_id == b.lead.instance_id and holder.epoch == 2
        async with b.db.read() as session:
            stored = await session.get(KeyValue, "written")
        assert stored is not None and stored.value == "b leads"
    finally:
        await b.close()
        await a.db.close()


async def test_a_leader_whose_heartbeat_lapsed_learns_it_lost_the_lead(url: str) -> None:
    a, b = Node(url, "a"), Node(url, "b")
    try:
        await a.take()
        await _freeze(a)
        await asyncio.wait_for(b.take(), 5.0)
        a.lead._beating = asyncio.create_task(a.lead._beat())  # the process wakes up: it beats again
        await asyncio.wait_for(a.told.wait(), 3.0)
        await asyncio.sleep(0.5)  # more beats: still told once
        assert len(a.lost) == 1, a.lost  # its heartbeat's write met the fence (or found the lapse)
        assert not b.lost
    finally:
        await b.close()
        await a.db.close()


async def test_a_standby_finds_the_leader_and_where_it_listens(url: str) -> None:
    a, b = Node(url, "a"), Node(url, "b")
    a.lead.relay_url = "http://127.0.0.1:8443/telegram/webhook"
    try:
        await a.take()
        standby = asyncio.create_task(b.take())
        await asyncio.sleep(1.5)  # several tries: a still leads
        leader = await b.lead.leader()
        assert leader is not None and (leader.name, leader.relay_url) == (
            "a",
            "http://127.0.0.1:8443/telegram/webhook",
        )
        assert not b.lead.leading
        await a.close()
        await asyncio.wait_for(standby, 2.0)
        leader = await b.lead.leader()
        assert leader is not None and (leader.name, leader.relay_url) == ("b", None)
    finally:
        await b.close()
