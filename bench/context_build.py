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

With ``--pg-url postgresql+asyncpg://…`` (a server's maintenance database, e.g. the one
``scripts/test-services`` exports as ``AGENTGRAM_TEST_PG_URL``) every case runs on a fresh
PostgreSQL database too (one per size, created and dropped by the run): the schema made by
:func:`migrate` through agentgram's ``Database``, the same rows copied in with asyncpg
(``copy_records_to_table``), then ``ANALYZE`` (what autovacuum does to a server database that
has grown); the table adds the PostgreSQL/SQLite ratio of each case's p50s::

    scripts/test-services sh -c 'python -m bench.context_build --pg-url "$AGENTGRAM_TEST_PG_URL"'

The target (issue 13): under 50 ms at 10,000 rows, and with compaction on a cost that does not
grow with the total history.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
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
from bench.common import asyncpg_dsn, machine, pg_database, ratio, row, shown_url, summary_ms, write_results

TARGET_MS = 50.0
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
SQLITE_NOW = "2026-03-01 12:00:00.000000"  # how the ORM stores NOW in SQLite
WORDS = "the staging database listens on port 6543 and the backup runs nightly at two ".split()


@dataclass(slots=True, frozen=True)
class Options:
    sizes: tuple[int, ...] = (1_000, 10_000, 50_000)
    recent: int = 40
    repeats: int = 30
    max_history_messages: int = 200
    pg_url: str | None = None


def _text(index: int, words: int = 30) -> str:
    return " ".join(WORDS[(index + k) % len(WORDS)] for k in range(words))


HISTORY_COLUMNS = (
    "id", "session_id", "role", "content", "is_synthetic", "status", "metadata", "input_tokens",
    "output_tokens", "created_at",
)  # fmt: skip
CALL_COLUMNS = (
    "session_id",
    "history_id",
    "position",
    "call_id",
    "name",
    "arguments",
    "status",
    "result",
    "created_at",
)
SUMMARY_COLUMNS = (
    "session_id", "covers_through", "made_after", "covered_rows", "covers_until", "content",
    "input_tokens", "output_tokens", "created_at",
)  # fmt: skip


@dataclass(slots=True, frozen=True)
class Rows:
    """One session's stored history, as rows of :data:`HISTORY_COLUMNS`, :data:`CALL_COLUMNS` and
    :data:`SUMMARY_COLUMNS` (``now`` in every timestamp column: a string for SQLite, a datetime for
    asyncpg)."""

    history: list[tuple[Any, ...]]
    calls: list[tuple[Any, ...]]
    summaries: list[tuple[Any, ...]]


def _rows(session_id: int, rows: int, recent: int, now: object) -> Rows:
    """``rows`` history rows (and their tool calls), then a summary covering all but ``recent``."""
    history, calls, summaries = [], [], []
    for index in range(1, rows + 1):
        user = index % 2 == 1
        content = "" if index % 10 == 0 else _text(index)
        history.append(
            (index, session_id, "user" if user else "assistant", content, False, "ok", "{}", 0, 0, now)
        )
        if index % 10 == 0:  # an answer that called a tool, before the next text answer
            calls.append(
                (session_id, index, 0, f"call_{index}", "read_file", '{"path": "notes.md"}', "done",
                 _text(index, 80), now)
            )  # fmt: skip
    covered = max(rows - recent, 0)
    if covered:
        summaries.append((session_id, covered, rows, covered, now, _text(0, 400), 0, 0, now))
    return Rows(history, calls, summaries)


def _insert(table: str, columns: Sequence[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"


def _fill_sqlite(path: Path, session_id: int, rows: int, recent: int) -> None:
    """The history of :func:`_rows`, written with raw ``sqlite3`` (the ORM would take minutes)."""
    made = _rows(session_id, rows, recent, SQLITE_NOW)
    raw = sqlite3.connect(path)
    raw.executemany(_insert("chat_history", HISTORY_COLUMNS), made.history)
    raw.executemany(_insert("tool_calls", CALL_COLUMNS), made.calls)
    raw.executemany(_insert("history_summaries", SUMMARY_COLUMNS), made.summaries)
    raw.commit()
    raw.close()


async def _fill_postgres(url: str, session_id: int, rows: int, recent: int) -> None:
    """The same rows copied in with asyncpg; the id sequences moved past them, then ``ANALYZE``."""
    import asyncpg

    made = _rows(session_id, rows, recent, NOW)
    raw = await asyncpg.connect(asyncpg_dsn(url))
    try:
        async with raw.transaction():
            for table, columns, records in (
                ("chat_history", HISTORY_COLUMNS, made.history),
                ("tool_calls", CALL_COLUMNS, made.calls),
                ("history_summaries", SUMMARY_COLUMNS, made.summaries),
            ):
                await raw.copy_records_to_table(table, records=records, columns=list(columns))
                await raw.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" (SELECT coalesce(max(id), 0) + 1 FROM {table}), false)"
                )
        await raw.execute("ANALYZE chat_history, tool_calls, history_summaries")
    finally:
        await raw.close()


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


async def _measure(url: str, options: Options, fill: Callable[[int], Awaitable[None]]) -> dict[str, Any]:
    """Both cases on the database at ``url``: migrated, one session opened, ``fill(session_id)``."""
    db = Database(url)
    try:
        await migrate(db)
        session, _ = await SessionStore(db).find_or_open(1, user_id=1, language="en")
        assert session.id is not None
    finally:
        await db.close()
    await fill(session.id)
    db = Database(url)
    try:
        return {
            "truncated": await _case(db, session.id, options, compacted=False),
            "compacted": await _case(db, session.id, options, compacted=True),
        }
    finally:
        await db.close()


def _ratios(sqlite: dict[str, Any], postgres: dict[str, Any]) -> dict[str, Any]:
    """PostgreSQL ÷ SQLite per size and case, of the cold and warm p50 and p90."""
    return {
        size: {
            case: {
                f"{kind}_{p}": ratio(postgres[size][case][kind].get(p), result[kind].get(p))
                for kind in ("cold", "warm")
                for p in ("p50", "p90")
            }
            for case, result in cases.items()
        }
        for size, cases in sqlite.items()
        if size in postgres
    }


async def run(options: Options) -> dict[str, Any]:
    results: dict[str, Any] = {}
    postgres: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="agentgram-context-") as tmp:
        for size in options.sizes:
            path = Path(tmp) / f"history-{size}.db"

            async def fill_sqlite(session_id: int, path: Path = path, size: int = size) -> None:
                _fill_sqlite(path, session_id, size, options.recent)

            results[str(size)] = await _measure(f"sqlite+aiosqlite:///{path}", options, fill_sqlite)
            if options.pg_url is None:
                continue
            async with pg_database(options.pg_url) as url:

                async def fill_postgres(session_id: int, url: str = url, size: int = size) -> None:
                    await _fill_postgres(url, session_id, size, options.recent)

                postgres[str(size)] = await _measure(url, options, fill_postgres)
    extra: dict[str, Any] = {}
    if options.pg_url is not None:
        extra = {"postgresql": postgres, "ratio_postgresql_sqlite": _ratios(results, postgres)}
    return {
        "benchmark": "context_build",
        "options": {
            "sizes": list(options.sizes),
            "recent": options.recent,
            "repeats": options.repeats,
            "max_history_messages": options.max_history_messages,
            "pg_url": shown_url(options.pg_url),
        },
        "machine": machine(),
        "target_ms": TARGET_MS,
        "results": results,  # SQLite
        **extra,
    }


def table(payload: dict[str, Any]) -> str:
    widths = (8, 10, 10, 9, 12, 12, 12, 12)
    lines = [
        row(
            (
                "rows",
                "case",
                "backend",
                "messages",
                "cold p50 ms",
                "cold p90 ms",
                "warm p50 ms",
                "warm p90 ms",
            ),
            widths,
        )
    ]
    backends = [("sqlite", payload["results"])]
    if "postgresql" in payload:
        backends.append(("postgresql", payload["postgresql"]))
    ratios = payload.get("ratio_postgresql_sqlite", {})
    for size, cases in payload["results"].items():
        for name in cases:
            for backend, results in backends:
                result = results[size][name]
                cold, warm = result["cold"], result["warm"]
                cells = (
                    size,
                    name,
                    backend,
                    result["messages"],
                    cold["p50"],
                    cold["p90"],
                    warm["p50"],
                    warm["p90"],
                )
                lines.append(row(cells, widths))
            if size in ratios:
                r = ratios[size][name]
                cells = (
                    size,
                    name,
                    "pg/sqlite",
                    "",
                    r["cold_p50"],
                    r["cold_p90"],
                    r["warm_p50"],
                    r["warm_p90"],
                )
                lines.append(row(cells, widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--recent", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument(
        "--pg-url",
        default=None,
        help="also on a fresh database of this PostgreSQL server (postgresql+asyncpg://…)",
    )
    args = parser.parse_args()
    options = Options(
        tuple(int(s) for s in args.sizes.split(",")), args.recent, args.repeats, pg_url=args.pg_url
    )
    payload = asyncio.run(run(options))
    print(table(payload))
    print(f"results: {write_results('context_build', payload)}")


if __name__ == "__main__":
    main()
