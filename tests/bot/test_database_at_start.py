"""A PostgreSQL ``storage.url`` at start, on the real process (``python -m agentgram.bot run``):

- a server out of reach (a port nobody listens on yet) is waited out with one warning per attempt
  naming the delay; once it "comes up" (a TCP forwarder to the test server opens on that port) the
  bot starts and answers; a signal during the wait ends the process cleanly, exit 0;
- refused credentials and a database that does not exist are one line naming ``storage.url`` and
  exit 2, before anything reaches Telegram.

In-process, with a fast backoff: :func:`runtime.schema.take_instance_lock` retries only what may
change (a refusal is raised at once) and never retries a SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from agentgram.runtime.app import AlreadyRunning, InstanceLock
from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.schema import take_instance_lock
from tests.backends import pg_database, pg_forwarder
from tests.crash.harness import CrashRig, crash_rig
from tests.fakes.openai_server import Text

FAST = Backoff(0.05, 0.2)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _at(url: str, port: int) -> str:
    return make_url(url).set(port=port).render_as_string(hide_password=False)


def _log(rig: CrashRig) -> str:
    return rig.log_path.read_text(errors="replace") if rig.log_path.exists() else ""


SLOW = 60.0
"""Seconds for what a cold interpreter on a busy machine does first (imports, a fresh schema)."""


async def _wait_log(rig: CrashRig, pattern: str, timeout: float = SLOW) -> re.Match[str]:
    await rig.wait(lambda: re.search(pattern, _log(rig)) is not None, f"the log to show {pattern!r}", timeout)
    match = re.search(pattern, _log(rig))
    assert match is not None
    return match


@asynccontextmanager
async def _starting(rig: CrashRig) -> AsyncIterator[asyncio.Task[None]]:
    """:meth:`CrashRig.start` in the background: the process is up, its start-up may not be."""
    task = asyncio.create_task(rig.start())
    await rig.wait(lambda: rig.proc is not None, "the process to be spawned")
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, AssertionError):  # it exited: the test says why
            await task


async def test_a_database_server_down_at_boot_is_waited_out_with_logged_retries_then_the_bot_answers(
    tmp_path: Path,
) -> None:
    async with pg_database() as url:
        port = _free_port()
        name = make_url(url).database
        async with crash_rig(tmp_path, storage={"url": _at(url, port)}) as rig:
            async with _starting(rig):
                first = await _wait_log(
                    rig,
                    rf"WARNING agentgram.storage: database 127.0.0.1:{port}/{name} cannot be reached"
                    rf" \(ConnectionRefusedError: .*\); retry 1 in ([\d.]+)s",
                )
                assert 0.5 <= float(first.group(1)) <= 1.5
                await _wait_log(rig, r"cannot be reached .*; retry 2 in ([\d.]+)s")
                assert not rig.tg.requests  # nothing reaches Telegram before the database
                async with pg_forwarder(port, url):  # the server comes up
                    polling = "the bot to start polling"  # rig.start's own budget counts from the spawn
                    await rig.wait(lambda: bool(rig.tg.calls("getUpdates")), polling, SLOW)
                    rig.llm.script(Text("the database is up"))
                    rig.say("hi")
                    await rig.wait_text("the database is up")
                    assert await rig.terminate(within=10.0) == 0
            log = _log(rig)
        assert log.count("cannot be reached") >= 2
        assert "Traceback" not in log and "TEST-token" not in log


async def test_a_signal_while_waiting_for_the_database_ends_the_process_cleanly(tmp_path: Path) -> None:
    async with pg_database() as url, crash_rig(tmp_path, storage={"url": _at(url, _free_port())}) as rig:
        async with _starting(rig):
            await _wait_log(rig, r"cannot be reached .*; retry 1 in ")
            assert rig.proc is not None
            os.kill(rig.proc.pid, signal.SIGTERM)
            assert await asyncio.wait_for(rig.proc.wait(), 10.0) == 0
        assert "stopped while waiting for the database" in _log(rig)
        assert "Traceback" not in _log(rig) and not rig.tg.requests


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"username": "nobody"}, 'PostgreSQL refused the credentials: role "nobody" does not exist'),
        ({"database": "no_such_db"}, 'no such database: database "no_such_db" does not exist'),
    ],
    ids=["credentials", "database"],
)
async def test_a_refusal_at_start_is_one_line_naming_storage_url_and_exit_2(
    tmp_path: Path, change: dict[str, str], line: str
) -> None:
    async with pg_database() as url:
        wrong = make_url(url).set(**change).render_as_string(hide_password=False)  # type: ignore[arg-type]
        async with crash_rig(tmp_path, storage={"url": wrong}) as rig, _starting(rig):
            assert rig.proc is not None
            assert await asyncio.wait_for(rig.proc.wait(), SLOW) == 2
            log = _log(rig)
    assert log.strip().splitlines()[-1] == f"config error: storage.url: {line}"
    assert "cannot be reached" not in log and "Traceback" not in log and not rig.tg.requests


# --- in-process ---------------------------------------------------------------------------------


class _Retries(logging.Handler):
    """Counts the "cannot be reached" warnings; :attr:`enough` is set at the ``wanted``-th."""

    def __init__(self, wanted: int) -> None:
        super().__init__(logging.WARNING)
        self.wanted = wanted
        self.records: list[logging.LogRecord] = []
        self.enough = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "cannot be reached" in record.getMessage():
            self.records.append(record)
            if len(self.records) >= self.wanted:
                self.enough.set()


async def test_the_lock_waits_for_the_server_then_holds_it() -> None:
    retries = _Retries(wanted=3)
    logger = logging.getLogger("agentgram.storage")
    logger.addHandler(retries)
    try:
        async with pg_database() as url:
            port = _free_port()
            taking = asyncio.create_task(take_instance_lock(_at(url, port), "f", backoff=FAST))
            await asyncio.wait_for(retries.enough.wait(), 10.0)
            assert not taking.done()
            async with pg_forwarder(port, url):  # the server comes up
                lock = await asyncio.wait_for(taking, 10.0)
                try:
                    with pytest.raises(AlreadyRunning):  # held: the server itself says so
                        await asyncio.to_thread(InstanceLock.acquire, url, "f")
                finally:
                    await asyncio.to_thread(lock.release)  # its connection runs through the forwarder
    finally:
        logger.removeHandler(retries)
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in retries.records)
    numbers = [int(re.search(r"retry (\d+) in", r.getMessage()).group(1)) for r in retries.records]  # type: ignore[union-attr]
    assert numbers == list(range(1, len(numbers) + 1))  # one line per attempt, each with its delay


async def test_a_refusal_is_not_retried() -> None:
    retries = _Retries(wanted=1)
    logger = logging.getLogger("agentgram.storage")
    logger.addHandler(retries)
    try:
        async with pg_database() as url:
            wrong = make_url(url).set(username="nobody").render_as_string(hide_password=False)
            with pytest.raises(
                ConfigError, match=r"^config error: storage.url: PostgreSQL refused the credentials"
            ):
                await take_instance_lock(wrong, "f", backoff=FAST)
    finally:
        logger.removeHandler(retries)
    assert retries.records == []


async def test_a_sqlite_file_is_never_retried(tmp_path: Path) -> None:
    (tmp_path / "sub").write_text("")  # a file where the database's folder should be
    with pytest.raises(NotADirectoryError):  # at once: an OSError, but no server to wait for
        await asyncio.wait_for(
            take_instance_lock(f"sqlite+aiosqlite:///{tmp_path / 'sub' / 'a.db'}", "f"), 5.0
        )
