"""Issue 27 req. 14: one, two and three agentgram instances on one PostgreSQL, in webhook mode.

Per run (one instance count, one pacing mode): a fresh PostgreSQL database on ``--pg-url``'s
server (:func:`bench.common.pg_database`), fresh fakes (:class:`~bench.fakes.TimedTelegram`,
:class:`~bench.fakes.TimedOpenAI`) and a :class:`RoundRobinProxy` in this process, and each
instance in its own process as an operator starts it: ``python -m agentgram.bot run --config
FILE`` with ``cluster: {enabled: true, instance_name: node-X}`` (default ``lease_ttl`` and
``heartbeat``), ``telegram.mode: webhook`` and ``telegram.webhook.public_url`` the proxy's URL
on every instance, so Telegram's POSTs go to each instance in turn. The instances share the chats
(:mod:`agentgram.runtime.infra.ownership`): each chat runs on the instance that holds its ``chat``
lease, claimed by the instance its first update reaches; an update reaching another instance is
relayed to the owner (``bot/telegram/core/webhook_relay.py``). The lead is only the scheduler's.
node-a starts first, until it leads and has set the webhook; then the others, until each has
logged ``agentgram is running``; then the load. The workdir is shared, the logs are at the
product's default level (INFO), the driver is ``--library``. Before the instances stop, the
``leases`` table tells which instance owns each chat of the load, and so how many of the POSTs the
proxy handed to an instance were for a chat another instance runs (relayed).

The load and the timing are :mod:`bench.chats`': ``--chats`` private chats at once, each sending
``--messages`` messages one after another (each after the previous reply is complete), the model
answering every request in ``--chunks`` chunks over ``--llm-ms``. *End-to-end* = the update queued
in FakeTelegram (which POSTs it to the proxy with Telegram's per-chat order) → FakeTelegram
accepts the message that shows the complete reply; *overhead* = end-to-end − the model's time.
*msgs/s* = user messages answered per second of the load.

Two pacing modes (``--pacing``):

* ``off`` — Telegram's pacing lifted: ``telegram.messages_per_second`` set to :data:`LIFTED`
  (the shared budget is still asked for every metered send, so its database round trip stays in
  the figures; a private chat's one a second is Telegram's and stays too, never reached by a
  closed-loop chat here). It measures the engine. (``bench.chats``' ``agentgram-nolimit`` kind
  does the same.)
* ``on`` — the product's 30 messages a second, which a cluster's instances share: the run reports
  the most messages Telegram received in any 1-second window, and per second over any 10 seconds
  (the fake's own arrival times of ``sendMessage``; the JSON also has every call the budget meters,
  :mod:`agentgram.bot.telegram.core.ratelimit`).

Per process (``/proc``): CPU seconds (user + system) during the measured load and peak RSS
(``VmHWM``); beside them the PostgreSQL server's processes' CPU, this driver's (the fakes, the
proxy and the users) and the machine's busy cores, so a ceiling can be placed. The summary gives
the instances' CPU per message together (all instances' CPU ÷ messages) and the busiest and the
idlest instance's utilisation.

Usage: ``scripts/test-services sh -c 'python -m bench.cluster --pg-url "$AGENTGRAM_TEST_PG_URL"'``
(300 chats × 2 messages; 1, 2 and 3 instances, pacing off and on, each twice, in the order 1, 2, 3,
3, 2, 1 so that a drift in the shared machine's load favours no count; ≈ 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml

from agentgram.bot.settings import bot_settings_from_mapping, current_layout
from agentgram.bot.telegram.core.ratelimit import UNLIMITED, UNMETERED
from bench import chats
from bench.botproc import Stalls
from bench.common import (
    MODEL,
    ROOT,
    agentgram_config,
    asyncpg_dsn,
    machine,
    pg_database,
    ratio,
    row,
    shown_url,
    summary_ms,
    write_results,
)
from bench.fakes import TimedOpenAI, TimedTelegram
from tests.cluster.harness import Forwarded, RoundRobinProxy, free_port

Pacing = Literal["off", "on"]
PACINGS: tuple[Pacing, ...] = ("off", "on")
LIFTED = 1_000_000.0
"""``telegram.messages_per_second`` with the pacing lifted: never the limit."""
PRODUCT_RATE = 30.0
"""``telegram.messages_per_second`` as shipped."""
WEBHOOK_PATH = "/telegram/webhook"
SECRET = "bench-cluster_" + "s" * 32
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
RUNNING = "agentgram is running as @"
"""What an instance logs once it serves (``bot/telegram/app.py``)."""
CLAIMED = re.compile(r"instance \S+ runs chat (-?\d+) now")
"""What an instance logs as it claims a chat (``runtime/infra/ownership.py``); the chat id."""


@dataclass(slots=True, frozen=True)
class Options:
    instances: tuple[int, ...] = (1, 2, 3)
    pacing: tuple[Pacing, ...] = PACINGS
    chats: int = 300
    messages: int = 2
    llm_ms: float = 300.0
    chunks: int = 10
    edit_interval: float = 1.0
    turn_timeout: float = 120.0
    library: str = "ptb"
    repeat: int = 1  # the command line's default is 2
    seed: int = 1
    pg_url: str | None = None


def chat_load(opts: Options) -> chats.Options:
    """The per-chat load of ``opts``, as :mod:`bench.chats` runs it."""
    return chats.Options(
        chats=opts.chats, messages=opts.messages, llm_ms=opts.llm_ms, chunks=opts.chunks,
        edit_interval=opts.edit_interval, turn_timeout=opts.turn_timeout, seed=opts.seed,
    )  # fmt: skip


# --------------------------------------------------------------------------- the instances


@dataclass
class Node:
    """One instance: its config, its log, its own listener and its process."""

    name: str
    folder: Path
    port: int
    proc: asyncio.subprocess.Process | None = None

    @property
    def config(self) -> Path:
        return self.folder / f"{self.name}.yml"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.name}.log"

    @property
    def listen_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def logged(self, text: str) -> bool:
        return text in self.log_text()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> None:
        env = dict(os.environ, PTB_TIMEDELTA="1", PYTHONUNBUFFERED="1")
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentgram.bot", "run", "--config", str(self.config),
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip

    async def wait_for(self, ready: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
        """Until ``ready()``; fails with the log's tail if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while not ready():
            if not self.running:
                raise RuntimeError(f"{self.name} exited waiting for {what}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no {what} within {timeout}s:\n{self.log_tail()}")
            await asyncio.sleep(0.1)

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit within :data:`STOP_TIMEOUT`; the exit code."""
        if self.proc is None or self.proc.returncode is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()


def instance_config(
    node: Node, *, tg_root: str, llm_url: str, public_url: str, database_url: str, users: Sequence[int],
    workdir: Path, opts: Options, pacing: Pacing,
) -> dict[str, Any]:  # fmt: skip
    """An instance's config: the benchmarks' bot (:func:`bench.common.agentgram_config`) on the
    shared database and workdir, in webhook mode behind ``public_url``, in the cluster as
    ``node.name``; logs at the default level (INFO: the lead and each chat's claim are told there)."""
    raw = agentgram_config(
        workdir, tg_root=tg_root, llm_url=llm_url, users=users, edit_interval=opts.edit_interval,
        storage_url=database_url,
    )  # fmt: skip
    raw["telegram"] |= {
        "library": opts.library,
        "mode": "webhook",
        "messages_per_second": LIFTED if pacing == "off" else PRODUCT_RATE,
        "webhook": {"listen": f"127.0.0.1:{node.port}", "public_url": public_url, "secret_token": SECRET},
    }
    raw["cluster"] = {"enabled": True, "instance_name": node.name}
    raw["logging"] = {"level": "INFO"}
    bot_settings_from_mapping(raw, {})  # a config the product refuses fails here, not in a process
    return current_layout(raw)


# --------------------------------------------------------------------------- /proc readings


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def process_cpu_s(pid: int, *, children: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` (with ``children``: of its reaped children too);
    0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    used = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return used / _ticks()


def process_kb(pid: int, key: str) -> int:
    """A ``/proc/PID/status`` size in kB (``VmHWM``: the peak RSS, ``VmRSS``: now); 0 if unknown."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    return 0


async def postmaster_pid(database_url: str) -> int | None:
    """The PID of the PostgreSQL server that serves ``database_url``, if it runs on this machine (the
    parent of a backend of ours); ``None`` otherwise."""
    import asyncpg

    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:  # read while the backend lives: it exits when the connection closes
        return parent_pid(int(await connection.fetchval("SELECT pg_backend_pid()")))
    finally:
        await connection.close()


def parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def postgres_cpu_s(postmaster: int | None) -> float | None:
    """CPU seconds of the server ``postmaster`` and its processes (the backends, those that ended
    included: their time is the postmaster's children's); ``None`` for a server elsewhere."""
    if postmaster is None:
        return None
    total = process_cpu_s(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and parent_pid(int(entry.name)) == postmaster:
            total += process_cpu_s(int(entry.name))
    return total


def machine_busy_s() -> float:
    """CPU seconds the whole machine was busy (all cores; ``/proc/stat``: not idle, not iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _ticks()


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def most_in_window(times: Sequence[float], window: float = 1.0) -> int:
    """The most of ``times`` (seconds) that fall in any half-open window ``[t, t + window)``."""
    ordered = sorted(times)
    return max((bisect_left(ordered, t + window, i) - i for i, t in enumerate(ordered)), default=0)


METERED_OUT = UNMETERED | UNLIMITED


def telegram_side(tg: TimedTelegram, since: int, turns: int) -> dict[str, Any]:
    """What Telegram saw from request ``since`` on: sends and their densest second, all calls the
    budget meters (a chat's message: sent, edited, deleted …), requests per turn, webhook retries."""
    seen = tg.requests[since:]
    sends = [r.time for r in seen if r.method == "sendMessage"]
    metered = [r.time for r in seen if "chat_id" in r.params and r.method not in METERED_OUT]
    return {
        "send_message": len(sends),
        "send_message_max_per_1s": most_in_window(sends),
        "send_message_max_per_s_over_10s": round(most_in_window(sends, 10.0) / 10, 1),
        "metered": len(metered),
        "metered_max_per_1s": most_in_window(metered),
        "requests_per_turn": round(len(seen) / max(turns, 1), 2),
        "webhook_failed_posts": sum(1 for d in tg.webhook_deliveries if not 200 <= d.status < 300),
    }


# --------------------------------------------------------------------------- one run


async def start_cluster(nodes: Sequence[Node], tg: TimedTelegram, hook_url: str) -> None:
    """node-a first, until it leads (the scheduler's lead) and has set the webhook; then the others
    at once, until each has logged that it is running (every instance serves its chats)."""
    first, *others = nodes
    await first.start()
    await first.wait_for(partial(first.logged, f"instance {first.name} leads"), "lead")
    await first.wait_for(lambda: tg.webhook_url == hook_url, "setWebhook")
    await first.wait_for(partial(first.logged, RUNNING), "running line")
    for node in others:
        await node.start()
    for node in others:
        await node.wait_for(partial(node.logged, RUNNING), "running line")


async def chat_owners(database_url: str) -> dict[int, str]:
    """Each chat's owner now: the name of the instance that holds its ``chat`` lease."""
    import asyncpg

    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await connection.fetch(
            "SELECT l.key, i.name FROM leases l JOIN instances i ON i.id = l.instance_id"
            " WHERE l.kind = 'chat'"
        )
    finally:
        await connection.close()
    return {int(r["key"]): str(r["name"]) for r in rows}


def ownership(
    nodes: Sequence[Node], owners: dict[int, str], users: Sequence[int], posts: Sequence[Forwarded]
) -> dict[str, Any]:
    """How the load's chats were shared: chats owned per instance (the leases, and the claims of the
    load's chats each instance logged: more than it owns when chats moved), and the load's POSTs the proxy handed to an instance that does not own the
    chat (relayed to the owner)."""
    load = set(users)
    owned = Counter(owners[u] for u in users if u in owners)
    updates = [p for p in posts if p.chat in load and 200 <= p.status < 300]
    relayed = sum(
        1 for p in updates if p.chat is not None and owners.get(p.chat) not in (None, nodes[p.upstream].name)
    )
    return {
        "chats_owned": {n.name: owned.get(n.name, 0) for n in nodes},
        "chats_unowned": len(load) - sum(owned.values()),
        "chats_claimed_logged": {
            n.name: sum(1 for c in CLAIMED.findall(n.log_text()) if int(c) in load) for n in nodes
        },
        "load_posts": len(updates),
        "relayed_posts": relayed,
        "relayed_share": round(relayed / len(updates), 3) if updates else None,
    }


async def measure(count: int, pacing: Pacing, opts: Options, folder: Path) -> dict[str, Any]:
    """``count`` instances with ``pacing`` under the load, on a database of their own."""
    assert opts.pg_url is not None, "a PostgreSQL server is needed: --pg-url"
    load_opts = chat_load(opts)
    users = [chats.FIRST_USER + i for i in range(opts.chats)]
    folder.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240  (set-up, before the measurement)
    nodes = [Node(f"node-{chr(ord('a') + n)}", folder, free_port()) for n in range(count)]
    async with AsyncExitStack() as stack:
        database_url = await stack.enter_async_context(pg_database(opts.pg_url))
        tg = await stack.enter_async_context(TimedTelegram())
        llm = await stack.enter_async_context(
            TimedOpenAI(chats.key_of, chats.replier(load_opts), models=(MODEL,))
        )
        proxy = await stack.enter_async_context(RoundRobinProxy([n.listen_url for n in nodes]))
        stack.push_async_callback(_stop_all, nodes)  # before the fakes close and the database is dropped
        for node in nodes:
            raw = instance_config(
                node, tg_root=tg.root, llm_url=llm.base_url, public_url=proxy.url, database_url=database_url,
                users=[chats.WARM_USER, *users], workdir=folder / "shared", opts=opts, pacing=pacing,
            )  # fmt: skip
            node.config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        try:
            await start_cluster(nodes, tg, proxy.url + WEBHOOK_PATH)
        except RuntimeError as error:
            raise RuntimeError(f"{count} instance(s), pacing {pacing}: {error}") from None
        ready_kb = {n.name: process_kb(n.pid, "VmRSS") for n in nodes}
        for index in range(max(chats.WARM_TURNS, count)):  # every instance takes a POST before the load
            await chats.one_turn(tg, llm, chats.WARM_USER, index, opts.turn_timeout)
        server = await postmaster_pid(database_url)
        posted = len(proxy.forwarded)
        result = await _loaded(nodes, tg, llm, users, load_opts, server)
        owners = await chat_owners(database_url)
        result |= ownership(nodes, owners, users, proxy.forwarded[posted:])
        result |= {
            "instances": count,
            "pacing": pacing,
            "messages_per_second_setting": LIFTED if pacing == "off" else PRODUCT_RATE,
            "ready_rss_mb": {name: round(kb / 1024, 1) for name, kb in ready_kb.items()},
            "peak_rss_mb": {n.name: round(process_kb(n.pid, "VmHWM") / 1024, 1) for n in nodes},
            "lead": next((n.name for n in nodes if n.logged(f"instance {n.name} leads")), None),
            "proxy": {
                nodes[i].name if i >= 0 else "none": dict(
                    Counter(f.status for f in proxy.forwarded if f.upstream == i)
                )
                for i in sorted({f.upstream for f in proxy.forwarded})
            },
        }
        exits = await _stop_all(nodes)
        result["exit_codes"] = exits
        result["log_lines"] = {n.name: len(n.log_text().splitlines()) for n in nodes}
        return result


async def _loaded(
    nodes: Sequence[Node],
    tg: TimedTelegram,
    llm: TimedOpenAI,
    users: Sequence[int],
    opts: chats.Options,
    server: int | None,
) -> dict[str, Any]:
    """The measured load, with every process's CPU around it (the driver's collector off during it,
    as :func:`bench.chats.measure` does: the fakes take every timestamp here; the heap unfrozen
    after it, so the next run's collection frees this run's fakes)."""
    gc.collect()
    gc.freeze()
    driver = Stalls()
    driver.start()
    rng = random.Random(opts.seed)
    load = chats.Load()
    since = len(tg.requests)
    cpu_before = {n.name: process_cpu_s(n.pid) for n in nodes}
    pg_before, busy_before, self_before = postgres_cpu_s(server), machine_busy_s(), _self_cpu_s()
    gc.disable()
    try:
        started = time.perf_counter()
        await asyncio.gather(
            *(chats.one_chat(tg, llm, u, opts, random.Random(rng.random()), load) for u in users)
        )
        wall = time.perf_counter() - started
    finally:
        gc.enable()
        gc.unfreeze()
    cpu = {n.name: process_cpu_s(n.pid) - cpu_before[n.name] for n in nodes}
    pg_after, busy, own = postgres_cpu_s(server), machine_busy_s() - busy_before, _self_cpu_s() - self_before
    pg = None if pg_after is None or pg_before is None else pg_after - pg_before
    stalls = driver.stop()
    turns = len(load.samples)
    samples = load.samples
    return {
        "turns": turns,
        "failures": load.failures,
        "wall_s": round(wall, 3),
        "messages_per_s": round(turns / wall, 2) if wall else 0.0,
        "end_to_end_ms": summary_ms([s.e2e for s in samples]),
        "llm_ms": summary_ms([s.llm for s in samples]),
        "overhead_ms": summary_ms([s.overhead for s in samples]),
        "before_llm_ms": summary_ms([s.before_llm for s in samples]),
        "after_llm_ms": summary_ms([s.after_llm for s in samples]),
        "first_text_ms": summary_ms([s.first_text for s in samples]),
        "cpu_s": {name: round(value, 2) for name, value in cpu.items()},
        "cpu_utilisation": {name: round(value / wall, 2) if wall else 0.0 for name, value in cpu.items()},
        "cpu_ms_per_message": {name: round(value * 1000 / max(turns, 1), 2) for name, value in cpu.items()},
        "postgres_cpu_s": None if pg is None else round(pg, 2),
        "postgres_utilisation": None if pg is None or not wall else round(pg / wall, 2),
        "driver_cpu_utilisation": round(own / wall, 2) if wall else 0.0,
        "machine_busy_cores": round(busy / wall, 2) if wall else 0.0,
        "telegram": telegram_side(tg, since, turns),
        "driver_stalls": stalls,
        "slowest": chats.slowest(samples, 6),
    }


async def _stop_all(nodes: Sequence[Node]) -> dict[str, int | None]:
    """The others first, then node-a (the scheduler's lead, so nobody takes it over meanwhile)."""
    return {n.name: await n.stop() for n in reversed(nodes)}


# --------------------------------------------------------------------------- all runs, the report


async def run(opts: Options) -> dict[str, Any]:
    """Every instance count of ``opts`` under each pacing, ``repeat`` times: the counts in order,
    then in reverse (1,2,3,3,2,1), so a drift of the shared machine's load does not favour one."""
    facts = machine()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agentgram-cluster-") as tmp:
        for pacing in opts.pacing:
            for rep in range(opts.repeat):
                for count in opts.instances if rep % 2 == 0 else reversed(opts.instances):
                    folder = Path(tmp) / f"{pacing}-{count}-{rep}"
                    runs.append(await measure(count, pacing, opts, folder) | {"repeat": rep})
    return {
        "benchmark": "cluster",
        "machine": facts,
        "options": _options(opts),
        "runs": runs,
        "summary": summary(runs),
    }


def summary(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per pacing and instance count, the runs' means (msgs/s with its range), and the ratios of
    msgs/s and e2e p50/p99 to one instance's with the same pacing."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["pacing"], r["instances"]), []).append(r)
    found = [_summed(pacing, count, group) for (pacing, count), group in groups.items()]
    ones = {s["pacing"]: s for s in found if s["instances"] == 1}
    for s in found:
        one = ones.get(s["pacing"], {})
        s["ratio_to_one"] = {
            key: ratio(s[key], one.get(key)) for key in ("messages_per_s", "e2e_p50_ms", "e2e_p99_ms")
        }
    return found


def _summed(pacing: str, count: int, group: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def per_run(key: str, pick: Callable[[Sequence[float]], float]) -> float | None:
        return _mean([pick(list(r[key].values())) for r in group])

    rates = [r["messages_per_s"] for r in group]
    owned = [v for r in group for v in r["chats_owned"].values()]
    return {
        "pacing": pacing,
        "instances": count,
        "runs": len(group),
        "messages_per_s": _mean(rates),
        "messages_per_s_range": [min(rates), max(rates)],
        "e2e_p50_ms": _mean([r["end_to_end_ms"].get("p50") for r in group]),
        "e2e_p99_ms": _mean([r["end_to_end_ms"].get("p99") for r in group]),
        "overhead_p50_ms": _mean([r["overhead_ms"].get("p50") for r in group]),
        "cpu_ms_per_message": per_run("cpu_ms_per_message", sum),
        "instance_cpu_ms_per_message_max": per_run("cpu_ms_per_message", max),
        "instance_cpu_ms_per_message_min": per_run("cpu_ms_per_message", min),
        "instances_utilisation": per_run("cpu_utilisation", sum),
        "utilisation_max": per_run("cpu_utilisation", max),
        "utilisation_min": per_run("cpu_utilisation", min),
        "postgres_utilisation": _mean([r["postgres_utilisation"] for r in group]),
        "postgres_cpu_ms_per_message": _mean([_per_message(r, r["postgres_utilisation"]) for r in group]),
        "driver_utilisation": _mean([r["driver_cpu_utilisation"] for r in group]),
        "driver_cpu_ms_per_message": _mean([_per_message(r, r["driver_cpu_utilisation"]) for r in group]),
        "machine_busy_cores": _mean([r["machine_busy_cores"] for r in group]),
        "chats_owned_range": [min(owned), max(owned)] if owned else None,
        "chats_unowned": sum(r["chats_unowned"] for r in group),
        "relayed_share": _mean([r["relayed_share"] for r in group]),
        "peak_rss_mb_max": max(v for r in group for v in r["peak_rss_mb"].values()),
        "send_message_max_per_1s": max(r["telegram"]["send_message_max_per_1s"] for r in group),
        "send_message_max_per_s_over_10s": max(
            r["telegram"]["send_message_max_per_s_over_10s"] for r in group
        ),
        "failures": sum(len(r["failures"]) for r in group),
    }


def _per_message(run: dict[str, Any], utilisation: float | None) -> float | None:
    """CPU ms per message of a process whose ``utilisation`` over the run's load is given."""
    if utilisation is None or not run["turns"]:
        return None
    return float(utilisation * run["wall_s"] * 1000 / run["turns"])


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 2) if known else None


def _options(opts: Options) -> dict[str, Any]:
    return {
        "instances": list(opts.instances), "pacing": list(opts.pacing), "chats": opts.chats,
        "messages": opts.messages, "llm_ms": opts.llm_ms, "chunks": opts.chunks,
        "edit_interval": opts.edit_interval, "turn_timeout": opts.turn_timeout, "library": opts.library,
        "repeat": opts.repeat, "seed": opts.seed, "pg_url": shown_url(opts.pg_url),
    }  # fmt: skip


def _percent(share: float | None) -> object:
    return "-" if share is None else round(100 * share)


def _per_node(values: dict[str, Any]) -> str:
    return " / ".join(str(v) for v in values.values())


def table(payload: dict[str, Any]) -> str:
    """Every run, then the summary per pacing and instance count."""
    widths = [7, 5, 4, 7, 9, 9, 9, 17, 17, 13, 6, 5, 5, 5, 7, 8]
    header = [
        "pacing", "inst", "rep", "msgs/s", "e2e p50", "e2e p99", "ovh p50", "CPU s (a/b/c)",
        "CPU% (a/b/c)", "chats (a/b/c)", "relay", "pg%", "drv%", "busy", "max/1s", "max/10s",
    ]  # fmt: skip
    lines = [row(header, widths)]
    for r in payload["runs"]:
        tg = r["telegram"]
        lines.append(row([
            r["pacing"], r["instances"], r.get("repeat", 0), r["messages_per_s"],
            r["end_to_end_ms"].get("p50", "-"), r["end_to_end_ms"].get("p99", "-"),
            r["overhead_ms"].get("p50", "-"), _per_node(r["cpu_s"]),
            _per_node({k: _percent(v) for k, v in r["cpu_utilisation"].items()}), _per_node(r["chats_owned"]),
            _percent(r["relayed_share"]), _percent(r["postgres_utilisation"]),
            _percent(r["driver_cpu_utilisation"]), r["machine_busy_cores"],
            tg["send_message_max_per_1s"], tg["send_message_max_per_s_over_10s"],
        ], widths))  # fmt: skip
        if r["failures"]:
            lines.append(f"  {len(r['failures'])} failed: {r['failures'][:3]}")
    widths = [7, 5, 20, 6, 9, 9, 9, 16, 11, 8, 10, 6, 5, 5, 5, 7, 8]
    header = [
        "pacing", "inst", "msgs/s (range)", "×1", "e2e p50", "e2e p99", "ovh p50", "ms/msg inst/pg/drv",
        "max/min %", "all %", "chats", "relay", "pg%", "drv%", "busy", "max/1s", "max/10s",
    ]  # fmt: skip
    lines += ["", "summary (mean of the runs):", row(header, widths)]
    for s in payload["summary"]:
        low, high = s["messages_per_s_range"]
        owned = s["chats_owned_range"] or ["-", "-"]
        lines.append(row([
            s["pacing"], s["instances"], f"{s['messages_per_s']} ({low}–{high})",
            s["ratio_to_one"]["messages_per_s"] or "-", s["e2e_p50_ms"], s["e2e_p99_ms"], s["overhead_p50_ms"],
            "/".join(
                "-" if v is None else str(round(v))
                for v in (s["cpu_ms_per_message"], s["postgres_cpu_ms_per_message"], s["driver_cpu_ms_per_message"])
            ),
            f"{_percent(s['utilisation_max'])}/{_percent(s['utilisation_min'])}",
            _percent(s["instances_utilisation"]), f"{owned[0]}–{owned[1]}", _percent(s["relayed_share"]),
            _percent(s["postgres_utilisation"]), _percent(s["driver_utilisation"]), s["machine_busy_cores"],
            s["send_message_max_per_1s"], s["send_message_max_per_s_over_10s"],
        ], widths))  # fmt: skip
    lines.append(
        "CPU% / pg% / drv%: CPU of each instance, the PostgreSQL server, this driver (100 = one core);"
        " ms/msg inst/pg/drv: CPU per message of all instances together, PostgreSQL, this driver; max/min %: the busiest and the idlest instance;"
        " all %: the instances together; chats: the load's chats an instance owns (fewest–most);"
        " relay: the load's POSTs that reached an instance not owning the chat; busy: the machine's"
        " cores in use (other work included); max/1s: most sendMessage calls Telegram got in any 1 s;"
        " max/10s: in any 10 s, per second"
    )
    return "\n".join(lines)


def parse(argv: Sequence[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instances", default="1,2,3", help="instance counts, one run each")
    parser.add_argument("--pacing", choices=("off", "on", "both"), default="both")
    parser.add_argument("--chats", type=int, default=300)
    parser.add_argument("--messages", type=int, default=2, help="messages per chat, one after another")
    parser.add_argument("--llm-ms", type=float, default=300.0, help="the model's time per reply")
    parser.add_argument("--chunks", type=int, default=10, help="streamed chunks per reply")
    parser.add_argument("--edit-interval", type=float, default=1.0, help="telegram.stream_edit_interval")
    parser.add_argument("--turn-timeout", type=float, default=120.0)
    parser.add_argument("--library", choices=("ptb", "aiogram"), default="ptb")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each count (order 1,2,3 then 3,2,1 …)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pg-url", required=True, help="a PostgreSQL server (postgresql+asyncpg://…)")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    counts = tuple(int(c) for c in args.instances.split(",") if c.strip())
    if not counts or min(counts) < 1 or max(counts) > 26:
        parser.error("--instances: counts from 1 to 26, e.g. 1,2,3")
    pacing: tuple[Pacing, ...] = PACINGS if args.pacing == "both" else (args.pacing,)
    opts = Options(
        instances=counts, pacing=pacing, chats=args.chats, messages=args.messages, llm_ms=args.llm_ms,
        chunks=args.chunks, edit_interval=args.edit_interval, turn_timeout=args.turn_timeout,
        library=args.library, repeat=args.repeat, seed=args.seed, pg_url=args.pg_url,
    )  # fmt: skip
    return opts, args.out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    opts, out = parse(argv)
    payload = asyncio.run(run(opts))
    print(table(payload))
    print(f"results: {write_results('cluster', payload, out)}")
    return payload


if __name__ == "__main__":
    main()
