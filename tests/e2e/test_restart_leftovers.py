"""What a restart leaves in the chat is finished, not repeated; "typing…" never shows while the
turn waits for the user.

Each restart here is a real one: a second bot on the same database and the same fake Telegram
(:func:`tests.e2e.harness.fakes`), so the messages the first bot sent are still there to edit.
The first bot is stopped with its turn waiting or working: the turn stays ``running`` and the
second bot resumes it, as after a crash (the crash tests kill the process instead).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import agentgram.bot.telegram.views.delivery as delivery_module
from agentgram.bot.telegram.core.records import PROMPT, STATUS_LINE
from tests.conftest import ALLOWED_USER, also_on_postgres
from tests.e2e.harness import Rig, fakes, running_bot
from tests.e2e.test_approvals import PROMPT as PROMPT_TITLE
from tests.e2e.test_approvals import shell, tap, wait_decided, wait_prompt
from tests.e2e.test_turn_control import eventually
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import SentMessage

RESTARTED = "🔄 Restarted — continuing your last request."
HINT = "reply to this message"
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo released"
TYPING_EVERY = 0.02


@pytest.fixture(autouse=True)
def quick_typing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Typing every 20 ms: a typing action shown while the turn waits would show up at once."""
    monkeypatch.setattr(delivery_module, "TYPING_EVERY", TYPING_EVERY)
    monkeypatch.setattr(delivery_module, "TYPING_AFTER", 0.0)


def status_lines(rig: Rig) -> list[SentMessage]:
    return [m for m in rig.chat() if m.visible_text.startswith("⚙️ execute_cmd")]


async def records(rig: Rig) -> dict[str, str]:
    sessions = rig.bot.runtime.parts.session_store
    return await sessions.values_with_prefix(STATUS_LINE) | await sessions.values_with_prefix(PROMPT)


async def waiting_for_user(rig: Rig) -> None:
    """Until the turn's gate waits for the decision (the user's move from then on)."""
    approvals, hub = rig.bot.runtime.parts.approval_manager, rig.bot.runtime.parts.hub
    await eventually(
        approvals.pending, lambda pending: bool(pending) and bool(hub.awaited(pending[0].session_id))
    )


async def assert_no_typing_while_waiting(rig: Rig) -> None:
    await waiting_for_user(rig)
    before = len(rig.tg.chat_actions)
    await asyncio.sleep(TYPING_EVERY * 15)
    assert len(rig.tg.chat_actions) == before, "typing… shown while the turn waits for the user"


@also_on_postgres
async def test_a_prompt_waiting_across_a_restart_is_pointed_at_and_edited_once_decided(
    tmp_path: Path,
) -> None:
    async with fakes() as chat:
        async with running_bot(tmp_path, on=chat) as rig:
            rig.llm.script(shell("echo hi >> ran.txt"))
            rig.say("run it")
            prompt = await wait_prompt(rig)
            (old_line,) = status_lines(rig)
            assert old_line.visible_text.endswith("…")
        async with running_bot(tmp_path, on=chat) as rig:
            rig.llm.script(Text("Done."))
            notice = await rig.wait_text(RESTARTED)
            assert notice.reply_to_message_id == prompt.message_id, "the notice points at the prompt"
            await rig.tg.wait_for(
                lambda: rig.tg.message(ALLOWED_USER, old_line.message_id).visible_text.endswith(
                    "⚠️ interrupted"
                )
            )
            await assert_no_typing_while_waiting(rig)

            tap(rig, prompt, "✅ Approve")
            await rig.wait_turns()
            decided = await wait_decided(rig, prompt, "✅ Approved")
            assert decided.buttons == [] and HINT not in decided.visible_text
            assert PROMPT_TITLE in decided.visible_text and "echo hi" in decided.visible_text
            assert [m for m in rig.chat() if m.reply_to_message_id == prompt.message_id] == [notice]
            assert not any(m.visible_text == "✅ Approved" for m in rig.chat()), "answered, not edited"
            assert [m.visible_text for m in status_lines(rig)] == [  # the resumed turn's line is new
                "⚙️ execute_cmd · echo hi >> ran.txt ⚠️ interrupted",
                "⚙️ execute_cmd · echo hi >> ran.txt ✓",
            ]
            assert rig.texts()[-1] == "Done."
            assert (rig.workdir / "ran.txt").read_text() == "hi\n"
            assert await records(rig) == {}


async def test_a_decision_shown_before_a_restart_is_not_shown_again(tmp_path: Path) -> None:
    async with fakes() as chat:
        async with running_bot(tmp_path, on=chat) as rig:
            rig.llm.script(shell(WAIT_FOR_GO))
            rig.say("wait for it")
            prompt = await wait_prompt(rig)
            tap(rig, prompt, "✅ Approve")
            await wait_decided(rig, prompt, "✅ Approved")
            await rig.tg.wait_for(lambda: len(rig.tg.chat_actions) > 0)  # the command runs
        (rig.workdir / "go").touch()
        async with running_bot(tmp_path, on=chat) as rig:
            rig.llm.script(Text("Released."))
            await rig.wait_turns()
            assert rig.texts()[-1] == "Released."
            shown = rig.tg.message(ALLOWED_USER, prompt.message_id)
            assert len(shown.edits) == 1, "the decided prompt is edited once, before the restart only"
            assert not any(m.visible_text == "✅ Approved" for m in rig.chat())
            assert not any(m.reply_to_message_id == prompt.message_id for m in rig.chat())
            assert await records(rig) == {}


async def test_a_status_line_the_chat_never_saw_finish_reads_its_final_marks_after_a_restart(
    tmp_path: Path,
) -> None:
    failing = True

    def final_mark(params: dict[str, object]) -> bool:
        text = str(params.get("text") or "")
        return failing and text.startswith("⚙️ execute_cmd") and "✓" in text

    async with fakes() as chat:
        tg, _ = chat
        tg.fail_next("editMessageText", status=403, times=1000, when=final_mark)
        async with running_bot(
            tmp_path, on=chat, approval={"rules": [{"tool": "execute_cmd", "action": "allow"}]}
        ) as rig:
            rig.llm.script(shell("echo one"), Text("Ran it."))
            rig.say("run it")
            await rig.wait_turns()
            (line,) = status_lines(rig)
            assert line.visible_text.endswith("…"), "the final ✓ never reached the chat"
            assert list(await records(rig)), "so the line stays recorded"
        failing, asked = False, rig.llm.calls
        async with running_bot(tmp_path, on=chat) as rig:
            await rig.tg.wait_for(
                lambda: rig.tg.message(ALLOWED_USER, line.message_id).visible_text.endswith("✓")
            )
            assert rig.tg.message(ALLOWED_USER, line.message_id).visible_text == "⚙️ execute_cmd · echo one ✓"
            await eventually(lambda: records(rig), lambda found: found == {})
            assert rig.llm.calls == asked, "a finished turn is not resumed"


async def test_no_typing_while_a_prompt_waits_and_typing_again_once_approved(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell(WAIT_FOR_GO), Text("Released."))
        rig.say("wait for it")
        prompt = await wait_prompt(rig)
        await assert_no_typing_while_waiting(rig)

        before = len(rig.tg.chat_actions)
        tap(rig, prompt, "✅ Approve")
        await rig.tg.wait_for(lambda: len(rig.tg.chat_actions) > before)  # working again
        (rig.workdir / "go").touch()
        await rig.wait_turns()
        assert rig.texts()[-1] == "Released."
        assert await records(rig) == {}
