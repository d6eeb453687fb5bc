"""The instance lock: one process per database, keyed without the secret, never stale."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgram.runtime.infra.storage.lock import AlreadyRunning, InstanceLock, fingerprint, lock_path

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


def test_a_server_database_is_keyed_by_a_hash_without_password_or_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    url = "postgresql+asyncpg://me:pw-secret@db.example/agentgram"
    path = lock_path(url, fingerprint(TOKEN))
    assert path is not None and path.parent == tmp_path
    assert "pw-secret" not in path.name and "TEST-token" not in path.name and "123456" not in path.name
    assert lock_path(url, fingerprint(TOKEN)) == path  # stable
    assert lock_path(url, fingerprint("654321:other")) != path  # another bot on that server
    with InstanceLock.acquire(url, fingerprint(TOKEN)):
        with pytest.raises(AlreadyRunning):
            InstanceLock.acquire(url, fingerprint(TOKEN))
    assert path.read_text().strip() == str(os.getpid())  # the file holds the pid, nothing else


def test_without_a_runtime_dir_a_private_temp_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with InstanceLock.acquire("postgresql+asyncpg://db.example/agentgram", "f") as lock:
        assert lock.path is not None and lock.path.parent == tmp_path / f"agentgram-{os.getuid()}"
        assert lock.path.parent.stat().st_mode & 0o777 == 0o700


def test_an_in_memory_database_shares_nothing_and_takes_no_lock(tmp_path: Path) -> None:
    assert lock_path("sqlite+aiosqlite:///:memory:", "f") is None
    with InstanceLock.acquire("sqlite+aiosqlite://", "f"), InstanceLock.acquire("sqlite+aiosqlite://", "f"):
        pass
