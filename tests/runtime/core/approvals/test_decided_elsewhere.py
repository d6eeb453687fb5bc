"""Approvals across a cluster's instances: a decision or a rule another process stored.

In webhook mode the instance that shows a button press may not be the one whose turn waits on
the approval: it stores the decision (one compare-and-set) and mails it to the chat's owner,
whose :meth:`ApprovalManager.decide` then finds the row decided already. That call applies
nothing, yet must wake the gate waiting in this process, which reads the stored decision. An
"Always" rule saved on another instance reaches this one's cache through
:meth:`ApprovalManager.reload` (run at every ownership poll).

Two managers, each on its own :class:`Database` of the same database, stand for two processes;
each test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agentgram.runtime.capabilities.tools.base import ToolGroup
from agentgram.runtime.core.approvals.manager import ApprovalManager
from agentgram.runtime.core.approvals.rules import Action, CallFacts, Rule
from agentgram.runtime.infra.config import ApprovalSettings
from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ApprovalRequestRow, ApprovalStatus, Turn
from agentgram.runtime.infra.storage.sessions import SessionStore

CHAT = 1001
GIT_LOG = CallFacts(tool="execute_cmd", group=ToolGroup.SHELL, source="chat", command="git log -3")


@dataclass
class Cluster:
    here: ApprovalManager
    """The process whose turn waits (the chat's owner)."""
    there: ApprovalManager
    """Another instance on the same database (where the button was pressed)."""
    session_id: int
    call_id: int


@pytest.fixture
async def cluster(database_url: str) -> AsyncIterator[Cluster]:
    first, second = Database(database_url), Database(database_url)
    await migrate(first)
    session = (await SessionStore(first).find_or_open(CHAT, user_id=CHAT, language="en"))[0]
    assert session.id is not None
    async with first.write() as tx:
        turn = Turn(session_id=session.id)
        tx.add(turn)
        await tx.flush()
        turn_id = turn.id or 0
    call = ToolCallRequest(id="c0", name="execute_cmd", arguments='{"command": "git log -3"}')
    entry = await HistoryStore(first).record_round(
        session_id=session.id, turn_id=turn_id, result=LLMRound(tool_calls=[call])
    )
    here, there = ApprovalManager(first, ApprovalSettings()), ApprovalManager(second, ApprovalSettings())
    for manager in (here, there):
        await manager.load_rules()
    try:
        yield Cluster(here, there, session.id, entry.calls[0].id or 0)
    finally:
        await first.close()
        await second.close()


async def waiting_on(cluster: Cluster) -> tuple[str, asyncio.Task[ApprovalRequestRow]]:
    """A request opened here and this process's gate waiting on it (parked, not yet woken)."""
    request, fresh = await cluster.here.request_for_call(cluster.session_id, cluster.call_id, CHAT)
    assert fresh
    waiting: asyncio.Task[ApprovalRequestRow] = asyncio.create_task(cluster.here.wait(request.id))
    await asyncio.sleep(0.05)  # the gate read the pending row and parked on its wake-up
    assert not waiting.done()
    return request.id, waiting


@pytest.mark.parametrize("approved", [True, False])
async def test_a_decision_stored_elsewhere_wakes_the_gate_when_it_is_applied_here(
    cluster: Cluster, approved: bool
) -> None:
    request_id, waiting = await waiting_on(cluster)
    stored = await cluster.there.decide(request_id, approved=approved, reason=None if approved else "no")
    assert stored.applied
    await asyncio.sleep(0.05)
    assert not waiting.done(), "another process's decision wakes nobody here by itself"

    result = await cluster.here.decide(request_id, approved=approved)

    want = ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED
    assert (result.applied, result.status) == (False, want), "stored once, elsewhere"
    row = await asyncio.wait_for(waiting, 2)
    assert (row.id, row.status) == (request_id, want)


async def test_the_gate_reads_the_stored_decision_not_the_one_applied_here(cluster: Cluster) -> None:
    """The mail that reaches the owner may say otherwise (a second, later tap): the first
    decision stored is the one the gate goes by."""
    request_id, waiting = await waiting_on(cluster)
    assert (await cluster.there.decide(request_id, approved=True)).applied
    result = await cluster.here.decide(request_id, approved=False, reason="too late")
    assert (result.applied, result.status) == (False, ApprovalStatus.APPROVED)
    row = await asyncio.wait_for(waiting, 2)
    assert (row.status, row.reason) == (ApprovalStatus.APPROVED, None)


async def test_a_request_cancelled_elsewhere_wakes_the_gate_with_its_cancellation(cluster: Cluster) -> None:
    request_id, waiting = await waiting_on(cluster)
    assert [r.id for r in await cluster.there.cancel_session(cluster.session_id)] == [request_id]
    result = await cluster.here.decide(request_id, approved=True)
    assert (result.applied, result.status) == (False, ApprovalStatus.CANCELLED)
    row = await asyncio.wait_for(waiting, 2)
    assert row.status == ApprovalStatus.CANCELLED


async def test_a_gate_of_another_request_is_not_woken(cluster: Cluster) -> None:
    request_id, waiting = await waiting_on(cluster)
    assert not (await cluster.here.decide("no-such-request", approved=True)).applied
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert (await cluster.here.decide(request_id, approved=True)).applied
    assert (await asyncio.wait_for(waiting, 2)).status == ApprovalStatus.APPROVED


async def test_reload_picks_up_a_rule_saved_elsewhere_and_drops_one_deleted_there(cluster: Cluster) -> None:
    assert cluster.here.check(cluster.session_id, GIT_LOG) == Action.REQUIRE
    saved = await cluster.there.add_rule(Rule(tool="execute_cmd", path="git log*", action=Action.ALLOW))
    assert saved.id not in {r.id for r in cluster.here.rules()}, "cached until reloaded"
    assert cluster.here.check(cluster.session_id, GIT_LOG) == Action.REQUIRE

    await cluster.here.reload()

    mine = [r for r in cluster.here.rules() if r.origin == "user"]
    assert [(r.id, r.tool, r.path, r.action) for r in mine] == [
        (saved.id, "execute_cmd", "git log*", Action.ALLOW)
    ]
    assert cluster.here.check(cluster.session_id, GIT_LOG) == Action.ALLOW
    assert len(cluster.here.rules()) == len(cluster.there.rules())

    assert await cluster.there.delete_rule(saved.id)
    await cluster.here.reload()
    assert saved.id not in {r.id for r in cluster.here.rules()}
    assert cluster.here.check(cluster.session_id, GIT_LOG) == Action.REQUIRE
