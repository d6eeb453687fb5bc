"""``agentgram init`` against the fakes: from flags, from answers on stdin, and what it refuses."""

from __future__ import annotations

import argparse
import io
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from agentgram.bot import init
from agentgram.bot.cli import main
from agentgram.bot.config_check import check_config
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

TOKEN = "123456:TEST-token"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as server:
        yield server


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main-model", "backup-model")) as server:
        yield server


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    init.add_parser(parser.add_subparsers())
    return parser.parse_args(["init", *argv])


def flags(tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI, *extra: str) -> list[str]:
    return [
        "--non-interactive", "--output", str(tmp_path / "config.yml"), "--token", TOKEN, "--user-id", "4242",
        "--model", "main-model", "--llm-base-url", llm.base_url, "--llm-api-key", "sk-secret",
        "--workdir", str(tmp_path / "ws"), "--telegram-api-base-url", tg.root, *extra,
    ]  # fmt: skip


def leftovers(folder: Path) -> list[str]:
    """Temporary files init left behind (it checks the config in one before moving it into place)."""
    return [p.name for p in folder.iterdir() if p.name.startswith(".agentgram-init")]


async def run(args: argparse.Namespace, answers: str = "") -> tuple[int, str]:
    out = io.StringIO()
    code = await init.run_init(args, io.StringIO(answers), out, detect_wait=2.0)
    return code, out.getvalue()


async def test_flags_write_a_private_config_that_passes_check_config(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    code, out = await run(parse(*flags(tmp_path, tg, llm)))
    assert code == 0, out
    path = tmp_path / "config.yml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    settings = check_config(path, {})
    assert settings.telegram.token.get_secret_value() == TOKEN  # written as it is: see bot/init.py
    assert settings.telegram.allowed_user_ids == [4242]
    assert settings.telegram.api_base_url == tg.root
    assert (settings.llm.base_url, settings.llm.model) == (llm.base_url, "main-model")
    assert settings.llm.api_key.get_secret_value() == "sk-secret"
    assert f"agentgram doctor --config {path}" in out
    assert leftovers(tmp_path) == []


async def test_an_existing_file_is_kept_unless_forced(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yml"
    path.write_text("# mine\n")
    code, _ = await run(parse(*flags(tmp_path, tg, llm)))
    assert code == 2
    assert path.read_text() == "# mine\n"
    assert "exists; pass --force" in capsys.readouterr().err
    code, _ = await run(parse(*flags(tmp_path, tg, llm, "--force")))
    assert code == 0
    assert check_config(path, {}).telegram.allowed_user_ids == [4242]


async def test_non_interactive_names_the_missing_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = await run(parse("--yes", "--output", str(tmp_path / "c.yml"), "--token", TOKEN))
    assert code == 2
    assert "--user-id, --model required with --non-interactive" in capsys.readouterr().err
    assert not (tmp_path / "c.yml").exists()


async def test_a_rejected_token_writes_nothing(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = flags(tmp_path, tg, llm)
    argv[argv.index(TOKEN)] = "999:wrong-token"
    code, _ = await run(parse(*argv))
    assert code == 2
    err = capsys.readouterr().err
    assert "Telegram rejected the bot token (401 Unauthorized)" in err and "wrong-token" not in err
    assert not (tmp_path / "config.yml").exists()


async def test_a_model_the_endpoint_does_not_list_writes_nothing(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = flags(tmp_path, tg, llm)
    argv[argv.index("main-model")] = "gpt-nonexistent"
    code, _ = await run(parse(*argv))
    assert code == 2
    assert "gpt-nonexistent is not among the 2 models" in capsys.readouterr().err
    assert not (tmp_path / "config.yml").exists()


async def test_questions_check_each_answer_and_read_the_user_id_from_a_message(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    update_id = tg.send_text(4242, "hi, it's me", first_name="Ann")  # the user writes to the bot
    answers = "\n".join(
        [
            "999:wrong-token", "n",  # refused by Telegram, not kept: asked again
            TOKEN,
            llm.base_url, "sk-secret",
            "gpt-nonexistent",  # not listed: asked again
            "",  # the default: the first listed model
            "",  # no user id: read from the message
            "y",  # that is me
            str(tmp_path / "ws"),
        ]
    ) + "\n"  # fmt: skip
    code, out = await run(
        parse("--output", str(tmp_path / "config.yml"), "--telegram-api-base-url", tg.root), answers
    )
    assert code == 0, out
    assert "✗ Telegram rejected the bot token (401 Unauthorized)" in out
    assert "✓ the token works: @agentgram_test_bot" in out
    assert "✓ the endpoint answers and lists 2 models" in out
    assert "✗ gpt-nonexistent is not among the 2 models" in out
    assert "Model [main-model]: " in out
    assert "Send @agentgram_test_bot any message now" in out
    assert "✓ a message from Ann: user id 4242. Is that you?" in out
    settings = check_config(tmp_path / "config.yml", {})
    assert settings.telegram.allowed_user_ids == [4242]
    assert settings.llm.model == "main-model"
    assert settings.agent.workdir == tmp_path / "ws"
    assert tg.confirmed_offset > update_id  # `run` will not answer the message that told the id


async def test_a_typed_user_id_must_be_a_number(tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI) -> None:
    answers = "\n".join(["@ann", "123456789", "777", ""]) + "\n"
    args = parse(
        "--output", str(tmp_path / "config.yml"), "--telegram-api-base-url", tg.root, "--token", TOKEN,
        "--llm-base-url", llm.base_url, "--llm-api-key", "", "--model", "main-model",
    )  # fmt: skip
    code, out = await run(args, answers)
    assert code == 0, out
    assert out.count("✗ that is not a user id") == 2  # a @username, and the example's placeholder
    assert check_config(tmp_path / "config.yml", {}).telegram.allowed_user_ids == [777]


async def test_input_ending_early_writes_nothing(
    tmp_path: Path, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = await run(
        parse("--output", str(tmp_path / "config.yml"), "--telegram-api-base-url", tg.root), TOKEN + "\n"
    )
    assert code == 1
    assert "the input ended; nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "config.yml").exists()


def test_the_cli_runs_init_offline_with_no_check(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    argv = ["init", "-y", "--no-check", "-o", str(path), "--token", "1:abc", "--user-id", "7", "--model", "m"]
    assert main(argv) == 0
    raw = yaml.safe_load(path.read_text())
    assert raw["telegram"] == {"token": "1:abc", "allowed_user_ids": [7]}
    assert raw["llm"] == {"base_url": "https://api.openai.com/v1", "api_key": "", "model": "m"}
    assert path.read_text().startswith("# Written by `agentgram init`.")
