"""Memory over many scheduled headless runs: the process's RSS every ``--sample-every`` runs.

Every tic and cron run opens a fresh headless session, and so gets a session
worker, in-memory views of its mail and history, and a few rows. This
benchmark drives ``--runs`` of them, one after the other, through the real
scheduler path — a cron job's run (``SchedulerService.run_now``, the
``CronRunner.launch`` APScheduler calls on a fire) alternating with a tic
(``SchedulerService.tic``) — against the fake OpenAI server, in a real
``Runtime`` on a file SQLite database as a user would configure it. Each run
waits for the previous one to be recorded.

At every sample it runs a full garbage collection and records the RSS (psutil),
the hub's workers, the event loop's tasks and the entries of the in-memory
views (unread mail, history tails). The fake LLM runs in this process too; its
record of requests is cleared at every sample so that only the runtime's memory
can grow. The chat the runs report to exists beforehand (its user talked to the
bot before), so every worker counted is a headless one.

Usage: ``python -m bench.headless_memory --runs 1000 --sample-every 100``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from agentgram.bot.settings import BotSettings, bot_settings_from_mapping
from agentgram.runtime.app import Runtime
from agentgram.runtime.scheduler.models import JobRun, TicRun
from agentgram.runtime.scheduler.tic import Run
from agentgram.runtime.scheduler.values import JobSpec
from bench.common import MODEL, machine, row, write_results
from bench.fakes import last_user_text
from tests.fakes.openai_server import FakeOpenAI, Reply, Text

CHAT = 4001
RUN_TIMEOUT = 30.0  # seconds one run may take before the benchmark gives up
SETTLE_TIMEOUT = 5.0  # after the last run, for the last headless worker to go
KINDS = ("cron", "tic")


@dataclass(slots=True, frozen=True)
class Options:
    runs: int = 1000
    sample_every: int = 100


def settings(workdir: Path, llm_url: str) -> BotSettings:
    raw: dict[str, Any] = {
        "telegram": {"token": "123456:TEST-token", "allowed_user_ids": [CHAT]},
        "llm": {"base_url": llm_url, "api_key": "sk-bench", "model": MODEL, "max_retries": 0},
        "storage": {"url": f"sqlite+aiosqlite:///{workdir / 'agentgram.db'}"},
        "agent": {"workdir": str(workdir / "workspace"), "timezone": "UTC"},
        "tic": {"enabled": False},  # not on a timer: this benchmark asks for each tic
        "logging": {"level": "WARNING"},
    }
    return bot_settings_from_mapping(raw, {})


def reply(body: dict[str, Any]) -> Reply:
    """A tic says it has nothing to report; a cron run answers a line."""
    return Text("TIC_OK") if last_user_text(body).startswith("[TIC]") else Text("All backups are fine.")


class Driver:
    """Starts one run at a time and waits for the scheduler to record it."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.recorded = asyncio.Event()
        self.evicted = asyncio.Event()
        runtime.parts.scheduler.run_listeners.append(self._recorded)
        runtime.parts.scheduler.tic_listeners.append(self._recorded)
        runtime.parts.hub.evict_listeners.append(lambda _: self.evicted.set())

    def _recorded(self, _: JobRun | TicRun) -> None:
        self.recorded.set()

    async def one(self, kind: str, job_id: int) -> None:
        self.recorded.clear()
        scheduler = self.runtime.parts.scheduler
        if kind == "cron":
            started = await scheduler.run_now(job_id)
        else:
            started = isinstance(await scheduler.tic(manual=True), Run)
        if not started:
            raise RuntimeError(f"the {kind} run did not start")
        await asyncio.wait_for(self.recorded.wait(), RUN_TIMEOUT)

    async def settle(self) -> None:
        """Until the last run's worker is gone (it goes right after its turn, maybe a step later)."""

        async def evicted() -> None:
            while self.runtime.parts.hub.workers:
                self.evicted.clear()
                await self.evicted.wait()

        try:
            await asyncio.wait_for(evicted(), SETTLE_TIMEOUT)
        except TimeoutError:
            pass  # reported: the sample counts the workers left


def sample(runtime: Runtime, runs: int, started: float) -> dict[str, Any]:
    gc.collect()
    return {
        "runs": runs,
        "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 2),
        "workers": len(runtime.parts.hub.workers),
        "tasks": len(asyncio.all_tasks()),
        # diagnostics: how many sessions the in-memory views hold (bounded LRUs)
        "unread_views": len(runtime.parts.mailbox._view._views),
        "history_tails": len(runtime.parts.history.tails._views),
        "seconds": round(time.perf_counter() - started, 2),
    }


async def measure(workdir: Path, llm: FakeOpenAI, opts: Options) -> list[dict[str, Any]]:
    (workdir / "workspace").mkdir(parents=True)
    (workdir / "workspace" / "TIC.md").write_text("- anything urgent?\n")
    runtime = Runtime(settings(workdir, llm.base_url), format_rules="", home_chat_id=CHAT)
    await runtime.start()
    try:
        await runtime.parts.session_store.find_or_open(CHAT, user_id=CHAT, language="en")  # the user's chat
        job = await runtime.parts.scheduler.add_job(
            JobSpec(title="Backups", schedule="every 24h", prompt="Check the backups.", chat_id=CHAT)
        )
        driver = Driver(runtime)
        samples = []
        started = time.perf_counter()
        for n in range(1, opts.runs + 1):
            await driver.one(KINDS[n % len(KINDS)], job.id or 0)
            if n % opts.sample_every == 0 or n == opts.runs:
                await driver.settle()
                llm.requests.clear()
                samples.append(sample(runtime, n, started))
        return samples
    finally:
        await runtime.close()


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    async with FakeOpenAI(models=(MODEL,)) as llm:
        llm.handler = reply
        with tempfile.TemporaryDirectory(prefix="agentgram-bench-") as tmp:
            samples = await measure(Path(tmp), llm, opts)
    first, last = samples[0], samples[-1]
    span = last["runs"] - first["runs"]
    growth = round(last["rss_mb"] - first["rss_mb"], 2)
    return {
        "benchmark": "headless_memory",
        "machine": facts,
        "options": {"runs": opts.runs, "sample_every": opts.sample_every},
        "samples": samples,
        "rss_first_mb": first["rss_mb"],
        "rss_last_mb": last["rss_mb"],
        "rss_growth_mb": growth,
        "rss_growth_kb_per_run": round(growth * 1024 / span, 2) if span else None,
        "workers_at_end": last["workers"],
        "runs_per_s": round(last["runs"] / last["seconds"], 1) if last["seconds"] else None,
    }


def table(payload: dict[str, Any]) -> str:
    widths = [6, 8, 8, 6, 12, 13, 8]
    head = ["runs", "RSS MB", "workers", "tasks", "unread views", "history tails", "seconds"]
    lines = [row(head, widths)]
    for s in payload["samples"]:
        cells = [s["runs"], s["rss_mb"], s["workers"], s["tasks"], s["unread_views"], s["history_tails"]]
        lines.append(row([*cells, s["seconds"]], widths))
    first, last = payload["samples"][0], payload["samples"][-1]
    lines.append(
        f"RSS {payload['rss_first_mb']} MB at {first['runs']} runs → {payload['rss_last_mb']} MB at "
        f"{last['runs']}: {payload['rss_growth_mb']:+} MB ({payload['rss_growth_kb_per_run']} KB/run); "
        f"{payload['runs_per_s']} runs/s"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sample-every", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    payload = asyncio.run(run(Options(args.runs, args.sample_every)))
    print(table(payload))
    print(f"results: {write_results('headless_memory', payload, args.out)}")
    return payload


if __name__ == "__main__":
    main()
