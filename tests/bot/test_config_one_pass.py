"""Issue 25's configuration: every error in one pass, keys beside the config, and words that help.

Every test runs the one validation (:func:`bot.config_check.inspect`) through the command line,
as ``check-config`` / ``run`` / ``chat`` / ``doctor`` do.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentgram.bot.cli import main
from agentgram.bot.settings import bot_settings_from_mapping, load_bot_config
from tests.conftest import config_mapping

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "http://127.0.0.1:9/v1"
PLACEHOLDER = (
    "config error: telegram.allowed_user_ids: 123456789 is the example's placeholder;"
    " put your own Telegram user id (see README)"
)


def _write(path: Path, raw: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _check(
    capsys: pytest.CaptureFixture[str], config: Path, command: str = "check-config"
) -> tuple[int, list[str], str]:
    code = main([command, "--config", str(config)])
    out, err = capsys.readouterr()
    return code, err.splitlines(), out


def _minimal(**sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "telegram": {"token": "1:abc", "allowed_user_ids": [1001], "api_base_url": "http://127.0.0.1:9"},
        "llm": {"base_url": LOCAL, "api_key": "sk-x", "model": "m"},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return raw


# --- every error in one pass ---------------------------------------------------------------


def test_the_unchanged_example_without_its_variables_reports_everything_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, err, out = _check(capsys, ROOT / "config.example.yml")
    assert (code, out) == (2, "")
    assert err == [  # the placeholder too, not on the second try; in the file's order
        "config error: telegram.token: environment variable TELEGRAM_BOT_TOKEN is not set",
        PLACEHOLDER,
        "config error: llm.api_key: environment variable OPENAI_API_KEY is not set",
    ]
    assert list(tmp_path.iterdir()) == []


def test_type_errors_and_semantic_checks_come_together_in_the_files_key_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _minimal(
        telegram={"allowed_user_ids": [123456789]},
        llm={"max_tool_rounds": "lots"},
        agent={"workdir": "/proc/nope"},
        locale={"default": "de"},
        tic={"interval": "soon"},
    )
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert code == 2
    assert [line.split(": ", 2)[1] for line in err] == [
        "telegram.allowed_user_ids",
        "llm.max_tool_rounds",
        "agent.workdir",
        "locale.default",
        "tic.interval",
    ]


# --- an API key for a local endpoint ---------------------------------------------------------


def test_an_unset_api_key_is_accepted_for_a_local_endpoint_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = _write(tmp_path / "config.yml", _minimal(llm={"api_key": "${OPENAI_API_KEY}"}))
    code, err, out = _check(capsys, config)
    assert (code, err) == (
        0,
        [
            "config warning: llm.api_key: environment variable OPENAI_API_KEY is not set:"
            f" no API key is sent to {LOCAL}"
        ],
    )
    assert json.loads(out)["llm"]["api_key"] == ""
    assert load_bot_config(config, {}).llm.api_key.get_secret_value() == ""


def test_an_empty_api_key_is_accepted_for_a_local_endpoint_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", _minimal(llm={"api_key": ""})))
    assert (code, err) == (0, [f"config warning: llm.api_key: is empty: no API key is sent to {LOCAL}"])


def test_an_unset_api_key_is_refused_for_api_openai_com(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raw = _minimal(llm={"base_url": "https://api.openai.com/v1", "api_key": "${OPENAI_API_KEY}"})
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert (code, err) == (2, ["config error: llm.api_key: environment variable OPENAI_API_KEY is not set"])


# --- words that help -------------------------------------------------------------------------


def test_a_typod_key_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _minimal()
    raw["llm"]["modle"] = raw["llm"].pop("model")
    raw["telegramm"] = {}
    raw["telegram"]["pol_timeout"] = 5  # a knob that moved: the suggestion names its place now
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert code == 2
    assert err == [
        "config error: telegram.pol_timeout: is not a known key; did you mean advanced.telegram.poll_timeout?",
        "config error: llm.model: is required",
        "config error: llm.modle: is not a known key; did you mean llm.model?",
        "config error: telegramm: is not a known key; did you mean telegram?",
    ]


def test_an_unknown_advanced_key_gets_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _minimal(advanced={"telegram": {"poll_timeut": 5}, "tools": {"attach_seconds": 5}})
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert code == 2
    assert err == [
        "config error: advanced.telegram.poll_timeut: is not a known key;"
        " did you mean advanced.telegram.poll_timeout?",
        "config error: advanced.tools.attach_seconds: is not a tuning knob: write it as tools.attach_seconds",
    ]


def test_a_username_where_a_user_id_belongs_gets_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _minimal(telegram={"allowed_user_ids": ["@ann", "annabelle"]})
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert code == 2
    hint = "is a username; a user id is a number, not a @username: the bot tells a stranger their id"
    assert err == [
        f"config error: telegram.allowed_user_ids.0: '@ann' {hint}",
        f"config error: telegram.allowed_user_ids.1: 'annabelle' {hint}",
    ]


def test_a_user_id_written_as_a_string_is_read_as_the_number() -> None:
    """Decided (bot.settings.UserId): ``"123"`` is the id 123, as pydantic reads any quoted integer."""
    settings = bot_settings_from_mapping(_minimal(telegram={"allowed_user_ids": ["4242", 7]}), {})
    assert settings.telegram.allowed_user_ids == [4242, 7]


# --- relative paths ------------------------------------------------------------------------


def test_relative_paths_resolve_beside_the_config_from_another_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "x"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "system.md").write_text("be brief")
    raw = _minimal(agent={"workdir": "./workspace", "system_prompt_file": "prompts/system.md"})
    config = _write(folder / "config.yml", raw)  # storage.url: the default, ./data/agentgram.db
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, err, out = _check(capsys, config)
    assert (code, err) == (0, [])
    shown = json.loads(out)
    assert shown["agent"]["workdir"] == str(folder / "workspace")
    assert shown["agent"]["system_prompt_file"] == str(folder / "prompts" / "system.md")
    assert shown["storage"]["url"] == f"sqlite+aiosqlite:///{folder / 'data' / 'agentgram.db'}"
    assert list(elsewhere.iterdir()) == [] and not (folder / "data").exists()


def _agentgram_database(path: Path, tables: tuple[str, ...] = ("sessions", "session_mail")) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        for table in tables:
            db.execute(f"CREATE TABLE {table} (id INTEGER)")
    db.close()


def test_a_new_database_beside_other_agentgram_databases_is_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _agentgram_database(tmp_path / "old" / "agentgram.db")
    _agentgram_database(tmp_path / "notes.db", ("notes",))  # somebody else's database: not named
    config = _write(tmp_path / "config.yml", _minimal(agent={"workdir": "ws"}))
    code, err, _ = _check(capsys, config)
    assert code == 0
    assert err == [
        f"config warning: storage.url: {tmp_path / 'data' / 'agentgram.db'} does not exist yet (it will be"
        f" created), but {tmp_path} holds agentgram databases: old/agentgram.db;"
        " point storage.url at one to keep its history"
    ]


def test_an_existing_database_is_no_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _agentgram_database(tmp_path / "old" / "agentgram.db")
    raw = _minimal(storage={"url": "sqlite+aiosqlite:///old/agentgram.db"}, agent={"workdir": "ws"})
    code, err, out = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert (code, err) == (0, [])
    assert json.loads(out)["storage"]["url"] == f"sqlite+aiosqlite:///{tmp_path / 'old' / 'agentgram.db'}"


# --- advanced: ---------------------------------------------------------------------------------


def test_knobs_at_their_old_place_still_work_with_one_warning_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _minimal(telegram={"poll_timeout": 5}, llm={"max_retries": 0}, scheduler={"misfire_grace": "2h"})
    config = _write(tmp_path / "config.yml", raw)
    code, err, out = _check(capsys, config)
    assert code == 0
    assert err == [
        "config warning: telegram.poll_timeout: moved to advanced.telegram.poll_timeout; it still works here",
        "config warning: llm.max_retries: moved to advanced.llm.max_retries; it still works here",
        "config warning: scheduler.misfire_grace: moved to advanced.scheduler.misfire_grace; it still works here",
    ]
    settings = load_bot_config(config, {})
    assert (settings.telegram.poll_timeout, settings.llm.max_retries, settings.scheduler.misfire_grace) == (
        5,
        0,
        7200.0,
    )
    assert json.loads(out)["advanced"]["telegram"]["poll_timeout"] == 5  # shown where it belongs now


def test_knobs_under_advanced_are_read_into_their_sections_and_errors_name_where_they_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _minimal(advanced={"telegram": {"poll_timeout": 7}, "mailbox": {"max_unread": 3}})
    config = _write(tmp_path / "config.yml", raw)
    assert _check(capsys, config)[:2] == (0, [])
    settings = load_bot_config(config, {})
    assert (settings.telegram.poll_timeout, settings.mailbox.max_unread) == (7, 3)
    raw["advanced"]["telegram"]["poll_timeout"] = 99
    code, err, _ = _check(capsys, _write(tmp_path / "config.yml", raw))
    assert (code, err) == (
        2,
        ["config error: advanced.telegram.poll_timeout: Input should be less than or equal to 50"],
    )


def test_the_test_configs_use_the_current_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """conftest's config_mapping writes tuning knobs under advanced:, so ``run`` warns about nothing."""
    raw = config_mapping(tmp_path, LOCAL, telegram={"stream_first_delay": 5})
    assert raw["advanced"]["telegram"]["stream_first_delay"] == 5 and "poll_timeout" not in raw["telegram"]
    assert _check(capsys, _write(tmp_path / "config.yml", raw))[:2] == (0, [])
