from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

import agentgram.runtime.scheduler.models  # noqa: F401  (registers the tables before migrating)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.scheduler.clock import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 27, 12, 0, tzinfo=UTC))  # a Friday, 13:00 in Berlin


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """The scheduler's store on each backend (``tests/conftest.py``'s ``backend``)."""
    database = Database(database_url)
    await migrate(database)
    yield database
    await database.close()
