"""Reaching a database server at start: a refusal the config must fix, or an outage to wait out.

A server (PostgreSQL) that refuses the credentials or has no such database will refuse them on
every try: that is the configuration's mistake, one line naming ``storage.url`` and exit 2
(:func:`refusal`). A server that cannot be reached — connection refused, a timeout, a name that
does not resolve yet, a server still starting up or out of connection slots — may come back: a
service started at boot before its database, a database restarting. :func:`reach` waits that
out with the one backoff helper (:mod:`runtime.infra.backoff`), a warning per failed attempt with
its delay, for as long as it takes, as the chat adapter waits out its platform at start.

A SQLite file is never "unreachable" (a missing folder is created, a permission problem is the
config's), so only a server's URL is retried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from sqlalchemy.engine import make_url

from agentgram.runtime.infra.backoff import Backoff, retrying
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.log import get_logger

log = get_logger("storage")
T = TypeVar("T")

START_BACKOFF = Backoff(1.0, 30.0, jitter=0.2)
"""A database out of reach at start is tried again after ~1 s, then doubling up to 30 s."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it wraps: SQLAlchemy's ``orig``, the driver adapter's ``__cause__``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__


def refusal(error: BaseException) -> ConfigError | None:
    """The one config line for a refusal no retry changes (credentials, no such database); else
    ``None``. A :class:`ConfigError` is already one."""
    import asyncpg  # only a server's errors are classified here

    for cause in _chain(error):
        if isinstance(cause, ConfigError):
            return cause
        if isinstance(cause, asyncpg.InvalidAuthorizationSpecificationError | asyncpg.InvalidPasswordError):
            return ConfigError("storage.url", f"PostgreSQL refused the credentials: {cause}")
        if isinstance(cause, asyncpg.InvalidCatalogNameError):
            return ConfigError("storage.url", f"no such database: {cause}")
    return None


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the server cannot be reached now, but may be later."""
    import asyncpg

    transient = (OSError, asyncpg.CannotConnectNowError, asyncpg.TooManyConnectionsError)
    return refusal(error) is None and any(isinstance(cause, transient) for cause in _chain(error))


def is_server(url: str) -> bool:
    """Whether ``url`` names a database server (anything but a SQLite file or memory)."""
    return make_url(url).get_backend_name() != "sqlite"


def where(url: str) -> str:
    """``host:port/database`` of a server URL: what the log may say (never the credentials)."""
    parsed = make_url(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.host or 'localhost'}{port}/{parsed.database or ''}"


async def reach(url: str, connect: Callable[[], Awaitable[T]], *, backoff: Backoff = START_BACKOFF) -> T:
    """``connect()`` to the database at ``url``, retried while the server is out of reach.

    A refusal becomes its :class:`ConfigError` (see :func:`refusal`); any other error is raised
    as it is. Cancelling it (a signal during the wait) stops the retries.
    """

    def retried(attempt: int, error: BaseException, delay: float) -> None:
        log.warning(
            "database %s cannot be reached (%s: %s); retry %d in %.1fs",
            where(url),
            type(error).__name__,
            error,
            attempt,
            delay,
        )

    server = is_server(url)
    try:
        return await retrying(
            connect, backoff, attempts=None, retry_if=lambda e: server and unreachable(e), on_retry=retried
        )
    except Exception as error:
        config = refusal(error) if server else None
        if config is not None and config is not error:
            raise config from None
        raise


__all__ = ["START_BACKOFF", "is_server", "reach", "refusal", "unreachable", "where"]
