"""A SIGKILL in the middle of a ``/rollback`` (issue 30): every file is old or new, never torn,
and the next start finishes the rollback before anything else runs, and the agent is told.

The turn's command rewrites many files (``tools.checkpoint_commands``), so undoing it takes a
while; a thread watches the checkpoint store and kills the bot the moment the rollback's plan is
written — the plan still being there after the kill is the proof it was cut short."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.conftest import ALLOWED_USER
from tests.crash.conftest import ONE_DRIVER
from tests.crash.harness import CrashRig, crash_rig
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

pytestmark = ONE_DRIVER  # what is killed and recovered is the runtime's; the e2e suite runs both drivers

FILES = 400
OLD, NEW = "old content, line one\nline two\n", "new content\n"


def _killer(rig: CrashRig, plan: Path) -> tuple[threading.Thread, threading.Event]:
    """A thread that SIGKILLs the bot as soon as ``plan`` exists (or gives up when told)."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if plan.exists():
                rig.kill_now()
                return
            stop.wait(0.0005)

    thread = threading.Thread(target=watch, name="rollback-killer", daemon=True)
    thread.start()
    return thread, stop


async def _pressed(rig: CrashRig, message: SentMessage, label: str) -> None:
    rig.tg.press_button(ALLOWED_USER, message.message_id, message.button_data(label))


async def test_a_rollback_killed_midway_leaves_no_torn_file_and_is_finished_on_the_next_start(
    tmp_path: Path,
) -> None:
    store = tmp_path / "checkpoints"
    sections = {
        "tools": {"checkpoint_commands": True, "checkpoint_dir": str(store)},
        "approval": {"rules": [{"tool": "@shell", "action": "allow"}]},
    }
    async with crash_rig(tmp_path, **sections) as rig:
        for n in range(FILES):
            (rig.workdir / f"f{n:04d}.txt").write_text(OLD)
        command = f"for n in $(seq -f %04g 0 {FILES - 1}); do echo 'new content' > f$n.txt; done"
        rig.llm.script(ToolCalls([("execute_cmd", {"command": command})]), Text("Rewrote them all."))
        await rig.start()
        rig.say("rewrite every file")
        await rig.wait_text("Rewrote them all.")
        await rig.wait_settled()
        assert all((rig.workdir / f"f{n:04d}.txt").read_text() == NEW for n in range(FILES))

        rig.say("/rollback")
        listed = await rig.wait_containing("Turns that changed files")
        await _pressed(rig, listed, "↩️ Turn")
        question = await rig.wait_containing("Undo turn")
        killer, stop = _killer(rig, store / "rollback.json")
        try:
            await _pressed(rig, question, "↩️ Undo")
            await rig.wait(lambda: rig.kills == 1, "the kill during the rollback")
        finally:
            stop.set()
            killer.join()
        await rig.reap_killed()

        assert (store / "rollback.json").exists(), "killed before the rollback finished"
        seen = {(rig.workdir / f"f{n:04d}.txt").read_text() for n in range(FILES)}
        assert seen <= {OLD, NEW}, f"a torn file: {seen - {OLD, NEW}}"

        rig.llm.script(Text("Noted: the files are back."))
        await rig.start()
        assert not (store / "rollback.json").exists(), "the start finished the rollback"
        assert all((rig.workdir / f"f{n:04d}.txt").read_text() == OLD for n in range(FILES))
        assert not list(rig.workdir.glob(".*.agentgram-rollback")), "no temporary file is left"

        rig.say("are my files back?")
        await rig.wait_text("Noted: the files are back.")
        told = "\n".join(str(m.get("content")) for m in rig.llm.requests[-1]["messages"])
        assert "rolled back the file changes" in told

        rig.say("/rollback")
        await rig.wait_containing("Nothing to roll back")
        assert await rig.terminate() == 0
