"""execute_cmd: output, exit codes, limits, secrets, and that timeouts and /stop kill everything."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.capabilities.tools.shell import OUTPUT_LIMIT_BYTES, ExecuteCmd, command_env
from agentgram.runtime.infra.errors import ToolError


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path)


@pytest.fixture
def stray_pids() -> Iterator[list[int]]:
    """Pids a test deliberately leaves running; killed afterwards."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def run(ctx: ToolContext, **raw: object) -> str:
    tool = ExecuteCmd()
    return await tool.execute(tool.parse(raw), ctx)


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll an observable condition (a file, a process) with a deadline."""
    async with asyncio.timeout(timeout):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)


def live_members(pgid: int) -> list[psutil.Process]:
    """Processes of group ``pgid`` that are not zombies (zombies are dead, waiting for a reaper)."""
    alive = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return alive


# --- normal runs -------------------------------------------------------------------


async def test_output_and_exit_code(ctx: ToolContext) -> None:
    assert await run(ctx, command="echo out; echo err >&2") == "out\nerr\nexit code: 0"


async def test_nonzero_exit_is_a_result_not_an_error(ctx: ToolContext) -> None:
    assert await run(ctx, command="echo failing; exit 3") == "failing\nexit code: 3"


async def test_no_output(ctx: ToolContext) -> None:
    assert await run(ctx, command="true") == "(no output)\nexit code: 0"


async def test_runs_in_workdir_and_relative_workdir(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert await run(ctx, command="pwd") == f"{tmp_path}\nexit code: 0"
    assert await run(ctx, command="pwd", workdir="sub") == f"{tmp_path / 'sub'}\nexit code: 0"


async def test_missing_workdir(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"workdir .*nope does not exist"):
        await run(ctx, command="pwd", workdir="nope")


async def test_stdin_is_empty(ctx: ToolContext) -> None:
    assert await run(ctx, command="cat; echo done") == "done\nexit code: 0"


async def test_output_is_cut_keeping_head_and_tail(ctx: ToolContext) -> None:
    total = 300_000
    out = await run(ctx, command=f"printf START; head -c {total - 8} /dev/zero | tr '\\0' a; printf END")
    assert out.startswith("STARTaaa")
    assert out.endswith("aaaEND\nexit code: 0")
    assert f"\n[... {total - OUTPUT_LIMIT_BYTES} bytes cut ...]\n" in out
    assert len(out) < OUTPUT_LIMIT_BYTES + 200


async def test_secrets_are_not_in_the_environment(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-1")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    monkeypatch.setenv("db_password", "hunter2")
    monkeypatch.setenv("CLIENT_SECRET_X", "s")
    monkeypatch.setenv("HARMLESS", "visible")
    out = await run(
        ctx, command='echo "[$MY_API_KEY][$TELEGRAM_BOT_TOKEN][$db_password][$CLIENT_SECRET_X][$HARMLESS]"'
    )
    assert out == "[][][][][visible]\nexit code: 0"
    assert "PATH" in command_env()


async def test_background_child_does_not_block(
    ctx: ToolContext, tmp_path: Path, stray_pids: list[int]
) -> None:
    async with asyncio.timeout(5):
        out = await run(ctx, command="sleep 30 & echo $! > bg.pid; echo started")
    stray_pids.append(int((tmp_path / "bg.pid").read_text()))
    assert out.startswith("started\n")
    assert "background processes still running" in out
    assert out.endswith("exit code: 0")


def test_target_is_the_command(ctx: ToolContext) -> None:
    tool = ExecuteCmd()
    assert tool.target(tool.parse({"command": "ls -la"}), ctx) == "ls -la"


@pytest.mark.parametrize("bad", [0, 601])
def test_timeout_bounds(bad: int) -> None:
    with pytest.raises(ToolError, match="timeout_seconds"):
        ExecuteCmd().parse({"command": "true", "timeout_seconds": bad})


# --- stopping ------------------------------------------------------------------------

SLEEPERS = 'echo $$ > pid; sleep 30 & sh -c "sleep 30"; wait; touch marker'


async def test_timeout_kills_the_whole_group(ctx: ToolContext, tmp_path: Path) -> None:
    async with asyncio.timeout(4):
        with pytest.raises(ToolError) as err:
            await run(ctx, command=f"echo so-far; {SLEEPERS}", timeout_seconds=1)
    assert "timed out after 1 s" in str(err.value)
    assert "so-far" in str(err.value)
    pgid = int((tmp_path / "pid").read_text())
    assert live_members(pgid) == []
    assert not (tmp_path / "marker").exists()


async def _start_and_cancel(ctx: ToolContext, tmp_path: Path, command: str) -> int:
    task = asyncio.create_task(run(ctx, command=command))
    pid_file = tmp_path / "pid"
    await wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    pgid = int(pid_file.read_text())
    await wait_for(lambda: len(live_members(pgid)) >= 3)  # sh, the background sleep, the nested sh/sleep
    task.cancel()
    async with asyncio.timeout(3):
        with pytest.raises(asyncio.CancelledError):
            await task
    return pgid


async def test_cancel_kills_the_whole_group(ctx: ToolContext, tmp_path: Path) -> None:
    pgid = await _start_and_cancel(ctx, tmp_path, SLEEPERS)
    assert live_members(pgid) == []
    assert not (tmp_path / "marker").exists()


async def test_cancel_escalates_to_sigkill_when_term_is_ignored(ctx: ToolContext, tmp_path: Path) -> None:
    stubborn = "trap '' TERM; echo $$ > pid; sleep 30 & sh -c \"trap '' TERM; sleep 30\"; wait; touch marker"
    pgid = await _start_and_cancel(ctx, tmp_path, stubborn)
    assert live_members(pgid) == []
    assert not (tmp_path / "marker").exists()


async def test_cancel_reaps_the_shell(ctx: ToolContext, tmp_path: Path) -> None:
    pgid = await _start_and_cancel(ctx, tmp_path, SLEEPERS)
    # The shell is our child: after cancellation it must be reaped, not a zombie of ours.
    zombies = [c for c in psutil.Process().children() if c.pid == pgid]
    assert zombies == []


def live_in(directory: Path) -> list[psutil.Process]:
    """Non-zombie processes whose working directory is ``directory``."""
    alive = []
    for proc in psutil.process_iter():
        try:
            if proc.cwd() == str(directory) and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return alive


@pytest.mark.parametrize("yields", [1, 2, 3, 5, 8])
async def test_cancel_while_starting_leaves_nothing(ctx: ToolContext, tmp_path: Path, yields: int) -> None:
    # Regression: cancelling inside loop.subprocess_exec only SIGKILLed the shell
    # and orphaned the children it had already started.
    task = asyncio.create_task(run(ctx, command="sleep 30 & sh -c 'sleep 30'; wait; touch marker"))
    for _ in range(yields):
        await asyncio.sleep(0)
    task.cancel()
    async with asyncio.timeout(3):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert live_in(tmp_path) == []
    assert not (tmp_path / "marker").exists()
