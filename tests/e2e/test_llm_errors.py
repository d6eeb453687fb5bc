"""LLM trouble reaches the user as a short note; the process keeps serving."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Error, Text


async def test_fallback_model_answers_with_a_note(tmp_path: Path) -> None:
    async with running_bot(tmp_path, llm={"fallback_models": ["backup-model"]}) as rig:
        rig.llm.on_model("main-model", Error(500, "overloaded"))
        rig.llm.on_model("backup-model", Text("backup here"))
        rig.say("hi")
        await rig.wait_turns()
        texts = rig.texts()
        assert any("main-model" in t and "backup-model" in t for t in texts)
        assert texts[-1] == "backup here"


async def test_failed_llm_is_reported_and_next_message_works(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Error(503, "down"))
        rig.say("hi")
        await rig.wait_turns()
        assert "went wrong" in rig.texts()[-1]
        rig.llm.script(Text("back again"))
        rig.say("still there?")
        await rig.wait_turns(2)
        assert rig.texts()[-1] == "back again"
        # the failed turn's message was marked failed, so the model sees a clean alternation
        last = rig.llm.requests[-1]["messages"]
        assert [m["role"] for m in last] == ["system", "user", "system"]
        assert last[1]["content"] == "still there?"


async def test_unreachable_llm_at_start_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    async with running_bot(tmp_path, llm={"base_url": "http://127.0.0.1:9/v1", "request_timeout": 2}) as rig:
        rig.say("hi")
        await rig.wait_turns(timeout=15)
        assert "went wrong" in rig.texts()[-1]
