"""``agentgram doctor`` against the fakes: all green once, then each failure on its own line with a fix."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from agentgram.bot.cli import main
from agentgram.bot.doctor import Result, Status, diagnose, report
from agentgram.runtime.infra.storage.migrations import SCHEMA_VERSION
from tests.conftest import config_mapping
from tests.fakes.openai_server import Error, FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram


class DownOpenAI(FakeOpenAI):
    """An endpoint that answers every request with 500, /models included."""

    def application(self) -> web.Application:
        async def down(request: web.Request) -> web.Response:
            return web.json_response(
                {"error": {"message": "upstream is down", "type": "server_error"}}, status=500
            )

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", down)
        return app


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main-model", "backup-model")) as server:
        server.script(Text("ok"))
        yield server


def write_config(tmp_path: Path, llm_url: str, tg_root: str, **sections: Any) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config_mapping(tmp_path, llm_url, tg_root, **sections)))
    return path


async def results(path: Path) -> dict[str, Result]:
    return {result.name: result async for result in diagnose(path, {})}


def failures(found: dict[str, Result]) -> list[str]:
    return [name for name, result in found.items() if result.status == Status.FAIL]


async def test_a_healthy_setup_passes_every_check_and_exits_0(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, llm.base_url, tg.root)
    assert await report(path) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"✓ config: {path} is valid",
        "✓ telegram: the token works: @agentgram_test_bot (id 123456)",
        "✓ webhook: none set (agentgram polls for updates)",
        f"✓ llm models: {llm.base_url} lists main-model",
        "✓ llm completion: main-model streamed an answer with a tool defined",
        f"– transcription: uses the LLM endpoint ({llm.base_url}) with whisper-1; not tried (it needs audio)",
        f"✓ database: sqlite+aiosqlite:///{tmp_path / 'agentgram.db'} opens, schema version {SCHEMA_VERSION} (created)",
        f"✓ workdir: {tmp_path / 'workspace'} is writable (created on start)",
        "all checks passed",
    ]
    request = llm.requests[0]
    assert request["stream"] is True
    assert [tool["function"]["name"] for tool in request["tools"]] == ["agentgram_ping"]
    assert (tmp_path / "agentgram.db").exists()


async def test_a_rejected_token_fails_and_skips_the_webhook_check(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, llm.base_url, tg.root, telegram={"token": "999:wrong-token"})
    assert await report(path) == 1
    out = capsys.readouterr().out
    assert (
        "✗ telegram: Telegram rejected the bot token (401 Unauthorized) — fix: copy the token again from @BotFather"
        in out
    )
    assert "– webhook: not checked without a working token" in out
    assert "wrong-token" not in out
    assert out.splitlines()[-1] == "some checks failed"


async def test_a_webhook_set_fails_with_the_fix(tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI) -> None:
    tg.webhook_url = "https://example.com/hook"
    found = await results(write_config(tmp_path, llm.base_url, tg.root))
    assert failures(found) == ["webhook"]
    assert found["webhook"].line == (
        "✗ webhook: a webhook is set (https://example.com/hook): polling cannot get updates"
        " — fix: make sure no other program serves this bot; agentgram deletes the webhook when it starts"
    )


async def test_an_llm_endpoint_answering_500_fails_both_llm_checks(tmp_path: Path, tg: FakeTelegram) -> None:
    async with DownOpenAI() as down:
        found = await results(write_config(tmp_path, down.base_url, tg.root))
    assert failures(found) == ["llm models", "llm completion"]
    assert found["llm models"].detail == f"{down.base_url}/models answered HTTP 500"
    assert "HTTP 500" in found["llm completion"].detail
    assert "sk-test-secret" not in found["llm completion"].line


async def test_a_model_the_endpoint_does_not_list_fails(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    found = await results(write_config(tmp_path, llm.base_url, tg.root, llm={"model": "gpt-nonexistent"}))
    assert "llm models" in failures(found)
    assert found["llm models"].line == (
        "✗ llm models: gpt-nonexistent is not among the 2 models the endpoint lists (main-model, backup-model)"
        " — fix: set llm.model to one of them"
    )


async def test_a_failing_completion_fails_with_the_endpoints_words(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.fail_next(Error(400, "tools are not supported by this model"))
    found = await results(write_config(tmp_path, llm.base_url, tg.root))
    assert failures(found) == ["llm completion"]
    assert found["llm completion"].detail == "main-model: HTTP 400: tools are not supported by this model"
    assert "function calling" in (found["llm completion"].fix or "")


async def test_a_database_folder_that_cannot_be_made_fails_on_the_database_line(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = f"sqlite+aiosqlite:///{tmp_path / 'a-file' / 'agentgram.db'}"
    found = await results(write_config(tmp_path, llm.base_url, tg.root, storage={"url": url}))
    assert failures(found) == ["database"]  # not on the config line as well
    assert found["config"].status == Status.PASS
    assert "is not a directory" in found["database"].detail


async def test_a_database_file_that_is_not_one_fails(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    (tmp_path / "agentgram.db").write_bytes(b"this is no SQLite database, just bytes " * 100)
    found = await results(write_config(tmp_path, llm.base_url, tg.root))
    assert failures(found) == ["database"]
    assert "not a database" in found["database"].detail


async def test_an_unwritable_workdir_fails_on_the_workdir_line(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    workdir = tmp_path / "a-file" / "workspace"
    found = await results(write_config(tmp_path, llm.base_url, tg.root, agent={"workdir": str(workdir)}))
    assert failures(found) == ["workdir"]
    assert found["workdir"].line == (
        f"✗ workdir: {tmp_path / 'a-file'} is not a directory — fix: set agent.workdir to a folder this user can write"
    )


def test_a_config_that_does_not_parse_stops_after_the_config_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yml"
    path.write_text(
        yaml.safe_dump({"telegram": {"token": "1:x", "allowed_user_ids": "me"}, "llm": {"model": "m"}})
    )
    assert main(["doctor", "--config", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("✗ config: telegram.allowed_user_ids: ")
    assert lines[1:] == ["some checks failed"]


async def test_a_refused_api_key_says_so_as_the_chat_does(tmp_path: Path, tg: FakeTelegram) -> None:
    """Issue 25: a 401 names llm.api_key (as the chat's "refused the API key (HTTP 401) — check
    llm.api_key"), not llm.model and function calling."""
    async with FakeOpenAI(models=("main-model",), api_key="the-right-key") as guarded:
        found = await results(write_config(tmp_path, guarded.base_url, tg.root))
    assert failures(found) == ["llm models", "llm completion"]
    for name in ("llm models", "llm completion"):
        assert found[name].line == (
            f"✗ {name}: {guarded.base_url} refused the API key (HTTP 401) — check llm.api_key"
        ), found[name].line
        assert "llm.model" not in found[name].line and "sk-test-secret" not in found[name].line


async def test_transcription_says_which_endpoint_it_uses(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    """Issue 25: never "not configured" — by default it uses the LLM endpoint."""
    own = {"base_url": "http://127.0.0.1:9/v1", "model": "whisper-large"}
    found = await results(write_config(tmp_path, llm.base_url, tg.root, transcription=own))
    assert found["transcription"].line == (
        "– transcription: uses http://127.0.0.1:9/v1 with whisper-large; not tried (it needs audio)"
    )
    off = await results(write_config(tmp_path, llm.base_url, tg.root, transcription={"enabled": False}))
    assert off["transcription"].line == "– transcription: off (transcription.enabled is false)"


async def test_config_warnings_are_shown_and_fail_nothing(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    path = write_config(tmp_path, llm.base_url, tg.root)
    raw = yaml.safe_load(path.read_text())
    raw["telegram"]["messages_per_second"] = 20  # at its old place
    raw["advanced"]["telegram"]["poll_timeout"] = 2
    raw["telegram"]["poll_timeout"] = 5  # at both: the new place wins
    path.write_text(yaml.safe_dump(raw))
    found = [result async for result in diagnose(path, {})]
    assert [r.line for r in found if r.status == Status.WARN] == [
        "⚠ config: telegram.poll_timeout: ignored: advanced.telegram.poll_timeout is set",
        "⚠ config: telegram.messages_per_second: moved to advanced.telegram.messages_per_second;"
        " it still works here",
    ]
    assert not [r for r in found if r.status == Status.FAIL]
