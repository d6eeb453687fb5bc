"""The instance lock: one process per database, keyed without the secret, never stale; on
PostgreSQL an advisory lock in the database, met from any host."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.storage.lock import (
    AlreadyRunning,
    InstanceLock,
    fingerprint,
    lock_path,
    server_lock_key,
)
from tests.backends import pg_database

TOKEN = "123456:TEST-token-secret"


def _sqlite(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def test_a_second_holder_of_the_same_database_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    url = _sqlite(tmp_path / "data" / "agentgram.db")
    with InstanceLock.acquire(url, fingerprint(TOKEN)) as lock:
        assert lock.path == tmp_path / "data" / "agentgram.db.lock"
        assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700  # a first run: the lock made it
        assert lock.path.stat().st_mode & 0o777 == 0o600
        with pytest.raises(AlreadyRunning) as refused:
            InstanceLock.acquire(url, fingerprint("another:token"))  # one database, whatever the token
        assert str(refused.value) == f"another agentgram is running (pid {os.getpid()})"
    InstanceLock.acquire(url, fingerprint(TOKEN)).release()  # released: the next one starts


def test_every_name_of_one_file_meets_the_same_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    with InstanceLock.acquire(_sqlite(Path("real/a.db")), "x"):
        with pytest.raises(AlreadyRunning):
            InstanceLock.acquire(_sqlite(tmp_path / "link" / "a.db"), "x")
        InstanceLock.acquire(_sqlite(tmp_path / "real" / "b.db"), "x").release()  # another database


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    url = _sqlite(tmp_path / "agentgram.db")
    root = Path(__file__).parents[4]
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE, text=True, cwd=root
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            with pytest.raises(AlreadyRunning) as refused:
                InstanceLock.acquire(url, "x")
            assert refused.value.pid == holder.pid
        finally:
            holder.kill()  # SIGKILL: no clean-up of any kind runs
    InstanceLock.acquire(url, "x").release()
    assert (tmp_path / "agentgram.db.lock").exists()  # the file stays; only the flock died


HOLD = """
import sys, time
from agentgram.runtime.infra.storage.lock import InstanceLock
lock = InstanceLock.acquire(sys.argv[1], "x")
print("locked", flush=True)
time.sleep(60)
"""


async def test_postgresql_is_locked_in_the_database_and_the_holder_named_with_host_and_pid() -> None:
    """The lock another host would meet too: it is in the database, keyed by the bot."""
    async with pg_database() as url:
        assert lock_path(url, fingerprint(TOKEN)) is None  # no file on any host
        with InstanceLock.acquire(url, fingerprint(TOKEN)) as lock:
            assert lock.path is None
            with pytest.raises(AlreadyRunning) as refused:
                await asyncio.to_thread(InstanceLock.acquire, url, fingerprint(TOKEN))
            assert str(refused.value) == (
                f"another agentgram is running (host {socket.gethostname()}, pid {os.getpid()})"
            )
            assert (refused.value.pid, refused.value.host) == (os.getpid(), socket.gethostname())
            InstanceLock.acquire(url, fingerprint("654321:other")).release()  # another bot on it
        InstanceLock.acquire(url, fingerprint(TOKEN)).release()  # released: the next one starts
    key = str(server_lock_key(fingerprint(TOKEN)))
    assert "123456" not in key and server_lock_key(fingerprint(TOKEN)) == int(key)  # stable, no token


async def test_a_killed_holder_on_postgresql_leaves_no_stale_lock() -> None:
    async with pg_database() as url:
        await asyncio.to_thread(_kill_a_holder, url)
        for _ in range(100):  # the server notices the closed connection at once, or nearly
            try:
                InstanceLock.acquire(url, "x").release()
                break
            except AlreadyRunning:
                await asyncio.sleep(0.1)
        else:
            pytest.fail("the killed holder's lock stayed")


def _kill_a_holder(url: str) -> None:
    """A process takes the lock of ``url``, a second is refused with its pid, then it is SIGKILLed."""
    root = Path(__file__).parents[4]
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE, text=True, cwd=root
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            with pytest.raises(AlreadyRunning) as refused:
                InstanceLock.acquire(url, "x")
            assert refused.value.pid == holder.pid
        finally:
            holder.kill()  # SIGKILL: its connection closes, and the lock with it


async def test_credentials_postgresql_refuses_are_one_config_line() -> None:
    async with pg_database() as url:
        wrong = make_url(url).set(username="nobody").render_as_string(hide_password=False)
        with pytest.raises(ConfigError, match=r"^config error: storage.url: PostgreSQL refused"):
            InstanceLock.acquire(wrong, "x")


def test_an_in_memory_database_shares_nothing_and_takes_no_lock(tmp_path: Path) -> None:
    assert lock_path("sqlite+aiosqlite:///:memory:", "f") is None
    with InstanceLock.acquire("sqlite+aiosqlite://", "f"), InstanceLock.acquire("sqlite+aiosqlite://", "f"):
        pass
