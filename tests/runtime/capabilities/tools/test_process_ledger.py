"""The process ledger (issue 27 item 11): an entry names its host, and a start reaps only the
groups its own host recorded; another host's entry is left alone, whatever its pgid means here.
In a cluster an entry also names its instance, and a start reaps only the groups of instances
that are no longer live: a neighbour on the same host keeps its running commands."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentgram.runtime.capabilities.tools.processes import (
    HOST,
    PREFIX,
    SqlProcessLedger,
    ledger_key,
    parse_key,
    start_time,
)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}")
    await migrate(db)
    try:
        yield SessionStore(db)
    finally:
        await db.close()


async def _group() -> asyncio.subprocess.Process:
    """A command in a process group of its own, as ``execute_cmd`` starts one."""
    return await asyncio.create_subprocess_exec("sleep", "60", start_new_session=True)


async def _stop(*processes: asyncio.subprocess.Process) -> None:
    for process in processes:
        if process.returncode is None:
            os.killpg(process.pid, 9)
            await process.wait()


async def _killed(process: asyncio.subprocess.Process) -> bool:
    return await asyncio.wait_for(process.wait(), 5) < 0


async def test_only_this_hosts_groups_are_reaped(store: SessionStore) -> None:
    ours, theirs, legacy = await _group(), await _group(), await _group()
    try:
        ledger = SqlProcessLedger(store)
        await ledger.started(ours.pid)
        assert await store.values_with_prefix(PREFIX) == {f"{PREFIX}{HOST}:{ours.pid}": start_time(ours.pid)}
        await store.set_value(ledger_key(theirs.pid, "another-host"), start_time(theirs.pid) or "")
        await store.set_value(f"{PREFIX}{legacy.pid}", start_time(legacy.pid) or "")  # an older release's

        assert sorted(await ledger.reap_orphans()) == sorted([ours.pid, legacy.pid])
        assert await asyncio.wait_for(ours.wait(), 5) < 0 and await asyncio.wait_for(legacy.wait(), 5) < 0
        assert theirs.returncode is None, "another host's pgid is not this host's to kill"
        assert await store.values_with_prefix(PREFIX) == {
            ledger_key(theirs.pid, "another-host"): start_time(theirs.pid)
        }, "its entry stays for its own host"
    finally:
        await _stop(ours, theirs, legacy)


async def test_a_finished_group_leaves_no_entry(store: SessionStore) -> None:
    ledger = SqlProcessLedger(store)
    process = await _group()
    try:
        await ledger.started(process.pid)
        await ledger.finished(process.pid)
        assert await store.values_with_prefix(PREFIX) == {}
    finally:
        await _stop(process)


async def test_only_groups_of_instances_no_longer_live_are_reaped(store: SessionStore) -> None:
    own, neighbour, dead, single, legacy = [await _group() for _ in range(5)]
    try:
        ledger = SqlProcessLedger(store, instance=lambda: 7)
        await ledger.started(own.pid)
        for process, key in [
            (neighbour, ledger_key(neighbour.pid, instance=8)),  # a live instance on this host
            (dead, ledger_key(dead.pid, instance=9)),  # an instance that is gone
            (single, ledger_key(single.pid)),  # a process outside a cluster
            (legacy, f"{PREFIX}{legacy.pid}"),  # an older release
        ]:
            await store.set_value(key, start_time(process.pid) or "")

        reaped = await ledger.reap_orphans(live={8})
        assert sorted(reaped) == sorted([dead.pid, single.pid, legacy.pid])
        assert await _killed(dead) and await _killed(single) and await _killed(legacy)
        assert own.returncode is None, "this instance's own command is running"
        assert neighbour.returncode is None, "a live neighbour's command is not ours to kill"
        assert await store.values_with_prefix(PREFIX) == {
            f"{PREFIX}{HOST}:7:{own.pid}": start_time(own.pid),
            f"{PREFIX}{HOST}:8:{neighbour.pid}": start_time(neighbour.pid),
        }, "the live instances' entries stay; the reaped ones are gone"
    finally:
        await _stop(own, neighbour, dead, single, legacy)


async def test_without_live_instances_every_other_group_of_this_host_is_reaped(store: SessionStore) -> None:
    own, other = await _group(), await _group()
    try:
        ledger = SqlProcessLedger(store, instance=lambda: 7)
        await ledger.started(own.pid)
        await store.set_value(ledger_key(other.pid, instance=8), start_time(other.pid) or "")

        assert await ledger.reap_orphans() == [other.pid]
        assert await _killed(other) and own.returncode is None
        assert await store.values_with_prefix(PREFIX) == {
            ledger_key(own.pid, instance=7): start_time(own.pid)
        }
    finally:
        await _stop(own, other)


async def test_finished_removes_the_instance_keyed_entry(store: SessionStore) -> None:
    ledger = SqlProcessLedger(store, instance=lambda: 7)
    process = await _group()
    try:
        await ledger.started(process.pid)
        assert await store.values_with_prefix(PREFIX) == {
            f"{PREFIX}{HOST}:7:{process.pid}": start_time(process.pid)
        }
        await ledger.finished(process.pid)
        assert await store.values_with_prefix(PREFIX) == {}
    finally:
        await _stop(process)


async def test_finished_removes_the_entry_started_wrote_before_the_instance_registered(
    store: SessionStore,
) -> None:
    registered: list[int] = []
    ledger = SqlProcessLedger(store, instance=lambda: registered[0] if registered else None)
    process = await _group()
    try:
        await ledger.started(process.pid)
        registered.append(7)
        await ledger.finished(process.pid)
        assert await store.values_with_prefix(PREFIX) == {}
    finally:
        await _stop(process)


def test_a_key_parses_in_each_of_its_forms() -> None:
    assert parse_key(ledger_key(4242, "h1", 7)) == ("h1", 7, 4242)
    assert parse_key(ledger_key(4242, "h1")) == ("h1", None, 4242)
    assert parse_key(f"{PREFIX}4242") == (HOST, None, 4242), "an older release's entry is this host's"
    for bad in ["proc:", "proc:h1:x", "proc::4242", "proc:h1:7:8:4242", "other:4242", "proc:h1:0", "proc:-3"]:
        with pytest.raises(ValueError):
            parse_key(bad)


async def test_a_malformed_entry_is_left_alone(store: SessionStore) -> None:
    await store.set_value(f"{PREFIX}0", "")  # killpg(0) would kill the reaper's own group
    assert await SqlProcessLedger(store).reap_orphans() == []
    assert await store.values_with_prefix(PREFIX) == {f"{PREFIX}0": ""}
