"""The real ``mcp-server-time`` over stdio, as config gives it (``python -m mcp_server_time``)."""

from __future__ import annotations

import gc
import signal
import sys
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

TIME_SERVER: dict[str, Any] = {"command": sys.executable, "args": ["-m", "mcp_server_time"], "timeout": 30}


def kill_time_servers() -> int:
    """SIGKILL every ``mcp_server_time`` this test process started; how many there were."""
    killed = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if "mcp_server_time" in child.cmdline():
                child.send_signal(signal.SIGKILL)
                child.wait(5)
                killed += 1
        except psutil.NoSuchProcess:
            continue
    return killed


def time_servers() -> int:
    """How many ``mcp_server_time`` processes this test process has running."""
    count = 0
    for child in psutil.Process().children(recursive=True):
        try:
            count += "mcp_server_time" in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            continue
    return count


@pytest.fixture(autouse=True)
def collected() -> Iterator[None]:
    """Collect garbage after each test, so a subprocess transport left unclosed fails its own test."""
    yield
    gc.collect()
