"""The adapter's unit tests run once per driver (``telegram.library``) where a driver takes part.

``telegram_library`` is the driver's name; a test that builds settings passes it explicitly as
``telegram={"library": telegram_library}`` so the settings say which driver it exercises.
``driver`` is that driver pointed at nothing in particular (for its parser, or for code that
needs a :class:`~agentgram.bot.telegram.core.port.BotApi` but makes no call); it is closed after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentgram.bot.telegram.drivers import Driver, make_driver
from tests.conftest import DRIVERS, make_settings


@pytest.fixture(params=DRIVERS)
def telegram_library(request: pytest.FixtureRequest) -> str:
    library: str = request.param
    return library


@pytest.fixture
async def driver(tmp_path: Path, telegram_library: str) -> AsyncIterator[Driver]:
    settings = make_settings(tmp_path, "http://127.0.0.1:9/v1", telegram={"library": telegram_library})
    made = make_driver(settings.telegram)
    try:
        yield made
    finally:
        await made.api.close()
