"""What every benchmark shares: percentiles, machine facts, result files, the bot's settings."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Sequence
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
) -> BotSettings:
    """The bot as a user would configure it, pointed at the fakes; file SQLite in ``workdir``."""
    raw: dict[str, Any] = {
        "telegram": {
            "token": TOKEN,
            "api_base_url": tg_root,
            "allowed_user_ids": list(users),
            "stream_edit_interval": edit_interval,
            "poll_timeout": 10,
        },
        "llm": {"base_url": llm_url, "api_key": "sk-bench", "model": MODEL, "max_retries": 0},
        "storage": {"url": f"sqlite+aiosqlite:///{workdir / 'agentgram.db'}"},
        "agent": {"workdir": str(workdir / "workspace"), "timezone": "UTC"},
        "tic": {"enabled": False},
        "logging": {"level": "WARNING"},
    }
    return bot_settings_from_mapping(raw, {})


def row(cells: Sequence[object], widths: Sequence[int]) -> str:
    return "  ".join(
        str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )
