"""Issue 12's latency scenarios in one invocation, each bot against the baseline, with the targets.

**Human pace**: ``--chats`` (1,000) concurrent private chats, each sending
``--messages`` messages; a user starts at a random moment within
``--spread-ms`` and pauses ``--think-ms`` (× a random 0.5–1.5) between a reply
and their next message. **Burst**: ``--burst-chats`` (100) chats sending
``--burst-messages`` each as fast as replies come. Both run
:func:`bench.chats.measure` for every bot of ``--bots``, one after the other
against fresh fakes.

The human-pace load is kept under Telegram's ~30 messages/s for the whole
bot (2,000 turns over ~100 s by default): above it real Telegram answers the
baseline — which has no rate limiter — with 429s, so the comparison would
be with a bot that cannot exist.

Targets (:data:`TARGETS`): end-to-end p50 ≤ 1.05× and p99 ≤ 1.25× the
baseline's; first visible text p50 ≤ 150 ms after the model's first token;
peak RSS ≤ 150 MiB; the burst within 5 % of the time Telegram's 30
messages/s need for one message per reply.

Usage: ``python -m bench.latency`` (≈ 5 minutes), ``--skip-burst`` for the first part only;
``--bots baseline,agentgram,agentgram-pg --pg-url URL`` adds agentgram on PostgreSQL
(:mod:`bench.chats`), with its end-to-end p50/p99 ÷ agentgram's on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import chats
from bench.common import machine, row, write_results

TELEGRAM_MESSAGES_PER_S = 30.0
PRODUCT_EDIT_INTERVAL = 1.0
"""``telegram.stream_edit_interval`` as shipped."""


@dataclass(slots=True, frozen=True)
class Target:
    label: str
    limit: float
    unit: str


TARGETS = {
    "e2e_p50_ratio": Target("end-to-end p50 ÷ baseline", 1.05, "×"),
    "e2e_p99_ratio": Target("end-to-end p99 ÷ baseline p99", 1.25, "×"),
    "first_text_p50_ms": Target("first visible text p50 after the first token", 150.0, "ms"),
    "peak_rss_mib": Target("peak RSS", 150.0, "MiB"),
    "burst_floor_ratio": Target("burst wall time ÷ Telegram's 30 msg/s floor", 1.05, "×"),
}


HUMAN = chats.Options(
    chats=1000, messages=2, think_ms=3000.0, spread_ms=100_000.0, edit_interval=PRODUCT_EDIT_INTERVAL
)
BURST = chats.Options(chats=100, messages=5, edit_interval=PRODUCT_EDIT_INTERVAL)


@dataclass(slots=True, frozen=True)
class Options:
    human: chats.Options = HUMAN
    burst: chats.Options | None = BURST


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    scenarios: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="agentgram-latency-") as tmp:
        for name, scenario in (("human", opts.human), ("burst", opts.burst)):
            if scenario is not None:
                scenarios[name] = {
                    "options": chats.vars_of(scenario) | {"profile": str(scenario.profile or "")},
                    "results": await chats.measure_all(scenario, Path(tmp) / name),
                }  # fmt: skip
    return {
        "benchmark": "latency",
        "machine": facts,
        "scenarios": scenarios,
        "verdicts": {kind: verdicts(scenarios, kind) for kind in opts.human.bots if kind != "baseline"},
    }


def verdicts(scenarios: dict[str, dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Each target's figure for bot ``kind`` and whether it holds."""
    human = scenarios["human"]["results"]
    bot, base = human[kind], human.get("baseline")
    figures: dict[str, float | None] = {
        "e2e_p50_ratio": _ratio(bot, base, "p50"),
        "e2e_p99_ratio": _ratio(bot, base, "p99"),
        "first_text_p50_ms": bot["first_text_ms"].get("p50"),
        "peak_rss_mib": bot["bot_peak_rss_mb"],
        "burst_floor_ratio": None,
    }
    if "burst" in scenarios and kind in scenarios["burst"]["results"]:
        burst = scenarios["burst"]["results"][kind]
        floor = burst["turns"] / TELEGRAM_MESSAGES_PER_S
        figures["burst_floor_ratio"] = round(burst["wall_s"] / floor, 3) if floor else None
    return {
        name: {"value": value, "limit": TARGETS[name].limit, "met": value is not None and value <= TARGETS[name].limit}
        for name, value in figures.items()
    }  # fmt: skip


def _ratio(bot: dict[str, Any], base: dict[str, Any] | None, p: str) -> float | None:
    if base is None or not base["end_to_end_ms"].get("n") or not bot["end_to_end_ms"].get("n"):
        return None
    return round(float(bot["end_to_end_ms"][p]) / float(base["end_to_end_ms"][p]), 3)


def table(payload: dict[str, Any]) -> str:
    parts: list[str] = []
    for name, scenario in payload["scenarios"].items():
        parts.append(f"== {name} ==")
        results = scenario["results"]
        parts.append(
            chats.table({"results": results, "e2e_p50_ratio": {}, "e2e_pg_ratio": chats.pg_ratio(results)})
        )
    for kind, verdict in payload["verdicts"].items():
        parts.append(f"== targets: {kind} ==")
        for name, v in verdict.items():
            target = TARGETS[name]
            mark = "met" if v["met"] else "NOT met"
            parts.append(
                row([target.label, f"{v['value']} {target.unit}", f"≤ {target.limit}", mark], [48, 16, 10, 8])
            )
    return "\n".join(parts)


def parse(argv: Sequence[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    human, burst = HUMAN, BURST
    parser.add_argument("--chats", type=int, default=human.chats)
    parser.add_argument("--messages", type=int, default=human.messages)
    parser.add_argument(
        "--think-ms", type=float, default=human.think_ms, help="mean pause before a next message"
    )
    parser.add_argument("--spread-ms", type=float, default=human.spread_ms, help="users start within this")
    parser.add_argument("--burst-chats", type=int, default=burst.chats)
    parser.add_argument("--burst-messages", type=int, default=burst.messages)
    parser.add_argument("--skip-burst", action="store_true")
    parser.add_argument("--llm-ms", type=float, default=human.llm_ms, help="LLM time per reply")
    parser.add_argument("--bots", default="baseline,agentgram")
    parser.add_argument("--together", action="store_true", help="run the bots at the same time, not in turn")
    parser.add_argument(
        "--profile", type=Path, default=None, help="pyinstrument profile of agentgram (human pace)"
    )
    parser.add_argument("--seed", type=int, default=human.seed)
    parser.add_argument(
        "--pg-url",
        default=None,
        help="a PostgreSQL server (postgresql+asyncpg://…) for agentgram-pg's databases",
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    chats.check_pg_url(parser, args.bots, args.pg_url)
    bots = tuple(b.strip() for b in args.bots.split(",") if b.strip())
    common = {
        "llm_ms": args.llm_ms, "bots": bots, "seed": args.seed, "together": args.together, "pg_url": args.pg_url,
    }  # fmt: skip
    opts = Options(
        human=replace(
            human, chats=args.chats, messages=args.messages, think_ms=args.think_ms, spread_ms=args.spread_ms,
            profile=args.profile, **common,
        ),
        burst=None if args.skip_burst else replace(burst, chats=args.burst_chats, messages=args.burst_messages, **common),
    )  # fmt: skip
    return opts, args.out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    opts, out = parse(argv)
    payload = asyncio.run(run(opts))
    print(table(payload))
    print(f"results: {write_results('latency', payload, out)}")
    return payload


if __name__ == "__main__":
    main()
