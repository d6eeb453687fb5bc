"""A durable ledger of the process groups shell commands start.

``execute_cmd`` runs each command in its own session so /stop can kill the
whole group. The flip side: if agentgram itself is SIGKILLed, those groups
outlive it, and crash recovery re-runs the interrupted call — the command
would run twice at once. So every group is recorded (pgid plus the leader's
start time, to tell a reused pid apart) before the command is awaited and
removed when it ends; on start, :meth:`SqlProcessLedger.reap_orphans` kills
every group a previous process left behind, before any turn resumes.

An entry names its host (``proc:<host>:<pgid>``) and only the same host reaps it: a pgid means
nothing on another machine, and a cluster's new leader may run elsewhere (a dead instance's
groups are its service manager's to kill with its control group, docs/operations/cluster.md).
An entry of an older release (``proc:<pgid>``) is this host's.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.sessions import SessionStore

log = get_logger("tools.processes")
PREFIX = "proc:"
HOST = socket.gethostname()


def ledger_key(pgid: int, host: str = HOST) -> str:
    """The key of ``pgid``'s entry, started on ``host``."""
    return f"{PREFIX}{host}:{pgid}"


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or ``None``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return fields[19].decode()


class SqlProcessLedger:
    def __init__(self, store: SessionStore) -> None:
        self._store = store

    async def started(self, pgid: int) -> None:
        await self._store.set_value(ledger_key(pgid), start_time(pgid) or "")

    async def finished(self, pgid: int) -> None:
        await self._store.delete_value(ledger_key(pgid))

    async def reap_orphans(self) -> list[int]:
        """Kill every group this host recorded that is still alive (left by a crashed process)."""
        killed = []
        for key, recorded in (await self._store.values_with_prefix(PREFIX)).items():
            host, _, number = key[len(PREFIX) :].rpartition(":")
            if host not in ("", HOST):
                continue  # another host's group: only that host can tell whether it is still its own
            pgid = int(number)
            current = start_time(pgid)
            if current is not None and recorded and current != recorded:
                log.info("pid %s was reused; not touching it", pgid)
            elif _kill_group(pgid):
                killed.append(pgid)
            await self._store.delete_value(key)
        if killed:
            log.warning(
                "killed %d command group(s) left running by the previous process: %s", len(killed), killed
            )
        return killed


def _kill_group(pgid: int) -> bool:
    try:
        os.killpg(pgid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def child_with_env(key: str, value: str) -> int | None:
    """The pid of this process's child whose environment holds ``key=value`` (Linux), or ``None``.

    For a child started by code that does not hand its process out (the MCP SDK's stdio
    transport): the caller puts a fresh token in the child's environment and looks it up here.
    """
    me, needle = os.getpid(), f"{key}={value}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) != me:
                continue
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except (OSError, ValueError):
            continue
    return None


def kill_group(pgid: int) -> bool:
    """SIGKILL what is left of group ``pgid``; whether anything was there to kill."""
    return _kill_group(pgid)
