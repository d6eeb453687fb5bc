"""The command line: check-config, clear config errors with exit 2, a rejected token exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def _agentgram(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTB_TIMEDELTA": "1"}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_check_config_prints_effective_config_with_secrets_masked(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.yml",
        {
            "telegram": {"token": "1:topsecret", "allowed_user_ids": [7]},
            "llm": {"model": "m", "api_key": "sk-zzz"},
        },
    )
    result = _agentgram("check-config", "--config", str(config))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["telegram"]["allowed_user_ids"] == [7]
    assert "topsecret" not in result.stdout and "sk-zzz" not in result.stdout


def test_invalid_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.yml", {"telegram": {"token": "1:x", "allowed_user_ids": "me"}, "llm": {"model": "m"}}
    )
    result = _agentgram("run", "--config", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "telegram.allowed_user_ids" in lines[0]
    assert "Traceback" not in result.stderr


async def test_rejected_token_exits_2_with_one_line(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(models=("m",)) as llm:
        config = _write(
            tmp_path / "c.yml",
            {
                "telegram": {"token": "999:wrong-token", "api_base_url": tg.root, "allowed_user_ids": [1]},
                "llm": {"model": "m", "base_url": llm.base_url},
                "storage": {"url": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"},
                "agent": {"workdir": str(tmp_path / "ws")},
                "tic": {"enabled": False},
            },
        )
        proc = await _spawn("run", "--config", str(config))
        _, stderr = await proc.communicate()
    assert proc.returncode == 2, stderr.decode()
    assert "telegram.token" in stderr.decode()
    assert "wrong-token" not in stderr.decode()


async def _spawn(*args: str):  # type: ignore[no-untyped-def]
    import asyncio

    env = {**os.environ, "PTB_TIMEDELTA": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
