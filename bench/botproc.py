"""One bot (agentgram or the baseline) in its own process, controlled over stdin/stdout.

The benchmark driver runs the fakes and the load in its own process and
starts this one per bot, so the bot's peak RSS and CPU time are the bot's
alone and the fakes do not compete for the bot's event loop. Protocol, one
JSON object per stdout line: ``{"event": "ready", ...}`` once started; each
``stats`` line on stdin answers ``{"event": "stats", ...}``; ``stop`` stops
the bot and answers ``{"event": "done", ...}`` (with :class:`Stalls`' figures from the
first ``stats`` on, i.e. over the measured load). Kinds: ``baseline``
(:mod:`bench.baseline_bot`), ``agentgram`` (``TelegramBot`` as shipped) and
``agentgram-nolimit``, a diagnostic: the same bot with python-telegram-bot's
``AIORateLimiter`` (30 requests/s overall) taken out, to separate the cost of
that deliberate cap from the runtime's own; ``agentgram-oldsession``, a
diagnostic: a new chat's session opened as before issue 12
(:func:`old_session_path`), to measure that change in one run; ``agentgram-pg``, agentgram as
shipped on the PostgreSQL database of ``--storage-url`` (the driver makes a fresh one per run,
:func:`bench.common.pg_database`). ``--storage-url`` points any agentgram kind's ``storage.url``
elsewhere (default: a SQLite file in ``--workdir``). Stats are this process's RSS,
peak RSS (``VmHWM``, :func:`peak_rss_kb`) and CPU seconds (user + system).

``memory`` runs a full collection and answers ``{"event": "memory", ...}``: RSS, the Python
heap's allocated blocks, the objects the collector tracks and, for agentgram, what its in-memory
maps hold (session workers, unread views, history tails and their entries, cached chat sessions),
for :mod:`bench.chat_memory`. ``--idle-timeout SECONDS`` sets agentgram's chat idle timeout (how
long a chat's idle worker is kept before it is evicted; the product's is
:data:`~agentgram.runtime.core.sessions.hub.CHAT_IDLE_TIMEOUT`).

``--profile FILE`` writes a pyinstrument profile (HTML if FILE ends in
``.html``, the session to render later if ``.pyisession``, text otherwise) of everything between ``ready`` and ``stop``
(``pip install pyinstrument``; the driver passes it to agentgram only).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("PTB_TIMEDELTA", "1")

from bench.common import MODEL, TOKEN, agentgram_settings

KINDS = ("baseline", "agentgram", "agentgram-nolimit", "agentgram-oldsession", "agentgram-pg")
NEEDS_STORAGE_URL = ("agentgram-pg",)
"""Kinds that run only on the database the driver passes as ``--storage-url``."""


def stats() -> dict[str, Any]:
    import psutil

    usage = resource.getrusage(resource.RUSAGE_SELF)
    process = psutil.Process()
    return {
        "rss_kb": process.memory_info().rss // 1024,
        "peak_rss_kb": peak_rss_kb() or usage.ru_maxrss,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        # the event loop's thread apart from the others (the database's, the resolver's)
        "main_thread_cpu_s": next(
            (t.user_time + t.system_time for t in process.threads() if t.id == process.pid), None
        ),
    }


def peak_rss_kb() -> int | None:
    """This process's peak RSS (``VmHWM``, kB). Not ``ru_maxrss``: Linux keeps that across
    ``execve``, so a bot started by a driver that has grown would report the driver's size."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


class Stalls:
    """What holds the bot's event loop up: its lag (a 10 ms tick's overshoot) and the
    garbage collector's pauses, to tell a latency tail's cause."""

    TICK = 0.01

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.gc_pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._gc_started = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """From the first call on (the driver's first ``stats`` marks the measured load's start)."""
        if self._task is not None:
            return
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.create_task(self._tick())

    def stop(self) -> dict[str, Any]:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
        lags = sorted(self.lags)
        return {
            "loop_lag_ms": {
                "p50": _ms(lags, 0.5), "p99": _ms(lags, 0.99), "p999": _ms(lags, 0.999),
                "max": round(lags[-1] * 1000, 1) if lags else 0.0,
                "over_50ms": sum(1 for lag in lags if lag > 0.05),
            },
            "gc_tracked_objects": len(gc.get_objects()),  # what a full collection walks (not frozen)
            "gc": {
                str(gen): {"count": len(ps), "max_ms": round(max(ps, default=0) * 1000, 1),
                           "total_ms": round(sum(ps) * 1000, 1)}
                for gen, ps in self.gc_pauses.items()
            },
        }  # fmt: skip

    async def _tick(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.TICK)
            self.lags.append(max(0.0, time.perf_counter() - before - self.TICK))

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_pauses[int(info["generation"])].append(time.perf_counter() - self._gc_started)


def _ms(ordered: list[float], q: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2) if ordered else 0.0


_CYCLIC = [0]
"""Objects the cyclic collector freed since the bot started, outside :func:`memory`'s own
collections: garbage that reference counting could not free (counted from :func:`start_bot` on)."""


def _count_cyclic(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop":
        _CYCLIC[0] += int(info["collected"])


def memory(inspect: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """After a full collection: RSS, the Python heap, the cyclic garbage freed so far and what the
    bot's in-memory maps hold."""
    import psutil

    _CYCLIC[0] -= gc.collect()  # the sample's own collection is not the turns' garbage
    return {
        "cyclic_garbage": _CYCLIC[0],
        "rss_kb": psutil.Process().memory_info().rss // 1024,
        "sqlite_kb": sqlite_memory_kb(),
        "py_blocks": sys.getallocatedblocks(),
        "gc_objects": len(gc.get_objects()),
        "tasks": len(asyncio.all_tasks()),
        **inspect(),
    }


def sqlite_memory_kb() -> int | None:
    """SQLite's own heap in this process (its page caches, statements, schemas), if the sqlite3
    module is linked to a shared libsqlite3 that ctypes can reach (Debian's is)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return None
    try:
        used = ctypes.CDLL(name).sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    used.restype = ctypes.c_int64
    return int(used()) // 1024


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


@dataclass(slots=True, frozen=True)
class Started:
    """A started bot: its stop function, its database's dialect (``none`` for the baseline, the
    ``ready`` line reports it) and what its in-memory maps hold (:func:`memory`)."""

    stop: Callable[[], Awaitable[None]]
    storage: str
    inspect: Callable[[], dict[str, Any]]


async def start_bot(args: argparse.Namespace) -> Started:
    """Start the chosen bot."""
    gc.callbacks.append(_count_cyclic)
    if args.kind == "baseline":
        from bench.baseline_bot import build_baseline, start_baseline, stop_baseline

        application = build_baseline(TOKEN, args.tg, args.llm, MODEL)
        await start_baseline(application)
        return Started(lambda: stop_baseline(application), "none", dict)
    from agentgram.bot.cli import freeze_startup_heap, limit_malloc_arenas, trim_after_full_collections

    limit_malloc_arenas()  # as `agentgram run` does, before its threads
    from agentgram.bot.telegram.app import compose

    users = [int(u) for u in args.users.split(",")]
    settings = agentgram_settings(
        Path(args.workdir), tg_root=args.tg, llm_url=args.llm, users=users, edit_interval=args.edit_interval,
        storage_url=args.storage_url or None,
    )  # fmt: skip
    if args.kind == "agentgram-nolimit":  # diagnostic: the driver's pacer out of the way
        telegram = settings.telegram.model_copy(update={"messages_per_second": 1e6})
        settings = settings.model_copy(update={"telegram": telegram})
    bot = compose(settings)
    if args.kind == "agentgram-oldsession":  # diagnostic: a chat's session opened as before issue 12
        old_session_path(bot.runtime.parts.session_store)
    if args.idle_timeout is not None:
        bot.runtime.parts.hub.options.idle_timeout = args.idle_timeout
    await bot.start()
    freeze_startup_heap()  # as `agentgram run` does
    trim_after_full_collections()
    return Started(bot.stop, bot.runtime.parts.db.engine.dialect.name, lambda: held(bot.runtime.parts))


def held(parts: Any) -> dict[str, int]:
    """What agentgram's per-session in-memory maps hold (diagnostics; private attributes read)."""
    tails = parts.history.tails._views
    return {
        "workers": len(parts.hub.workers),
        "unread_views": len(parts.mailbox._view._views),
        "history_tails": len(tails),
        "history_tail_entries": sum(len(tail.entries) for tail in tails.values()),
        "history_tail_kb": getattr(parts.history.tails, "weight", 0) // 1024,  # an older checkout: 0
        "chat_sessions": len(parts.chat_sessions._sessions),
    }


def old_session_path(sessions: Any) -> None:
    """A new chat's session as issue 12 found it: a read, then an ORM write (select again, insert,
    flush, the root frame), whatever the runtime's cache knows — to compare in one run."""
    from sqlmodel import Session

    from agentgram.runtime.infra.storage import sessions as module
    from agentgram.runtime.infra.storage.models import ChatSession, SessionSource

    db = sessions._db

    async def find_or_open(
        chat_id: int,
        *,
        user_id: int | None,
        language: str | None,
        look_first: bool = True,
        source: SessionSource = SessionSource.CHAT,
    ) -> tuple[ChatSession, bool]:
        found = await db.read_sync(lambda tx: tx.exec(module._active_query(chat_id, source)).first())
        if found is not None and (language is None or found.language_code == language):
            return found, False

        def find_or_create(tx: Session) -> tuple[ChatSession, bool]:
            found = tx.exec(module._active_query(chat_id, source)).first()
            created = found is None
            if found is None:
                fresh = ChatSession(source=source, chat_id=chat_id, user_id=user_id)
                found = module._create(tx, fresh)
            found.language_code = language or found.language_code
            tx.add(found)
            return found, created

        created: tuple[ChatSession, bool] = await db.write_orm(find_or_create)
        return created

    sessions.find_or_open = find_or_open


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    bot = await start_bot(args)
    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled")
        profiler.start()
    stalls = Stalls()
    say("ready", pid=os.getpid(), storage=bot.storage, **stats())
    while line := (await reader.readline()).decode().strip():
        if line == "stats":
            stalls.start()
            say("stats", **stats())
        elif line == "memory":
            say("memory", **memory(bot.inspect))
        elif line == "stop":
            break
    stalled = stalls.stop()
    if profiler is not None:
        profiler.stop()
        show_all = os.environ.get("BENCH_PROFILE_ALL") == "1"  # library frames too
        out = Path(args.profile)
        if out.suffix == ".pyisession":  # the samples, to render later (pyinstrument --load FILE)
            profiler.last_session.save(str(out))  # type: ignore[union-attr]
        else:
            text = (
                profiler.output_html() if out.suffix == ".html" else profiler.output_text(show_all=show_all)
            )
            out.write_text(text)  # noqa: ASYNC240  (once, at the end, outside the measurement)
    await asyncio.wait_for(bot.stop(), 30)
    say("done", **stats(), stalls=stalled)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--tg", required=True, help="FakeTelegram root URL")
    parser.add_argument("--llm", required=True, help="FakeOpenAI base URL (…/v1)")
    parser.add_argument("--users", default="", help="comma-separated allowed user ids")
    parser.add_argument("--workdir", default=".")
    parser.add_argument("--edit-interval", type=float, default=0.1)
    parser.add_argument("--profile", default="")
    parser.add_argument(
        "--idle-timeout", type=float, default=None, help="agentgram's chat idle timeout (s) before eviction"
    )
    parser.add_argument(
        "--storage-url", default="", help="agentgram's storage.url (default: SQLite in --workdir)"
    )
    args = parser.parse_args(argv)
    if args.kind in NEEDS_STORAGE_URL and not args.storage_url:
        parser.error(f"--kind {args.kind} needs --storage-url")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
