"""N concurrent private chats through the fakes: agentgram's overhead beside a minimal bot.

For each bot (the baseline of :mod:`bench.baseline_bot`, then agentgram) a
fresh FakeTelegram and FakeOpenAI start in this process and the bot starts in
its own process (:mod:`bench.botproc`). Every chat sends ``--messages``
messages one after another, each only after the previous reply is complete
(and a ``--think-ms`` pause, 0 by default), all chats at once. The LLM answers
every request with a ~110-character text streamed in ``--chunks`` chunks over
``--llm-ms`` milliseconds. ``--bots`` may add ``agentgram-nolimit``, a
diagnostic run without the 30 requests/s rate limiter (:mod:`bench.botproc`), and
``agentgram-pg``: agentgram as shipped on PostgreSQL, a fresh database per run on the server of
``--pg-url`` (:func:`bench.common.pg_database`; the ``agentgram`` kinds use a SQLite file). The
table ends with each bot's end-to-end p50 and p99 ÷ the baseline's and, with both agentgram kinds,
agentgram-pg's ÷ agentgram's.

Per turn: **end-to-end** = update injected into FakeTelegram → the chat first
shows the complete reply text (timed by the fake when it accepts the
``sendMessage``/``editMessageText``); **LLM** = the fake LLM's request read →
its last byte written; **overhead** = end-to-end − LLM: polling, handlers,
database, context building, HTTP to both services, rendering, delivery;
**first visible text** = the fake LLM wrote the reply's first token → the
fake Telegram accepted the first request that shows any of the reply (a
``sendMessageDraft`` with text, a ``sendMessage`` or an ``editMessageText``).

Usage: ``python -m bench.chats --chats 100 --messages 5``;
``scripts/test-services sh -c 'python -m bench.chats --bots baseline,agentgram,agentgram-pg --pg-url "$AGENTGRAM_TEST_PG_URL"'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import random
import re
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.botproc import Stalls
from bench.common import MODEL, machine, pg_database, ratio, row, shown_url, summary_ms, write_results
from bench.fakes import TimedOpenAI, TimedTelegram, last_user_text
from bench.process import BotProcess
from tests.fakes.openai_server import Reply, Text

FIRST_USER = 2001
WARM_USER = 1999
WARM_TURNS = 2
_KEY = re.compile(r"\bc(\d+) m(\d+):")
_FILLER = "The quick brown fox jumps over the lazy dog, twice and then once more for good measure."


@dataclass(slots=True, frozen=True)
class Options:
    chats: int = 100
    messages: int = 5
    llm_ms: float = 300.0
    chunks: int = 10
    edit_interval: float = 0.1
    spread_ms: float = 0.0
    think_ms: float = 0.0
    turn_timeout: float = 60.0
    bots: tuple[str, ...] = ("baseline", "agentgram")
    profile: Path | None = None
    seed: int = 1
    together: bool = (
        False  # the bots at the same time, each with its own fakes: they share the machine's noise
    )
    pg_url: str | None = None  # a PostgreSQL server's URL (postgresql+asyncpg://…): agentgram-pg's


@dataclass(slots=True, frozen=True)
class TurnSample:
    chat: int
    index: int
    e2e: float
    llm: float
    before_llm: float  # injected → the LLM request read
    after_llm: float  # the LLM's last byte → the reply visible
    first_text: float  # the LLM's first token → the first request showing any of the reply

    @property
    def overhead(self) -> float:
        return self.e2e - self.llm


@dataclass(slots=True)
class Load:
    samples: list[TurnSample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def user_text(chat: int, index: int) -> str:
    return f"c{chat} m{index}: hello, how are you?"


def reply_text(chat: int, index: int) -> str:
    return f"Reply to c{chat} m{index}: {_FILLER}"


def part_of(expected: str) -> Callable[[str], bool]:
    """Accepts a text that shows the start of ``expected`` (a draft or the first streamed piece)."""

    def shows(text: str) -> bool:
        shown = text.strip()
        return bool(shown) and expected.startswith(shown[:5])

    return shows


def key_of(body: dict[str, Any]) -> tuple[int, int] | None:
    found = _KEY.findall(last_user_text(body))
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def replier(opts: Options) -> Callable[[Any], Reply]:
    def reply_for(key: tuple[int, int] | None) -> Reply:
        text = reply_text(*key) if key is not None else "Hello."
        size = math.ceil(len(text) / opts.chunks)
        return Text(text, chunk_size=size, delay=opts.llm_ms / 1000.0 / opts.chunks)

    return reply_for


async def one_turn(tg: TimedTelegram, llm: TimedOpenAI, chat: int, index: int, timeout: float) -> TurnSample:
    expected = reply_text(chat, index)
    shown = tg.expect(chat, lambda text: text.strip() == expected)
    begun = tg.expect(chat, part_of(expected), drafts=True)
    injected = time.perf_counter()
    tg.send_text(chat, user_text(chat, index))
    visible = await asyncio.wait_for(shown, timeout)
    first_shown = begun.result() if begun.done() else visible
    spans = llm.spans.get((chat, index)) or [(visible, visible)]
    first_token = llm.first_token.get((chat, index), spans[0][0])
    return TurnSample(
        chat, index, visible - injected, llm.llm_seconds((chat, index)),
        spans[0][0] - injected, visible - spans[-1][1], first_shown - first_token,
    )  # fmt: skip


async def one_chat(
    tg: TimedTelegram, llm: TimedOpenAI, chat: int, opts: Options, rng: random.Random, load: Load
) -> None:
    await asyncio.sleep(rng.uniform(0, opts.spread_ms / 1000.0))
    for index in range(opts.messages):
        if index and opts.think_ms:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * opts.think_ms / 1000.0)
        try:
            load.samples.append(await one_turn(tg, llm, chat, index, opts.turn_timeout))
        except TimeoutError:
            load.failures.append(f"chat {chat} message {index}: no complete reply in {opts.turn_timeout}s")
            return


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


PG_KIND = "agentgram-pg"
"""The bot kind that runs on PostgreSQL (``agentgram-pg@DIR`` too): a fresh database per run."""


def on_postgres(kind: str) -> bool:
    return kind.partition("@")[0] == PG_KIND


async def measure(kind: str, opts: Options, workdir: Path) -> dict[str, Any]:
    """Bot ``kind`` under the load of ``opts``; ``agentgram-pg`` on a database of its own, made on
    ``opts.pg_url``'s server before the bot starts and dropped after it stopped."""
    async with contextlib.AsyncExitStack() as stack:
        storage_url = None
        if on_postgres(kind):
            if opts.pg_url is None:
                raise ValueError(f"bot {kind!r} needs a PostgreSQL server: --pg-url")
            storage_url = await stack.enter_async_context(pg_database(opts.pg_url))
        return await _measure(kind, opts, workdir, storage_url)


async def _measure(kind: str, opts: Options, workdir: Path, storage_url: str | None) -> dict[str, Any]:
    users = [FIRST_USER + i for i in range(opts.chats)]
    rng = random.Random(opts.seed)
    async with (
        TimedTelegram() as tg,
        TimedOpenAI(key_of, replier(opts), models=(MODEL,)) as llm,
        BotProcess(
            kind, tg_root=tg.root, llm_url=llm.base_url, workdir=workdir / kind.replace("/", "_"), users=[WARM_USER, *users],
            edit_interval=opts.edit_interval, profile=opts.profile if kind == "agentgram" else None,
            storage_url=storage_url,
        ) as bot,
    ):  # fmt: skip
        for index in range(WARM_TURNS):
            await one_turn(tg, llm, WARM_USER, index, opts.turn_timeout)
        # the fakes time every event in this process, so its collector must not pause them: what an
        # earlier bot's run left is frozen, and nothing is collected during the load (the fakes keep
        # every request of a bot that makes more of them — agentgram's drafts — and the 150 ms gen-2
        # pauses that made showed up as that bot's LLM time)
        gc.collect()
        gc.freeze()
        driver = Stalls()
        driver.start()
        gc.disable()
        try:
            before, requests_before, cpu_before = await bot.stats(), len(tg.requests), _cpu()
            load = Load()
            started = time.perf_counter()
            chats = (one_chat(tg, llm, u, opts, random.Random(rng.random()), load) for u in users)
            await asyncio.gather(*chats)
            wall = time.perf_counter() - started
        finally:
            gc.enable()
        driver_stalls = driver.stop()
        after, requests = await bot.stats(), len(tg.requests) - requests_before
        driver_cpu = _cpu() - cpu_before
        done = await bot.stop()
    turns = len(load.samples)
    return {
        "turns": turns,
        "failures": load.failures,
        "wall_s": round(wall, 3),
        "turns_per_s": round(turns / wall, 1) if wall else 0.0,
        "end_to_end_ms": summary_ms([s.e2e for s in load.samples]),
        "llm_ms": summary_ms([s.llm for s in load.samples]),
        "overhead_ms": summary_ms([s.overhead for s in load.samples]),
        # a chat's first message also meets a cold session: its row, worker, mailbox and history
        "overhead_first_message_ms": summary_ms([s.overhead for s in load.samples if s.index == 0]),
        "overhead_later_messages_ms": summary_ms([s.overhead for s in load.samples if s.index > 0]),
        "end_to_end_first_message_ms": summary_ms([s.e2e for s in load.samples if s.index == 0]),
        "first_text_ms": summary_ms([s.first_text for s in load.samples]),
        "before_llm_ms": summary_ms([s.before_llm for s in load.samples]),
        "after_llm_ms": summary_ms([s.after_llm for s in load.samples]),
        "bot_storage": bot.ready.get("storage", "-"),  # the database's dialect (an older checkout: "-")
        "bot_rss_ready_mb": round(bot.ready["rss_kb"] / 1024, 1),
        "bot_peak_rss_mb": round(done["peak_rss_kb"] / 1024, 1),
        "bot_cpu_ms_per_turn": round((after["cpu_s"] - before["cpu_s"]) * 1000 / max(turns, 1), 2),
        "bot_cpu_utilisation": round((after["cpu_s"] - before["cpu_s"]) / wall, 2) if wall else 0.0,
        "driver_cpu_utilisation": round(driver_cpu / wall, 2) if wall else 0.0,
        "telegram_requests_per_turn": round(requests / max(turns, 1), 2),
        "bot_stalls": done.get("stalls", {}),
        "driver_stalls": driver_stalls,
        "slowest": slowest(load.samples),
    }


def slowest(samples: Sequence[TurnSample], count: int = 12) -> list[dict[str, float | int]]:
    """The slowest turns with their parts (ms), to tell what a tail is made of."""
    worst = sorted(samples, key=lambda s: s.e2e, reverse=True)[:count]
    return [_parts(s) for s in worst]


def _parts(s: TurnSample) -> dict[str, float | int]:
    ms = {
        "e2e": s.e2e, "llm": s.llm, "before_llm": s.before_llm, "after_llm": s.after_llm,
        "first_text": s.first_text,
    }  # fmt: skip
    return {"chat": s.chat, "index": s.index, **{k: round(v * 1000, 1) for k, v in ms.items()}}


async def measure_all(opts: Options, workdir: Path) -> dict[str, Any]:
    """Every bot of ``opts``, one after the other or (``together``) at the same time."""
    if opts.together:
        measured = await asyncio.gather(*(measure(kind, opts, workdir) for kind in opts.bots))
        return dict(zip(opts.bots, measured, strict=True))
    return {kind: await measure(kind, opts, workdir) for kind in opts.bots}


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    with tempfile.TemporaryDirectory(prefix="agentgram-bench-") as tmp:
        results = await measure_all(opts, Path(tmp))
    payload: dict[str, Any] = {
        "benchmark": "chats",
        "machine": facts,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars_of(opts).items()},
        "results": results,
    }
    for p in ("p50", "p99"):
        payload[f"e2e_{p}_ratio"] = {
            kind: value
            for kind in results
            if kind != "baseline" and (value := e2e_ratio(results, kind, "baseline", p)) is not None
        }
    payload["e2e_pg_ratio"] = pg_ratio(results)
    return payload


def e2e_ratio(results: dict[str, Any], kind: str, other: str, p: str) -> float | None:
    """Bot ``kind``'s end-to-end ``p`` ÷ bot ``other``'s (``None`` if either has no turns)."""
    if kind not in results or other not in results:
        return None
    mine, theirs = results[kind]["end_to_end_ms"], results[other]["end_to_end_ms"]
    if not mine.get("n") or not theirs.get("n"):
        return None
    return ratio(mine[p], theirs[p])


def pg_ratio(results: dict[str, Any]) -> dict[str, float | None]:
    """agentgram-pg's end-to-end p50 and p99 ÷ agentgram's (on SQLite); empty without both."""
    if PG_KIND not in results or "agentgram" not in results:
        return {}
    return {p: e2e_ratio(results, PG_KIND, "agentgram", p) for p in ("p50", "p99")}


def vars_of(opts: Options) -> dict[str, Any]:
    """The options for a result file (the PostgreSQL URL without its password)."""
    found = {name: getattr(opts, name) for name in opts.__slots__}  # type: ignore[attr-defined]
    return found | {"pg_url": shown_url(opts.pg_url)}


def table(payload: dict[str, Any]) -> str:
    kinds = list(payload["results"])
    widths = [24] + [max(12, len(k)) for k in kinds]
    lines = [row(["", *kinds], widths)]
    for label, path in (
        ("end-to-end p50 ms", ("end_to_end_ms", "p50")),
        ("end-to-end p99 ms", ("end_to_end_ms", "p99")),
        ("LLM p50 ms", ("llm_ms", "p50")),
        ("overhead p50 ms", ("overhead_ms", "p50")),
        ("overhead p99 ms", ("overhead_ms", "p99")),
        ("  1st message p50 ms", ("overhead_first_message_ms", "p50")),
        ("  1st message p99 ms", ("overhead_first_message_ms", "p99")),
        ("  later messages p50 ms", ("overhead_later_messages_ms", "p50")),
        ("  later messages p99 ms", ("overhead_later_messages_ms", "p99")),
        ("e2e 1st message p99 ms", ("end_to_end_first_message_ms", "p99")),
        ("1st token→text p50 ms", ("first_text_ms", "p50")),
        ("1st token→text p99 ms", ("first_text_ms", "p99")),
        ("  update→LLM p50 ms", ("before_llm_ms", "p50")),
        ("  LLM→visible p50 ms", ("after_llm_ms", "p50")),
        ("turns (failed)", None),
        ("bot database", ("bot_storage",)),
        ("turns/s", ("turns_per_s",)),
        ("bot peak RSS MB", ("bot_peak_rss_mb",)),
        ("bot CPU ms/turn", ("bot_cpu_ms_per_turn",)),
        ("bot CPU utilisation", ("bot_cpu_utilisation",)),
        ("driver CPU utilisation", ("driver_cpu_utilisation",)),
        ("Telegram requests/turn", ("telegram_requests_per_turn",)),
        ("bot loop lag p99 ms", ("bot_stalls", "loop_lag_ms", "p99")),
        ("bot loop lag max ms", ("bot_stalls", "loop_lag_ms", "max")),
        ("bot GC gen2 max ms", ("bot_stalls", "gc", "2", "max_ms")),
        ("driver loop lag p99 ms", ("driver_stalls", "loop_lag_ms", "p99")),
        ("driver loop lag max ms", ("driver_stalls", "loop_lag_ms", "max")),
        ("driver GC gen2 max ms", ("driver_stalls", "gc", "2", "max_ms")),
    ):
        cells: list[object] = []
        for kind in kinds:
            result = payload["results"][kind]
            if path is None:
                cells.append(f"{result['turns']} ({len(result['failures'])})")
                continue
            value: Any = result
            for part in path:
                value = value.get(part, "-") if isinstance(value, dict) else "-"
            cells.append(value)
        lines.append(row([label, *cells], widths))
    p99s = payload.get("e2e_p99_ratio", {})
    for kind, p50 in payload["e2e_p50_ratio"].items():
        lines.append(f"end-to-end {kind} / baseline: p50 {p50}, p99 {p99s.get(kind)}")
    if pg := payload.get("e2e_pg_ratio"):
        lines.append(
            f"end-to-end {PG_KIND} / agentgram (PostgreSQL / SQLite): p50 {pg['p50']}, p99 {pg['p99']}"
        )
    return "\n".join(lines)


def parse(argv: Sequence[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--messages", type=int, default=5, help="messages per chat, sent one after another")
    parser.add_argument("--llm-ms", type=float, default=300.0, help="LLM time per reply")
    parser.add_argument("--chunks", type=int, default=10, help="streamed chunks per reply")
    parser.add_argument("--edit-interval", type=float, default=1.0, help="agentgram stream_edit_interval")
    parser.add_argument("--spread-ms", type=float, default=0.0, help="random start offset per chat")
    parser.add_argument("--think-ms", type=float, default=0.0, help="mean pause before each next message")
    parser.add_argument("--turn-timeout", type=float, default=60.0)
    parser.add_argument("--bots", default="baseline,agentgram")
    parser.add_argument("--together", action="store_true", help="run the bots at the same time, not in turn")
    parser.add_argument(
        "--profile", type=Path, default=None, help="pyinstrument profile of the agentgram bot (.html or text)"
    )
    parser.add_argument(
        "--pg-url",
        default=None,
        help=f"a PostgreSQL server (postgresql+asyncpg://…) for {PG_KIND}'s databases",
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    check_pg_url(parser, args.bots, args.pg_url)
    opts = Options(
        chats=args.chats, messages=args.messages, llm_ms=args.llm_ms, chunks=args.chunks,
        edit_interval=args.edit_interval, spread_ms=args.spread_ms, think_ms=args.think_ms,
        turn_timeout=args.turn_timeout,
        bots=tuple(b.strip() for b in args.bots.split(",") if b.strip()), profile=args.profile,
        together=args.together, pg_url=args.pg_url,
    )  # fmt: skip
    return opts, args.out


def check_pg_url(parser: argparse.ArgumentParser, bots: str, pg_url: str | None) -> None:
    """``--bots`` with ``agentgram-pg`` needs ``--pg-url``; say so before any bot runs."""
    if pg_url is None and any(on_postgres(b.strip()) for b in bots.split(",")):
        parser.error(f"--bots {PG_KIND} needs --pg-url (a PostgreSQL server, e.g. $AGENTGRAM_TEST_PG_URL)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    opts, out = parse(argv)
    payload = asyncio.run(run(opts))
    print(table(payload))
    path = write_results("chats", payload, out)
    print(f"results: {path}")
    return payload


if __name__ == "__main__":
    main()
