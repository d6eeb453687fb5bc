"""Shared fixtures: fakes over HTTP on loopback, settings, and a guard against real network."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentgram.bot.settings import BotSettings, bot_settings_from_mapping, current_layout
from tests.backends import BACKENDS, database, pg_database
from tests.fakes.openai_server import FakeOpenAI

os.environ.setdefault("PTB_TIMEDELTA", "1")  # PTB 22: retry_after as timedelta, no deprecation warning

ALLOWED_USER = 1001
STRANGER = 666

DRIVERS = ("ptb", "aiogram")
"""Every ``telegram.library``: the e2e and crash suites run once with each (their conftests)."""
_library = {"telegram": "ptb"}


def use_library(name: str) -> None:
    """The ``telegram.library`` every bot a test builds from :func:`config_mapping` uses."""
    _library["telegram"] = name


_database: dict[str, str | None] = {"url": None}


def use_database(url: str | None) -> None:
    """The ``storage.url`` every bot a test builds from :func:`config_mapping` uses; ``None``
    (the default): a SQLite file in the test's ``tmp_path``."""
    _database["url"] = url


Decorated = TypeVar("Decorated", bound=Callable[..., Any])


def also_on_postgres(test: Decorated) -> Decorated:
    """An end-to-end or crash test that runs once more on PostgreSQL, with the ptb driver only:
    its ids are ``[ptb]`` and ``[aiogram]`` (SQLite, as every test of those suites) and
    ``[ptb-postgres]``. The whole suite on both backends and both drivers does not fit the CI
    budget; docs/architecture/development.md says which tests carry this mark and why."""
    cases = [pytest.param(driver, "sqlite", id=driver) for driver in DRIVERS]
    cases.append(pytest.param("ptb", "postgres", id="ptb-postgres"))
    marks = (
        pytest.mark.usefixtures("storage_backend"),
        pytest.mark.parametrize(("telegram_library", "storage_backend"), cases, indirect=True),
    )
    for mark in marks:
        test = mark(test)
    return test


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and self.family in (socket.AF_INET, socket.AF_INET6):
        if not (host.startswith("127.") or host in ("::1", "localhost")):
            raise AssertionError(f"test tried to reach a non-loopback address: {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_real_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each database backend in turn (``sqlite``, ``postgres``): a test that takes it runs on both."""
    return str(request.param)


@pytest.fixture
async def storage_backend(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The backend the bots of an :func:`also_on_postgres` test store in: ``sqlite`` (a file in
    the test's ``tmp_path``) or ``postgres`` (a fresh database on the test server, for the whole
    test: a restart finds what the first bot stored; dropped after)."""
    backend = str(getattr(request, "param", "sqlite"))
    if backend == "sqlite":
        yield backend
        return
    async with pg_database() as url:
        use_database(url)
        try:
            yield backend
        finally:
            use_database(None)


@pytest.fixture
async def database_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database of the test's :func:`backend`, its own (see ``tests/backends.py``)."""
    async with database(backend, tmp_path) as url:
        yield url


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main-model", "backup-model")) as server:
        yield server


def config_mapping(
    tmp_path: Path, llm_url: str, tg_root: str = "http://127.0.0.1:9", **sections: Any
) -> dict[str, Any]:
    """The raw config every test bot uses, with ``sections`` merged over it."""
    raw: dict[str, Any] = {
        "telegram": {
            "token": "123456:TEST-token",
            "api_base_url": tg_root,
            "allowed_user_ids": [ALLOWED_USER],
            "stream_edit_interval": 0.2,
            "stream_first_delay": 0,  # tests of the delay set their own
            "poll_timeout": 1,
            "library": _library["telegram"],
        },
        "llm": {"base_url": llm_url, "api_key": "sk-test-secret", "model": "main-model", "max_retries": 0},
        "storage": {"url": _database["url"] or f"sqlite+aiosqlite:///{tmp_path / 'agentgram.db'}"},
        "agent": {"workdir": str(tmp_path / "workspace"), "timezone": "Europe/Berlin"},
        "tic": {"enabled": False},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return current_layout(raw)  # tuning knobs under advanced:, as config.example.yml writes them


def make_settings(
    tmp_path: Path, llm_url: str, tg_root: str = "http://127.0.0.1:9", **sections: Any
) -> BotSettings:
    return bot_settings_from_mapping(config_mapping(tmp_path, llm_url, tg_root, **sections), {})
