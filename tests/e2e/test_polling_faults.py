"""Polling survives what Telegram's getUpdates really does: poison updates, 5xx, invalid JSON,
hangs, a second poller (409) — and only a revoked token (401) ends the process."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from pathlib import Path

import pytest

from agentgram.bot.cli import EXIT_CONFIG, _run
from agentgram.bot.telegram.core.ingest import OFFSET_KEY
from tests.conftest import ALLOWED_USER, make_settings
from tests.e2e.harness import Rig, running_bot
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram


def user_texts(rig: Rig) -> list[str]:
    """Everything the model was shown as the user's words, in order."""
    return [
        str(m.get("content"))
        for request in rig.llm.requests
        for m in request["messages"]
        if m.get("role") == "user"
    ]


async def test_poison_updates_are_dead_lettered_and_the_batch_goes_on(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("Read you.", delay=0.3), Text("Both read."))
        first = rig.say("first message")
        rig.tg.send_poll_missing_allows_revoting(ALLOWED_USER)
        rig.tg.send_message_with_bad_chat(ALLOWED_USER)
        rig.tg.send_unknown_update(force=True)
        rig.tg.press_button_with_broken_message(ALLOWED_USER, force=True)
        last = rig.say("second message")
        assert last == first + 5, "one batch of six"
        await rig.tg.wait_for(lambda: any("second message" in t for t in user_texts(rig)), timeout=10)
        await rig.bot.delivery.idle()
        assert any("first message" in t for t in user_texts(rig))
        assert rig.tg.confirmed_offset == last + 1 or rig.tg.unconfirmed() == []
        assert await rig.bot.runtime.parts.session_store.get_value(OFFSET_KEY) == str(last + 1)
        letters = await rig.bot.runtime.parts.session_store.dead_letters()
        assert [int(letter.ref) for letter in letters] == [first + 1, first + 2, first + 4]
        assert all(letter.source == "telegram" and letter.payload.startswith("{") for letter in letters)
        assert "allows_revoting" in letters[0].error  # the library names the missing field
        assert rig.bot._ingest_task is not None and not rig.bot._ingest_task.done()
        rig.llm.script(Text("Still here."))
        rig.say("are you alive?")
        await rig.wait_text("Still here.")


async def test_a_poison_update_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with running_bot(tmp_path) as rig:
        with caplog.at_level(logging.WARNING, logger="agentgram"):
            poll = rig.tg.send_poll_missing_allows_revoting(ALLOWED_USER)
            rig.say("/help")
            await rig.wait_text("/stop")
        lines = [r.getMessage() for r in caplog.records if str(poll) in r.getMessage()]
        assert len(lines) == 1 and "dead letter" in lines[0]


async def test_polling_comes_back_fast_after_502s_bad_json_and_a_hang(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.fail_next("getUpdates", status=502, times=3)
        rig.tg.fail_next("getUpdates", invalid_json=True)
        rig.tg.fail_next("getUpdates", status=504, hang=30.0)  # past the watchdog and read timeout
        rig.llm.script(Text("Back."))
        hung = 5  # the 5th poll hangs; the watchdog (or the read timeout) gives up on it

        def polled_past_the_hang() -> bool:
            calls = rig.tg.calls("getUpdates")
            return len(calls) > hung and calls[hung - 1].status == 0 and calls[hung].status == 200

        await rig.tg.wait_for(polled_past_the_hang, timeout=30)
        faults_ended = time.monotonic()
        rig.say("hello?")
        await rig.wait_text("Back.", timeout=10)
        assert time.monotonic() - faults_ended < 10
        gaps = [b.time - a.time for a, b in itertools.pairwise(rig.tg.calls("getUpdates"))]
        assert gaps[0] < 1.5, "the first retry comes within a second"
        assert max(gaps[: hung - 1]) < 5.5, "backoff is capped at 5 s"


async def test_409_conflict_is_named_and_survived(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with running_bot(tmp_path) as rig:
        with caplog.at_level(logging.WARNING, logger="agentgram"):
            rig.tg.fail_next("getUpdates", status=409, times=2)
            rig.llm.script(Text("Here."))
            await rig.tg.wait_for(lambda: len(rig.tg.injected) == 2, timeout=10)
            rig.say("hi")
            await rig.wait_text("Here.")
        assert any("409 Conflict" in r.getMessage() and "another" in r.getMessage() for r in caplog.records)


async def test_a_token_revoked_at_run_time_ends_the_process_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeTelegram() as tg, FakeOpenAI() as llm:
        settings = make_settings(tmp_path, llm.base_url, tg.root)
        running = asyncio.create_task(_run(settings))
        await tg.wait_for(lambda: len(tg.calls("getUpdates")) >= 1, timeout=10)
        tg.revoke_token()
        code = await asyncio.wait_for(running, 15)
    assert code == EXIT_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "telegram.token" in err[0] and "401" in err[0]
