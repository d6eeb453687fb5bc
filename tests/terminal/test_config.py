"""``agentgram chat``'s config: Telegram optional (the terminal alone), ``run`` unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agentgram.bot.cli import main
from agentgram.bot.settings import BotSettings
from agentgram.bot.terminal.config import ChatSettings, chat_user, check_chat_config
from agentgram.runtime.infra.config import ConfigInvalid
from tests.conftest import ALLOWED_USER, config_mapping


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _raw(tmp_path: Path, **sections: Any) -> dict[str, Any]:
    return config_mapping(tmp_path, "http://127.0.0.1:9/v1", **sections)


def test_without_a_telegram_section_the_terminal_runs_alone_as_terminal_user_id(tmp_path: Path) -> None:
    raw = _raw(tmp_path, terminal={"user_id": 42})
    del raw["telegram"]
    settings = check_chat_config(_write(tmp_path, raw), {})
    assert isinstance(settings, ChatSettings) and settings.telegram is None
    assert chat_user(settings) == 42


def test_a_telegram_section_without_a_token_counts_as_absent_and_names_the_user(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    del raw["telegram"]["token"]
    settings = check_chat_config(_write(tmp_path, raw), {})
    assert isinstance(settings, ChatSettings) and settings.telegram is None
    assert chat_user(settings) == ALLOWED_USER


def test_with_a_token_the_chat_is_validated_as_run_validates_it(tmp_path: Path) -> None:
    settings = check_chat_config(_write(tmp_path, _raw(tmp_path, terminal={"user_id": 42})), {})
    assert isinstance(settings, BotSettings)
    assert chat_user(settings) == ALLOWED_USER  # the first allowed user, whatever terminal.user_id says


def test_alone_without_any_user_id_is_one_config_error(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    del raw["telegram"]
    with pytest.raises(ConfigInvalid) as raised:
        check_chat_config(_write(tmp_path, raw), {})
    assert str(raised.value).startswith(
        "config error: terminal.user_id: is required without a telegram.token"
    )


def test_run_still_requires_telegram_and_chat_exits_2_on_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _raw(tmp_path)
    del raw["telegram"]
    path = _write(tmp_path, raw)
    assert main(["run", "--config", str(path)]) == 2
    assert "config error: telegram: is required" in capsys.readouterr().err
    assert main(["chat", "--config", str(path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "config error: terminal.user_id: is required without a telegram.token"
        " (any number; your Telegram user id shares its history)"
    ]


def test_the_example_config_with_the_bot_token_variable_unset_runs_alone() -> None:
    example = Path(__file__).parents[2] / "config.example.yml"
    settings = check_chat_config(example, {"OPENAI_API_KEY": "sk-test"})  # no TELEGRAM_BOT_TOKEN
    assert isinstance(settings, ChatSettings) and settings.telegram is None
    assert chat_user(settings) == 123456789  # the example's first allowed user


def test_a_token_mixing_text_and_an_unset_variable_is_still_an_error(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    raw["telegram"]["token"] = "123:${TELEGRAM_BOT_SECRET}"
    with pytest.raises(ConfigInvalid) as raised:
        check_chat_config(_write(tmp_path, raw), {})
    assert "TELEGRAM_BOT_SECRET is not set" in str(raised.value)
