"""This suite runs once per Telegram driver (``telegram.library``: ptb and aiogram), on SQLite;
the tests marked ``@also_on_postgres`` (tests/conftest.py) run once more, with ptb, on PostgreSQL.

A module whose scenario the driver takes no part in (processes the runtime reaps, sub-agents,
compaction: what is killed and recovered is the runtime's alone, and the chat side is the
e2e suite's, which runs every test with both drivers) says so (``pytestmark = ONE_DRIVER``) and runs with
ptb only: the crash suite is the slowest part of CI, and a second driver there measured no
second behaviour (docs/architecture/development.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import DRIVERS, use_library

ONE_DRIVER = pytest.mark.parametrize("telegram_library", ["ptb"], indirect=True)
"""A module's ``pytestmark``: its tests run with ptb only (the module docstring)."""


@pytest.fixture(autouse=True, params=DRIVERS)
def telegram_library(request: pytest.FixtureRequest) -> Iterator[str]:
    use_library(request.param)
    yield request.param
    use_library("ptb")
