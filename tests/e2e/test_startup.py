"""Start-up of the real process: outages waited out, signals obeyed, one instance per database.

The bot runs as ``python -m bot run`` (tests/crash/harness.py). "The network is down at boot"
is a port nobody listens on yet; "it comes up" is a TCP forwarder opened on that port to the
fake behind it, so the bot sees a refused connection first and the same URL working after.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.crash.harness import CrashRig, crash_rig, write_config
from tests.fakes.openai_server import Text

REJECTED = "config error: telegram.token: Telegram rejected the bot token (401 Unauthorized)"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def forwarder(port: int, target: int) -> AsyncIterator[None]:
    """The network comes up: 127.0.0.1:``port`` now reaches 127.0.0.1:``target``."""
    open_writers: set[asyncio.StreamWriter] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        open_writers.update((writer, up_writer))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(connection, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()
        for writer in open_writers:
            writer.close()
        await server.wait_closed()


@asynccontextmanager
async def starting(rig: CrashRig) -> AsyncIterator[asyncio.Task[None]]:
    """:meth:`CrashRig.start` in the background: the process is up, its start-up may not be."""
    task = asyncio.create_task(rig.start())
    await rig.wait(lambda: rig.proc is not None, "the process to be spawned")
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, AssertionError):  # it exited: the test says why
            await task


def log_text(rig: CrashRig) -> str:
    return rig.log_path.read_text(errors="replace") if rig.log_path.exists() else ""


async def wait_log(rig: CrashRig, pattern: str) -> re.Match[str]:
    await rig.wait(lambda: re.search(pattern, log_text(rig)) is not None, f"the log to show {pattern!r}")
    match = re.search(pattern, log_text(rig))
    assert match is not None
    return match


async def exit_code(rig: CrashRig, within: float = 30.0) -> int:
    """The process's exit code, once it exits within ``within`` seconds of the call. Importing
    aiogram 3.31's types alone takes about 9 s of CPU on a 2-core machine (pydantic rebuilds
    every model at import), so a start that fails at once still needs well over 15 s there."""
    assert rig.proc is not None
    return await asyncio.wait_for(rig.proc.wait(), within)


def unreachable(rig: CrashRig, tmp_path: Path, *, tg_port: int, llm_port: int | None = None) -> None:
    llm_url = rig.llm.base_url if llm_port is None else f"http://127.0.0.1:{llm_port}/v1"
    write_config(rig.config_path, tg_root=f"http://127.0.0.1:{tg_port}", llm_url=llm_url, tmp_path=tmp_path)


async def test_network_down_at_boot_is_waited_out_with_logged_retries_then_the_bot_answers(
    tmp_path: Path,
) -> None:
    tg_port, llm_port = _free_port(), _free_port()
    async with crash_rig(tmp_path) as rig:
        unreachable(rig, tmp_path, tg_port=tg_port, llm_port=llm_port)
        async with starting(rig) as start:
            first = await wait_log(rig, r"start-up: getMe failed \(NetworkError: .*\); retry 1 in ([\d.]+)s")
            assert float(first.group(1)) <= 2.0
            await wait_log(rig, r"start-up: getMe failed .*; retry 2 in ")
            assert not rig.tg.requests  # nothing got through yet
            async with forwarder(tg_port, rig.tg.port):  # Telegram comes up; the model not yet
                await start
                await wait_log(
                    rig, rf"WARNING agentgram.runtime: LLM endpoint: .*127.0.0.1:{llm_port}.* unreachable"
                )
                async with forwarder(llm_port, rig.llm.port):
                    rig.llm.script(Text("up now"))
                    rig.say("hi")
                    await rig.wait_text("up now")
                    assert await rig.terminate(within=10.0) == 0
        assert "Traceback" not in log_text(rig)
        assert "TEST-token" not in log_text(rig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_during_the_start_up_retries_ends_the_process_cleanly_and_promptly(
    tmp_path: Path, sig: signal.Signals
) -> None:
    async with crash_rig(tmp_path) as rig:
        unreachable(rig, tmp_path, tg_port=_free_port())
        async with starting(rig):
            await wait_log(rig, r"start-up: getMe failed .*; retry 1 in ")
            assert rig.proc is not None
            loop = asyncio.get_running_loop()
            sent = loop.time()
            os.kill(rig.proc.pid, sig)
            assert await exit_code(rig, within=10.0) == 0
            assert loop.time() - sent < 5.0
        assert "Traceback" not in log_text(rig)
        assert "stopped during start-up" in log_text(rig)


async def test_a_401_after_transient_failures_at_start_exits_2_with_one_line(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.tg.fail_next("getMe", status=502)
        rig.tg.fail_next("getMe", status=401, description="Unauthorized")
        async with starting(rig):
            assert await exit_code(rig) == 2
        log = log_text(rig)
        assert len(rig.tg.calls("getMe")) == 2  # retried the 502, not the 401
        assert log.rstrip().splitlines()[-1] == REJECTED
        assert log.count(REJECTED) == 1 and "Traceback" not in log and "TEST-token" not in log


async def test_a_refusal_at_start_that_no_retry_changes_is_one_logged_line_and_exit_1(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.tg.fail_next("deleteWebhook", status=400, description="Bad Request: no such thing", times=3)
        async with starting(rig):
            assert await exit_code(rig) == 1
        log = log_text(rig)
        assert len(rig.tg.calls("deleteWebhook")) == 1
        assert "ERROR agentgram.cli: start-up failed: Telegram refused it: BadRequest: No such thing" in log
        assert "Traceback" not in log


async def _second_instance(rig: CrashRig) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentgram.bot", "run", "--config", str(rig.config_path),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, PTB_TIMEDELTA="1"), cwd=rig.tmp_path,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30.0)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_second_instance_on_the_same_database_exits_2_and_a_killed_one_leaves_no_stale_lock(
    tmp_path: Path,
) -> None:
    async with crash_rig(tmp_path) as rig:
        await rig.start()
        assert rig.proc is not None
        first_pid = rig.proc.pid
        requests = len(rig.tg.requests)
        code, out, err = await _second_instance(rig)
        assert (code, out, err) == (2, "", f"another agentgram is running (pid {first_pid})\n")
        assert {r.method for r in rig.tg.requests[requests:]} <= {"getUpdates"}  # it never reached Telegram
        rig.llm.script(Text("still the first"))
        rig.say("are you there?")
        await rig.wait_text("still the first")  # the first one kept working

        await rig.kill()  # SIGKILL: no clean-up runs, the lock dies with the process
        await rig.start()
        rig.llm.script(Text("the new one"))
        rig.say("and now?")
        await rig.wait_text("the new one")
        assert await rig.terminate() == 0
