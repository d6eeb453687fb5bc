"""``agentgram run`` with the web view: config mistakes and a port in use are one line, exit 2."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from pydantic import ValidationError

from agentgram.bot.web.serve import WebServer
from agentgram.bot.web.settings import WebSettings
from tests.conftest import config_mapping
from tests.e2e.harness import fakes
from tests.web.harness import TOKEN


async def _run(tmp_path: Path, llm_url: str, tg_root: str, **web: Any) -> tuple[int, str]:
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(config_mapping(tmp_path, llm_url, tg_root, web=web)))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentgram.bot", "run", "--config", str(config),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, PTB_TIMEDELTA="1"), cwd=tmp_path,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60.0)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_enabled_without_a_token_is_one_line_naming_web_token(tmp_path: Path) -> None:
    code, err = await _run(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9", enabled=True)
    assert (code, err.splitlines()) == (
        2,
        ["config error: web.token: is required when web.enabled is true (e.g. `openssl rand -hex 24`)"],
    )


async def test_a_public_address_without_a_token_is_refused(tmp_path: Path) -> None:
    code, err = await _run(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9", listen="0.0.0.0:8765")
    assert (code, err.splitlines()) == (
        2,
        ["config error: web.token: is required to listen on 0.0.0.0:8765, which is not a loopback address"],
    )


async def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        async with fakes() as (tg, llm):
            code, err = await _run(
                tmp_path, llm.base_url, tg.root, enabled=True, token=TOKEN, listen=f"127.0.0.1:{port}"
            )
    line = f"config error: web.listen: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert code == 2
    assert err.rstrip().splitlines()[-1] == line and err.count(line) == 1 and "Traceback" not in err
    assert TOKEN not in err


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


async def test_the_web_view_starts_with_the_bot_and_stops_first_on_shutdown(tmp_path: Path) -> None:
    port = _free_port()
    async with fakes() as (tg, llm):
        config = tmp_path / "config.yml"
        web = {"enabled": True, "token": TOKEN, "listen": f"127.0.0.1:{port}"}
        config.write_text(yaml.safe_dump(config_mapping(tmp_path, llm.base_url, tg.root, web=web)))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentgram.bot", "run", "--config", str(config),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=dict(os.environ, PTB_TIMEDELTA="1"), cwd=tmp_path,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        assert proc.stderr is not None
        async with asyncio.timeout(30):  # its log line says when it listens
            while f"web view on {url}" not in (await proc.stderr.readline()).decode():
                pass
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            assert (await client.get("/api/sessions")).json()["total"] == 0
            proc.terminate()
            async with asyncio.timeout(30):  # the shutdown's log: the web view stops before the bot
                while "shutting down" not in (await proc.stderr.readline()).decode():
                    pass
                while "web view stopped" not in (line := (await proc.stderr.readline()).decode()):
                    assert line, "the bot ended without stopping the web view"
            assert not await _answers(client), "the port refuses once the web view says it stopped"
            _, err = await asyncio.wait_for(proc.communicate(), 30.0)
            assert proc.returncode == 0, err.decode()


async def _answers(client: httpx.AsyncClient) -> bool:
    try:
        return (await client.get("/healthz")).status_code in (200, 503)
    except httpx.TransportError:
        return False


async def test_a_port_in_use_is_refused_before_the_bot_starts(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        async with fakes() as (tg, llm):
            code, _ = await _run(
                tmp_path, llm.base_url, tg.root, enabled=True, token=TOKEN, listen=f"127.0.0.1:{port}"
            )
            assert code == 2
            assert tg.requests == [], "no Bot API call: the socket is bound before the bot starts"


async def test_a_failed_web_start_closes_its_socket_and_leaves_no_task() -> None:
    listening = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # not a stream socket: uvicorn fails
    listening.bind(("127.0.0.1", 0))
    server = WebServer(FastAPI(), listening)
    with pytest.raises(ValueError, match="Stream Socket"):
        await server.start()
    assert listening.fileno() == -1, "the socket is closed"
    assert [t for t in asyncio.all_tasks() if t.get_name() == "web"] == []


def test_public_url_with_a_path_is_one_config_error_naming_it() -> None:
    with pytest.raises(ValidationError) as raised:
        WebSettings(public_url="https://example.org/agentgram/")
    assert raised.value.errors()[0]["loc"] == ("public_url",)
    assert (
        WebSettings(public_url="https://example.org/").public_url == "https://example.org"
    )  # the root: fine
