"""The databases the storage tests run on: SQLite files and a real PostgreSQL server.

``scripts/test-services`` starts a throwaway PostgreSQL and exports its URL as
:data:`PG_URL_ENV`; every test that runs on PostgreSQL gets a database of its own on it
(:func:`pg_database`), created empty and dropped afterwards. Without the variable such a test
fails, never skips: a suite that silently skipped PostgreSQL would prove nothing about it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

BACKENDS = ("sqlite", "postgres")
"""Every backend ``storage.url`` supports: the parametrised storage tests run once on each."""

PG_URL_ENV = "AGENTGRAM_TEST_PG_URL"


def pg_server_url() -> str:
    """The test server's URL (its maintenance database); fails the test when none is configured."""
    url = os.environ.get(PG_URL_ENV)
    if not url:
        pytest.fail(
            f"{PG_URL_ENV} is not set: run the tests through scripts/test-services (e.g. scripts/test-services pytest)"
        )
    return url


def _dsn(url: str) -> str:
    """The asyncpg DSN of a SQLAlchemy ``postgresql+asyncpg://`` URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def pg_database() -> AsyncIterator[str]:
    """A new, empty database on the test server for the block; its SQLAlchemy URL. Dropped after
    (``WITH (FORCE)``: a connection a failed test left open does not keep it)."""
    server = pg_server_url()
    name = f"agentgram_test_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(_dsn(server))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(_dsn(server))
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@asynccontextmanager
async def database(backend: str, folder: Path, name: str = "agentgram.db") -> AsyncIterator[str]:
    """An empty database of ``backend`` (a SQLite file in ``folder``) for the block; its URL."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / name}"
        return
    async with pg_database() as url:
        yield url


@asynccontextmanager
async def pg_forwarder(port: int, url: str) -> AsyncIterator[None]:
    """A TCP forwarder on ``127.0.0.1:port`` to the server of ``url``, for the block: a database
    server that "appears" on a port where nothing listened (the start-up retry tests)."""
    import asyncio

    target = make_url(url)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    tasks: set[asyncio.Task[None]] = set()

    async def serve(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(target.host, target.port)
        for task in (pipe(client_reader, server_writer), pipe(server_reader, client_writer)):
            tasks.add(asyncio.create_task(task))

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
