"""A token that is not shaped like @BotFather's is a config error, one line and exit 2, whichever
driver would speak the Bot API (aiogram refused it with a traceback when its ``Bot`` was made)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bot.test_cli import _config, _main, connections
from tests.conftest import config_mapping

__all__ = ["connections"]  # the fixture, used by name

TEST_TOKEN = config_mapping(Path(), "http://127.0.0.1:9")["telegram"]["token"]
"""The token every test bot runs with."""
NOT_A_TOKEN = "config error: telegram.token: is not a bot token"


@pytest.mark.parametrize("library", ["ptb", "aiogram"])
@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize("token", ["not-a-token", "98765", "abc:def", "123:has space", "123:ü"])
def test_a_malformed_token_is_one_line_and_exit_2(
    token: str,
    command: str,
    library: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    connections: list[object],
) -> None:
    config = _config(tmp_path, telegram={"token": token, "library": library})
    code, err, out = _main(capsys, command, "--config", str(config))
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(NOT_A_TOKEN), err
    assert token not in err[0]
    assert connections == []


@pytest.mark.parametrize("token", ["1:abc", "123456789:AAE-x_Y", TEST_TOKEN])
def test_tokens_shaped_like_botfathers_pass(
    token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    config = _config(tmp_path, telegram={"token": token})
    code, err, _ = _main(capsys, "check-config", "--config", str(config))
    assert (code, err) == (0, [])


def test_a_token_from_the_environment_is_checked_once_expanded(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    connections: list[object],
) -> None:
    config = _config(tmp_path, telegram={"token": "${BOT_TOKEN}"})
    monkeypatch.setenv("BOT_TOKEN", "42:from-env")
    assert _main(capsys, "check-config", "--config", str(config))[:2] == (0, [])
    monkeypatch.setenv("BOT_TOKEN", "from-env")
    code, err, _ = _main(capsys, "check-config", "--config", str(config))
    assert code == 2 and len(err) == 1 and err[0].startswith(NOT_A_TOKEN)
