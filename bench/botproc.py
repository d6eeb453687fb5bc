"""One bot (agentgram or the baseline) in its own process, controlled over stdin/stdout.

The benchmark driver runs the fakes and the load in its own process and
starts this one per bot, so the bot's peak RSS and CPU time are the bot's
alone and the fakes do not compete for the bot's event loop. Protocol, one
JSON object per stdout line: ``{"event": "ready", ...}`` once started; each
``stats`` line on stdin answers ``{"event": "stats", ...}``; ``stop`` stops
the bot and answers ``{"event": "done", ...}``. Kinds: ``baseline``
(:mod:`bench.baseline_bot`), ``agentgram`` (``TelegramBot`` as shipped) and
``agentgram-nolimit``, a diagnostic: the same bot with python-telegram-bot's
``AIORateLimiter`` (30 requests/s overall) taken out, to separate the cost of
that deliberate cap from the runtime's own. Stats are this process's RSS,
peak RSS (``ru_maxrss``) and CPU seconds (user + system).

``--profile FILE`` writes a pyinstrument profile (HTML if FILE ends in
``.html``, text otherwise) of everything between ``ready`` and ``stop``
(``pip install pyinstrument``; the driver passes it to agentgram only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PTB_TIMEDELTA", "1")

from bench.common import MODEL, TOKEN, agentgram_settings

KINDS = ("baseline", "agentgram", "agentgram-nolimit")


def stats() -> dict[str, Any]:
    import psutil

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "rss_kb": psutil.Process().memory_info().rss // 1024,
        "peak_rss_kb": usage.ru_maxrss,  # kilobytes on Linux
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


async def start_bot(args: argparse.Namespace) -> Callable[[], Awaitable[None]]:
    """Start the chosen bot; return its stop function."""
    if args.kind == "baseline":
        from bench.baseline_bot import build_baseline, start_baseline, stop_baseline

        application = build_baseline(TOKEN, args.tg, args.llm, MODEL)
        await start_baseline(application)
        return lambda: stop_baseline(application)
    from agentgram.bot.cli import freeze_startup_heap
    from agentgram.bot.telegram.app import compose

    users = [int(u) for u in args.users.split(",")]
    settings = agentgram_settings(
        Path(args.workdir), tg_root=args.tg, llm_url=args.llm, users=users, edit_interval=args.edit_interval
    )
    bot = compose(settings)
    if args.kind == "agentgram-nolimit":  # diagnostic: without the 30 requests/s AIORateLimiter
        bot.application.bot._rate_limiter = None
    await bot.start()
    freeze_startup_heap()  # as `agentgram run` does
    return bot.stop


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    stop = await start_bot(args)
    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled")
        profiler.start()
    say("ready", pid=os.getpid(), **stats())
    while line := (await reader.readline()).decode().strip():
        if line == "stats":
            say("stats", **stats())
        elif line == "stop":
            break
    if profiler is not None:
        profiler.stop()
        show_all = os.environ.get("BENCH_PROFILE_ALL") == "1"  # library frames too
        out = Path(args.profile)
        text = profiler.output_html() if out.suffix == ".html" else profiler.output_text(show_all=show_all)
        out.write_text(text)  # noqa: ASYNC240  (once, at the end, outside the measurement)
    await asyncio.wait_for(stop(), 30)
    say("done", **stats())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--tg", required=True, help="FakeTelegram root URL")
    parser.add_argument("--llm", required=True, help="FakeOpenAI base URL (…/v1)")
    parser.add_argument("--users", default="", help="comma-separated allowed user ids")
    parser.add_argument("--workdir", default=".")
    parser.add_argument("--edit-interval", type=float, default=0.1)
    parser.add_argument("--profile", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
