"""Start-up waits out Telegram trouble step by step; only a refusal no retry changes ends it.

In-process, with a fast retry policy; the real policy, signals and the instance lock are tested on
the real process in tests/e2e/test_startup.py.
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path

import pytest

from agentgram.bot.cli import main
from agentgram.bot.telegram.app import START_RETRY, compose
from agentgram.bot.telegram.core.port import BadRequest
from agentgram.bot.telegram.core.sender import Retry
from tests.conftest import ALLOWED_USER, DRIVERS, make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram

FAST = Retry(attempts=None, first_delay=0.01, max_delay=0.05)


@pytest.mark.parametrize("telegram_library", DRIVERS)
async def test_each_start_step_that_talks_to_telegram_retries_then_the_bot_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, telegram_library: str
) -> None:
    caplog.set_level(logging.INFO, logger="agentgram")
    async with FakeTelegram() as tg, FakeOpenAI(models=("main-model",)) as llm:
        tg.fail_next("getMe", status=502, times=2)
        tg.fail_next("deleteWebhook", status=500)
        tg.fail_next("setMyCommands", status=504)
        tg.fail_next("setMyCommands", invalid_json=True)  # a proxy's HTML page: not even a NetworkError
        settings = make_settings(tmp_path, llm.base_url, tg.root, telegram={"library": telegram_library})
        bot = compose(settings, start_retry=FAST)
        await bot.start()
        try:
            assert [(f.method, f.status) for f in tg.injected] == [
                ("getme", 502), ("getme", 502), ("deletewebhook", 500),
                ("setmycommands", 504), ("setmycommands", 200),
            ]  # fmt: skip
            assert tg.my_commands()  # the menu got through in the end
            llm.script(Text("hello"))
            tg.send_text(ALLOWED_USER, "hi")
            await tg.wait_for(lambda: any(m.visible_text == "hello" for m in tg.messages(ALLOWED_USER)))
        finally:
            await bot.stop()
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert [line.split(" failed")[0] for line in retries] == [
        "start-up: getMe", "start-up: getMe", "start-up: deleteWebhook",
        "start-up: setMyCommands", "start-up: setMyCommands",
    ]  # fmt: skip
    assert all(
        r.levelno == logging.WARNING and r.exc_info is None for r in caplog.records if "retry" in r.msg
    )


@pytest.mark.parametrize("telegram_library", DRIVERS)
async def test_a_bad_request_at_start_is_not_retried(tmp_path: Path, telegram_library: str) -> None:
    """A 400 is a refusal, not a transient failure (python-telegram-bot's ``BadRequest`` is a
    ``NetworkError`` subclass: the driver's mapping must not make it one)."""
    async with FakeTelegram() as tg, FakeOpenAI(models=("main-model",)) as llm:
        tg.fail_next("deleteWebhook", status=400, description="Bad Request: something", times=5)
        settings = make_settings(tmp_path, llm.base_url, tg.root, telegram={"library": telegram_library})
        bot = compose(settings, start_retry=FAST)
        try:
            with pytest.raises(BadRequest):
                await bot.start()
        finally:
            await bot.stop()
        assert len(tg.calls("deleteWebhook")) == 1


def test_the_start_up_backoff_retries_within_2s_and_never_waits_over_a_minute() -> None:
    delays = [START_RETRY.delay(attempt) for attempt in range(1, 40) for _ in range(20)]
    assert START_RETRY.attempts is None  # until Telegram answers
    assert max(START_RETRY.delay(1) for _ in range(200)) <= 2.0
    assert max(delays) <= 60.0 and max(delays) >= 45.0  # capped, and it does get there


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0  # answered before the parser (tests/test_lazy_imports.py)
    assert capsys.readouterr().out == f"agentgram {version('agentgram')}\n"
