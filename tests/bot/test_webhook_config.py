"""``telegram.mode: webhook`` and ``telegram.webhook.*``: a missing or wrong key is one config line
naming it and exit 2, for ``check-config`` and ``run`` alike, before anything connects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_cli import _config, _main, connections
from tests.bot.test_doctor import llm, results, tg, write_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

__all__ = ["connections", "llm", "tg"]  # the fixtures, used by name

SECRET = "a" * 32
HOOK = {"public_url": "https://bot.example.org", "secret_token": SECRET}
PUBLIC_API = "https://api.telegram.org"


def _webhook(tmp_path: Path, hook: dict[str, Any], **telegram: Any) -> Path:
    return _config(tmp_path, telegram={"mode": "webhook", "webhook": hook, **telegram})


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize(
    ("hook", "telegram", "line"),
    [
        (
            {"secret_token": SECRET},
            {},
            "telegram.webhook.public_url: is required when telegram.mode is webhook",
        ),
        ({"public_url": "https://bot.example.org"}, {}, "telegram.webhook.secret_token: is required"),
        (
            {**HOOK, "public_url": "http://bot.example.org"},
            {"api_base_url": PUBLIC_API},
            "telegram.webhook.public_url: must be https://",
        ),
        ({**HOOK, "secret_token": "short"}, {}, "telegram.webhook.secret_token: use 32-256 characters"),
        (
            {**HOOK, "secret_token": "b" * 31 + "!"},
            {},
            "telegram.webhook.secret_token: use 32-256 characters",
        ),
        ({**HOOK, "secret_token": "c" * 257}, {}, "telegram.webhook.secret_token: use 32-256 characters"),
        ({**HOOK, "max_connections": 0}, {}, "telegram.webhook.max_connections:"),
        ({**HOOK, "max_connections": 101}, {}, "telegram.webhook.max_connections:"),
        ({**HOOK, "listen": "8443"}, {}, "telegram.webhook.listen:"),
        ({**HOOK, "path": "telegram"}, {}, "telegram.webhook.path:"),
    ],
)
def test_a_webhook_without_a_required_key_or_with_a_bad_one_is_one_line_and_exit_2(
    hook: dict[str, Any],
    telegram: dict[str, Any],
    line: str,
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    connections: list[object],
) -> None:
    code, err, out = _main(capsys, command, "--config", str(_webhook(tmp_path, hook, **telegram)))
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(f"config error: {line}"), err
    secret = str(hook.get("secret_token"))
    assert secret not in err[0], "the secret is never echoed"
    assert connections == []


def test_a_mode_that_is_neither_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _ = _main(
        capsys, "check-config", "--config", str(_config(tmp_path, telegram={"mode": "push"}))
    )
    assert code == 2 and len(err) == 1 and err[0].startswith("config error: telegram.mode:"), err


def test_a_complete_webhook_passes_and_its_secret_is_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    code, err, out = _main(capsys, "check-config", "--config", str(_webhook(tmp_path, HOOK)))
    assert (code, err) == (0, [])
    shown = json.loads(out)["telegram"]
    assert shown["mode"] == "webhook" and shown["webhook"]["max_connections"] == 40
    assert SECRET not in out
    assert connections == []


def test_plain_http_is_allowed_with_a_local_bot_api_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = {**HOOK, "public_url": "http://10.0.0.5:8443"}  # the tests' api_base_url is a local server
    assert _main(capsys, "check-config", "--config", str(_webhook(tmp_path, hook)))[:2] == (0, [])


def test_polling_is_the_default_and_needs_no_webhook_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, out = _main(capsys, "check-config", "--config", str(_config(tmp_path)))
    assert (code, err) == (0, []) and json.loads(out)["telegram"]["mode"] == "polling"


@pytest.mark.parametrize(
    ("set_url", "status"), [("", "✓"), ("http://10.0.0.5:8443/telegram/webhook", "✓"), ("https://x/y", "✗")]
)
async def test_doctor_in_webhook_mode_accepts_only_its_own_webhook(
    set_url: str, status: str, tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    tg.webhook_url = set_url
    hook = {**HOOK, "public_url": "http://10.0.0.5:8443"}
    found = await results(
        write_config(tmp_path, llm.base_url, tg.root, telegram={"mode": "webhook", "webhook": hook})
    )
    assert found["webhook"].line.startswith(f"{status} webhook:"), found["webhook"].line
