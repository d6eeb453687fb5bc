"""``/rollback`` in the terminal chat (issue 30): the same dialog as Telegram's buttons, with text
prompts. A turn writes a file and edits another; ``/rollback`` lists it, ``/rollback <turn>``
shows the diff and asks, a file the user changed since is named and asked about again, and ``y``
puts everything back."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fakes.openai_server import Call, Text, ToolCalls
from tests.terminal.harness import terminal_rig

ALLOW_WRITES = {"rules": [{"tool": "@fs_write", "action": "allow"}]}


async def test_rollback_lists_asks_in_text_and_undoes_the_turn(tmp_path: Path) -> None:
    async with terminal_rig(tmp_path, approval=ALLOW_WRITES) as rig:
        workdir = tmp_path / "workspace"
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "list.txt").write_text("eggs\n")
        rig.llm.script(
            ToolCalls(
                [
                    Call("write_file", {"path": "new.txt", "content": "brand new\n"}),
                    Call("edit_file", {"path": "list.txt", "old_text": "eggs", "new_text": "ham"}),
                ]
            ),
            Text("Both changed."),
        )
        rig.start()
        await rig.wait_for("type a message")
        rig.type("change them")
        await rig.wait_for("Both changed.")

        rig.type("/rollback")
        await rig.wait_for("Turns that changed files")
        await rig.wait_for("/rollback <turn>")
        found = re.search(r"Turn (\d+) · .* · 2 files · \+2 −1", rig.seen)
        assert found, rig.seen[-2000:]
        turn = found.group(1)

        (workdir / "list.txt").write_text("ham\nmy own line\n")  # the user's edit since
        rig.type(f"/rollback {turn}")
        await rig.wait_for(f"Undo turn {turn}?")
        await rig.wait_for("+brand new")
        await rig.wait_for("undo? ›")
        rig.type("y")
        await rig.wait_for("You changed this file since turn")
        assert (workdir / "new.txt").exists(), "nothing is undone before the second confirmation"
        rig.type("y")
        await rig.wait_for("Rolled back")
        assert (workdir / "list.txt").read_text() == "eggs\n"
        assert not (workdir / "new.txt").exists()

        rig.type("/rollback")
        await rig.wait_for("Nothing to roll back")
        rig.type("/exit")
        assert await rig.exited() == 0
