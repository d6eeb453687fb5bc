"""Both SDKs' HTTP stack over aiohttp (:mod:`agentgram.runtime.infra.http`), against a real socket
server that fails the ways servers do: each failure comes out as the httpx (or httpx2) error
httpcore would have raised, and a POST is never sent twice."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import httpx
import httpx2
import pytest

from agentgram.runtime.infra.http import ReadClient, env_proxy, httpx_transport, model_http_client
from tests.runtime.infra.cycles import cyclic_garbage

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Server:
    """A loopback HTTP/1.1 server that answers each request by ``behaviour``."""

    behaviour: Behaviour
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    url: str = ""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                self.requests.append(head + await reader.readexactly(length))
                await self.behaviour(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Behaviour], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(behaviour: Behaviour) -> Server:
        server = Server(behaviour)
        listening = await asyncio.start_server(server._serve, "127.0.0.1", 0)
        servers.append(listening)
        server.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}/method"
        return server

    yield start
    for listening in servers:
        listening.close()
        await listening.wait_closed()


def _client(errors: ModuleType, url: str) -> Any:
    if errors is httpx:
        return ReadClient(transport=httpx_transport(url, 4))  # the chat platform's client
    return model_http_client(url)


async def _post(errors: ModuleType, url: str, timeout: float = 5.0) -> bytes:
    client = _client(errors, url)
    try:
        async with client.stream("POST", url, json={"text": "hi"}, timeout=timeout) as response:
            return b"".join([chunk async for chunk in response.aiter_bytes()])
    finally:
        await client.aclose()


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(
        b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: application/json\r\n\r\n{"ok":true}'
    )
    await writer.drain()


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()
    raise ConnectionError("hung up")


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"ok":')
    await writer.drain()
    writer.close()
    raise ConnectionError("cut")


SDKS = pytest.mark.parametrize("errors", [httpx, httpx2], ids=["httpx", "httpx2"])


@SDKS
async def test_an_answer_comes_through(serve: Any, errors: ModuleType) -> None:
    server = await serve(answer)
    assert await _post(errors, server.url) == b'{"ok":true}'
    assert server.requests[0].startswith(b"POST /method HTTP/1.1") and server.requests[0].endswith(b'"hi"}')


@SDKS
async def test_a_refused_connection_is_a_connect_error_not_a_timeout(errors: ModuleType) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(errors.ConnectError) as info:
        await _post(errors, f"http://127.0.0.1:{port}/method")
    assert not isinstance(info.value, errors.TimeoutException)


@SDKS
async def test_a_server_hanging_up_unanswered_is_a_protocol_error_and_the_post_is_not_repeated(
    serve: Any, errors: ModuleType
) -> None:
    server = await serve(hang_up)
    with pytest.raises(errors.RemoteProtocolError) as info:
        await _post(errors, server.url)
    assert not isinstance(info.value, errors.TimeoutException)
    await asyncio.sleep(0.1)
    assert len(server.requests) == 1


@SDKS
async def test_a_server_that_never_answers_is_a_read_timeout(serve: Any, errors: ModuleType) -> None:
    server = await serve(hang)
    with pytest.raises(errors.ReadTimeout):
        await _post(errors, server.url, timeout=0.3)
    assert len(server.requests) == 1


@SDKS
async def test_a_body_cut_short_is_a_read_error(serve: Any, errors: ModuleType) -> None:
    server = await serve(cut_short)
    with pytest.raises(errors.ReadError) as info:
        await _post(errors, server.url)
    assert not isinstance(info.value, errors.TimeoutException)


@SDKS
async def test_connections_are_kept_and_reused(serve: Any, errors: ModuleType) -> None:
    server = await serve(answer)
    client = _client(errors, server.url)
    try:
        for _ in range(5):
            response = await client.post(server.url, json={"text": "hi"})
            assert response.json() == {"ok": True}
    finally:
        await client.aclose()
    assert (len(server.requests), server.connections) == (5, 1)


@SDKS
async def test_a_response_read_whole_leaves_no_reference_cycle(serve: Any, errors: ModuleType) -> None:
    """Every chat send and model round is a request: what it built goes when its reader lets go,
    not at the cyclic collector's next pass (httpx binds a response's stream to the response)."""
    server = await serve(answer)
    client = _client(errors, server.url)
    try:
        await client.post(server.url, json={"text": "hi"})  # the session and its connection
        with cyclic_garbage() as found:
            for _ in range(5):
                assert (await client.post(server.url, json={"text": "hi"})).json() == {"ok": True}
    finally:
        await client.aclose()
    assert {type(o).__module__.split(".")[0] for o in found} & {"httpx", "httpx2", "aiohttp"} == set()


def test_the_environments_proxy_is_the_one_for_the_scheme_unless_no_proxy_exempts_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.telegram.org/bot") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.lan:3128")
    monkeypatch.setenv("NO_PROXY", "llm.lan")
    assert env_proxy("https://api.telegram.org/bot") == "http://user:secret@proxy.lan:3128"
    assert env_proxy("http://api.telegram.org/bot") is None, "no proxy for plain http"
    assert env_proxy("https://llm.lan/v1") is None, "NO_PROXY exempts the host"


@SDKS
async def test_a_client_sends_through_the_proxy_the_environment_named_when_it_was_made(
    serve: Any, errors: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await serve(answer)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/method"))
    target = "http://api.example.invalid/method"
    client = _client(errors, target)
    monkeypatch.delenv("HTTP_PROXY")  # read once, when the client was made: not per request
    try:
        for _ in range(2):
            response = await client.post(target, json={"text": "hi"})
            assert response.json() == {"ok": True}
    finally:
        await client.aclose()
    assert [request.split(b"\r\n", 1)[0] for request in proxy.requests] == [
        b"POST http://api.example.invalid/method HTTP/1.1"
    ] * 2
