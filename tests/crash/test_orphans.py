"""A command left running by a killed agentgram is killed on restart, before the call re-runs."""

from __future__ import annotations

import os
from pathlib import Path

from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import _process_table, crash_rig, descendants
from tests.crash.test_crash import ALLOW_SHELL, _running
from tests.fakes.openai_server import Text, ToolCalls

pytestmark = ONE_DRIVER  # the driver takes no part in what is killed and recovered here


def _group_alive(pgid: int) -> bool:
    return any(group == pgid for _, (_, group) in _process_table().items())


async def test_orphaned_command_group_is_killed_before_the_call_is_rerun(tmp_path: Path) -> None:
    async with crash_rig(tmp_path, **ALLOW_SHELL) as rig:
        rig.llm.script(
            ToolCalls([("execute_cmd", {"command": "sleep 20; echo orphan >> orphan.txt"})]), Text("done")
        )
        await rig.start()
        rig.say("run the slow thing")
        await rig.wait(lambda: _running(rig, "sleep 20"), "the command to run")
        assert rig.proc is not None
        groups = {_process_table()[child][1] for child in descendants(rig.proc.pid)} - {
            rig.proc.pid,
            os.getpgid(0),
        }
        assert groups, "the command should run in its own process group"
        rig.kill_now(kill_commands=False)
        await rig.reap_killed()
        assert all(_group_alive(g) for g in groups), "precondition: the command outlived the bot"

        await rig.start()
        await rig.wait(lambda: not any(_group_alive(g) for g in groups), "the orphaned group to be killed")
        await rig.wait(lambda: _running(rig, "sleep 20"), "the interrupted call to be re-run")
        rig.say("/stop")
        await rig.wait_text("⏹ Stopped.")
        await rig.terminate()
        assert not (rig.workdir / "orphan.txt").exists(), "the orphaned command finished behind our back"


async def test_a_detached_command_killed_with_agentgram_is_orphaned_and_the_agent_tells_the_user(
    tmp_path: Path,
) -> None:
    """Issue 14 req. 5: a background call dies with its process; after the restart its run reads
    ``orphaned``, its process group is gone, and the agent is told (a turn reports it)."""
    async with crash_rig(tmp_path, tools={"attach_seconds": 1}, **ALLOW_SHELL) as rig:
        rig.llm.script(
            ToolCalls([("execute_cmd", {"command": "sleep 30; echo late >> late.txt"})]),
            Text("It is running in the background."),
        )
        await rig.start()
        rig.say("start the long job")
        await rig.wait_text("It is running in the background.")
        assert rig.query("SELECT status, detached FROM background_calls")[0]["detached"] == 1
        assert rig.proc is not None
        groups = {_process_table()[child][1] for child in descendants(rig.proc.pid)} - {
            rig.proc.pid,
            os.getpgid(0),
        }
        assert groups, "the detached command should run in its own process group"
        rig.kill_now(kill_commands=False)
        await rig.reap_killed()

        rig.llm.script(Text("The restart stopped the long job; say if I should start it again."))
        await rig.start()
        await rig.wait_text("The restart stopped the long job; say if I should start it again.")
        await rig.wait(lambda: not any(_group_alive(g) for g in groups), "the orphaned group to be killed")
        [run] = rig.query("SELECT status, result FROM background_calls")
        assert run["status"] == "orphaned" and "restarted" in run["result"]
        told = [m["content"] for m in rig.llm.requests[-1]["messages"] if m["role"] == "user"][-1]
        assert "(execute_cmd) orphaned]" in told
        await rig.wait_settled(turns=2)
        rig.assert_consistent("start the long job")
        await rig.terminate()
        assert not (rig.workdir / "late.txt").exists()
