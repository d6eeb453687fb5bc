"""What every benchmark shares: percentiles, machine facts, result files, the bot's settings, and a
fresh PostgreSQL database for a run (:func:`pg_database`)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from agentgram.bot.settings import BotSettings, bot_settings_from_mapping

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
TOKEN = "123456:TEST-token"  # FakeTelegram's default token
MODEL = "bench-model"


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (``p`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of nothing")
    rank = (len(ordered) - 1) * p / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/mean/max in milliseconds of samples given in seconds."""
    if not seconds:
        return {"n": 0}
    ms = [s * 1000.0 for s in seconds]
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 2),
        "p90": round(percentile(ms, 90), 2),
        "p99": round(percentile(ms, 99), 2),
        "mean": round(sum(ms) / len(ms), 2),
        "max": round(max(ms), 2),
    }


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],  # other work on the machine
    }


def write_results(name: str, payload: dict[str, Any], directory: Path | None = None) -> Path:
    directory = directory or RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = directory / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def agentgram_settings(
    workdir: Path,
    *,
    tg_root: str,
    llm_url: str,
    users: Sequence[int],
    edit_interval: float,
    storage_url: str | None = None,
) -> BotSettings:
    """The bot as a user would configure it, pointed at the fakes; file SQLite in ``workdir``, or the
    database at ``storage_url`` (a PostgreSQL one from :func:`pg_database`)."""
    raw = agentgram_config(
        workdir, tg_root=tg_root, llm_url=llm_url, users=users, edit_interval=edit_interval,
        storage_url=storage_url,
    )  # fmt: skip
    return bot_settings_from_mapping(raw, {})


def agentgram_config(
    workdir: Path,
    *,
    tg_root: str,
    llm_url: str,
    users: Sequence[int],
    edit_interval: float,
    storage_url: str | None = None,
) -> dict[str, Any]:
    """:func:`agentgram_settings`' raw config (a bot started as ``agentgram run --config`` gets it as
    a file, :mod:`bench.cluster`)."""
    return {
        "telegram": {
            "token": TOKEN,
            "api_base_url": tg_root,
            "allowed_user_ids": list(users),
            "stream_edit_interval": edit_interval,
            "poll_timeout": 10,
        },
        "llm": {"base_url": llm_url, "api_key": "sk-bench", "model": MODEL, "max_retries": 0},
        "storage": {"url": storage_url or f"sqlite+aiosqlite:///{workdir / 'agentgram.db'}"},
        "agent": {"workdir": str(workdir / "workspace"), "timezone": "UTC"},
        "tic": {"enabled": False},
        "logging": {"level": "WARNING"},
    }


def asyncpg_dsn(url: str) -> str:
    """The asyncpg DSN of a SQLAlchemy ``postgresql+asyncpg://`` URL."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def shown_url(url: str | None) -> str | None:
    """``url`` with its password hidden, for a result file."""
    from sqlalchemy.engine import make_url

    return None if url is None else make_url(url).render_as_string(hide_password=True)


@contextlib.asynccontextmanager
async def pg_database(server_url: str) -> AsyncIterator[str]:
    """A new database on the PostgreSQL server of ``server_url`` (a ``postgresql+asyncpg://`` URL of
    its maintenance database, e.g. ``scripts/test-services``' ``AGENTGRAM_TEST_PG_URL``) for the
    run; its URL. Dropped after, ``WITH (FORCE)``: a bot process killed mid-run does not keep it."""
    import asyncpg
    from sqlalchemy.engine import make_url

    dsn = asyncpg_dsn(server_url)
    name = f"agentgram_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def ratio(numerator: object, denominator: object) -> float | None:
    """``numerator / denominator`` to 3 places, or ``None`` when either is missing or zero."""
    if not isinstance(numerator, int | float) or not isinstance(denominator, int | float) or not denominator:
        return None
    return round(numerator / denominator, 3)


def row(cells: Sequence[object], widths: Sequence[int]) -> str:
    return "  ".join(
        str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )
