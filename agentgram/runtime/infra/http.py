"""The HTTP stack under the SDKs: aiohttp, behind each SDK's own httpx client.

The chat platform's library speaks httpx and the openai SDK speaks httpx2; both default to an
httpcore transport. httpcore's connection pool looks at every pooled connection on each request
and again when each response closes, and for every idle one asks the socket whether the server has
closed it (``getpeername`` and ``poll`` system calls). With a connection per busy chat that was a
quarter of the event loop's time at 200 busy chats; on aiohttp, CPU per turn halved (14.8 to
7.3 ms, issue 31, ``bench/README.md``). A minimal bot never notices: it handles one update at a
time, so its pool holds one connection.

aiohttp keeps a host's idle connections in a queue and takes the newest in constant time. So both
SDKs send through it, by httpx-aiohttp's transport (kept by an httpx maintainer; the openai SDK
ships the same code as ``DefaultAioHttpClient``). What the SDKs see is unchanged: httpx's requests,
responses and exceptions (a timeout is still ``httpx.TimeoutException``, a cut stream
``httpx.ReadError``), and aiohttp never repeats a POST on its own.

Each session is made on the first request, inside the running loop (aiohttp binds a session to
it). **Proxies:** a client sends to one host (the Bot API's, the model endpoint's), so the proxy the
environment names for it (``HTTPS_PROXY``/``HTTP_PROXY``, unless ``NO_PROXY`` exempts the host) is
looked up once, when the client is made, and given to its transport, as httpx reads the
environment once per client. aiohttp's own ``trust_env`` is off: it looks the proxy and
``~/.netrc`` up again on every request, each lookup a hop to a worker thread and back, two waits on
a busy loop before every request is sent.

httpx-aiohttp 0.2 maps aiohttp's exceptions onto httpx's in the order of a table whose broadest
entry comes first, so a refused connection, a server that hangs up without an answer, or a reset
all come out as ``ConnectTimeout``. A timeout and a refused connection are told apart downstream
(the model's "timed out" against "unreachable"), so :func:`corrected` maps them again, by the
nearest class in the aiohttp exception's own ancestry.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import urlsplit

import aiohttp
import httpx
import httpx2
import httpx_aiohttp
import httpx_aiohttp.httpx2
from openai import DefaultAioHttpClient

MODEL_CONNECTIONS = 100
"""Connections to the model's endpoint at most (one per streaming turn; a turn beyond waits)."""
KEEPALIVE = 5.0
"""Seconds an idle connection is kept (httpx's default)."""


def session_factory(limit: int, keepalive: float | None = KEEPALIVE) -> Callable[[], aiohttp.ClientSession]:
    """A maker of the aiohttp session a transport sends through, at most ``limit`` connections."""

    def make() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=keepalive or KEEPALIVE)
        return aiohttp.ClientSession(connector=connector)  # no trust_env: the transport has the proxy

    return make


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``'s scheme, unless ``NO_PROXY`` exempts its host."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def corrected(exc: Exception, errors: ModuleType) -> Exception:
    """``exc`` (an error of ``errors``, httpx or httpx2, raised from an aiohttp one) as the error
    httpcore would have raised for the same failure."""
    cause = exc.__cause__
    if not isinstance(cause, aiohttp.ClientError):
        return exc
    table: dict[type[BaseException], type[Exception]] = {
        aiohttp.ConnectionTimeoutError: errors.ConnectTimeout,
        aiohttp.SocketTimeoutError: errors.ReadTimeout,
        aiohttp.ServerTimeoutError: errors.TimeoutException,
        aiohttp.ClientConnectorError: errors.ConnectError,
        aiohttp.ServerDisconnectedError: errors.RemoteProtocolError,
        aiohttp.ClientPayloadError: errors.ReadError,
        aiohttp.ClientConnectionError: errors.NetworkError,
    }
    for klass in type(cause).__mro__:
        if (better := table.get(klass)) is not None:
            return exc if type(exc) is better else better(str(exc))
    return exc


class _CorrectedBody:
    """A response body whose read errors are :func:`corrected`."""

    errors: ClassVar[ModuleType]

    def __init__(self, body: Any) -> None:
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._body:
                yield chunk
        except self.errors.TransportError as exc:
            raise corrected(exc, self.errors) from exc.__cause__

    async def aclose(self) -> None:
        try:
            await self._body.aclose()
        except self.errors.TransportError as exc:
            raise corrected(exc, self.errors) from exc.__cause__


class _HttpxBody(_CorrectedBody, httpx.AsyncByteStream):
    errors: ClassVar[ModuleType] = httpx


class _Httpx2Body(_CorrectedBody, httpx2.AsyncByteStream):
    errors: ClassVar[ModuleType] = httpx2


class _Corrected:
    """httpx-aiohttp's transport, its errors :func:`corrected` (those of its ``body``'s module)."""

    body: ClassVar[type[_CorrectedBody]]

    async def handle_async_request(self, request: Any) -> Any:
        errors = self.body.errors
        try:
            response = await super().handle_async_request(request)  # type: ignore[misc]
        except errors.TransportError as exc:
            raise corrected(exc, errors) from exc.__cause__
        response.stream = self.body(response.stream)
        return response


class HttpxTransport(_Corrected, httpx_aiohttp.AiohttpTransport):
    """An httpx transport over aiohttp (for a library built on httpx, such as the bot's)."""

    body: ClassVar[type[_CorrectedBody]] = _HttpxBody


class Httpx2Transport(_Corrected, httpx_aiohttp.httpx2.AiohttpTransport):
    """An httpx2 transport over aiohttp (the openai SDK's)."""

    body: ClassVar[type[_CorrectedBody]] = _Httpx2Body


_READ = httpx.ByteStream(b"")
"""The stream of every response whose body was read (it is kept as the response's content)."""


class ReadClient(httpx.AsyncClient):
    """httpx's client, leaving no reference cycle behind a response it read whole.

    httpx binds each response's stream to the response (``BoundAsyncStream`` holds it, to time
    it), so every response was a cycle of some 40 objects with its request, headers and aiohttp's
    response, freed only by the cyclic collector. The chat platform's library reads each response
    whole (``stream=False``), so once it is read its stream is replaced: the response goes as soon
    as its reader lets go (``bench/README.md``, session 22). A streamed response keeps its stream.
    """

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = httpx.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        response = await super().send(request, stream=stream, auth=auth, follow_redirects=follow_redirects)
        if not stream:
            response.stream = _READ
        return response


def httpx_transport(url: str, limit: int, keepalive: float | None = KEEPALIVE) -> httpx.AsyncBaseTransport:
    """A transport for an httpx client sending to ``url``'s host, through at most ``limit`` connections."""
    proxy = env_proxy(url)
    return HttpxTransport(
        client=session_factory(limit, keepalive), proxy=httpx.Proxy(proxy) if proxy else None
    )


def model_http_client(url: str) -> httpx2.AsyncClient:
    """The openai SDK's client for the endpoint at ``url``, over aiohttp, with the SDK's own
    defaults otherwise."""
    proxy = env_proxy(url)
    transport = Httpx2Transport(
        client=session_factory(MODEL_CONNECTIONS), proxy=httpx2.Proxy(proxy) if proxy else None
    )
    return DefaultAioHttpClient(transport=transport)
