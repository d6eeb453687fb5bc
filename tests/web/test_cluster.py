"""The web view shows the cluster (issue 27 item 12): ``/api/cluster``, the Cluster page, the
instance and role in ``/healthz``, and the instance series in ``/metrics``.

Two instances' leads run in this process on one PostgreSQL database (each with its own engine,
as its own process has); the bot beside them is the runtime whose web view is read, given
``node-a``'s lead as its debug view's (the wiring ``Runtime.debug`` does for a cluster).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentgram.runtime.debug_view import DebugView, InstanceRole
from agentgram.runtime.infra.config import ClusterSettings
from agentgram.runtime.infra.lead import Lead
from agentgram.runtime.infra.storage.db import Database
from tests.backends import pg_database
from tests.e2e.harness import running_bot
from tests.web.harness import web_view

SETTINGS = ClusterSettings(enabled=True, lease_ttl=3.0, heartbeat=0.2)


class Node:
    """One instance's lead, on its own engine."""

    def __init__(self, url: str, name: str) -> None:
        self.db = Database(url)
        self.lost: list[str] = []
        self.lead = Lead(
            self.db, SETTINGS.model_copy(update={"instance_name": name}), on_lost=self.lost.append
        )

    async def close(self) -> None:
        await self.lead.release()
        await self.db.close()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with pg_database() as url:
        yield url


async def _instances(client: httpx.AsyncClient, n: int) -> dict[str, Any]:
    """``/api/cluster`` once it lists ``n`` instances."""
    async with asyncio.timeout(5.0):
        while True:
            found: dict[str, Any] = (await client.get("/api/cluster")).json()
            if len(found["instances"]) >= n:
                return found
            await asyncio.sleep(0.05)


def _series(text: str, name: str) -> dict[str, float]:
    """The samples of one metric in an exposition text, by their label part."""
    return {
        line[len(name) :].rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{")
    }


async def test_the_cluster_lists_both_instances_marks_the_leader_and_a_stopped_standby(
    tmp_path: Path, pg_url: str
) -> None:
    a, b = Node(pg_url, "node-a"), Node(pg_url, "node-b")
    async with running_bot(tmp_path, storage={"url": pg_url}) as rig:
        await a.lead.take()
        standby = asyncio.create_task(b.lead.take())
        runtime = rig.bot.runtime
        runtime.debug = DebugView(runtime.parts.db, runtime.parts.scheduler, runtime.parts.llm, lead=a.lead)
        try:
            async with web_view(rig) as web:
                found = await _instances(web.client, 2)
                assert found["enabled"] is True
                this = found["instance"]
                assert (this["name"], this["role"], this["id"]) == ("node-a", "leader", a.lead.instance_id)
                assert (this["host"], this["pid"]) == (socket.gethostname(), os.getpid())
                listed = [(i["name"], i["live"], i["stopped_at"]) for i in found["instances"]]
                assert listed == [("node-a", True, None), ("node-b", True, None)]
                assert found["leader"]["name"] == "node-a"
                (lease,) = found["leases"]
                assert (
                    lease["kind"],
                    lease["key"],
                    lease["instance_name"],
                    lease["epoch"],
                    lease["live"],
                ) == (
                    "lead",
                    0,
                    "node-a",
                    1,
                    True,
                )
                assert not standby.done(), "node-b waits for the lead"
                as_b = DebugView(runtime.parts.db, runtime.parts.scheduler, runtime.parts.llm, lead=b.lead)
                assert (await as_b.cluster()).instance.role == InstanceRole.STANDBY

                page = await web.client.get("/cluster")
                assert page.status_code == 200
                assert "node-a" in page.text and "node-b" in page.text
                assert '<span class="badge leader">leader</span>' in page.text
                assert page.text.count('<span class="live">live</span>') == 3  # two instances, one lease
                assert '<a href="/cluster">Cluster</a>' in page.text

                async with web.anonymous() as anonymous:
                    health = (await anonymous.get("/healthz")).json()
                assert (health["instance"], health["role"]) == ("node-a", "leader")

                metrics = (await web.client.get("/metrics")).text
                info = _series(metrics, "agentgram_instance_info")
                host = socket.gethostname()
                assert info[f'{{host="{host}",instance="node-a"}}'] == 1.0
                assert info[f'{{host="{host}",instance="node-b"}}'] == 1.0
                leader = _series(metrics, "agentgram_leader")
                assert (leader['{instance="node-a"}'], leader['{instance="node-b"}']) == (1.0, 0.0)

                standby.cancel()
                await asyncio.gather(standby, return_exceptions=True)
                await b.close()  # a graceful stop: marked stopped, no longer live
                found = (await web.client.get("/api/cluster")).json()
                (stopped,) = [i for i in found["instances"] if i["name"] == "node-b"]
                assert stopped["live"] is False and stopped["stopped_at"] is not None
                assert found["leader"]["name"] == "node-a" and found["leader"]["live"] is True
                assert ">stopped " in (await web.client.get("/cluster")).text
            assert not a.lost and not b.lost
        finally:
            standby.cancel()
            await asyncio.gather(standby, return_exceptions=True)
            await a.close()
            await b.db.close()


async def test_without_a_cluster_the_process_is_single_and_nothing_is_listed(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig, web_view(rig) as web:
        found = (await web.client.get("/api/cluster")).json()
        name = f"{socket.gethostname()}-{os.getpid()}"
        assert found == {
            "enabled": False,
            "instance": {
                "id": None,
                "name": name,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "role": "single",
            },
            "instances": [],
            "leases": [],
            "leader": None,
        }
        page = await web.client.get("/cluster")
        assert page.status_code == 200 and "No cluster" in page.text and ">single<" in page.text
        health = (await web.client.get("/healthz")).json()
        assert (health["instance"], health["role"]) == (name, "single")
