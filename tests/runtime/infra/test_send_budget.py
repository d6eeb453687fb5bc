"""The send budget a cluster's instances share (issue 27 item 10), on SQLite and a real PostgreSQL:
a burst, then the rate; both tokens of a send reserved for one time; a chat that holds a send back
reserves nothing and blocks no other chat; pauses any instance records; cached pause reads; idle
rows pruned; and, on PostgreSQL, several Database objects (engines, as instances have) taking at
once without ever exceeding the budget."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterable

import pytest
import sqlalchemy as sa

from agentgram.runtime.infra.send_budget import (
    AT_ONCE,
    GLOBAL,
    LATE,
    PRUNE_EVERY,
    BudgetUnavailable,
    Rate,
    SendBudget,
    chat_key,
)
from agentgram.runtime.infra.storage.budget_rows import SendBudgetRow
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from tests.backends import pg_database

CLOSE = 0.05
"""Seconds a wait may differ from the bucket's arithmetic: the database's clock moves between takes."""
FAST = Rate(100.0, burst=100)
"""An overall budget that holds nothing back."""
JITTER = LATE
"""Seconds a measured send time may trail its reservation: the pacer lets a send go at most
:data:`~agentgram.runtime.infra.send_budget.LATE` after it (or takes again), and the round trips
through one event loop, shared by every instance of a test, jitter by about as much."""


def most_within(times: Iterable[float], seconds: float) -> int:
    """The most of ``times`` inside any half-open window ``seconds`` long."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while ordered[first] <= at - seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


def budget_bound(rate: Rate, seconds: float) -> int:
    """The most sends a bucket reserves in any half-open window ``seconds`` long: its burst, then
    one per step (GCRA's bound; the window is widened by :data:`JITTER` where times are measured)."""
    return rate.burst + math.ceil(rate.per_second * seconds - 1e-9) - 1


async def warm(budget: SendBudget) -> None:
    """Open the connections a burst's takes use and read the database's clock (pause reads of keys
    that have no row), as an instance that has been running has done: a burst that opens them on
    its first takes stalls the one event loop a test's instances share."""
    await asyncio.gather(*(budget.paused_for(f"warm:{n}") for n in range(AT_ONCE)))


class FakeClock:
    """A monotonic clock the test moves (the pause cache's and the prune's)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await migrate(database)
    try:
        yield database
    finally:
        await database.close()


async def _rows(db: Database) -> dict[str, float]:
    table = SendBudgetRow.__table__  # type: ignore[attr-defined]
    return await db.read_sync(
        lambda s: {row.key: row.paused_until for row in s.connection().execute(sa.select(table)).all()}
    )


def test_the_window_count_counts_half_open_windows() -> None:
    assert most_within([0.0, 0.5, 0.99, 1.0, 1.2], 1.0) == 4
    assert most_within([], 1.0) == 0
    assert budget_bound(Rate(20.0, burst=5), 1.0) == 24  # 5 at once, then at 0.05, 0.10 … 0.95
    assert budget_bound(Rate(1.0), 1.0) == 1


async def taken(
    budget: SendBudget, overall: Rate, chat: tuple[str, Rate] | None = None
) -> tuple[float, bool]:
    """A take's wait from when it was answered (its budget's clock is the monotonic one), and
    whether it reserved the send."""
    slot = await budget.take(overall, chat)
    return slot.wait(time.monotonic()), slot.reserved


async def test_a_burst_goes_at_once_then_the_rate_spaces_the_sends(db: Database) -> None:
    budget = SendBudget(db)
    slots = [await budget.take(Rate(2.0, burst=3)) for _ in range(6)]
    assert all(slot.reserved for slot in slots)
    answered = time.monotonic()
    assert [slot.wait(answered) for slot in slots[:3]] == [0.0, 0.0, 0.0], "the burst goes at once"
    first = slots[0].at
    assert [slot.at - first for slot in slots[3:]] == pytest.approx([0.5, 1.0, 1.5], abs=CLOSE)


async def test_a_chat_holding_a_send_back_reserves_nothing_and_blocks_no_other_chat(db: Database) -> None:
    budget = SendBudget(db)
    one, two = (chat_key(1), Rate(1.0)), (chat_key(2), Rate(1.0))
    first = await budget.take(FAST, one)
    assert first.reserved
    held = await budget.take(FAST, one)
    assert not held.reserved and held.at - first.at == pytest.approx(1.0, abs=CLOSE)
    assert await taken(budget, FAST, two) == (0.0, True), "chat 1's wait reserved nothing overall"


async def test_both_tokens_are_reserved_for_the_time_the_overall_budget_gives(db: Database) -> None:
    budget = SendBudget(db)
    overall = Rate(2.0)  # one send per 0.5 s, no burst
    chat = (chat_key(1), Rate(10.0, burst=5))
    slots = [await budget.take(overall, chat) for _ in range(4)]
    assert all(slot.reserved for slot in slots)
    assert [slot.at - slots[0].at for slot in slots] == pytest.approx([0.0, 0.5, 1.0, 1.5], abs=CLOSE)


async def test_a_send_waits_for_the_chat_then_goes(db: Database) -> None:
    budget = SendBudget(db)
    chat = (chat_key(1), Rate(4.0))
    started = time.monotonic()
    for _ in range(3):
        await budget.acquire(FAST, chat)
    took = time.monotonic() - started
    # two waits of 1/4 s each: never sooner (the budget held the sends), and not for anything else
    # (a loaded machine adds its own delay, so the upper bound is loose: speed is the benchmark's)
    assert 0.45 <= took < 2.0, took


PAUSE = 5.0


async def test_a_pause_holds_its_key_on_every_instance(db: Database) -> None:
    here, there = SendBudget(db), SendBudget(db)
    # long enough that a loaded machine never sees it end between a pause and its check
    paused = time.monotonic()
    await here.pause(chat_key(1), PAUSE)
    wait, reserved = await taken(there, FAST, (chat_key(1), Rate(1.0)))
    assert not reserved and wait == pytest.approx(paused + PAUSE - time.monotonic(), abs=CLOSE)
    assert await taken(there, FAST, (chat_key(2), Rate(1.0))) == (0.0, True)
    left = await there.paused_for(GLOBAL, chat_key(1))
    assert left == pytest.approx(paused + PAUSE - time.monotonic(), abs=CLOSE)
    paused = time.monotonic()
    await here.pause(GLOBAL, PAUSE)
    wait, reserved = await taken(there, FAST, (chat_key(3), Rate(1.0)))
    assert reserved and wait == pytest.approx(paused + PAUSE - time.monotonic(), abs=CLOSE)
    await here.pause(GLOBAL, 0.1)
    left = await SendBudget(db).paused_for(GLOBAL)
    assert left == pytest.approx(paused + PAUSE - time.monotonic(), abs=CLOSE), (
        "a shorter pause shortens none"
    )


async def test_pause_reads_are_cached_briefly(db: Database) -> None:
    clock = FakeClock()
    here, there = SendBudget(db), SendBudget(db, clock=clock)
    assert await there.paused_for(GLOBAL, chat_key(1)) == 0.0
    await here.pause(chat_key(1), 5.0)
    clock.now += 0.1
    assert await there.paused_for(chat_key(1)) == 0.0, "read 0.1 s ago: trusted"
    clock.now += 0.1
    assert await there.paused_for(chat_key(1)) == pytest.approx(5.0, abs=0.2)
    assert await here.paused_for(chat_key(1)) == pytest.approx(5.0, abs=0.2), "the pauser knows at once"


async def test_idle_rows_are_pruned(db: Database) -> None:
    clock = FakeClock()
    budget = SendBudget(db, clock=clock)
    await budget.take(FAST, (chat_key(1), Rate(1.0)))
    table = SendBudgetRow.__table__  # type: ignore[attr-defined]

    def age(conn: sa.Connection) -> None:
        conn.execute(sa.update(table).where(table.c.key == chat_key(1)).values(tat=table.c.tat - 7200))

    await db.write_sync(age)
    await budget.take(FAST, (chat_key(2), Rate(1.0)))
    assert chat_key(1) in await _rows(db), "not pruned before PRUNE_EVERY"
    clock.now += PRUNE_EVERY
    await budget.take(FAST, (chat_key(2), Rate(1.0)))
    assert set(await _rows(db)) == {GLOBAL, chat_key(2)}
    assert (await budget.take(FAST, (chat_key(1), Rate(1.0)))).reserved, "a pruned key starts afresh"


async def test_a_database_out_of_reach_is_budget_unavailable() -> None:
    db = Database("postgresql+asyncpg://nobody@127.0.0.1:9/none")
    try:
        with pytest.raises(BudgetUnavailable):
            await SendBudget(db).take(FAST)
    finally:
        await db.close()


async def test_instances_taking_at_once_never_exceed_the_budget() -> None:
    """Three Database objects (three engines and pools, as three processes have) on one
    PostgreSQL, 60 sends to 4 chats at once: the overall and every chat's budget hold over the
    times the sends were let go."""
    overall, per_chat = Rate(20.0, burst=5), Rate(5.0, burst=2)
    async with pg_database() as url:
        dbs = [Database(url) for _ in range(3)]
        try:
            await migrate(dbs[0])
            budgets = [SendBudget(db) for db in dbs]
            for budget in budgets:
                await warm(budget)
            sent: list[tuple[int, float]] = []

            async def send(n: int) -> None:
                chat = n % 4
                await budgets[n % 3].acquire(overall, (chat_key(chat), per_chat))
                sent.append((chat, time.monotonic()))

            started = time.monotonic()
            await asyncio.gather(*(send(n) for n in range(60)))
            took = time.monotonic() - started
        finally:
            for db in dbs:
                await db.close()
    assert len(sent) == 60
    assert took >= (60 - overall.burst) / overall.per_second - CLOSE, "the overall rate held them back"
    times = [at for _, at in sent]
    for window in (0.25, 1.0):
        assert most_within(times, window) <= budget_bound(overall, window + JITTER)
    for chat in range(4):
        mine = [at for to, at in sent if to == chat]
        assert len(mine) == 15
        assert most_within(mine, 1.0) <= budget_bound(per_chat, 1.0 + JITTER), f"chat {chat}"
