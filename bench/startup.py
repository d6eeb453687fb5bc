"""Start-up (issue 31 req. 6): process start → the first ``getUpdates``, agentgram beside the baseline.

Each start is a new process as a user starts it: agentgram is ``agentgram run --config FILE`` (the
console script next to this interpreter; ``python -m agentgram.bot`` without it) with the benchmarks'
config (:func:`bench.common.agentgram_config`: file SQLite, polling, ``tic`` off) in a fresh folder,
so a fresh database that the start migrates; *agentgram (restart)* starts it once more on that
database right after (the common case: a restart). The baseline is ``python -m bench.baseline_bot``
(python-telegram-bot's updater and the openai SDK, nothing else). The clock starts just before the
process is spawned and stops when the fake Bot API server receives the process's first
``getUpdates``; the process's CPU time (user + system) and RSS are read from ``/proc`` at that
moment. Then it gets SIGTERM.

``agentgram --version`` is timed the same way (spawn → exit), beside ``python -c pass`` (the
interpreter's own start, the floor under every figure here).

Bytecode: every child runs with ``PYTHONPYCACHEPREFIX`` in this run's temporary folder and without
``PYTHONDONTWRITEBYTECODE`` (which the test environment sets: every start would compile agentgram's
sources), and one start of each kind before the measured ones compiles it, as an installed package
has it compiled. ``--repeats`` starts of each kind follow, the order alternating; medians are
reported, and the ratios to the baseline with the targets (:data:`TARGETS`).

Usage: ``python -m bench.startup --repeats 7``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentgram.bot.settings import current_layout
from bench.common import MODEL, ROOT, agentgram_config, machine, ratio, row, write_results
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

USER = 2001
STOP_TIMEOUT = 30.0
KINDS = ("baseline", "agentgram", "agentgram (restart)")


@dataclass(slots=True, frozen=True)
class Target:
    label: str
    limit: float


TARGETS = {
    "first_poll_ratio": Target("first getUpdates ÷ baseline's (fresh database)", 2.0),
    "version_s": Target("agentgram --version wall s", 0.3),
}


@dataclass(slots=True, frozen=True)
class Options:
    repeats: int = 7
    timeout: float = 60.0
    bytecode: bool = True
    """Compile into this run's ``PYTHONPYCACHEPREFIX`` with one start of each kind first; ``False``:
    the children get this environment as it is and no start goes first (the smoke test's)."""


class FirstPoll(FakeTelegram):
    """FakeTelegram that tells when the first ``getUpdates`` arrived, and what came before it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.first_poll: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    async def _m_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if not self.first_poll.done():
            self.first_poll.set_result(time.perf_counter())
        return await super()._m_getUpdates(params)


def child_env(pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": str(pycache), "PTB_TIMEDELTA": "1"}


def agentgram_command() -> list[str]:
    script = Path(sys.executable).with_name("agentgram")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentgram.bot"]


def proc_facts(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) and RSS (MB) of a running process, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    rss_kb = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    return {"cpu_s": round(cpu, 3), "rss_mb": round(rss_kb / 1024, 1)}


def command_for(kind: str, tg_root: str, llm_url: str, folder: Path) -> list[str]:
    """How ``kind`` is started against the fakes; agentgram's config is written to ``folder``."""
    if kind == "baseline":
        return [sys.executable, "-m", "bench.baseline_bot", "--tg", tg_root, "--llm", llm_url]
    config = folder / "config.yml"
    raw = agentgram_config(folder, tg_root=tg_root, llm_url=llm_url, users=[USER], edit_interval=1.0)
    config.write_text(yaml.safe_dump(current_layout(raw)), encoding="utf-8")
    return [*agentgram_command(), "run", "--config", str(config)]


async def start_once(kind: str, env: dict[str, str], folder: Path, opts: Options) -> dict[str, Any]:
    """Spawn → the first ``getUpdates``; then SIGTERM."""
    async with FirstPoll() as tg, FakeOpenAI(models=(MODEL,)) as llm:
        command = command_for(kind, tg.root, llm.base_url, folder)
        with (folder / f"{kind.split()[0]}.log").open("ab") as log:
            spawned = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                *command, cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log
            )
        try:
            polled = await asyncio.wait_for(asyncio.shield(tg.first_poll), opts.timeout)
            facts = proc_facts(proc.pid)
            before_poll = [r.method for r in tg.requests if r.method != "getUpdates"]
        except TimeoutError:
            raise RuntimeError(f"{kind}: no getUpdates within {opts.timeout}s; see {folder}") from None
        finally:
            await stop(proc)
    return {"first_poll_s": round(polled - spawned, 3), **facts, "requests_before": before_poll}


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def wall_of(command: list[str], env: dict[str, str]) -> float:
    """Spawn → exit of ``command``, seconds; it must succeed."""
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{command} exited {proc.returncode}: {err.decode(errors='replace')[-500:]}")
    return round(took, 3)


async def one_round(n: int, env: dict[str, str], tmp: Path, opts: Options) -> dict[str, dict[str, Any]]:
    """One start of each kind (agentgram's restart right after its fresh start), the order by ``n``."""
    order = KINDS if n % 2 == 0 else (*KINDS[1:], KINDS[0])
    found: dict[str, dict[str, Any]] = {}
    for kind in order:
        folder = tmp / f"{kind.split()[0]}-{n}"  # the restart finds the fresh start's database
        folder.mkdir(exist_ok=True)
        found[kind] = await start_once(kind, env, folder, opts)
    return found


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    starts: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    version: list[float] = []
    floor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="agentgram-startup-") as name:
        tmp = Path(name)
        env = child_env(tmp / "pycache") if opts.bytecode else dict(os.environ)
        if opts.bytecode:  # the bytecode of both; not counted
            await one_round(-1, env, tmp, opts)
            await wall_of([*agentgram_command(), "--version"], env)
        for n in range(opts.repeats):
            for kind, result in (await one_round(n, env, tmp, opts)).items():
                starts[kind].append(result)
            version.append(await wall_of([*agentgram_command(), "--version"], env))
            floor.append(await wall_of([sys.executable, "-c", "pass"], env))
        shutil.rmtree(tmp / "pycache", ignore_errors=True)
    medians = {
        kind: {name: _median([r[name] for r in results]) for name in ("first_poll_s", "cpu_s", "rss_mb")}
        for kind, results in starts.items()
    }
    figures = {
        "first_poll_ratio": ratio(medians["agentgram"]["first_poll_s"], medians["baseline"]["first_poll_s"]),
        "version_s": _median(version),
    }
    return {
        "benchmark": "startup",
        "machine": facts,
        "options": {"repeats": opts.repeats, "bytecode": opts.bytecode, "command": agentgram_command()},
        "starts": starts,
        "medians": medians,
        "version_s": version,
        "python_floor_s": floor,
        "ratios": {
            kind: {
                name: ratio(medians[kind][name], medians["baseline"][name]) for name in ("first_poll_s", "cpu_s")
            }
            for kind in KINDS
            if kind != "baseline"
        },
        "verdicts": {
            name: {"value": value, "limit": TARGETS[name].limit, "met": value is not None and value <= TARGETS[name].limit}
            for name, value in figures.items()
        },
    }  # fmt: skip


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def table(payload: dict[str, Any]) -> str:
    widths = [22, 16, 14, 12, 22]
    lines = [row(["", "first poll s", "CPU s", "RSS MB", "÷ baseline (wall, CPU)"], widths)]
    for kind, m in payload["medians"].items():
        r = payload["ratios"].get(kind, {})
        shown = f"{r.get('first_poll_s')}, {r.get('cpu_s')}" if r else "-"
        lines.append(row([kind, m["first_poll_s"], m["cpu_s"], m["rss_mb"], shown], widths))
    lines.append(
        f"agentgram --version: median {_median(payload['version_s'])} s; python -c pass: "
        f"median {_median(payload['python_floor_s'])} s"
    )
    first = payload["starts"]["agentgram"][0]["requests_before"] if payload["starts"]["agentgram"] else []
    lines.append(f"agentgram's Bot API calls before its first getUpdates: {', '.join(first) or '-'}")
    for name, v in payload["verdicts"].items():
        mark = "met" if v["met"] else "NOT met"
        lines.append(f"{TARGETS[name].label} = {v['value']} (≤ {v['limit']}: {mark})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=Options().repeats, help="starts of each kind")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    payload = asyncio.run(run(Options(repeats=args.repeats)))
    print(table(payload))
    print(f"results: {write_results('startup', payload, args.out)}")
    return payload


if __name__ == "__main__":
    main()
