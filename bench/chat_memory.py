"""Memory per chat and over a long run (issue 31 req. 3): is per-chat memory bounded and small?

Three parts, each with agentgram in a process of its own (:mod:`bench.botproc`, ``--bot``: the
product's ``agentgram`` by default) against fresh fakes, the model answering at once (0 ms). Every
figure is read in the bot after a full garbage collection (``memory`` in :mod:`bench.botproc`): its
RSS, the Python heap's allocated blocks and what agentgram's in-memory maps hold (session workers,
unread views, history tails and their entries, cached chat sessions).

* **Idle chats** (``--idle-chats``, 2,000): the chat idle timeout is ``--idle-timeout`` (0.5 s
  instead of the product's 300), so every chat's worker is evicted right after its reply — the
  state of a chat nobody has written to for five minutes. The chats come in ``--batches`` groups,
  each chat making ``--messages`` turns; after each group, once no worker is left, a sample. *Per
  idle chat* = (RSS after all of them − RSS before the first) ÷ the chats, and the same over the
  last group alone (*marginal*): the in-memory caches keyed by session hold up to 1,024 entries
  (``CHAT_SESSIONS_KEPT`` and the like), so beyond 1,024 chats the marginal figure is what an idle
  chat costs for good.
* **Active chats** (``--active-chats``, 500): the product's idle timeout, so every chat keeps its
  worker and views; the same groups and samples. *Per active chat* as above.
* **Long run**: ``--long-chats`` (200) chats make ``--long-turns`` (10,000) turns between them,
  closed loop (each chat's next message as soon as its reply is complete), in rounds of
  ``--sample-every`` (1,000) turns; a sample after each round (every chat's turn of the round
  complete). *Growth after warm-up* = the largest distance of a sample at or after ``--warmup``
  turns (2,000) from the sample at ``--warmup``, ÷ that sample; the bound is 5 %.

Before each part 20 other chats make two turns each (imports, caches and the database warmed), and
the first sample is taken after them. The driver (fakes, users) runs in this process, so nothing of
its memory is in the bot's figures.

Usage: ``python -m bench.chat_memory`` (≈ 10 minutes); smaller: ``--idle-chats 300 --active-chats
100 --long-chats 50 --long-turns 2000 --sample-every 250 --warmup 500``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench import chats
from bench.common import MODEL, machine, row, write_results
from bench.fakes import TimedOpenAI, TimedTelegram
from bench.process import BotProcess
from bench.throughput import INSTANT

GROWTH_BOUND = 0.05
WARM_CHATS = 20
WARM_TURNS = 2
FIRST_CHAT = 10_001
EVICT_TIMEOUT = 30.0  # seconds for every idle worker to go after a group


@dataclass(slots=True, frozen=True)
class Options:
    idle_chats: int = 2000
    active_chats: int = 500
    batches: int = 4
    messages: int = 2
    idle_timeout: float = 0.5
    long_chats: int = 200
    long_turns: int = 10_000
    sample_every: int = 1000
    warmup: int = 2000
    concurrency: int = 200  # chats talking at once in the idle and active parts
    bot: str = "agentgram"
    turn_timeout: float = 60.0


class Talk:
    """The fakes and a bot process; chats take turns, one after another within a chat."""

    def __init__(self, tg: TimedTelegram, llm: TimedOpenAI, bot: BotProcess, timeout: float) -> None:
        self.tg, self.llm, self.bot, self.timeout = tg, llm, bot, timeout
        self.turns = 0
        self.next_index: dict[int, int] = {}
        self.failures: list[str] = []

    async def turns_of(self, chat: int, count: int) -> None:
        """``count`` turns of ``chat``; a reply not complete in time is a failure, the chat stops."""
        for _ in range(count):
            index = self.next_index.get(chat, 0)
            self.next_index[chat] = index + 1
            try:
                await chats.one_turn(self.tg, self.llm, chat, index, self.timeout)
            except TimeoutError:
                self.failures.append(f"chat {chat} message {index}: no complete reply in {self.timeout}s")
                return
            self.turns += 1

    async def chats_talk(self, chat_ids: Sequence[int], count: int, concurrency: int) -> None:
        """Every chat of ``chat_ids`` makes ``count`` turns, at most ``concurrency`` chats at once."""
        gate = asyncio.Semaphore(concurrency)

        async def one(chat: int) -> None:
            async with gate:
                await self.turns_of(chat, count)

        await asyncio.gather(*(one(c) for c in chat_ids))

    async def sample(self, **fields: Any) -> dict[str, Any]:
        memory = await self.bot.memory()
        self.llm.spans.clear()  # the driver's own records, so it does not grow either
        return {**fields, "turns": self.turns, **{k: v for k, v in memory.items() if k != "event"}}

    async def no_workers(self) -> None:
        """Until every idle worker has been evicted (a failure is seen in the sample's count)."""
        deadline = time.monotonic() + EVICT_TIMEOUT
        while (await self.bot.memory())["workers"] and time.monotonic() < deadline:  # noqa: ASYNC110  (another process)
            await asyncio.sleep(0.25)


async def with_bot(
    opts: Options, workdir: Path, users: Sequence[int], idle_timeout: float | None,
    body: Callable[[Talk], Awaitable[list[dict[str, Any]]]],
) -> dict[str, Any]:  # fmt: skip
    """``body`` against a fresh bot, after the warm-up chats: its samples and failures (with the
    bot's log's tail when there are any)."""
    warm = [FIRST_CHAT - 1 - n for n in range(WARM_CHATS)]
    async with (
        TimedTelegram() as tg,
        TimedOpenAI(chats.key_of, chats.replier(INSTANT), models=(MODEL,)) as llm,
        BotProcess(
            opts.bot, tg_root=tg.root, llm_url=llm.base_url, workdir=workdir, users=[*warm, *users],
            edit_interval=1.0, idle_timeout=idle_timeout,
        ) as bot,
    ):  # fmt: skip
        talk = Talk(tg, llm, bot, opts.turn_timeout)
        await talk.chats_talk(warm, WARM_TURNS, opts.concurrency)
        samples = await body(talk)
        log = bot.stderr_tail(40) if talk.failures else ""
        await bot.stop()
    return {"samples": samples, "failures": talk.failures, "bot_log_tail": log}


def groups(chat_ids: Sequence[int], count: int) -> list[Sequence[int]]:
    size = -(-len(chat_ids) // count)
    return [chat_ids[i : i + size] for i in range(0, len(chat_ids), size)]


async def per_chat(opts: Options, workdir: Path, chat_count: int, *, idle: bool) -> dict[str, Any]:
    """Chats in groups, a sample before and after each group; idle: once their workers are gone."""
    users = [FIRST_CHAT + n for n in range(chat_count)]

    async def body(talk: Talk) -> list[dict[str, Any]]:
        if idle:
            await talk.no_workers()
        samples = [await talk.sample(chats=0)]
        done = 0
        for group in groups(users, opts.batches):
            await talk.chats_talk(group, opts.messages, opts.concurrency)
            done += len(group)
            if idle:
                await talk.no_workers()
            samples.append(await talk.sample(chats=done))
        return samples

    found = await with_bot(opts, workdir, users, opts.idle_timeout if idle else None, body)
    return found | per_chat_figures(found["samples"])


async def long_run(opts: Options, workdir: Path) -> dict[str, Any]:
    """``long_chats`` chats, ``long_turns`` turns in rounds of ``sample_every``; a sample per round."""
    users = [FIRST_CHAT + n for n in range(opts.long_chats)]

    async def body(talk: Talk) -> list[dict[str, Any]]:
        samples = [await talk.sample(load_turns=0)]
        started, turns = time.perf_counter(), 0
        while turns < opts.long_turns:
            step = min(opts.sample_every, opts.long_turns - turns)
            per_chat, extra = divmod(step, len(users))
            await asyncio.gather(
                *(talk.turns_of(chat, per_chat + (n < extra)) for n, chat in enumerate(users))
            )
            turns += step
            samples.append(
                await talk.sample(load_turns=turns, seconds=round(time.perf_counter() - started, 1))
            )
        return samples

    found = await with_bot(opts, workdir, users, None, body)
    return found | growth(found["samples"], opts.warmup)


def per_chat_figures(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """KiB per chat overall and over the last group; the heap's blocks per chat; workers left."""
    first, before_last, last = samples[0], samples[-2], samples[-1]
    chats_all, chats_last = last["chats"] - first["chats"], last["chats"] - before_last["chats"]
    return {
        "chats": chats_all,
        "rss_kib_per_chat": _per(last["rss_kb"] - first["rss_kb"], chats_all),
        "rss_kib_per_chat_marginal": _per(last["rss_kb"] - before_last["rss_kb"], chats_last),
        "py_blocks_per_chat": _per(last["py_blocks"] - first["py_blocks"], chats_all),
        "py_blocks_per_chat_marginal": _per(last["py_blocks"] - before_last["py_blocks"], chats_last),
        "gc_objects_per_chat": _per(last["gc_objects"] - first["gc_objects"], chats_all),
        "workers_at_end": last["workers"],
        "rss_mb_first": round(first["rss_kb"] / 1024, 1),
        "rss_mb_last": round(last["rss_kb"] / 1024, 1),
    }


def _per(delta: float, count: int) -> float | None:
    return round(delta / count, 2) if count else None


def growth(samples: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """The samples from ``warmup`` turns on against the one at ``warmup``: the largest distance."""
    after = [s for s in samples if s["load_turns"] >= warmup] or samples[-1:]
    reference = after[0]
    worst = max(after, key=lambda s: abs(s["rss_kb"] - reference["rss_kb"]))
    change = (worst["rss_kb"] - reference["rss_kb"]) / reference["rss_kb"]
    seconds = samples[-1].get("seconds") or 0
    return {
        "reference_turns": reference["load_turns"],
        "reference_rss_mb": round(reference["rss_kb"] / 1024, 1),
        "worst_turns": worst["load_turns"],
        "worst_rss_mb": round(worst["rss_kb"] / 1024, 1),
        "growth": round(change, 4),
        "end_growth": round((samples[-1]["rss_kb"] - reference["rss_kb"]) / reference["rss_kb"], 4),
        "bound": GROWTH_BOUND,
        "met": abs(change) <= GROWTH_BOUND,
        "turns_per_s": round(samples[-1]["load_turns"] / seconds, 1) if seconds else None,
    }


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    with tempfile.TemporaryDirectory(prefix="agentgram-chat-memory-") as name:
        tmp = Path(name)
        idle = await per_chat(opts, tmp / "idle", opts.idle_chats, idle=True)
        print(f"idle: {idle}", flush=True)  # a long run: each part as soon as it is done
        active = await per_chat(opts, tmp / "active", opts.active_chats, idle=False)
        print(f"active: {active}", flush=True)
        long = await long_run(opts, tmp / "long")
    return {
        "benchmark": "chat_memory",
        "machine": facts,
        "options": {name: getattr(opts, name) for name in opts.__slots__},  # type: ignore[attr-defined]
        "idle": idle,
        "active": active,
        "long": long,
    }


def table(payload: dict[str, Any]) -> str:
    lines: list[str] = []
    head = [
        "chats", "turns", "RSS MB", "SQLite MB", "py blocks", "workers", "unread", "tails", "tail entries",
        "tail KiB", "sessions",
    ]  # fmt: skip
    widths = [7, 7, 8, 10, 10, 8, 7, 6, 12, 9, 9]
    for part in ("idle", "active"):
        found = payload[part]
        lines.append(f"== {part} chats ==")
        lines.append(row(head, widths))
        for s in found["samples"]:
            lines.append(row([s["chats"], s["turns"], round(s["rss_kb"] / 1024, 1), *_maps(s)], widths))
        lines.append(
            f"per {part} chat: {found['rss_kib_per_chat']} KiB RSS ({found['rss_kib_per_chat_marginal']} over "
            f"the last group), {found['py_blocks_per_chat']} heap blocks ({found['py_blocks_per_chat_marginal']}), "
            f"{found['gc_objects_per_chat']} tracked objects; workers at the end: {found['workers_at_end']}; "
            f"failed turns: {len(found['failures'])}"
        )
    long = payload["long"]
    lines.append("== long run ==")
    lines.append(
        row(
            head[1:],
            widths[1:],
        )
    )
    for s in long["samples"]:
        lines.append(row([s["load_turns"], round(s["rss_kb"] / 1024, 1), *_maps(s)], widths[1:]))
    garbage = per_turn_garbage(long["samples"])
    if garbage:
        lines.append("cyclic garbage freed per turn, per round: " + ", ".join(f"{g:.0f}" for g in garbage))
    mark = "met" if long["met"] else "NOT met"
    lines.append(
        f"growth after warm-up ({long['reference_turns']} turns, {long['reference_rss_mb']} MB): largest "
        f"{long['growth']:+.2%} at {long['worst_turns']} turns, {long['end_growth']:+.2%} at the end "
        f"(bound ±{long['bound']:.0%}: {mark}); {long['turns_per_s']} turns/s; failed turns: {len(long['failures'])}"
    )
    return "\n".join(lines)


def per_turn_garbage(samples: list[dict[str, Any]]) -> list[float]:
    """Objects the cyclic collector freed per turn between each two samples (none from an older
    ``bench.botproc`` that does not count them)."""
    return [
        (b["cyclic_garbage"] - a["cyclic_garbage"]) / (b["load_turns"] - a["load_turns"])
        for a, b in pairwise(samples)
        if "cyclic_garbage" in a and "cyclic_garbage" in b and b["load_turns"] > a["load_turns"]
    ]


def _maps(s: dict[str, Any]) -> list[object]:
    sqlite = s.get("sqlite_kb")
    return [
        "-" if sqlite is None else round(sqlite / 1024, 1), s["py_blocks"], s["workers"],
        s.get("unread_views", "-"), s.get("history_tails", "-"), s.get("history_tail_entries", "-"),
        s.get("history_tail_kb", "-"), s.get("chat_sessions", "-"),
    ]  # fmt: skip


def parse(argv: Sequence[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    d = Options()
    for name in ("idle_chats", "active_chats", "batches", "messages", "long_chats", "long_turns",
                 "sample_every", "warmup", "concurrency"):  # fmt: skip
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    parser.add_argument("--idle-timeout", type=float, default=d.idle_timeout, help="seconds, the idle part's")
    parser.add_argument("--bot", default=d.bot, help="agentgram or agentgram-nolimit (pacing off)")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    opts = Options(**{name: getattr(args, name) for name in d.__slots__ if hasattr(args, name)})  # type: ignore[attr-defined]
    return opts, args.out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    opts, out = parse(argv)
    payload = asyncio.run(run(opts))
    print(table(payload))
    print(f"results: {write_results('chat_memory', payload, out)}")
    return payload


if __name__ == "__main__":
    main()
