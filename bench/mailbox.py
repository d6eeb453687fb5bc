"""Mailbox accept throughput: the durable ``SqlMailbox`` on a SQLite file, and ``MemoryMailbox``.

The SQL mailbox runs exactly as the runtime configures it (``Database``: WAL,
``synchronous=NORMAL``, ``BEGIN IMMEDIATE``, one in-process write lock, the
migrated schema; each batch's transaction is one call on a worker thread,
``Database.write_sync``); each accept returns only after its transaction committed
(accepts made at the same time share one: group commit), so an accepted
envelope survives the process being killed. ``--full-sync`` adds a
run with ``PRAGMA synchronous=FULL`` (an fsync per commit: survives power
loss too).

Workloads, each ``--envelopes`` user messages:

- ``sequential``: one sender awaiting each accept, round-robin over
  ``--sessions`` sessions (so no session passes the unread bound);
- ``concurrent``: one sender task per session, all at once;
- ``duplicates``: the sequential envelopes re-sent (idempotent re-accept).

With ``--pg-url postgresql+asyncpg://…`` (a server's maintenance database, e.g. the one
``scripts/test-services`` exports as ``AGENTGRAM_TEST_PG_URL``) the same workloads run on a fresh
PostgreSQL database too (created and dropped by the run), and the table gives the ratio of each
workload to SQLite's.

Usage: ``python -m bench.mailbox --envelopes 5000 --sessions 50``;
``scripts/test-services sh -c 'python -m bench.mailbox --sessions 100 --pg-url "$AGENTGRAM_TEST_PG_URL"'``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgram.runtime.core.mailbox import (
    Envelope,
    Mailbox,
    MemoryMailbox,
    Sender,
    SenderKind,
    SqlMailbox,
    UserMessageBody,
)
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.migrations import migrate
from agentgram.runtime.infra.storage.sessions import SessionStore
from bench.common import machine, pg_database, ratio, row, write_results

TARGET = 2000.0  # envelopes/s on SQLite with durability on (issue 4)


@dataclass(slots=True, frozen=True)
class Options:
    envelopes: int = 5000
    sessions: int = 50
    full_sync: bool = False
    pg_url: str | None = None


def envelope(session_id: int, n: int) -> Envelope:
    return Envelope(
        id=f"bench:{session_id}:{n}",
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER, ref="2001"),
        body=UserMessageBody(text=f"message {n} — hello, how are you?", chat_message_id=n),
    )


def plan(session_ids: Sequence[int], total: int) -> list[Envelope]:
    """``total`` envelopes, round-robin over the sessions."""
    return [envelope(session_ids[n % len(session_ids)], n) for n in range(total)]


async def timed(label: str, count: int, work: Callable[[], Any]) -> dict[str, Any]:
    started = time.perf_counter()
    await work()
    seconds = time.perf_counter() - started
    return {
        "workload": label,
        "envelopes": count,
        "seconds": round(seconds, 3),
        "per_s": round(count / seconds),
    }


async def workloads(mailbox: Mailbox, session_ids: Sequence[int], total: int) -> list[dict[str, Any]]:
    sequential = plan(session_ids, total)

    async def one_by_one() -> None:
        for item in sequential:
            await mailbox.accept(item)

    async def again() -> None:
        for item in sequential:
            assert (await mailbox.accept(item)).duplicate

    per_session = max(1, total // len(session_ids))
    concurrent = [[envelope(s, 1_000_000 + n) for n in range(per_session)] for s in session_ids]

    async def sender(items: list[Envelope]) -> None:
        for item in items:
            await mailbox.accept(item)

    async def all_at_once() -> None:
        await asyncio.gather(*(sender(items) for items in concurrent))

    return [
        await timed("sequential", len(sequential), one_by_one),
        await timed(f"concurrent ({len(session_ids)} senders)", per_session * len(session_ids), all_at_once),
        await timed("duplicates", len(sequential), again),
    ]


async def sql_run(
    workdir: Path, opts: Options, *, full_sync: bool, url: str | None = None
) -> list[dict[str, Any]]:
    if url is not None:
        db = Database(url, pool_size=10)
    else:
        db = Database(
            f"sqlite+aiosqlite:///{workdir / ('full' if full_sync else 'normal')}.db",
            synchronous="FULL" if full_sync else "NORMAL",
        )
    try:
        await migrate(db)
        store = SessionStore(db)
        ids = []
        for n in range(opts.sessions):
            session, _ = await store.find_or_open(5000 + n, user_id=5000 + n, language="en")
            assert session.id is not None
            ids.append(session.id)
        # at most ~2 * envelopes/sessions unread per session: stay under the default bound of 256
        return await workloads(SqlMailbox(db, max_unread=256), ids, opts.envelopes)
    finally:
        await db.close()


async def run(opts: Options) -> dict[str, Any]:
    if 2 * opts.envelopes / opts.sessions >= 256:
        raise SystemExit("--envelopes / --sessions must stay below 128 (the unread bound is 256)")
    facts = machine()
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="agentgram-bench-") as tmp:
        results["sqlite (WAL, synchronous=NORMAL)"] = await sql_run(Path(tmp), opts, full_sync=False)
        if opts.full_sync:
            results["sqlite (WAL, synchronous=FULL)"] = await sql_run(Path(tmp), opts, full_sync=True)
    if opts.pg_url is not None:
        async with pg_database(opts.pg_url) as url:
            results["postgresql"] = await sql_run(Path(), opts, full_sync=False, url=url)
    results["memory"] = await workloads(MemoryMailbox(256), list(range(1, opts.sessions + 1)), opts.envelopes)
    sqlite = results["sqlite (WAL, synchronous=NORMAL)"]
    return {
        "benchmark": "mailbox",
        "machine": facts,
        "options": {
            "envelopes": opts.envelopes,
            "sessions": opts.sessions,
            "full_sync": opts.full_sync,
            "postgresql": opts.pg_url is not None,
        },
        "target_per_s": TARGET,
        "results": results,
        # accepts/s on PostgreSQL ÷ on SQLite (as configured), per workload; empty without --pg-url
        "ratio_postgresql_sqlite": {
            pg["workload"]: ratio(pg["per_s"], lite["per_s"])
            for pg, lite in zip(results.get("postgresql", []), sqlite, strict=False)
        },
    }


def table(payload: dict[str, Any]) -> str:
    widths = [34, 34, 10, 10]
    lines = [row(["mailbox", "workload", "envelopes", "per s"], widths)]
    for name, runs in payload["results"].items():
        for run_ in runs:
            lines.append(row([name, run_["workload"], run_["envelopes"], run_["per_s"]], widths))
    for workload, value in payload.get("ratio_postgresql_sqlite", {}).items():
        lines.append(f"accepts/s {workload}: PostgreSQL / SQLite = {value}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envelopes", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--full-sync", action="store_true", help="also run with PRAGMA synchronous=FULL")
    parser.add_argument("--pg-url", default=None, help="also on a fresh database of this PostgreSQL server")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    payload = asyncio.run(run(Options(args.envelopes, args.sessions, args.full_sync, args.pg_url)))
    print(table(payload))
    print(f"results: {write_results('mailbox', payload, args.out)}")
    return payload


if __name__ == "__main__":
    main()
