"""A command left running by a killed agentgram is killed on restart, before the call re-runs."""

from __future__ import annotations

import os
from pathlib import Path

from tests.crash.harness import _process_table, crash_rig, descendants
from tests.crash.test_crash import ALLOW_SHELL, _running
from tests.fakes.openai_server import Text, ToolCalls


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
