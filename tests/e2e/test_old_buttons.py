"""A press of a button on an old message, which Telegram sends as an ``InaccessibleMessage``
(``date`` 0, only its chat and id): the press is still a press in that chat, answered and acted on.

python-telegram-bot's ``Update.effective_chat`` gave that chat; so must ours, under both drivers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.e2e.test_approvals import lines, shell, toast, tool_results, wait_prompt
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import SentMessage


def inaccessible(message_id: int) -> dict[str, Any]:
    """What Telegram sends for a message the bot can no longer see."""
    return {
        "chat": {"id": ALLOWED_USER, "type": "private", "first_name": "Ann"},
        "message_id": message_id,
        "date": 0,
    }


def tap_old(rig: Rig, prompt: SentMessage, label: str) -> int:
    data = prompt.button_data(label)
    return rig.tg.press_button_with_broken_message(
        ALLOWED_USER, data, message=inaccessible(prompt.message_id)
    )


async def test_approve_on_an_inaccessible_prompt_is_answered_and_runs_the_command(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(shell("echo hi >> ran.txt"), Text("Done."))
        rig.say("run it")
        prompt = await wait_prompt(rig)
        tap_old(rig, prompt, "✅ Approve")
        assert await toast(rig) == "✅ Approved"
        await rig.wait_turns()
        assert lines(rig.workdir / "ran.txt") == ["hi"]
        assert tool_results(rig.llm.requests[1]) == ["(no output)\nexit code: 0"]
        assert rig.tg.unanswered_callbacks() == []
