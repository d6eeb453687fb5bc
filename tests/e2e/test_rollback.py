"""``/rollback`` end to end (issue 30): the real Telegram library of each driver against the fake
Bot API, the real ``openai`` SDK against the fake model. A turn's writes and its command's effect
are checkpointed; ``/rollback`` lists the turn, a press shows what undoing it undoes, ↩️ Undo puts
the files back (and deletes the ones it created), a file the user changed since needs a second
confirmation that names it, a running turn refuses it, and the agent reads what was rolled back
in its next turn."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text, ToolCalls
from tests.fakes.telegram_server import SentMessage

ALLOW_WRITES = {"rules": [{"tool": "@fs_write", "action": "allow"}, {"tool": "@shell", "action": "allow"}]}
ONLY_FILES = {"rules": [{"tool": "@fs_write", "action": "allow"}]}
LISTED = "Turns that changed files"


def write(path: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("write_file", {"path": path, "content": content})


async def listing(rig: Rig) -> SentMessage:
    """``/rollback``'s newest list in the chat."""
    before = len([m for m in rig.chat() if LISTED in m.visible_text])
    rig.say("/rollback")
    await rig.tg.wait_for(lambda: len([m for m in rig.chat() if LISTED in m.visible_text]) > before)
    return [m for m in rig.chat() if LISTED in m.visible_text][-1]


async def press(rig: Rig, message: SentMessage, label: str) -> None:
    answered = len(rig.tg.callback_answers)
    rig.tg.press_button(ALLOWED_USER, message.message_id, message.button_data(label))
    await rig.tg.wait_for(lambda: len(rig.tg.callback_answers) > answered)


async def preview(rig: Rig, listed: SentMessage, turn_label: str = "↩️ Turn") -> SentMessage:
    """Press the turn's button on the list; the question it brings."""
    count = len([m for m in rig.chat() if "Undo turn" in m.visible_text])
    await press(rig, listed, turn_label)
    await rig.tg.wait_for(lambda: len([m for m in rig.chat() if "Undo turn" in m.visible_text]) > count)
    return [m for m in rig.chat() if "Undo turn" in m.visible_text][-1]


async def edited_to(rig: Rig, message: SentMessage, needle: str) -> SentMessage:
    await rig.tg.wait_for(lambda: needle in rig.tg.message(ALLOWED_USER, message.message_id).visible_text)
    return rig.tg.message(ALLOWED_USER, message.message_id)


def contents(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


async def test_a_turn_that_wrote_two_files_and_ran_a_command_is_rolled_back_whole(tmp_path: Path) -> None:
    tools = {"checkpoint_commands": True}
    async with running_bot(tmp_path, approval=ALLOW_WRITES, tools=tools) as rig:
        (rig.workdir / "notes.txt").write_text("old notes\nkept line\n")
        rig.llm.script(
            ToolCalls([write("notes.txt", "new notes\nkept line\n"), write("docs/plan.md", "step one\n")]),
            ToolCalls([("execute_cmd", {"command": "echo made by a command > made.txt"})]),
            Text("All three done."),
        )
        rig.say("write the notes, the plan and run the command")
        await rig.wait_turns()
        assert (rig.workdir / "made.txt").read_text() == "made by a command\n"

        listed = await listing(rig)
        assert re.search(r"Turn \d+</?b?>? · .* · 3 files · \+3 −1", listed.text or ""), listed.text
        for name in ("notes.txt", "docs/plan.md", "made.txt"):
            assert name in listed.visible_text
        question = await preview(rig, listed)
        assert "-old notes" in question.visible_text and "+new notes" in question.visible_text
        assert "+made by a command" in question.visible_text
        await press(rig, question, "↩️ Undo")
        done = await edited_to(rig, question, "Rolled back")
        assert "notes.txt" in done.visible_text and "made.txt" in done.visible_text

        assert (rig.workdir / "notes.txt").read_text() == "old notes\nkept line\n"
        assert not (rig.workdir / "docs" / "plan.md").exists()
        assert not (rig.workdir / "made.txt").exists()

        rig.llm.script(Text("I see the files are back."))
        rig.say("what happened to my files?")
        await rig.wait_turns(2)
        told = contents(rig.llm.requests[-1])
        assert "rolled back the file changes" in told and "notes.txt" in told and "made.txt" in told

        rig.say("/rollback")
        await rig.wait_text("Nothing to roll back")


async def test_a_file_the_user_changed_since_is_overwritten_only_after_a_confirmation_naming_it(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path, approval=ONLY_FILES) as rig:
        (rig.workdir / "todo.txt").write_text("buy milk\n")
        rig.llm.script(
            ToolCalls(
                [
                    write("draft.txt", "a draft\n"),
                    ("edit_file", {"path": "todo.txt", "old_text": "milk", "new_text": "bread"}),
                ]
            ),
            Text("Drafted and edited."),
        )
        rig.say("draft it and fix the list")
        await rig.wait_turns()
        (rig.workdir / "todo.txt").write_text("buy bread\nand my own line\n")  # the user's edit

        question = await preview(rig, await listing(rig))
        await press(rig, question, "↩️ Undo")
        asked = await edited_to(rig, question, "You changed this file since turn")
        assert "todo.txt" in asked.visible_text and "draft.txt" not in asked.visible_text
        assert (rig.workdir / "draft.txt").exists(), "nothing is undone before the second confirmation"
        assert (rig.workdir / "todo.txt").read_text() == "buy bread\nand my own line\n"

        await press(rig, asked, "↩️ Overwrite and undo")
        await edited_to(rig, question, "Rolled back")
        assert (rig.workdir / "todo.txt").read_text() == "buy milk\n"
        assert not (rig.workdir / "draft.txt").exists()


async def test_a_rollback_is_refused_while_a_turn_runs(tmp_path: Path) -> None:
    async with running_bot(tmp_path, approval=ONLY_FILES) as rig:
        rig.llm.script(ToolCalls([write("report.txt", "v1\n")]), Text("Written."))
        rig.say("write the report")
        await rig.wait_turns()
        question = await preview(rig, await listing(rig))

        rig.llm.script(ToolCalls([("execute_cmd", {"command": "ls"})]), Text("Listed."))
        rig.say("list the files")  # the turn waits for the command's approval: it runs
        await rig.wait_text("Approval needed")
        await press(rig, question, "↩️ Undo")
        assert rig.tg.callback_answers[-1].text == (
            "A turn is running. Roll back when it has finished (or /stop it)."
        )
        assert (rig.workdir / "report.txt").read_text() == "v1\n"
        assert "Undo turn" in rig.tg.message(ALLOWED_USER, question.message_id).visible_text

        rig.say("/stop")
        await rig.wait_turns(2)
        await press(rig, question, "↩️ Undo")
        await edited_to(rig, question, "Rolled back")
        assert not (rig.workdir / "report.txt").exists()
