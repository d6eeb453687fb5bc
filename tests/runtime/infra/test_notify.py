"""LISTEN/NOTIFY between instances (``runtime.infra.storage.notify``) on a real PostgreSQL server:
a notification sent in a write transaction reaches a listener once it commits and never when it
rolls back; a listener whose connection the server terminated connects again, says so, and
hears later notifications; a handler's exception stops nothing. On SQLite both do nothing.

"Never delivered" is proven by order, not by waiting: PostgreSQL delivers in commit order, so a
marker committed after the rolled-back write is the first thing the listener hears."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import URL, make_url

from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.notify import CHANNEL, MAX_PAYLOAD, Listener, asyncpg_dsn, notify
from tests.backends import pg_database

WAKE = 1.0
"""A committed notification reaches the listener within this many seconds."""


class Heard:
    """What a listener's callbacks saw: notifications in a queue, reconnects as an event."""

    def __init__(self) -> None:
        self.notifications: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.reconnected = asyncio.Event()

    def on_notify(self, channel: str, payload: str) -> None:
        self.notifications.put_nowait((channel, payload))

    def on_reconnect(self) -> None:
        self.reconnected.set()

    async def next(self) -> tuple[str, str]:
        return await asyncio.wait_for(self.notifications.get(), WAKE)


@pytest.fixture
async def db() -> AsyncIterator[Database]:
    async with pg_database() as url:
        database = Database(url)
        try:
            yield database
        finally:
            await database.close()


async def send(db: Database, payload: str, channel: str = CHANNEL) -> None:
    await db.write_sync(lambda conn: notify(conn, channel, payload))


async def test_a_committed_notify_reaches_the_listener_within_a_second(db: Database) -> None:
    heard = Heard()
    listener = Listener(db, [CHANNEL, "agentgram_other"], heard.on_notify)
    await listener.start()
    try:
        await send(db, "42:7")
        assert await heard.next() == (CHANNEL, "42:7")
        await send(db, "x", channel="agentgram_other")
        assert await heard.next() == ("agentgram_other", "x")
    finally:
        await listener.close()
    assert listener.backend_pid is None


async def test_a_notify_in_a_rolled_back_transaction_is_never_delivered(db: Database) -> None:
    heard = Heard()
    listener = Listener(db, [CHANNEL], heard.on_notify)
    await listener.start()

    def notify_then_fail(conn: Connection) -> None:
        notify(conn, CHANNEL, "rolled-back")
        raise RuntimeError("the write fails")

    try:
        with pytest.raises(RuntimeError, match="the write fails"):
            await db.write_sync(notify_then_fail)
        await send(db, "marker")
        assert await heard.next() == (CHANNEL, "marker")
        assert heard.notifications.empty()
    finally:
        await listener.close()


async def test_the_listener_reconnects_after_the_server_terminated_its_connection(db: Database) -> None:
    heard = Heard()
    listener = Listener(
        db, [CHANNEL], heard.on_notify, on_reconnect=heard.on_reconnect, backoff=Backoff(0.05, 0.5)
    )
    await listener.start()
    try:
        first = listener.backend_pid
        assert first is not None
        async with db.read() as session:
            killed = await session.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        assert killed is True
        # well before the periodic check (5 s): the termination listener noticed
        await asyncio.wait_for(heard.reconnected.wait(), 3.0)
        assert listener.backend_pid not in (None, first)
        await send(db, "after the outage")
        assert await heard.next() == (CHANNEL, "after the outage")
    finally:
        await listener.close()


class FreezingProxy:
    """A TCP forwarder on loopback to the test server whose connections open so far can be
    frozen: their bytes stop, their sockets stay open (a network cut TCP does not notice)."""

    def __init__(self, target: URL) -> None:
        self.target = target
        self.port = 0
        self._frozen: list[asyncio.Event] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FreezingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def freeze(self) -> None:
        for frozen in self._frozen:
            frozen.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.target.host, self.target.port)
        frozen = asyncio.Event()
        self._frozen.append(frozen)
        for pipe in (self._pipe(reader, up_writer, frozen), self._pipe(up_reader, writer, frozen)):
            self._tasks.add(asyncio.create_task(pipe))

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frozen: asyncio.Event
    ) -> None:
        try:
            while (data := await reader.read(65536)) and not frozen.is_set():
                writer.write(data)
                await writer.drain()
            if frozen.is_set():
                await asyncio.Event().wait()  # hold the socket open until the proxy closes
        except ConnectionError:
            pass
        finally:
            writer.close()


async def test_the_periodic_check_finds_a_connection_that_went_silent(db: Database) -> None:
    async with FreezingProxy(db.engine.url) as proxy:
        via_proxy = Database(
            db.engine.url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        )
        heard = Heard()
        listener = Listener(
            via_proxy,
            [CHANNEL],
            heard.on_notify,
            on_reconnect=heard.on_reconnect,
            check_every=0.2,
            check_timeout=0.5,
            backoff=Backoff(0.05, 0.5),
        )
        try:
            await listener.start()
            first = listener.backend_pid
            proxy.freeze()  # no termination reaches the listener: only its check can tell
            await asyncio.wait_for(heard.reconnected.wait(), 5.0)
            assert listener.backend_pid not in (None, first)
            await send(db, "heard again")
            assert await heard.next() == (CHANNEL, "heard again")
        finally:
            await listener.close()
            await via_proxy.close()


async def test_a_handler_that_raises_does_not_stop_later_deliveries(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    heard = Heard()

    def on_notify(channel: str, payload: str) -> None:
        heard.on_notify(channel, payload)
        if payload == "boom":
            raise RuntimeError("a handler's bug")

    listener = Listener(db, [CHANNEL], on_notify)
    await listener.start()
    try:
        with caplog.at_level(logging.ERROR, logger="agentgram.cluster"):
            await send(db, "boom")
            assert await heard.next() == (CHANNEL, "boom")
            await send(db, "still here")
            assert await heard.next() == (CHANNEL, "still here")
        assert any("handling a notification" in r.message and r.exc_info for r in caplog.records)
    finally:
        await listener.close()


async def test_a_payload_postgresql_would_refuse_is_refused_before_the_transaction_aborts(
    db: Database,
) -> None:
    with pytest.raises(ValueError, match="shorter than 8000 bytes"):
        await send(db, "x" * MAX_PAYLOAD)
    await send(db, "x" * (MAX_PAYLOAD - 1))  # the longest that goes


async def test_the_listener_connects_with_sqlalchemy_only_query_arguments_in_the_url(db: Database) -> None:
    url = db.engine.url.update_query_dict({"prepared_statement_cache_size": "0"})
    other = Database(url.render_as_string(hide_password=False))
    heard = Heard()
    listener = Listener(other, [CHANNEL], heard.on_notify)
    try:
        await listener.start()
        await send(db, "via a tuned url")
        assert await heard.next() == (CHANNEL, "via a tuned url")
    finally:
        await listener.close()
        await other.close()


def test_the_dsn_keeps_what_asyncpg_reads_and_drops_what_only_sqlalchemy_reads() -> None:
    url = make_url(
        "postgresql+asyncpg://agent:s3cret@db.example:5433/agentgram"
        "?prepared_statement_cache_size=0&ssl=require&target_session_attrs=read-write"
    )
    dsn = make_url(asyncpg_dsn(url))
    assert dsn.drivername == "postgresql"
    assert (dsn.username, dsn.password, dsn.host, dsn.port, dsn.database) == (
        "agent",
        "s3cret",
        "db.example",
        5433,
        "agentgram",
    )
    assert dict(dsn.query) == {"sslmode": "require", "target_session_attrs": "read-write"}
    given = make_url("postgresql+asyncpg://a@h/d?ssl=require&sslmode=verify-full")
    assert dict(make_url(asyncpg_dsn(given)).query) == {"sslmode": "verify-full"}


async def test_on_sqlite_notify_and_the_listener_do_nothing(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'agentgram.db'}")
    heard = Heard()
    listener = Listener(db, [CHANNEL], heard.on_notify, on_reconnect=heard.on_reconnect)
    try:
        await listener.start()
        assert listener.backend_pid is None
        await send(db, "42:7")
        assert await db.write_sync(lambda conn: conn.execute(text("SELECT 1")).scalar()) == 1
        await listener.close()
        await listener.close()
    finally:
        await db.close()
    assert heard.notifications.empty() and not heard.reconnected.is_set()
