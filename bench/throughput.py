"""The engine's ceiling (issue 31 req. 5) and its CPU per turn (req. 4), agentgram beside the baseline.

The model answers at once (0 ms, the whole reply in one chunk), ``--chats`` (200) private chats
each send their next message as soon as the previous reply is complete (closed loop, no pause), and
Telegram's pacing is off in both bots: agentgram runs as ``agentgram-nolimit``
(``telegram.messages_per_second`` lifted, :mod:`bench.botproc`), the baseline has no pacer. So
what bounds the turns per second is each bot's own CPU (and the driver's: it plays Telegram, the
model and the 200 users on the same two cores, its share is reported).

Per bot: every chat first makes one turn (its session opened; not measured), then all chats talk
for ``--settle`` seconds before the measured window of ``--seconds``. *turns/s* = turns completed
in the window ÷ its length; *CPU ms/turn* = the bot process's user + system CPU time over the
window (``resource.getrusage`` in the bot, read at the window's two ends) ÷ those turns;
*utilisation* = that CPU time ÷ the window (1.0 = one core). Each bot runs ``--rounds`` times, the
order alternating (baseline first, then agentgram first, …), each run against fresh fakes; the
table gives the median of each figure and agentgram's ÷ the baseline's, with the targets
(:data:`TARGETS`).

Usage: ``python -m bench.throughput`` (≈ 3 minutes); ``--profile FILE`` writes a pyinstrument
profile of agentgram (then its figures are the profiled process's: do not quote them).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import chats
from bench.common import MODEL, machine, ratio, row, summary_ms, write_results
from bench.fakes import TimedOpenAI, TimedTelegram
from bench.process import BotProcess

BASELINE = "baseline"
AGENTGRAM = "agentgram-nolimit"
"""agentgram with Telegram's pacing lifted (:mod:`bench.botproc`)."""
INSTANT = chats.Options(llm_ms=0.0, chunks=1)
"""The model's reply: all of it at once."""


@dataclass(slots=True, frozen=True)
class Target:
    label: str
    limit: float
    at_most: bool  # the figure must be ≤ limit (else ≥)


TARGETS = {
    "cpu_per_turn_ratio": Target("CPU ms/turn ÷ baseline", 1.6, at_most=True),
    "turns_per_s_ratio": Target("turns/s ÷ baseline", 0.6, at_most=False),
}


@dataclass(slots=True, frozen=True)
class Options:
    chats: int = 200
    seconds: float = 30.0
    settle: float = 3.0
    rounds: int = 2
    bots: tuple[str, ...] = (BASELINE, AGENTGRAM)
    edit_interval: float = 1.0  # agentgram's telegram.stream_edit_interval, the product's
    turn_timeout: float = 60.0
    profile: Path | None = None


@dataclass(slots=True)
class Window:
    """Turns as the closed loops complete them: (completed at, end-to-end seconds)."""

    done: list[tuple[float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def within(self, start: float, end: float) -> list[float]:
        return [e2e for at, e2e in self.done if start <= at <= end]


async def talk(
    tg: TimedTelegram, llm: TimedOpenAI, chat: int, stop: asyncio.Event, window: Window, timeout: float
) -> None:
    """One chat's closed loop: its next message as soon as the reply is complete, until ``stop``."""
    index = 1  # message 0 opened the session
    while not stop.is_set():
        try:
            sample = await chats.one_turn(tg, llm, chat, index, timeout)
        except TimeoutError:
            window.failures.append(f"chat {chat} message {index}: no complete reply in {timeout}s")
            return
        window.done.append((time.perf_counter(), sample.e2e))
        index += 1


async def measure(kind: str, opts: Options, workdir: Path) -> dict[str, Any]:
    users = [chats.FIRST_USER + i for i in range(opts.chats)]
    async with (
        TimedTelegram() as tg,
        TimedOpenAI(chats.key_of, chats.replier(INSTANT), models=(MODEL,)) as llm,
        BotProcess(
            kind, tg_root=tg.root, llm_url=llm.base_url, workdir=workdir, users=users,
            edit_interval=opts.edit_interval, profile=opts.profile if kind != BASELINE else None,
        ) as bot,
    ):  # fmt: skip
        await asyncio.gather(*(chats.one_turn(tg, llm, u, 0, opts.turn_timeout) for u in users))
        gc.collect()  # the driver's timestamps must not wait for its collector (bench.chats)
        gc.freeze()
        gc.disable()
        stop, window = asyncio.Event(), Window()
        try:
            loops = [asyncio.create_task(talk(tg, llm, u, stop, window, opts.turn_timeout)) for u in users]
            await asyncio.sleep(opts.settle)
            before, driver_before, requests_before = await bot.stats(), chats._cpu(), len(tg.requests)
            start = time.perf_counter()
            await asyncio.sleep(opts.seconds)
            after, driver_after, requests_after = await bot.stats(), chats._cpu(), len(tg.requests)
            end = time.perf_counter()
            stop.set()
            await asyncio.gather(*loops)
        finally:
            gc.enable()
            gc.unfreeze()
        done = await bot.stop()
    e2e = window.within(start, end)
    turns, wall, cpu = len(e2e), end - start, after["cpu_s"] - before["cpu_s"]
    return {
        "turns": turns,
        "failures": window.failures,
        "window_s": round(wall, 3),
        "turns_per_s": round(turns / wall, 1),
        "cpu_ms_per_turn": round(cpu * 1000 / turns, 2) if turns else None,
        "main_thread_cpu_ms_per_turn": _main_thread_ms(before, after, turns),
        "cpu_utilisation": round(cpu / wall, 2),
        "driver_cpu_utilisation": round((driver_after - driver_before) / wall, 2),
        "telegram_requests_per_turn": round((requests_after - requests_before) / turns, 2) if turns else None,
        "end_to_end_ms": summary_ms(e2e),
        "peak_rss_mb": round(done["peak_rss_kb"] / 1024, 1),
    }


def _main_thread_ms(before: dict[str, Any], after: dict[str, Any], turns: int) -> float | None:
    """The event loop's thread's share of the CPU per turn (the rest: the database's threads)."""
    if not turns or before.get("main_thread_cpu_s") is None or after.get("main_thread_cpu_s") is None:
        return None
    return round((after["main_thread_cpu_s"] - before["main_thread_cpu_s"]) * 1000 / turns, 2)


FIGURES = (
    "turns_per_s", "cpu_ms_per_turn", "main_thread_cpu_ms_per_turn", "cpu_utilisation", "driver_cpu_utilisation",
)  # fmt: skip


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in opts.bots}
    with tempfile.TemporaryDirectory(prefix="agentgram-throughput-") as tmp:
        for n in range(opts.rounds):
            order = opts.bots if n % 2 == 0 else tuple(reversed(opts.bots))
            for kind in order:
                runs[kind].append(await measure(kind, opts, Path(tmp) / f"{kind}-{n}"))
    medians = {
        kind: {name: _median([r[name] for r in results]) for name in FIGURES}
        for kind, results in runs.items()
    }
    payload: dict[str, Any] = {
        "benchmark": "throughput",
        "machine": facts,
        "options": {name: str(getattr(opts, name)) for name in opts.__slots__},  # type: ignore[attr-defined]
        "runs": runs,
        "medians": medians,
    }
    if BASELINE in medians:
        payload["verdicts"] = {
            kind: verdicts(medians[kind], medians[BASELINE]) for kind in medians if kind != BASELINE
        }
    return payload


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def verdicts(bot: dict[str, Any], base: dict[str, Any]) -> dict[str, dict[str, Any]]:
    figures = {
        "cpu_per_turn_ratio": ratio(bot["cpu_ms_per_turn"], base["cpu_ms_per_turn"]),
        "turns_per_s_ratio": ratio(bot["turns_per_s"], base["turns_per_s"]),
    }
    found = {}
    for name, value in figures.items():
        target = TARGETS[name]
        met = value is not None and (value <= target.limit if target.at_most else value >= target.limit)
        found[name] = {"value": value, "limit": target.limit, "met": met}
    return found


def table(payload: dict[str, Any]) -> str:
    kinds = list(payload["runs"])
    widths = [32] + [max(14, len(k)) for k in kinds]
    lines = [row(["", *kinds], widths)]
    rounds = max(len(r) for r in payload["runs"].values())
    for label, name in (
        ("turns/s", "turns_per_s"),
        ("CPU ms/turn", "cpu_ms_per_turn"),
        ("  of it the loop's thread", "main_thread_cpu_ms_per_turn"),
        ("bot CPU utilisation", "cpu_utilisation"),
        ("driver CPU utilisation", "driver_cpu_utilisation"),
    ):
        for n in range(rounds):
            cells = [_at(payload["runs"][k], n, name) for k in kinds]
            lines.append(row([f"{label} (run {n + 1})", *cells], widths))
        lines.append(row([f"{label}, median", *(payload["medians"][k][name] for k in kinds)], widths))
    for label, path in (
        ("e2e p50 ms (run 1)", ("end_to_end_ms", "p50")),
        ("e2e p99 ms (run 1)", ("end_to_end_ms", "p99")),
        ("Telegram requests/turn", ("telegram_requests_per_turn",)),
        ("peak RSS MB (run 1)", ("peak_rss_mb",)),
        ("turns in window (failed)", None),
    ):
        firsts: list[object] = []
        for kind in kinds:
            first = payload["runs"][kind][0]
            if path is None:
                firsts.append(f"{first['turns']} ({len(first['failures'])})")
                continue
            value: Any = first
            for part in path:
                value = value.get(part, "-") if isinstance(value, dict) else "-"
            firsts.append(value)
        lines.append(row([label, *firsts], widths))
    for kind, verdict in payload.get("verdicts", {}).items():
        for name, v in verdict.items():
            target = TARGETS[name]
            bound = f"{'≤' if target.at_most else '≥'} {target.limit}"
            mark = "met" if v["met"] else "NOT met"
            lines.append(f"{kind}: {target.label} = {v['value']} ({bound}: {mark})")
    return "\n".join(lines)


def _at(results: list[dict[str, Any]], n: int, name: str) -> object:
    return results[n][name] if n < len(results) else "-"


def parse(argv: Sequence[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = Options()
    parser.add_argument("--chats", type=int, default=defaults.chats)
    parser.add_argument("--seconds", type=float, default=defaults.seconds, help="the measured window")
    parser.add_argument("--settle", type=float, default=defaults.settle, help="load before the window")
    parser.add_argument(
        "--rounds", type=int, default=defaults.rounds, help="runs of each bot, order alternating"
    )
    parser.add_argument("--bots", default=",".join(defaults.bots))
    parser.add_argument("--edit-interval", type=float, default=defaults.edit_interval)
    parser.add_argument("--profile", type=Path, default=None, help="pyinstrument profile of agentgram")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    opts = Options(
        chats=args.chats, seconds=args.seconds, settle=args.settle, rounds=args.rounds,
        bots=tuple(b.strip() for b in args.bots.split(",") if b.strip()),
        edit_interval=args.edit_interval, profile=args.profile,
    )  # fmt: skip
    return opts, args.out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    opts, out = parse(argv)
    payload = asyncio.run(run(opts))
    print(table(payload))
    print(f"results: {write_results('throughput', payload, out)}")
    return payload


if __name__ == "__main__":
    main()
