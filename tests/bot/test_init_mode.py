"""The config ``agentgram init`` writes holds the bot token and the API key: ``0600`` even under the
usual umask ``022``, while the files the agent writes follow the umask (issue 25)."""

from __future__ import annotations

import argparse
import io
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentgram.bot import init
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

TOKEN = "123456:TEST-token"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as server:
        yield server


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main-model",)) as server:
        yield server


async def test_the_config_init_writes_is_0600_under_umask_022(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    parser = argparse.ArgumentParser()
    init.add_parser(parser.add_subparsers())
    config = tmp_path / "config.yml"
    args = parser.parse_args(
        [
            "init", "--non-interactive", "--output", str(config), "--token", TOKEN, "--user-id", "4242",
            "--model", "main-model", "--llm-base-url", llm.base_url, "--llm-api-key", "sk-secret",
            "--workdir", str(tmp_path / "ws"), "--telegram-api-base-url", tg.root,
        ]
    )  # fmt: skip
    before = os.umask(0o022)
    try:
        out = io.StringIO()
        code = await init.run_init(args, io.StringIO(""), out, detect_wait=2.0)
    finally:
        os.umask(before)
    assert code == 0, out.getvalue()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
