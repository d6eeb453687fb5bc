"""No MCP server outlives a SIGKILLed agentgram (issue 16 req. 4): its recorded process group is
killed by the next start, before the servers start again, and the new server answers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import cmdline, crash_rig, descendants
from tests.crash.test_orphans import _group_alive
from tests.fakes.openai_server import Call, Text, ToolCalls

pytestmark = ONE_DRIVER  # the driver takes no part in what is killed and recovered here

TEST_SERVER = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py")
SERVER = {"command": sys.executable, "args": [TEST_SERVER, "--helper"], "lazy": False}
SECTIONS: dict[str, dict[str, Any]] = {
    "mcp": {"servers": {"test": SERVER}},
    "approval": {"rules": [{"tool": "mcp__test__*", "action": "allow"}]},
}


def server_pid(bot_pid: int) -> int:
    (pid,) = [p for p in descendants(bot_pid) if TEST_SERVER in cmdline(p)]
    return pid


async def test_a_server_left_by_a_killed_agentgram_is_killed_on_the_next_start(tmp_path: Path) -> None:
    groups: list[int] = []
    try:
        async with crash_rig(tmp_path, **SECTIONS) as rig:
            await rig.start()  # the eager server runs once the bot polls
            assert rig.proc is not None
            old = server_pid(rig.proc.pid)
            groups.append(old)
            assert os.getpgid(old) == old, "the SDK starts the server in its own session"
            rig.kill_now(kill_commands=False)
            await rig.reap_killed()
            assert _group_alive(old), "precondition: the server's group outlived the bot"

            rig.llm.script(ToolCalls([Call("mcp__test__pid", {})]), Text("pid noted"))
            await rig.start()
            await rig.wait(lambda: not _group_alive(old), "the orphaned group to be killed (and reaped)")
            assert (
                "killed 1 command group(s) left running by the previous process" in rig.log_path.read_text()
            )
            rig.say("which pid?")
            await rig.wait_text("pid noted")
            (answer,) = [m["content"] for m in rig.llm.requests[-1]["messages"] if m["role"] == "tool"]
            new = int(json.loads(answer) if answer.startswith('"') else answer)
            groups.append(new)
            assert new != old and _group_alive(new)
            await rig.terminate()
            # the bot has exited: the fake's poll (every 0.25 s) until nothing of the server's group is left
            await rig.tg.wait_for(lambda: not _group_alive(new), 10)
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time"], "lazy": False, "timeout": 30}


async def test_the_real_time_server_leaves_no_process_after_a_sigkill_and_restart(tmp_path: Path) -> None:
    """mcp-server-time, the published server: whether it ends with the killed bot's stdin or is
    still running, the next start leaves none of the old processes, and the new one answers."""
    sections = {
        "mcp": {"servers": {"time": TIME}},
        "approval": {"rules": [{"tool": "mcp__time__*", "action": "allow"}]},
    }
    groups: list[int] = []
    try:
        async with crash_rig(tmp_path, **sections) as rig:
            await rig.start()
            assert rig.proc is not None
            (old,) = [p for p in descendants(rig.proc.pid) if "mcp_server_time" in cmdline(p)]
            groups.append(old)
            rig.kill_now(kill_commands=False)
            await rig.reap_killed()

            rig.llm.script(
                ToolCalls([Call("mcp__time__get_current_time", {"timezone": "UTC"})]), Text("noon")
            )
            await rig.start()
            await rig.wait(lambda: not _group_alive(old), "the old server's group to be gone")
            rig.say("what time is it?")
            await rig.wait_text("noon")
            (answer,) = [m["content"] for m in rig.llm.requests[-1]["messages"] if m["role"] == "tool"]
            assert json.loads(answer)["timezone"] == "UTC"
            assert rig.proc is not None
            (new,) = [p for p in descendants(rig.proc.pid) if "mcp_server_time" in cmdline(p)]
            groups.append(new)
            await rig.terminate()
            await rig.tg.wait_for(lambda: not _group_alive(new), 10)
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
