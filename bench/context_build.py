"""Context building against a long stored history: does its cost follow the history's length?

A SQLite file holds one chat session with N stored history rows (a user message, then an
answer, every fifth answer after a tool call with its result), N from 1,000 to 50,000. Each
case reads what one round reads and builds the request's messages, as the turn loop does
(:func:`runtime.turn.loop.round_history`'s two paths, then :func:`build_messages`):

- ``truncated``: compaction off — the newest ``max_history_messages`` (200) entries;
- ``compacted``: compaction on, a summary covering all but the newest ``--recent`` rows — the
  summary and only the rows after it.

``cold`` is the first round after a start (nothing in memory: the rows come from the database);
``warm`` every later round (the session's tail is in memory). Run::

    python -m bench.context_build [--sizes 1000,10000,50000] [--recent 40] [--repeats 30]

The target (issue 13): under 50 ms at 10,000 rows, and with compaction on a cost that does not
grow with the total history.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agentgram.runtime.core.turn.compaction import Compactor
from agentgram.runtime.core.turn.context import ContextSettings, build_messages
from agentgram.runtime.infra.config import CompactionSettings
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore
from agentgram.runtime.infra.storage.summary_rows import SummaryStore
from bench.common import machine, row, summary_ms, write_results

TARGET_MS = 50.0
SQLITE_NOW = "2026-03-01 12:00:00.000000"
WORDS = "the staging database listens on port 6543 and the backup runs nightly at two ".split()


@dataclass(slots=True, frozen=True)
class Options:
    sizes: tuple[int, ...] = (1_000, 10_000, 50_000)
    recent: int = 40
    repeats: int = 30
    max_history_messages: int = 200


def _text(index: int, words: int = 30) -> str:
    return " ".join(WORDS[(index + k) % len(WORDS)] for k in range(words))


def _fill(path: Path, session_id: int, rows: int, recent: int) -> None:
    """``rows`` history rows (and their tool calls), then a summary covering all but ``recent``."""
    raw = sqlite3.connect(path)
    history, calls = [], []
    for index in range(1, rows + 1):
        user = index % 2 == 1
        history.append(
            (index, session_id, "user" if user else "assistant", "" if index % 10 == 0 else _text(index))
        )
        if index % 10 == 0:  # an answer that called a tool, before the next text answer
            calls.append(
                (session_id, index, 0, f"call_{index}", "read_file", '{"path": "notes.md"}', _text(index, 80))
            )
    raw.executemany(
        "INSERT INTO chat_history (id, session_id, role, content, is_synthetic, status, metadata,"
        f" input_tokens, output_tokens, created_at) VALUES (?, ?, ?, ?, 0, 'ok', '{{}}', 0, 0, '{SQLITE_NOW}')",
        history,
    )
    raw.executemany(
        "INSERT INTO tool_calls (session_id, history_id, position, call_id, name, arguments, status, result,"
        f" created_at) VALUES (?, ?, ?, ?, ?, ?, 'done', ?, '{SQLITE_NOW}')",
        calls,
    )
    covered = max(rows - recent, 0)
    if covered:
        raw.execute(
            "INSERT INTO history_summaries (session_id, covers_through, made_after, covered_rows, covers_until,"
            " content, input_tokens, output_tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?)",
            (session_id, covered, rows, covered, SQLITE_NOW, _text(0, 400), SQLITE_NOW),
        )
    raw.commit()
    raw.close()


async def _case(db: Database, session_id: int, options: Options, compacted: bool) -> dict[str, Any]:
    context = ContextSettings(
        static_system="You are a helpful agent." * 40,
        workdir=Path("/tmp"),
        timezone=ZoneInfo("UTC"),
        timezone_name="UTC",
        max_history_messages=options.max_history_messages,
    )
    now = datetime.now(UTC)
    timings: dict[str, list[float]] = {"cold": [], "warm": []}
    messages = 0
    for _ in range(options.repeats):
        history = HistoryStore(db)
        compactor = Compactor(CompactionSettings(threshold_tokens=10**9), history, SummaryStore(db))
        for kind in ("cold", "warm"):
            started = time.perf_counter()
            if compacted:
                view = await compactor.view(session_id)
                built = build_messages(view.entries, context, now, compacted=view.compacted)
            else:
                entries = await history.entries(session_id, limit=options.max_history_messages)
                built = build_messages(entries, context, now)
            timings[kind].append(time.perf_counter() - started)
            messages = len(built)
    return {kind: summary_ms(values) for kind, values in timings.items()} | {"messages": messages}


async def run(options: Options) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="agentgram-context-") as tmp:
        for size in options.sizes:
            path = Path(tmp) / f"history-{size}.db"
            db = Database(f"sqlite+aiosqlite:///{path}")
            await migrate(db)
            session, _ = await SessionStore(db).find_or_open(1, user_id=1, language="en")
            assert session.id is not None
            await db.close()
            _fill(path, session.id, size, options.recent)
            db = Database(f"sqlite+aiosqlite:///{path}")
            results[str(size)] = {
                "truncated": await _case(db, session.id, options, compacted=False),
                "compacted": await _case(db, session.id, options, compacted=True),
            }
            await db.close()
    return {
        "benchmark": "context_build",
        "options": {
            "sizes": list(options.sizes),
            "recent": options.recent,
            "repeats": options.repeats,
            "max_history_messages": options.max_history_messages,
        },
        "machine": machine(),
        "target_ms": TARGET_MS,
        "results": results,
    }


def table(payload: dict[str, Any]) -> str:
    widths = (8, 10, 9, 12, 12, 12, 12)
    lines = [
        row(("rows", "case", "messages", "cold p50 ms", "cold p90 ms", "warm p50 ms", "warm p90 ms"), widths)
    ]
    for size, cases in payload["results"].items():
        for name, result in cases.items():
            cold, warm = result["cold"], result["warm"]
            cells = (size, name, result["messages"], cold["p50"], cold["p90"], warm["p50"], warm["p90"])
            lines.append(row(cells, widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--recent", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    options = Options(tuple(int(s) for s in args.sizes.split(",")), args.recent, args.repeats)
    payload = asyncio.run(run(options))
    print(table(payload))
    print(f"results: {write_results('context_build', payload)}")


if __name__ == "__main__":
    main()
