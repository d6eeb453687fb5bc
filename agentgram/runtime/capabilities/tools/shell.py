"""``execute_cmd``: run a shell command the model wrote, and always be able to stop it.

How a command runs:

* ``/bin/sh -c <command>`` in its own session (``start_new_session=True``), so
  the shell and everything it spawns share one process group that can be
  signalled as a whole;
* in the agent's workdir (or ``workdir`` relative to it); stdin is
  ``/dev/null``; stdout and stderr are merged into one captured stream;
* **environment:** inherited from agentgram, minus every variable whose name
  contains ``TOKEN``, ``SECRET``, ``API_KEY`` or ``PASSWORD`` (any case) — the
  bot token and LLM keys must never reach a command an LLM wrote;
* output is kept in memory up to :data:`OUTPUT_LIMIT_BYTES` (head and tail,
  with ``[... N bytes cut ...]`` between), so a runaway command cannot
  exhaust memory.

The command runs inside ``ctx.checkpoints.command``: while it runs a ``/rollback`` is refused, and
with ``tools.checkpoint_commands`` its effect on the workdir is checkpointed when it ends
(:mod:`runtime.capabilities.checkpoints`).

The result is the output plus an ``exit code: N`` line; a non-zero exit is a
normal result the model reads, not a :class:`ToolError`.

Stopping: on timeout or cancellation (``/stop`` cancels the task running
``execute``) the whole process group gets SIGTERM, up to
:data:`TERM_GRACE_SECONDS` to exit, then SIGKILL; the shell is reaped before
``execute`` returns or re-raises, even if cancelled again meanwhile.
Background processes a command leaves behind after a *normal* exit (``server
&``) are left running on purpose; their later output is not captured.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from agentgram.runtime.capabilities.tools.base import (
    NO_PROCESSES,
    ProcessLedger,
    Progress,
    Tool,
    ToolArgs,
    ToolContext,
    ToolGroup,
)
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.storage.db import durable

OUTPUT_LIMIT_BYTES = 100 * 1024
DEFAULT_TIMEOUT_SECONDS = 120
MAX_TIMEOUT_SECONDS = 600
TERM_GRACE_SECONDS = 2.0
KILL_SETTLE_SECONDS = 0.5
# After the shell exits, how long to wait for output still in the pipe (or held
# open by a background child) before returning.
DRAIN_SECONDS = 0.5
T = TypeVar("T")
S = TypeVar("S")
SECRET_MARKERS = ("TOKEN", "SECRET", "API_KEY", "PASSWORD")


def command_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command sees: ``base`` (default ``os.environ``) without secrets."""
    source = os.environ if base is None else base
    return {k: v for k, v in source.items() if not any(m in k.upper() for m in SECRET_MARKERS)}


class _Capture:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int = OUTPUT_LIMIT_BYTES) -> None:
        self._half = limit // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._half:  # trim lazily: amortised O(n)
                del self._tail[: len(self._tail) - self._half]

    def recent(self, limit: int = 2000) -> str:
        """The newest ``limit`` bytes seen so far (a running command's progress)."""
        data = bytes(self._tail) if self._tail else bytes(self._head)
        return data[-limit:].decode("utf-8", errors="replace")

    def text(self) -> str:
        tail = self._tail[-self._half :] if self._half else b""
        cut = self.total - len(self._head) - len(tail)
        if cut <= 0:
            return (bytes(self._head) + bytes(self._tail)).decode("utf-8", errors="replace")
        head = self._head.decode("utf-8", errors="replace")
        return f"{head}\n[... {cut} bytes cut ...]\n{bytes(tail).decode('utf-8', errors='replace')}"


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self) -> None:
        self.capture = _Capture()
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.capture.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in group ``pgid``.

    Zombies are ignored: members re-parented to init wait there until init
    reaps them (in containers that can take seconds), yet they are already dead.
    Without ``/proc`` (macOS) we fall back to ``killpg(pgid, 0)``, which counts them.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    with os.scandir(proc) as entries:
        pids = [e.name for e in entries if e.name.isdigit()]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        if fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            return True
    return False


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def group_gone(pgid: int) -> None:
    """Return once no live process is left in the group (polled: there is no event for it).

    The ``/proc`` scan runs in a thread so a busy host does not stall the loop;
    callers bound the wait with a timeout.
    """
    while True:
        if not await asyncio.to_thread(_group_alive, pgid):
            return
        await asyncio.sleep(0.02)


async def _kill_group(transport: asyncio.SubprocessTransport, proto: _Protocol) -> None:
    """SIGTERM the group, give it :data:`TERM_GRACE_SECONDS`, SIGKILL it, reap the shell."""
    pgid = transport.get_pid()  # session leader: its pid is the group id
    signal_group(pgid, signal.SIGTERM)
    try:
        async with asyncio.timeout(TERM_GRACE_SECONDS):
            await proto.exited.wait()
            await group_gone(pgid)
    except TimeoutError:
        pass
    signal_group(pgid, signal.SIGKILL)
    await proto.exited.wait()
    transport.close()
    # SIGKILL is delivered asynchronously: let the other members finish dying so
    # that "execute returned" means "nothing of the command runs any more".
    try:
        async with asyncio.timeout(KILL_SETTLE_SECONDS):
            await group_gone(pgid)
    except TimeoutError:
        pass


async def finish_even_if_cancelled(task: asyncio.Future[T]) -> T:
    """Await ``task`` to completion even if we are cancelled meanwhile, then re-raise that.

    For work that must not be abandoned half-way: starting and stopping the
    process group. A second /stop during the stop is absorbed until the group
    is gone, then delivered.
    """
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


async def start_guarded(start: Awaitable[S], stop: Callable[[S], Awaitable[None]]) -> S:
    """Start a process group with ``start``; if cancelled meanwhile, ``stop`` what started (or
    nothing, if it never did), then re-raise.

    (``loop.subprocess_exec`` itself only SIGKILLs the shell on cancellation,
    which would orphan anything the shell has already spawned.)
    """
    started = asyncio.ensure_future(start)

    async def stop_when_started() -> None:
        try:
            value = await started
        except Exception:
            return  # never started: nothing to stop
        await stop(value)

    try:
        return await asyncio.shield(started)
    except asyncio.CancelledError:
        await finish_even_if_cancelled(asyncio.ensure_future(stop_when_started()))
        raise


async def _spawn(command: str, cwd: Path) -> tuple[asyncio.SubprocessTransport, _Protocol]:
    """Start the shell in its own session (see :func:`start_guarded`)."""
    loop = asyncio.get_running_loop()
    start = loop.subprocess_exec(
        _Protocol,
        "/bin/sh",
        "-c",
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=command_env(),
        start_new_session=True,
    )
    return await start_guarded(start, lambda started: _kill_group(*started))


async def run_command(
    command: str,
    cwd: Path,
    timeout_seconds: float,
    ledger: ProcessLedger = NO_PROCESSES,
    progress: Progress | None = None,
) -> tuple[int, str, bool]:
    """Run ``command``; return ``(exit_code, output, background_left_running)``.

    Raises :class:`TimeoutError` (after killing the group, output in its
    ``args[0]``) and re-raises cancellation after killing the group. The group
    is recorded in ``ledger`` while it runs, so a crashed agentgram's
    successor can kill it before re-running the call.
    """
    transport, proto = await _spawn(command, cwd)
    pgid = transport.get_pid()
    if progress is not None:
        progress.watch(proto.capture.recent)
    try:
        await durable(ledger.started(pgid))
    except BaseException:  # stopped (or the write failed) while recording it: it must not run on
        await finish_even_if_cancelled(asyncio.ensure_future(_kill_group(transport, proto)))
        await durable(ledger.finished(pgid))  # durable: the record landed, the group is gone
        raise
    try:
        return await _await_command(transport, proto, timeout_seconds)
    finally:
        await durable(ledger.finished(pgid))


async def _await_command(
    transport: asyncio.SubprocessTransport, proto: _Protocol, timeout_seconds: float
) -> tuple[int, str, bool]:
    try:
        try:
            async with asyncio.timeout(timeout_seconds):
                await proto.exited.wait()
        except TimeoutError:
            await finish_even_if_cancelled(asyncio.ensure_future(_kill_group(transport, proto)))
            raise TimeoutError(proto.capture.text()) from None
        lingering = False
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                await proto.output_closed.wait()
        except TimeoutError:
            lingering = True
    except asyncio.CancelledError:
        await finish_even_if_cancelled(asyncio.ensure_future(_kill_group(transport, proto)))
        raise
    transport.close()
    code = transport.get_returncode()
    assert code is not None  # exited is set
    return code, proto.capture.text(), lingering


class ExecuteCmdArgs(ToolArgs):
    command: str = Field(description="Shell command, run with /bin/sh -c. stdout and stderr are merged.")
    workdir: str | None = Field(
        default=None, description="Directory to run in, relative to the working directory. Default: it."
    )
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="Kill the command (and everything it started) after this many seconds.",
    )


def _exit_line(code: int) -> str:
    if code < 0:
        try:
            return f"exit code: {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"exit code: {code}"
    return f"exit code: {code}"


class ExecuteCmd(Tool[ExecuteCmdArgs]):
    name = "execute_cmd"
    description = (
        "Run a shell command (/bin/sh -c) in the working directory and return its combined "
        f"stdout/stderr (at most {OUTPUT_LIMIT_BYTES // 1024} KB: head and tail) and exit code. "
        "No stdin: commands must not wait for input. Secrets are not in its environment."
    )
    group = ToolGroup.SHELL
    tracked = True
    Args = ExecuteCmdArgs

    def target(self, args: ExecuteCmdArgs, ctx: ToolContext) -> str:
        return args.command

    async def execute(self, args: ExecuteCmdArgs, ctx: ToolContext) -> str:
        cwd = ctx.resolve(args.workdir) if args.workdir else ctx.workdir
        if not await asyncio.to_thread(cwd.is_dir):
            raise ToolError(f"workdir {cwd} does not exist or is not a directory")
        try:
            async with ctx.checkpoints.command(args.command):
                code, output, lingering = await run_command(
                    args.command, cwd, args.timeout_seconds, ctx.processes, ctx.progress
                )
        except TimeoutError as exc:
            output = exc.args[0] if exc.args else ""
            raise ToolError(
                f"command timed out after {args.timeout_seconds} s; it and its child processes were "
                f"killed. Output so far:\n{output or '(no output)'}"
            ) from None
        except OSError as exc:
            raise ToolError(f"cannot start /bin/sh: {exc.strerror or exc}") from None
        parts = [output.rstrip("\n") if output else "(no output)"]
        if lingering:
            parts.append("[background processes still running; their further output is not captured]")
        parts.append(_exit_line(code))
        return "\n".join(parts)
