"""Config: one typed model, env expansion, env overrides, one clear error naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config import load_config, masked, parse_duration, settings_from_mapping
from runtime.errors import ConfigError

BASE = {"telegram": {"token": "1:abc", "allowed_user_ids": [5]}, "llm": {"model": "m"}}


def test_defaults_fill_everything() -> None:
    settings = settings_from_mapping(BASE, {})
    assert settings.telegram.api_base_url == "https://api.telegram.org"
    assert settings.telegram.stream_edit_interval == 1.0
    assert settings.llm.max_tool_rounds == 20
    assert settings.storage.url == "sqlite+aiosqlite:///./data/agentgram.db"
    assert settings.agent.workdir == Path("./workspace")
    assert settings.locale.default == "en"
    assert settings.tic.interval == 1800.0


def test_env_vars_expand_inside_values() -> None:
    raw = {
        **BASE,
        "telegram": {"token": "${TG}", "allowed_user_ids": [5]},
        "llm": {"model": "m", "base_url": "http://${HOST}/v1"},
    }
    settings = settings_from_mapping(raw, {"TG": "9:zz", "HOST": "127.0.0.1:11434"})
    assert settings.telegram.token.get_secret_value() == "9:zz"
    assert settings.llm.base_url == "http://127.0.0.1:11434/v1"


def test_missing_env_var_names_the_key() -> None:
    raw = {**BASE, "llm": {"model": "m", "api_key": "${NOPE}"}}
    with pytest.raises(ConfigError, match=r"llm\.api_key: environment variable NOPE is not set"):
        settings_from_mapping(raw, {})


def test_env_overrides_section_keys() -> None:
    env = {
        "AGENTGRAM_LLM__MODEL": "other",
        "AGENTGRAM_LLM__FALLBACK_MODELS": "[a, b]",
        "AGENTGRAM_TIC__ENABLED": "false",
    }
    settings = settings_from_mapping(BASE, env)
    assert settings.llm.model == "other"
    assert settings.llm.fallback_models == ["a", "b"]
    assert settings.tic.enabled is False


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"llm": {"model": "m"}}, "telegram: is required"),
        ({**BASE, "telegram": {"token": "x", "allowed_user_ids": []}}, "telegram.allowed_user_ids"),
        ({**BASE, "llm": {"model": "m", "max_tool_rounds": "lots"}}, "llm.max_tool_rounds"),
        ({**BASE, "agent": {"timezone": "Mars/Olympus"}}, "agent.timezone: unknown IANA time zone"),
        ({**BASE, "quiet_hours": {"range": "late"}}, "quiet_hours.range"),
        (
            {**BASE, "telegram": {"token": "x", "allowed_user_ids": [1], "colour": "red"}},
            "telegram.colour: is not a known key",
        ),
        ({**BASE, "tic": {"interval": "soon"}}, "tic.interval"),
    ],
)
def test_invalid_values_name_the_key(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_mapping(raw, {})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_durations() -> None:
    assert parse_duration("30m") == 1800
    assert parse_duration("1.5h") == 5400
    assert parse_duration(45) == 45
    with pytest.raises(ValueError):
        parse_duration("-3s")


def test_masked_hides_secrets(tmp_path: Path) -> None:
    path = tmp_path / "c.yml"
    path.write_text(
        "telegram: {token: '1:supersecret', allowed_user_ids: [1]}\nllm: {model: m, api_key: sk-hidden}\n"
    )
    dumped = str(masked(load_config(path)))
    assert "supersecret" not in dumped and "sk-hidden" not in dumped


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("telegram: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
