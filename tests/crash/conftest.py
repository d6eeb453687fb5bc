"""This suite runs once per Telegram driver (``telegram.library``: ptb and aiogram)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import DRIVERS, use_library


@pytest.fixture(autouse=True, params=DRIVERS)
def telegram_library(request: pytest.FixtureRequest) -> Iterator[str]:
    use_library(request.param)
    yield request.param
    use_library("ptb")
