"""The approval manager on a real SQLite database: rules, requests, decisions, waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from agentgram.runtime.capabilities.tools.base import ToolGroup
from agentgram.runtime.core.approvals.manager import ApprovalManager
from agentgram.runtime.core.approvals.rules import SEEDED_RULES, Action, CallFacts, Rule
from agentgram.runtime.infra.config import ApprovalRuleSettings, ApprovalSettings
from agentgram.runtime.infra.llm.types import LLMRound, ToolCallRequest
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.models import ApprovalStatus, Turn, utcnow
from agentgram.runtime.infra.storage.sessions import SessionStore

SHELL = CallFacts(tool="execute_cmd", group=ToolGroup.SHELL, source="chat", command="ls")


@dataclass
class World:
    db: Database
    session_id: int
    call_ids: list[int]

    def manager(self, **settings: object) -> ApprovalManager:
        return ApprovalManager(self.db, ApprovalSettings.model_validate(settings))


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'agentgram.db'}")  # a file: readers and a writer at once
    await migrate(db)
    session = (await SessionStore(db).find_or_open(1001, user_id=1001, language="en"))[0]
    assert session.id is not None
    async with db.write() as tx:
        turn = Turn(session_id=session.id)
        tx.add(turn)
        await tx.flush()
        turn_id = turn.id or 0
    calls = [ToolCallRequest(id=f"c{i}", name="execute_cmd", arguments='{"command": "ls"}') for i in range(3)]
    entry = await HistoryStore(db).record_round(
        session_id=session.id, turn_id=turn_id, result=LLMRound(tool_calls=calls)
    )
    yield World(db, session.id, [c.id or 0 for c in entry.calls])
    await db.close()


# --- rules -------------------------------------------------------------------------------


async def test_load_rules_seeds_replaces_config_and_keeps_saved_rules(world: World) -> None:
    first = world.manager(rules=[{"tool": "execute_cmd", "path": "rm *", "action": "deny", "priority": 5}])
    await first.load_rules()
    await first.add_rule(Rule(tool="execute_cmd", path="git status*", action=Action.ALLOW))
    second = world.manager(rules=[{"tool": "@shell", "action": "allow", "source": "tic"}])
    await second.load_rules()
    await second.load_rules()
    by_origin = {
        o: [(r.tool, r.path, r.action) for r in second.rules() if r.origin == o] for o in ("config", "user")
    }
    assert by_origin == {
        "config": [("@shell", None, "allow")],
        "user": [("execute_cmd", "git status*", "allow")],
    }
    assert len([r for r in second.rules() if r.origin == "seed"]) == len(SEEDED_RULES)


async def test_config_rules_apply_in_check(world: World) -> None:
    deny = ApprovalRuleSettings(tool="execute_cmd", path="rm *", action="deny", priority=5)
    manager = ApprovalManager(world.db, ApprovalSettings(rules=[deny]))
    await manager.load_rules()
    rm = CallFacts(tool="execute_cmd", group=ToolGroup.SHELL, source="chat", command="rm -rf x")
    assert manager.check(world.session_id, rm) == Action.DENY
    assert manager.check(world.session_id, SHELL) == Action.REQUIRE


async def test_only_saved_rules_can_be_deleted(world: World) -> None:
    manager = world.manager()
    await manager.load_rules()
    saved = await manager.add_rule(Rule(tool="write_file", path="notes.md", action=Action.ALLOW))
    seed = next(r for r in manager.rules() if r.origin == "seed")
    assert not await manager.delete_rule(seed.id)
    assert await manager.delete_rule(saved.id)
    assert not await manager.delete_rule(saved.id)
    assert all(r.origin == "seed" for r in manager.rules())


async def test_a_bypass_turns_require_into_allow_but_never_deny(world: World) -> None:
    manager = world.manager(rules=[{"tool": "execute_cmd", "path": "rm *", "action": "deny"}])
    await manager.load_rules()
    rm = CallFacts(tool="execute_cmd", group=ToolGroup.SHELL, source="chat", command="rm -rf x")
    manager.grant_bypass(world.session_id, "all")
    assert manager.check(world.session_id, SHELL) == Action.ALLOW
    assert manager.check(world.session_id, rm) == Action.DENY
    assert manager.check(world.session_id + 1, SHELL) == Action.REQUIRE
    assert manager.check(world.session_id, SHELL, now=utcnow() + timedelta(minutes=16)) == Action.REQUIRE


# --- requests and decisions ------------------------------------------------------------------


async def test_one_open_request_per_call(world: World) -> None:
    manager = world.manager()
    request, fresh = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    again, fresh_again = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    assert (fresh, fresh_again) == (True, False) and again.id == request.id
    assert len(request.id.encode()) <= 40
    await manager.decide(request.id, approved=True)
    decided, reopened = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    assert (decided.id, decided.status, reopened) == (request.id, ApprovalStatus.APPROVED, False)


async def test_a_decision_applies_once(world: World) -> None:
    manager = world.manager()
    request, _ = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    results = await asyncio.gather(
        manager.decide(request.id, approved=True),
        manager.decide(request.id, approved=False, reason="no"),
        manager.decide(request.id, approved=True),
    )
    assert [r.applied for r in results].count(True) == 1
    winner = next(r for r in results if r.applied)
    stored = await manager.get(request.id)
    assert stored is not None and stored.status == winner.status
    assert all(r.status == winner.status for r in results)


async def test_deciding_an_unknown_request_is_stale(world: World) -> None:
    result = await world.manager().decide("no-such-request", approved=True)
    assert not result.applied and result.request is None


async def test_wait_returns_when_decided(world: World) -> None:
    manager = world.manager()
    request, _ = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    waiting = asyncio.create_task(manager.wait(request.id))
    await asyncio.sleep(0)
    assert not waiting.done()
    await manager.decide(request.id, approved=False, reason="use staging")
    row = await asyncio.wait_for(waiting, 2)
    assert (row.status, row.reason) == (ApprovalStatus.REJECTED, "use staging")


async def test_cancel_session_cancels_every_pending_request_and_wakes_waiters(world: World) -> None:
    manager = world.manager()
    first, _ = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    second, _ = await manager.request_for_call(world.session_id, world.call_ids[1], 1001)
    done, _ = await manager.request_for_call(world.session_id, world.call_ids[2], 1001)
    await manager.decide(done.id, approved=True)
    waiting = asyncio.create_task(manager.wait(first.id))
    cancelled = await manager.cancel_session(world.session_id)
    assert sorted(r.id for r in cancelled) == sorted([first.id, second.id])
    assert (await asyncio.wait_for(waiting, 2)).status == ApprovalStatus.CANCELLED
    assert await manager.pending(world.session_id) == []
    assert not (await manager.decide(first.id, approved=True)).applied


async def test_an_unanswered_request_expires_after_the_timeout(world: World) -> None:
    manager = world.manager(timeout=0.05)
    request, _ = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    assert request.expires_at is not None
    row = await asyncio.wait_for(manager.wait(request.id), 2)
    assert row.status == ApprovalStatus.EXPIRED
    assert not (await manager.decide(request.id, approved=True)).applied


async def test_no_timeout_means_no_expiry(world: World) -> None:
    manager = world.manager()
    request, _ = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    assert request.expires_at is None


async def test_prompts_are_found_by_their_message_and_listed_while_pending(world: World) -> None:
    manager = world.manager()
    request, _ = await manager.request_for_call(world.session_id, world.call_ids[0], 1001)
    await manager.attach_message(request.id, 1001, 77)
    found = await manager.by_message(1001, 77)
    assert found is not None and found.id == request.id
    assert await manager.by_message(1001, 78) is None
    assert [r.id for r in await manager.pending(world.session_id)] == [request.id]
    assert [r.id for r in await manager.pending()] == [request.id]
    assert await manager.pending(world.session_id + 1) == []


def test_settings_parse_durations() -> None:
    settings = ApprovalSettings.model_validate({"timeout": "10m", "bypass_duration": "1h"})
    assert (settings.timeout, settings.bypass_duration) == (600.0, 3600.0)


async def test_a_decision_racing_the_start_of_wait_is_not_lost(world: World) -> None:
    """Regression: the waiter used to register after reading the row, missing a decision in between."""
    manager = world.manager()
    for call_id in world.call_ids:
        request, _ = await manager.request_for_call(world.session_id, call_id, 1001)
        row, _ = await asyncio.wait_for(
            asyncio.gather(manager.wait(request.id), manager.decide(request.id, approved=True)), 2
        )
        assert row.status == ApprovalStatus.APPROVED
