"""This suite runs once per Telegram driver (``telegram.library``: ptb and aiogram), on SQLite;
the tests marked ``@also_on_postgres`` (tests/conftest.py) run once more, with ptb, on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import DRIVERS, use_library


@pytest.fixture(autouse=True, params=DRIVERS)
def telegram_library(request: pytest.FixtureRequest) -> Iterator[str]:
    use_library(request.param)
    yield request.param
    use_library("ptb")
