"""Config: one typed model, env expansion, env overrides, one clear error naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentgram.bot.settings import BotSettings
from agentgram.bot.settings import bot_settings_from_mapping as settings_from_mapping
from agentgram.bot.settings import load_bot_config as load_config
from agentgram.runtime.config_check import RUNTIME_CHECKS, validate_config
from agentgram.runtime.infra.config import ConfigInvalid, Settings, masked, parse_duration
from agentgram.runtime.infra.config import settings_from_mapping as core_settings_from_mapping
from agentgram.runtime.infra.errors import ConfigError

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


def test_the_core_settings_know_no_chat_platform() -> None:
    """The runtime's model holds only its own sections; the adapter's extends it, same file."""
    assert "telegram" not in Settings.model_fields
    core = core_settings_from_mapping({"llm": {"model": "m"}}, {})
    assert core.llm.model == "m" and not hasattr(core, "telegram")
    with pytest.raises(ConfigInvalid, match="telegram: is not a known key"):
        core_settings_from_mapping(BASE, {})
    adapter = settings_from_mapping(BASE, {})
    assert isinstance(adapter, Settings) and adapter.telegram.allowed_user_ids == [5]
    assert next(iter(BotSettings.model_fields)) == "telegram", "the file's first section stays first"


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
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(info.value) == (
        f"config error: {bad}:2:1: expected ',' or ']', but got '<stream end>'"
        " (while parsing a flow sequence at 1:11)"
    )


# --- every problem, one line each (issue 10) ------------------------------------------


def _lines(error: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return str(error.value).splitlines()


def _file(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_yaml_syntax_error_is_one_line_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    path.write_text("telegram:\n  token: x\n  a: b: c\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert _lines(info) == [f"config error: {path}:3:7: mapping values are not allowed here"]


def test_every_field_error_is_listed_with_its_dotted_key() -> None:
    raw = {
        "telegram": {"token": "1:x", "allowed_user_ids": [5, "me"]},
        "llm": {"base_url": "localhost:11434/v1"},
        "approval": {
            "rules": [{"tool": "x", "action": "allow"}, {"tool": "y", "action": "allow", "source": "crom"}]
        },
    }
    with pytest.raises(ConfigInvalid) as info:
        settings_from_mapping(raw, {})
    assert _lines(info) == [
        "config error: telegram.allowed_user_ids.1: Input should be a valid integer,"
        " unable to parse string as an integer",
        "config error: llm.base_url: 'localhost:11434/v1' is not an http:// or https:// URL",
        "config error: llm.model: is required",
        "config error: approval.rules.1.source: 'crom' is not one of 'telegram', 'tic' or 'cron'",
    ]


@pytest.mark.parametrize("url", ["https://", "ftp://example.org", "api.telegram.org"])
def test_base_urls_need_http_or_https_and_a_host(url: str) -> None:
    for key in ("llm", "telegram"):
        raw = {**BASE, key: {**BASE[key], ("base_url" if key == "llm" else "api_base_url"): url}}
        with pytest.raises(ConfigInvalid, match="is not an http:// or https:// URL"):
            settings_from_mapping(raw, {})


def test_an_override_that_breaks_a_key_names_the_variable() -> None:
    env = {"AGENTGRAM_LLM__BASE_URL": "ftp://x", "AGENTGRAM_TELEGRAM__ALLOWED_USER_IDS": "[1, two]"}
    with pytest.raises(ConfigInvalid) as info:
        settings_from_mapping(BASE, env)
    assert sorted(_lines(info)) == [
        "config error: llm.base_url: 'ftp://x' is not an http:// or https:// URL (set by AGENTGRAM_LLM__BASE_URL)",
        "config error: telegram.allowed_user_ids.1: Input should be a valid integer, unable to parse string"
        " as an integer (set by AGENTGRAM_TELEGRAM__ALLOWED_USER_IDS)",
    ]


def test_an_expanded_variable_that_breaks_a_key_is_named() -> None:
    raw = {**BASE, "approval": {"rules": [{"tool": "x", "action": "${ACTION}"}]}}
    with pytest.raises(ConfigInvalid) as info:
        settings_from_mapping(raw, {"ACTION": "maybe"})
    assert _lines(info) == [
        "config error: approval.rules.0.action: 'maybe' is not one of 'allow', 'require' or 'deny'"
        " (set by ${ACTION})"
    ]


def test_unset_variables_are_listed_with_the_other_errors_once_each() -> None:
    raw = {
        "telegram": {"token": "${TG}", "allowed_user_ids": ["${ME}"]},
        "llm": {"model": "m", "max_retries": -1},
    }
    with pytest.raises(ConfigInvalid) as info:
        settings_from_mapping(raw, {})
    assert _lines(info) == [
        "config error: telegram.token: environment variable TG is not set",
        "config error: telegram.allowed_user_ids.0: environment variable ME is not set",
        "config error: llm.max_retries: Input should be greater than or equal to 0",
    ]


def test_an_override_replaces_a_value_whose_variable_is_unset() -> None:
    raw = {**BASE, "llm": {"model": "m", "api_key": "${NOPE}"}}
    settings = settings_from_mapping(raw, {"AGENTGRAM_LLM__API_KEY": "sk-1"})
    assert settings.llm.api_key.get_secret_value() == "sk-1"


def test_home_is_expanded_in_paths() -> None:
    settings = settings_from_mapping({**BASE, "agent": {"system_prompt_file": "~/p.md"}}, {})
    assert settings.agent.system_prompt_file == Path("~/p.md").expanduser()


def test_semantic_checks_list_every_problem(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    raw = {
        **BASE,
        "storage": {"url": "sqlite:///./x.db"},
        "agent": {"workdir": str(not_a_dir), "system_prompt_file": str(tmp_path)},
        "locale": {"default": "de"},
        "tic": {"cron": "0 25 * * *"},
    }
    with pytest.raises(ConfigInvalid) as info:
        validate_config(_file(tmp_path, raw), RUNTIME_CHECKS, {}, model=BotSettings)
    assert [line.split(": ", 2)[1] for line in _lines(info)] == [  # the file's key order (issue 25)
        "storage.url",
        "agent.workdir",
        "agent.system_prompt_file",
        "locale.default",
        "tic.cron",
    ]
    assert f"agent.workdir: {not_a_dir} is not a directory" in str(info.value)
    assert f"agent.system_prompt_file: {tmp_path} is a directory, not a file" in str(info.value)


def test_semantic_checks_run_beside_the_type_errors_in_one_pass(tmp_path: Path) -> None:
    """Issue 25: the checks run on the values that are valid, in the same pass as the type errors
    (before, they waited for a config that parsed)."""
    raw = {**BASE, "llm": {"model": "m", "base_url": "nope"}, "locale": {"default": "de"}}
    with pytest.raises(ConfigInvalid) as info:
        validate_config(_file(tmp_path, raw), RUNTIME_CHECKS, {}, model=BotSettings)
    assert _lines(info)[0] == "config error: llm.base_url: 'nope' is not an http:// or https:// URL"
    assert [line.split(": ", 2)[1] for line in _lines(info)] == ["llm.base_url", "locale.default"]


def test_a_check_problem_on_an_overridden_key_names_the_variable(tmp_path: Path) -> None:
    env = {"AGENTGRAM_AGENT__WORKDIR": "/proc/nope"}
    with pytest.raises(ConfigInvalid) as info:
        validate_config(_file(tmp_path, BASE), RUNTIME_CHECKS, env, model=BotSettings)
    [line] = _lines(info)
    assert line.startswith("config error: agent.workdir: cannot create /proc/nope: ")
    assert line.endswith("(set by AGENTGRAM_AGENT__WORKDIR)")


def test_a_good_config_passes_every_check(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("be brief")
    raw = {
        **BASE,
        "storage": {"url": f"sqlite+aiosqlite:///{tmp_path / 'new' / 'db.sqlite'}"},
        "agent": {"workdir": str(tmp_path / "a" / "b"), "system_prompt_file": str(prompt)},
        "locale": {"default": "ru"},
        "tic": {"cron": "0 9-18 * * 1-5"},
    }
    settings = validate_config(_file(tmp_path, raw), RUNTIME_CHECKS, {}, model=BotSettings)
    assert settings.tic.cron == "0 9-18 * * 1-5"
    assert not (tmp_path / "a").exists() and not (tmp_path / "new").exists()  # checked, not created
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yml", "prompt.md"]  # no probe left
