"""Lint and type-check as part of the test command, so CI enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from pydantic import BaseModel

from agentgram.bot.settings import bot_settings_from_mapping

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_example_config_is_valid_and_complete() -> None:
    raw = yaml.safe_load((ROOT / "config.example.yml").read_text())
    env = {"TELEGRAM_BOT_TOKEN": "1:x", "OPENAI_API_KEY": "k"}
    settings = bot_settings_from_mapping(raw, env)
    for section, model in settings:
        if isinstance(model, BaseModel):
            written = {*(raw.get(section) or {}), *(raw["advanced"].get(section) or {})}  # tuning knobs there
            missing = set(type(model).model_fields) - written
            assert not missing, f"config.example.yml lacks {section}.{sorted(missing)}"
