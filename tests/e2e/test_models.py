"""/model and /cost through the real python-telegram-bot and openai SDK, over the HTTP fakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import ALLOWED_USER
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import Text

MODELS: dict[str, Any] = {
    "models": [
        {
            "name": "backup",
            "model": "backup-model",
            "capabilities": ["tools"],
            "prices": {"input": 2000, "output": 8000},
        }
    ],
    "prices": {"input": 1000, "output": 4000},
}


async def _turn(rig: Rig, text: str, turns: int) -> dict[str, Any]:
    rig.llm.script(Text(f"answer to {text}"))
    rig.say(text)
    await rig.wait_turns(turns)
    return rig.llm.requests[-1]


async def test_model_buttons_switch_the_model_the_next_request_names(tmp_path: Path) -> None:
    async with running_bot(tmp_path, llm=MODELS) as rig:
        assert (await _turn(rig, "first", 1))["model"] == "main-model"
        rig.say("/model")
        listing = await rig.wait_text("Pick the model")
        assert [label for row in listing.buttons for label, _ in row] == ["✅ default", "backup"]
        assert "backup-model" in listing.visible_text and "tools" in listing.visible_text
        labels_after = ["default", "✅ backup"]
        rig.tg.press_button(ALLOWED_USER, listing.message_id, listing.button_data("backup"))
        await rig.tg.wait_for(lambda: [label for row in listing.buttons for label, _ in row] == labels_after)
        assert "<b>Model</b>: backup" in (listing.text or "")
        assert not rig.tg.unanswered_callbacks()
        assert (await _turn(rig, "second", 2))["model"] == "backup-model"

        rig.say("/new")
        await rig.wait_text("Fresh conversation")
        assert (await _turn(rig, "third", 3))["model"] == "backup-model", "/new keeps the chosen model"

        rig.say("/model default")
        await rig.wait_text("now uses default")
        assert (await _turn(rig, "fourth", 4))["model"] == "main-model"


async def test_cost_shows_the_sessions_tokens_and_cost(tmp_path: Path) -> None:
    async with running_bot(tmp_path, llm=MODELS) as rig:
        rig.say("/cost")
        await rig.wait_text("No model requests")
        await _turn(rig, "one", 1)  # the fake reports 10 prompt + 5 completion tokens per request
        rig.say("/model backup")
        await rig.wait_text("now uses backup")
        await _turn(rig, "two", 2)
        rig.say("/cost")
        shown = (await rig.wait_text("2 model requests")).visible_text
        assert "Prompt tokens: 20 · completion tokens: 10" in shown
        # (10 × 1000 + 5 × 4000) / 1M on main-model, (10 × 2000 + 5 × 8000) / 1M on backup-model
        assert "main-model: 10 + 5 tokens · ≈ 0.03" in shown
        assert "backup-model: 10 + 5 tokens · ≈ 0.06" in shown
        assert "Cost: ≈ 0.09" in shown


async def test_one_model_lists_no_buttons_and_cost_without_prices(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/model")
        listing = await rig.wait_text("llm.models")
        assert listing.buttons == []
        await _turn(rig, "one", 1)
        rig.say("/cost")
        shown = (await rig.wait_text("one model request")).visible_text
        assert "main-model: 10 + 5 tokens" in shown and "No prices configured" in shown
