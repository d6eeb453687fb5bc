"""LLM trouble reaches the user as a short note; the process keeps serving."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.e2e.harness import running_bot
from tests.fakes.openai_server import Drop, Error, Text


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
        assert (
            rig.texts()[-1]
            == "⚠️ The model is not answering (HTTP 503) — send your message again in a moment."
        )
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
        assert "I can't reach the LLM endpoint" in rig.texts()[-1]
        assert "llm.base_url" in rig.texts()[-1]


async def test_a_500_reads_as_what_happened_and_what_to_do_without_the_sdks_words(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Error(500, "The server had an error while processing your request."))
        rig.say("hi")
        await rig.wait_turns()
        shown = "\n".join(rig.texts())
        assert (
            rig.texts()[-1]
            == "⚠️ The model is not answering (HTTP 500) — send your message again in a moment."
        )
        for raw in ("Error code", "HTTP 500: Error", "The server had an error", "LLM unavailable"):
            assert raw not in shown


async def test_a_refused_key_names_the_setting_to_check(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Error(401, "Incorrect API key provided: sk-test-***"))
        rig.say("hi")
        await rig.wait_turns()
        assert rig.texts()[-1] == (
            "⚠️ The LLM endpoint refused the API key (HTTP 401) — check llm.api_key in the config."
        )


async def test_no_switch_is_announced_to_the_model_already_in_use(tmp_path: Path) -> None:
    """Regression: "main-model isn't responding, switching to main-model." (fallback == primary)."""
    async with running_bot(tmp_path, llm={"fallback_models": ["main-model"]}) as rig:
        rig.llm.script(Error(500, "overloaded"))
        rig.say("hi")
        await rig.wait_turns()
        assert rig.texts() == [
            "⚠️ The model is not answering (HTTP 500) — send your message again in a moment."
        ]
        assert rig.llm.calls == 1


async def test_a_retry_after_a_cut_stream_replaces_the_text_without_a_notice(tmp_path: Path) -> None:
    async with running_bot(tmp_path, llm={"max_retries": 1}) as rig:
        rig.llm.script(Drop("half an ans"), Text("the whole answer"))
        rig.say("hi")
        await rig.wait_turns()
        assert rig.texts() == ["the whole answer"]


async def test_an_llm_down_at_start_is_checked_again_with_backoff_until_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentgram.runtime.app as app_module
    from tests.e2e.test_startup import _free_port, forwarder

    monkeypatch.setattr(app_module, "LLM_CHECK_FIRST", 0.1)
    caplog.set_level(logging.INFO, logger="agentgram")
    port = _free_port()

    def checks() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("LLM endpoint")]

    async with running_bot(tmp_path, llm={"base_url": f"http://127.0.0.1:{port}/v1"}) as rig:
        await rig.tg.wait_for(lambda: len(checks()) >= 3, timeout=10)
        assert all("unreachable; checking again in" in line for line in checks())
        async with forwarder(port, rig.llm.port):
            await rig.tg.wait_for(lambda: "LLM endpoint answers now" in checks(), timeout=10)
            rig.llm.script(Text("Up again."))
            rig.say("hi")
            await rig.wait_text("Up again.")


async def test_a_refused_key_at_start_is_logged_once_not_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentgram.runtime.app as app_module
    from agentgram.runtime.app import Runtime
    from tests.conftest import make_settings
    from tests.fakes.openai_server import FakeOpenAI

    monkeypatch.setattr(app_module, "LLM_CHECK_FIRST", 0.05)
    caplog.set_level(logging.INFO, logger="agentgram")
    async with FakeOpenAI(models=("main-model",), api_key="sk-right") as llm:
        runtime = Runtime(make_settings(tmp_path, llm.base_url))  # the test settings' key is another
        await runtime.start()
        assert runtime._llm_check is not None
        await asyncio.wait_for(runtime._llm_check, 5)
        await runtime.close()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("LLM endpoint")]
    assert len(lines) == 1 and "rejected the API key (401)" in lines[0] and "checking again" not in lines[0]
