"""File downloads through each driver, against a file route that fails or trickles.

Real python-telegram-bot and real aiogram over real HTTP to :class:`FileRoute`, a Bot API
server of a single file (the fake Bot API serves a file whole or not at all).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from agentgram.bot.telegram.core.files import TelegramFiles
from agentgram.bot.telegram.core.port import (
    BadRequest,
    BotApi,
    Forbidden,
    InvalidToken,
    NetworkError,
    TimedOut,
)
from agentgram.bot.telegram.core.sender import Retry
from agentgram.bot.telegram.drivers.aiogram import AiogramApi
from agentgram.bot.telegram.drivers.ptb import PtbApi
from agentgram.runtime.infra.errors import FetchFailed
from tests.fakes.loopback import LoopbackServer

TOKEN = "123456:secret-TOKEN_part"
FILE_PATH = "documents/file_0.txt"
BOT = {"id": 123456, "is_bot": True, "first_name": "Bot", "username": "the_bot"}


class FileRoute(LoopbackServer):
    """``getMe`` and ``getFile`` answer; the file route answers ``status`` with an HTML page, or
    (status 200) sends ``chunks`` with ``gap`` seconds before each, as a slow link does."""

    def __init__(self, status: int = 200, chunks: int = 1, gap: float = 0.0) -> None:
        self.status, self.chunks, self.gap = status, chunks, gap

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._call)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        return app

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _call(self, request: web.Request) -> web.Response:
        if request.match_info["method"] == "getMe":
            return web.json_response({"ok": True, "result": BOT})
        result = {"file_id": "f1", "file_unique_id": "u1", "file_size": self.chunks, "file_path": FILE_PATH}
        return web.json_response({"ok": True, "result": result})

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if self.status != 200:
            return web.Response(status=self.status, text="<html>no</html>", content_type="text/html")
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(self.chunks):
            await asyncio.sleep(self.gap)  # the slow link under test, not a synchronisation
            await response.write(b"x")
        await response.write_eof()
        return response


@asynccontextmanager
async def aiogram_api(root: str) -> AsyncIterator[BotApi]:
    api = AiogramApi(TOKEN, root, messages_per_second=30)
    try:
        yield api
    finally:
        await api.close()


@asynccontextmanager
async def ptb_api(root: str) -> AsyncIterator[BotApi]:
    api = PtbApi(TOKEN, f"{root}/bot", f"{root}/file/bot", per_second=30)
    try:
        await api.get_me()
        yield api
    finally:
        await api.close()


DRIVERS: dict[str, Callable[[str], AbstractAsyncContextManager[BotApi]]] = {
    "aiogram": aiogram_api,
    "ptb": ptb_api,
}


@asynccontextmanager
async def driver_against(library: str, server: FileRoute) -> AsyncIterator[BotApi]:
    async with server, DRIVERS[library](server.root) as api:
        yield api


@pytest.mark.parametrize("library", list(DRIVERS))
@pytest.mark.parametrize("status", [404, 500])
async def test_a_failed_download_never_shows_the_token(library: str, status: int, tmp_path: Path) -> None:
    async with driver_against(library, FileRoute(status)) as api:
        with pytest.raises(FetchFailed) as failed:
            await TelegramFiles(api, Retry(attempts=1)).fetch("f1", tmp_path / "f")
    cause = failed.value.__cause__
    assert TOKEN not in str(failed.value)
    assert cause is not None and TOKEN not in str(cause)
    assert "secret" not in str(failed.value)


@pytest.mark.parametrize(
    ("status", "error", "message"),
    [
        (400, BadRequest, "HTTP 400"),
        (401, InvalidToken, "HTTP 401"),
        (403, Forbidden, "HTTP 403"),
        (404, InvalidToken, "HTTP 404"),
        (410, BadRequest, "HTTP 410"),
        (502, NetworkError, "HTTP 502"),
    ],
)
async def test_aiogram_classes_a_download_status_as_ptb_does_saying_only_the_status(
    status: int, error: type[Exception], message: str, tmp_path: Path
) -> None:
    async with driver_against("aiogram", FileRoute(status)) as api:
        with pytest.raises(error) as raised:
            await api.download("f1", tmp_path / "f", read_timeout=5)
    assert str(raised.value) == message
    assert not isinstance(raised.value, TimedOut)


@pytest.mark.parametrize("library", list(DRIVERS))
async def test_read_timeout_bounds_the_gap_between_reads_not_the_whole_download(
    library: str, tmp_path: Path
) -> None:
    """Six bytes 0.4 s apart take 2.4 s, past a 1 s read timeout taken as a total."""
    async with driver_against(library, FileRoute(chunks=6, gap=0.4)) as api:
        await api.download("f1", tmp_path / "f", read_timeout=1)
    assert (tmp_path / "f").read_bytes() == b"x" * 6


@pytest.mark.parametrize("library", list(DRIVERS))
async def test_a_gap_longer_than_read_timeout_is_timed_out(library: str, tmp_path: Path) -> None:
    async with driver_against(library, FileRoute(chunks=1, gap=2.0)) as api:
        with pytest.raises(TimedOut):
            await api.download("f1", tmp_path / "f", read_timeout=0.5)
