"""Who may see the web view: whoever holds ``web.token``.

Every path but ``/healthz`` needs it, ``/docs`` and ``/metrics`` included.
It comes as ``Authorization: Bearer <token>`` (scripts, Prometheus) or in the
cookie a browser got by opening a link with ``?token=<token>`` once: that
request is answered with a redirect to the same URL without the token (so it
leaves the address bar and the history) and sets the cookie HttpOnly and
SameSite=Lax: another site cannot read it, and a browser sends it along from
another site only on top-level GET navigations, so a ``/trace`` link opened
from Telegram (or a ``?token=`` link's redirect) works, while a cross-site POST
(the Kill form, the only state-changing route) goes without it and is 401. Tokens are compared
with :func:`secrets.compare_digest`. A wrong or missing token is 401, with no
hint of what was wrong.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

COOKIE = "agentgram_web"
QUERY = "token"
OPEN_PATHS = frozenset({"/healthz"})
"""A liveness probe carries no credentials; what it answers is states only (``ok``, ``down``…)."""

Next = Callable[[Request], Awaitable[Response]]


def _matches(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _unauthorized() -> Response:
    return JSONResponse({"detail": "a valid web.token is required"}, status_code=401)


def _trade_for_cookie(request: Request, token: str) -> Response:
    """The ``?token=`` link: the same URL without it, and the cookie that replaces it."""
    if not _matches(request.query_params.get(QUERY), token):
        return _unauthorized()
    target = request.url.remove_query_params(QUERY)
    response = RedirectResponse(target.path + (f"?{target.query}" if target.query else ""), status_code=303)
    response.set_cookie(
        COOKIE, token, httponly=True, samesite="lax", secure=request.url.scheme == "https", path="/"
    )
    return response


def token_guard(token: str) -> Callable[[Request, Next], Awaitable[Response]]:
    """The HTTP middleware that lets only ``token``'s holders past (see the module docstring)."""

    async def guard(request: Request, call_next: Next) -> Response:
        if request.url.path in OPEN_PATHS:
            return await call_next(request)
        if QUERY in request.query_params:
            return _trade_for_cookie(request, token)
        if _matches(_bearer(request), token) or _matches(request.cookies.get(COOKIE), token):
            return await call_next(request)
        return _unauthorized()

    return guard
