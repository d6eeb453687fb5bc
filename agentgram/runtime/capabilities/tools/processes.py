"""A durable ledger of the process groups shell commands and stdio MCP servers start.

``execute_cmd`` runs each command in its own session so /stop can kill the
whole group. The flip side: if agentgram itself is SIGKILLed, those groups
outlive it, and crash recovery re-runs the interrupted call — the command
would run twice at once. So every group is recorded (pgid plus the leader's
start time, to tell a reused pid apart) before the command is awaited and
removed when it ends; on start, :meth:`SqlProcessLedger.reap_orphans` kills
the groups that processes no longer running left behind, before any turn resumes.

An entry carries its host and, in a cluster, its instance: ``proc:<host>:<instance>:<pgid>``
(``proc:<host>:<pgid>`` outside a cluster, or before the instance registered). Only the same
host reaps an entry: a pgid means nothing on another machine, and a cluster's new leader may run
elsewhere (a dead instance's groups on another host are its service manager's to kill with its
control group, docs/operations/cluster.md). The instance matters because several instances may
run on one host at once: a starting instance must not kill a live neighbour's commands, so it
reaps only the groups of instances the caller no longer counts as live (and never its own). An
entry without an instance (one process alone, or an older release) is reaped as before, and an
older release's ``proc:<pgid>`` is this host's.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Collection
from pathlib import Path

from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.sessions import SessionStore

log = get_logger("tools.processes")
PREFIX = "proc:"
HOST = socket.gethostname()


def ledger_key(pgid: int, host: str = HOST, instance: int | None = None) -> str:
    """The key of ``pgid``'s entry, started on ``host`` by cluster instance ``instance`` (if any)."""
    if instance is None:
        return f"{PREFIX}{host}:{pgid}"
    return f"{PREFIX}{host}:{instance}:{pgid}"


def parse_key(key: str) -> tuple[str, int | None, int]:
    """``(host, instance, pgid)`` of a ledger key; an older release's ``proc:<pgid>`` is this host's.

    Raises :class:`ValueError` for a key that is none of the three forms, or whose pgid is not a
    process group of its own (``killpg`` of 0 would be the caller's own group)."""
    fields = key.removeprefix(PREFIX).split(":") if key.startswith(PREFIX) else []
    match fields:
        case [pgid]:
            host, instance = HOST, None
        case [host, pgid] if host:
            instance = None
        case [host, number, pgid] if host:
            instance = int(number)
        case _:
            raise ValueError(f"not a process-ledger key: {key!r}")
    if int(pgid) <= 1:
        raise ValueError(f"not a process group of its own: {key!r}")
    return host, instance, int(pgid)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or ``None``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return fields[19].decode()


class SqlProcessLedger:
    """The ledger in the session store's key-value table.

    ``instance`` gives this process's cluster instance id, ``None`` outside a cluster; it is read
    at each :meth:`started`, since the id is known only once the instance registered."""

    def __init__(self, store: SessionStore, instance: Callable[[], int | None] = lambda: None) -> None:
        self._store = store
        self._instance = instance
        self._keys: dict[int, str] = {}  # running group -> the key it was recorded under

    async def started(self, pgid: int) -> None:
        key = self._keys[pgid] = ledger_key(pgid, instance=self._instance())
        await self._store.set_value(key, start_time(pgid) or "")

    async def finished(self, pgid: int) -> None:
        """Delete the entry :meth:`started` wrote, even if the instance registered in between."""
        key = self._keys.pop(pgid, None) or ledger_key(pgid, instance=self._instance())
        await self._store.delete_value(key)

    async def reap_orphans(self, live: Collection[int] | None = None) -> list[int]:
        """Kill the groups this host recorded for no live process, and delete their entries.

        ``live`` holds the ids of the cluster instances still running (``None``: no other one, as
        for a single process). A group recorded by this instance or by one in ``live`` is left
        alone with its entry; one recorded by any other instance, or without an instance, was left
        by a process that is gone. A group whose leader's pid was reused is not touched."""
        own, spared = self._instance(), set(live or ())
        if own is not None:
            spared.add(own)
        killed = []
        for key, recorded in (await self._store.values_with_prefix(PREFIX)).items():
            try:
                host, instance, pgid = parse_key(key)
            except ValueError:
                log.warning("process ledger: %r is not an entry; left alone", key)
                continue
            if host != HOST:
                continue  # another host's group: only that host can tell whether it is still its own
            if instance is not None and instance in spared:
                continue  # a live instance's running command
            current = start_time(pgid)
            if current is not None and recorded and current != recorded:
                log.info("pid %s was reused; not touching it", pgid)
            elif _kill_group(pgid):
                killed.append(pgid)
            await self._store.delete_value(key)
        if killed:
            by = "the previous process" if live is None else "instances no longer live"
            log.warning("killed %d command group(s) left running by %s: %s", len(killed), by, killed)
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
