"""The process ledger (issue 27 item 11): an entry names its host, and a start reaps only the
groups its own host recorded; another host's entry is left alone, whatever its pgid means here."""

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
        for process in (ours, theirs, legacy):
            if process.returncode is None:
                os.killpg(process.pid, 9)
                await process.wait()


async def test_a_finished_group_leaves_no_entry(store: SessionStore) -> None:
    ledger = SqlProcessLedger(store)
    process = await _group()
    try:
        await ledger.started(process.pid)
        await ledger.finished(process.pid)
        assert await store.values_with_prefix(PREFIX) == {}
    finally:
        os.killpg(process.pid, 9)
        await process.wait()
