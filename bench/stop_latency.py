"""/stop latency: from the /stop update to the LLM's HTTP stream closed, and to "⏹ Stopped.".

The agentgram bot runs in its own process (:mod:`bench.botproc`) against
FakeTelegram and FakeOpenAI in this one. Each trial: the user sends a message;
the fake LLM streams a first piece of text and then hangs (``Hang``); once that
text is visible in the chat, ``/stop`` is injected into FakeTelegram. Timed by
the fakes: **stream closed** = the fake LLM noticed the client close the
connection; **acknowledged** = the chat shows "⏹ Stopped.". ``--load-chats K``
keeps K other chats chatting (closed loop, as in :mod:`bench.chats`) during
the trials, to see /stop under load.

Usage: ``python -m bench.stop_latency --trials 30``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import chats
from bench.common import MODEL, machine, row, summary_ms, write_results
from bench.fakes import TimedOpenAI, TimedTelegram, last_user_text
from bench.process import BotProcess
from tests.fakes.openai_server import Hang, Reply

STOP_USER = 3001
FIRST_TEXT = "Working on it"
STOPPED = "⏹ Stopped."
_TRIAL = re.compile(r"\bs(\d+): go\b")


@dataclass(slots=True, frozen=True)
class Options:
    trials: int = 30
    load_chats: int = 0
    llm_ms: float = 300.0
    timeout: float = 20.0


@dataclass(slots=True)
class Trials:
    closed: list[float] = field(default_factory=list)
    acknowledged: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def key_of(body: dict[str, Any]) -> Any:
    found = _TRIAL.findall(last_user_text(body))
    return ("stop", int(found[-1])) if found else chats.key_of(body)


def replier(opts: Options) -> Callable[[Any], Reply]:
    chat_reply = chats.replier(chats.Options(llm_ms=opts.llm_ms))

    def reply_for(key: Any) -> Reply:
        if isinstance(key, tuple) and key[0] == "stop":
            return Hang(first_text=FIRST_TEXT, seconds=60.0)
        return chat_reply(key)

    return reply_for


async def trial(tg: TimedTelegram, llm: TimedOpenAI, n: int, timeout: float, out: Trials) -> None:
    streaming = tg.expect(STOP_USER, lambda text: FIRST_TEXT in text, drafts=True)  # as a draft or a message
    tg.send_text(STOP_USER, f"s{n}: go")
    await asyncio.wait_for(streaming, timeout)
    closed_before = len(llm.closed_at)
    acknowledged = tg.expect(STOP_USER, lambda text: STOPPED in text)
    injected = time.perf_counter()
    tg.send_text(STOP_USER, "/stop")
    await llm.wait_stream_closed(timeout, count=llm.closed_streams + 1)
    out.closed.append(llm.closed_at[closed_before] - injected)
    out.acknowledged.append(await asyncio.wait_for(acknowledged, timeout) - injected)


async def background(
    tg: TimedTelegram, llm: TimedOpenAI, chat: int, done: asyncio.Event, timeout: float
) -> int:
    turns = 0
    while not done.is_set() and turns < 10_000:
        try:
            await chats.one_turn(tg, llm, chat, turns, timeout)
        except TimeoutError:
            return turns
        turns += 1
    return turns


async def run(opts: Options) -> dict[str, Any]:
    load_users = [chats.FIRST_USER + i for i in range(opts.load_chats)]
    out = Trials()
    facts = machine()
    with tempfile.TemporaryDirectory(prefix="agentgram-bench-") as tmp:
        async with (
            TimedTelegram() as tg,
            TimedOpenAI(key_of, replier(opts), models=(MODEL,)) as llm,
            BotProcess(
                "agentgram", tg_root=tg.root, llm_url=llm.base_url, workdir=Path(tmp),
                users=[STOP_USER, *load_users],
            ) as bot,
        ):  # fmt: skip
            done = asyncio.Event()
            load = [asyncio.create_task(background(tg, llm, u, done, opts.timeout)) for u in load_users]
            try:
                for n in range(opts.trials):
                    try:
                        await trial(tg, llm, n, opts.timeout, out)
                    except (TimeoutError, AssertionError) as exc:
                        out.failures.append(f"trial {n}: {type(exc).__name__}: {exc}"[:300])
                        break
            finally:
                done.set()
                load_turns = sum(await asyncio.gather(*load))
            await bot.stop()
    return {
        "benchmark": "stop_latency",
        "machine": facts,
        "options": {"trials": opts.trials, "load_chats": opts.load_chats, "llm_ms": opts.llm_ms},
        "results": {
            "stream_closed_ms": summary_ms(out.closed),
            "acknowledged_ms": summary_ms(out.acknowledged),
            "failures": out.failures,
            "load_turns": load_turns,
        },
    }


def table(payload: dict[str, Any]) -> str:
    widths = [34, 8, 10, 10, 10]
    lines = [row(["/stop → …", "n", "p50 ms", "p99 ms", "max ms"], widths)]
    for label, key in (("LLM stream closed (at the fake)", "stream_closed_ms"), (STOPPED, "acknowledged_ms")):
        s = payload["results"][key]
        lines.append(row([label, s["n"], s.get("p50", "-"), s.get("p99", "-"), s.get("max", "-")], widths))
    failures = payload["results"]["failures"]
    lines.append(f"failures: {len(failures)}" + (f" ({failures[0]})" if failures else ""))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--load-chats", type=int, default=0, help="other chats chatting meanwhile")
    parser.add_argument("--llm-ms", type=float, default=300.0, help="LLM time per reply in the load chats")
    parser.add_argument("--timeout", type=float, default=20.0, help="per step of a trial")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    payload = asyncio.run(run(Options(args.trials, args.load_chats, args.llm_ms, args.timeout)))
    print(table(payload))
    print(f"results: {write_results('stop_latency', payload, args.out)}")
    return payload


if __name__ == "__main__":
    main()
