"""The driver's handle on a bot running in :mod:`bench.botproc`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from bench.common import ROOT

START_TIMEOUT = 60.0
STOP_TIMEOUT = 40.0


class BotProcessError(RuntimeError):
    pass


class BotProcess:
    """``async with BotProcess(...) as bot``: started and ready; killed on exit if still running."""

    def __init__(
        self,
        kind: str,
        *,
        tg_root: str,
        llm_url: str,
        workdir: Path,
        users: Sequence[int] = (),
        edit_interval: float = 0.1,
        profile: Path | None = None,
        storage_url: str | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        self.kind = kind
        # "agentgram@/path/to/checkout": the same bot from another checkout (e.g. the commit before,
        # as a git worktree), so one run compares the two
        kind, _, self.root = kind.partition("@")
        self.workdir = workdir
        self.stderr_path = workdir / f"{kind}-stderr.log"
        self.args = [
            "--kind", kind, "--tg", tg_root, "--llm", llm_url, "--workdir", str(workdir),
            "--users", ",".join(str(u) for u in users), "--edit-interval", str(edit_interval),
        ]  # fmt: skip
        if profile is not None:
            self.args += ["--profile", str(profile)]
        if storage_url is not None:  # agentgram's storage.url (a PostgreSQL database of the driver's)
            self.args += ["--storage-url", storage_url]
        if idle_timeout is not None:  # agentgram's chat idle timeout before a worker is evicted
            self.args += ["--idle-timeout", str(idle_timeout)]
        self.proc: asyncio.subprocess.Process | None = None
        self.ready: dict[str, Any] = {}

    async def __aenter__(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.stderr_path.open("wb") as stderr:
            root = Path(self.root) if self.root else ROOT
            env = {**os.environ, "PYTHONPATH": str(root)} if self.root else None
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.botproc", *self.args,
                cwd=root, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            )  # fmt: skip
        self.ready = await self._expect("ready", START_TIMEOUT)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def stats(self) -> dict[str, Any]:
        self._send("stats")
        return await self._expect("stats", 10.0)

    async def memory(self) -> dict[str, Any]:
        """After a full collection in the bot: its RSS, heap and in-memory maps (``bench.botproc``)."""
        self._send("memory")
        return await self._expect("memory", 30.0)

    async def stop(self) -> dict[str, Any]:
        self._send("stop")
        done = await self._expect("done", STOP_TIMEOUT)
        assert self.proc is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 10.0)
        return done

    def stderr_tail(self, lines: int = 30) -> str:
        return tail_of(self.stderr_path, lines)

    def _send(self, line: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")

    async def _expect(self, event: str, timeout: float) -> dict[str, Any]:
        assert self.proc is not None
        return await read_event(self.proc, event, timeout, self.kind, self.stderr_path, BotProcessError)


def tail_of(path: Path, lines: int = 30) -> str:
    """The last ``lines`` of a child's stderr log ("" if it has none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


async def read_event(
    proc: asyncio.subprocess.Process,
    event: str,
    timeout: float,
    who: str,
    stderr_path: Path,
    error: type[Exception] = RuntimeError,
) -> dict[str, Any]:
    """The child's next JSON line on stdout, which must be ``event``; ``error`` (with the tail of
    its stderr) if it does not come within ``timeout``, the child exits, or another comes."""
    assert proc.stdout is not None
    try:
        raw = await asyncio.wait_for(proc.stdout.readline(), timeout)
    except TimeoutError:
        raise error(f"{who}: no {event!r} within {timeout}s\n{tail_of(stderr_path)}") from None
    if not raw:
        await proc.wait()
        raise error(f"{who} exited ({proc.returncode}) before {event!r}\n{tail_of(stderr_path)}")
    message = json.loads(raw)
    if message.get("event") != event:
        raise error(f"{who}: expected {event!r}, got {message!r}")
    return dict(message)
