"""PostgreSQL LISTEN/NOTIFY between the instances of a cluster that share one database.

Why: an instance that commits work for another (mail for a session the other one runs, say)
should not make that one wait for its next poll. The writer calls :func:`notify` inside its
write transaction, so PostgreSQL delivers the notification only if, and once, that transaction
commits (a rolled-back write wakes nobody); every instance keeps one :class:`Listener`, a
dedicated asyncpg connection that LISTENs and hands each notification to a callback, so the
other instance wakes within about a second (usually milliseconds) instead of a poll interval.

What it does not promise: a notification is a wake-up, never the data. One sent while a
listener's connection is down (a server restart, a network cut, ``pg_terminate_backend``) is
lost for good, so callers keep polling as well, slower, and re-scan when
:class:`Listener` reconnects (``on_reconnect``). PostgreSQL also folds identical
notifications (same channel and payload) of one transaction into one.

Payloads are short text: PostgreSQL refuses one of :data:`MAX_PAYLOAD` bytes or more (the
default build's 8000-byte limit), which would abort the caller's whole write transaction, so
:func:`notify` refuses it first; send ids (``"42:7"``) and let the receiver read the rows.

On SQLite (one process, nothing to wake across) :func:`notify` and :class:`Listener` do nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.engine import URL

from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.tasks import cancel_and_wait

log = get_logger("cluster")

CHANNEL = "agentgram_mail"
"""The channel of new mail: its payload names what to look at (e.g. ``"<session>:<mail>"``)."""

MAX_PAYLOAD = 8000
"""PostgreSQL's limit on a payload, in bytes (UTF-8): a payload must be shorter."""

CHECK_EVERY = 5.0
"""Seconds between the listener's ``SELECT 1``: finds a connection that died without a word
(a half-open TCP connection after a network cut tells no termination listener)."""

CHECK_TIMEOUT = 5.0
"""Seconds the check (and a connection attempt) may take before the connection counts as lost."""

RECONNECT = Backoff(initial=0.5, max=30.0, jitter=0.2)
"""The wait between attempts to connect again after the connection was lost."""

CLOSE_TIMEOUT = 2.0

_DSN_QUERY = frozenset(
    {
        "host",
        "port",
        "user",
        "password",
        "passfile",
        "database",
        "dbname",
        "service",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslnegotiation",
        "sslcrl",
        "sslpassword",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
    }
)
"""The query arguments asyncpg reads from a DSN; it would send any other one to the server as a
setting (``prepared_statement_cache_size=0`` would then fail the connection)."""

OnNotify = Callable[[str, str], None]
"""``on_notify(channel, payload)``, called on the event loop for each notification."""


def notify(conn: Connection, channel: str, payload: str) -> None:
    """Send ``payload`` on ``channel`` when the transaction ``conn`` is in commits (not if it
    rolls back). Nothing on SQLite. Raises :class:`ValueError` for a payload PostgreSQL would
    refuse (:data:`MAX_PAYLOAD`), before it could abort the transaction."""
    if conn.dialect.name != "postgresql":
        return
    if len(payload.encode()) >= MAX_PAYLOAD:
        raise ValueError(f"a notification's payload must be shorter than {MAX_PAYLOAD} bytes")
    conn.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload})


def asyncpg_dsn(url: URL) -> str:
    """The asyncpg DSN of a SQLAlchemy ``postgresql+asyncpg://`` URL, password included.

    Query arguments asyncpg reads from a DSN stay; SQLAlchemy's own (e.g.
    ``prepared_statement_cache_size``) go. ``ssl=<mode>``, which SQLAlchemy hands asyncpg as a
    keyword, becomes the DSN's ``sslmode`` unless that is given too.
    """
    query: dict[str, str | tuple[str, ...]] = {k: v for k, v in url.query.items() if k in _DSN_QUERY}
    ssl = url.query.get("ssl")
    if isinstance(ssl, str) and "sslmode" not in query:
        query["sslmode"] = ssl
    return url.set(drivername="postgresql", query=query).render_as_string(hide_password=False)


class Listener:
    """One dedicated asyncpg connection LISTENing on ``channels``, kept connected.

    :meth:`start` connects and listens (a failure to connect then is raised); a supervising
    task then notices a lost connection (asyncpg's termination listener, or a failed
    ``SELECT 1`` every :data:`CHECK_EVERY` seconds), connects again under :data:`RECONNECT`
    until it succeeds, listens again and calls ``on_reconnect`` (the notifications of the
    outage are lost: the caller re-scans). ``on_notify`` and ``on_reconnect`` run on the event
    loop; what they raise is logged and never stops the listener. :meth:`close` ends it all.
    """

    def __init__(
        self,
        db: Database,
        channels: Sequence[str],
        on_notify: OnNotify,
        *,
        on_reconnect: Callable[[], None] | None = None,
        check_every: float = CHECK_EVERY,
        check_timeout: float = CHECK_TIMEOUT,
        backoff: Backoff = RECONNECT,
    ) -> None:
        self.db = db
        self.channels = tuple(channels)
        self.on_notify = on_notify
        self.on_reconnect = on_reconnect
        self.check_every = check_every
        self.check_timeout = check_timeout
        self.backoff = backoff
        self._conn: Any = None  # the asyncpg connection while connected
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection (``None`` while disconnected)."""
        return None if self._conn is None else int(self._conn.get_server_pid())

    async def start(self) -> None:
        """Connect and listen, then keep the connection up; nothing on SQLite, nothing twice."""
        if self.db.is_sqlite or self._task is not None:
            return
        self._conn = await self._connect()
        self._task = asyncio.create_task(self._supervise(), name="cluster-listener")

    async def close(self) -> None:
        """Stop reconnecting and close the connection; idempotent."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close(timeout=CLOSE_TIMEOUT)
            except Exception:  # a connection that cannot say goodbye is dropped
                conn.terminate()

    async def _connect(self) -> Any:
        import asyncpg  # only a PostgreSQL database needs it

        conn = await asyncpg.connect(asyncpg_dsn(self.db.engine.url), timeout=self.check_timeout)
        try:
            conn.add_termination_listener(lambda gone: self._terminated(gone))
            for channel in self.channels:
                await conn.add_listener(channel, self._deliver)
        except BaseException:
            conn.terminate()
            raise
        return conn

    def _deliver(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        try:
            self.on_notify(channel, payload)
        except Exception:  # the listener outlives a handler's bug
            log.exception("cluster: handling a notification on %s failed", channel)

    def _terminated(self, conn: object) -> None:
        if conn is self._conn:  # not an old connection this listener dropped itself
            self._lost.set()

    async def _supervise(self) -> None:
        while True:
            await self._until_lost()
            old, self._conn = self._conn, None
            if old is not None:
                old.terminate()
            self._lost.clear()
            log.warning("cluster: the notification listener lost its connection; reconnecting")
            self._conn = await self._reconnect()
            log.info("cluster: the notification listener is connected again")
            if self.on_reconnect is not None:
                try:
                    self.on_reconnect()
                except Exception:
                    log.exception("cluster: the listener's reconnect handler failed")

    async def _until_lost(self) -> None:
        """Return once the connection is lost: told by asyncpg, or found by the check."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), self.check_every)
                return
            try:
                await self._conn.fetchval("SELECT 1", timeout=self.check_timeout)
            except Exception as error:  # closed, reset or timed out: all mean gone
                log.debug("cluster: the listener's check failed: %r", error)
                return

    async def _reconnect(self) -> Any:
        """Connect again, waiting by :attr:`backoff` between failures; only the first is a warning."""
        for attempt in itertools.count(1):
            try:
                return await self._connect()
            except Exception as error:
                delay = self.backoff.next_delay(attempt)
                log.log(
                    logging.WARNING if attempt == 1 else logging.DEBUG,
                    "cluster: the notification listener cannot connect (%s); trying again in %.1fs",
                    error,
                    delay,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # itertools.count never ends


__all__ = ["CHANNEL", "MAX_PAYLOAD", "Listener", "OnNotify", "asyncpg_dsn", "notify"]
