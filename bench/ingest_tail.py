"""Issue 31 req. 7: update → model request, measured a second way — from the fakes' own logs, with
the fakes, the users and the bot each in a process of their own.

:mod:`bench.latency` (the first way) runs the fakes, the 1,000 simulated users and every clock in
one driver process and event loop. Here nothing is shared but the machine:

- **fake Bot API** (``python -m bench.ingest_tail fake-telegram``): ``FakeTelegram`` in a process
  of its own, plus a control route, ``POST /control/turn``, through which a user writes a message;
- **fake model** (``python -m bench.ingest_tail fake-openai``): ``FakeOpenAI`` in another process,
  answering every request as :mod:`bench.chats` does (the ~110-character reply of the user message
  the request answers, in ``--chunks`` chunks over ``--llm-ms``);
- **users** (``python -m bench.ingest_tail users``): the load in a third process, over HTTP only:
  the same chats, texts and seeded schedule as :mod:`bench.latency`'s human pace (each chat starts
  within ``--spread-ms``, writes its next message ``--think-ms`` × 0.5–1.5 after a complete reply);
- **the bot**: its own process, started by :class:`bench.process.BotProcess` exactly as
  :mod:`bench.chats` starts it;
- this process only starts and stops the others and reads the logs afterwards.

Each fake writes one JSON line per event, its time ``time.monotonic()`` (``CLOCK_MONOTONIC``: one
clock for every process of the machine), taken where the event happens:

- fake Bot API: ``queued`` (the user's update is in the queue the bot polls: its arrival at the
  Bot API), ``delivered`` (a ``getUpdates`` answer carries it for the first time), ``first_shown``
  (the first request that shows any of the reply: a draft with text, a message or an edit),
  ``complete`` (the ``sendMessage``/``editMessageText`` that makes the chat show the complete reply
  was accepted), ``api`` (every request: its method);
- fake model: ``llm`` per request: ``t``, its arrival (the handler runs, before the body is read —
  the moment :mod:`bench.chats` calls "the LLM request read"), ``read`` (body parsed and validated),
  ``first_token``, ``end`` (the last byte written), keyed by the ``c<chat> m<index>`` token of the
  request's last user message.

Per turn (the warm-up chat's excluded): **update → model** = ``queued`` → the first arrival of
that turn's key, split into **update → poll** (``queued`` → ``delivered``: until a ``getUpdates``
took it) and **poll → model**; **end-to-end** = ``queued`` → ``complete``; **LLM** = the model's
arrival → ``end`` (summed over a turn's requests); **overhead** = end-to-end − LLM. Every
process but the bot's collects its heap and freezes it once started, and collects nothing after
(as :mod:`bench.chats`' driver does during the load), and each reports its event-loop lag.

Targets: update → model p50 ≤ 30 ms and p99 ≤ 100 ms; end-to-end p50 ≤ 1.05× and p99 ≤ 1.25× the
baseline's. ``--first-way`` then runs :mod:`bench.latency`'s human-pace measurement of the same
load in this process (:func:`bench.chats.measure_all`) and prints both ways side by side.

Usage: ``python -m bench.ingest_tail --chats 1000 --bots baseline,agentgram [--first-way]``
(≈ 2 minutes per bot and way at 1,000 chats).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from bench import chats, latency
from bench.botproc import Stalls
from bench.common import MODEL, ROOT, machine, ratio, row, summary_ms, write_results
from bench.fakes import last_user_text
from bench.process import BotProcess, read_event
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram

WARM_USER = chats.WARM_USER
FIRST_USER = chats.FIRST_USER
CONTROL = "/control/turn"
TARGETS_MS = {"p50": 30.0, "p99": 100.0}
"""update → model request, per percentile (ms)."""
E2E_RATIO_TARGETS = {
    "p50": latency.TARGETS["e2e_p50_ratio"].limit,
    "p99": latency.TARGETS["e2e_p99_ratio"].limit,
}

Key = tuple[int, int]  # (chat, message index)


@dataclass(slots=True, frozen=True)
class Options:
    chats: int = latency.HUMAN.chats
    messages: int = latency.HUMAN.messages
    think_ms: float = latency.HUMAN.think_ms
    spread_ms: float = latency.HUMAN.spread_ms
    llm_ms: float = latency.HUMAN.llm_ms
    chunks: int = latency.HUMAN.chunks
    edit_interval: float = latency.HUMAN.edit_interval
    turn_timeout: float = latency.HUMAN.turn_timeout
    seed: int = latency.HUMAN.seed
    bots: tuple[str, ...] = ("baseline", "agentgram")
    first_way: bool = False  # also bench.latency's in-process measurement of the same load
    logs: Path | None = None  # keep the fakes' logs (and the bots' folders) here; default: a temporary folder


# ------------------------------------------------------------------------------------ the log


class EventLog:
    """One JSON line per event, each with ``t`` = ``time.monotonic()`` unless given."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("w", buffering=1 << 20)

    def write(self, ev: str, **fields: Any) -> None:
        fields.setdefault("t", time.monotonic())
        self._file.write(json.dumps({"ev": ev, **fields}) + "\n")

    def close(self) -> None:
        self._file.close()


def read_log(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


# ------------------------------------------------------------------------------------ the fakes


@dataclass(slots=True)
class _Turn:
    key: Key
    expected: str
    done: asyncio.Future[bool]
    shown: bool = False


class LoggedTelegram(FakeTelegram):
    """FakeTelegram that logs each turn's events and lets the users' process write through
    ``POST /control/turn`` (``{"chat", "index", "timeout"}``: answered when the chat shows the
    complete reply, ``{"ok": false}`` after ``timeout`` seconds)."""

    def __init__(self, log: EventLog) -> None:
        super().__init__()
        self.log = log
        self._open: dict[int, _Turn] = {}  # chat → its turn in flight (a user waits for each reply)
        self._delivered: set[int] = set()

    def application(self) -> web.Application:
        app = super().application()
        app.router.add_post(CONTROL, self._control_turn)
        return app

    async def _control_turn(self, request: web.Request) -> web.Response:
        asked = await request.json()
        chat, index = int(asked["chat"]), int(asked["index"])
        turn = _Turn((chat, index), chats.reply_text(chat, index), asyncio.get_running_loop().create_future())
        self._open[chat] = turn
        update_id = self.send_text(chat, chats.user_text(chat, index))
        self.log.write("queued", key=turn.key, update_id=update_id)
        await asyncio.wait({turn.done}, timeout=float(asked["timeout"]))
        if self._open.get(chat) is turn:
            del self._open[chat]
        return web.json_response({"ok": turn.done.done(), "update_id": update_id})

    async def _handle(self, request: web.Request) -> web.Response:
        self.log.write("api", method=request.match_info["method"])
        return await super()._handle(request)

    async def _m_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        updates = await super()._m_getUpdates(params)
        now = time.monotonic()
        for update in updates:
            if update["update_id"] not in self._delivered:
                self._delivered.add(update["update_id"])
                self.log.write("delivered", update_id=update["update_id"], t=now)
        return updates

    async def _m_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        message = await super()._m_sendMessage(params)
        self._seen(message["chat"]["id"], message.get("text") or "", final=True)
        return message

    async def _m_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        message = await super()._m_editMessageText(params)
        self._seen(message["chat"]["id"], message.get("text") or "", final=True)
        return message

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        accepted = await super()._m_sendMessageDraft(params)
        visible, _ = self._parse_text(
            str(params.get("text") or ""), str(params.get("parse_mode") or "") or None
        )
        self._seen(self._chat_id(params), visible, final=False)
        return accepted

    def _seen(self, chat: int, text: str, *, final: bool) -> None:
        turn = self._open.get(chat)
        if turn is None or turn.done.done():
            return
        now = time.monotonic()
        if not turn.shown and chats.part_of(turn.expected)(text):
            turn.shown = True
            self.log.write("first_shown", key=turn.key, t=now)
        if final and text.strip() == turn.expected:
            self.log.write("complete", key=turn.key, t=now)
            turn.done.set_result(True)


class LoggedOpenAI(FakeOpenAI):
    """FakeOpenAI answering as :mod:`bench.chats`' fake does; one ``llm`` line per request."""

    def __init__(self, log: EventLog, *, llm_ms: float, chunks: int) -> None:
        super().__init__(models=(MODEL,))
        self.log = log
        self.handler = self._reply
        self._answer = chats.replier(chats.Options(llm_ms=llm_ms, chunks=chunks))
        self._requests: dict[asyncio.Task[Any], dict[str, Any]] = {}

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        record: dict[str, Any] = {"key": None, "t": time.monotonic()}  # arrived: the handler runs
        self._requests[task] = record
        try:
            return await super()._chat(request)
        finally:
            del self._requests[task]
            self.log.write("llm", **record, end=time.monotonic())

    def _reply(self, body: dict[str, Any]) -> Reply:
        key = chats.key_of(body)
        task = asyncio.current_task()
        if task is not None and task in self._requests:
            self._requests[task].update(key=key, read=time.monotonic(), user_text=last_user_text(body)[:40])
        return self._answer(key)

    async def _play(self, out: Any, reply: Reply) -> None:
        task = asyncio.current_task()
        record = self._requests.get(task) if task is not None else None
        write = out.delta

        async def timed(delta: dict[str, Any], delay: float = 0.0) -> None:
            await write(delta, delay)
            if record is not None and delta.get("content") and "first_token" not in record:
                record["first_token"] = time.monotonic()

        out.delta = timed
        await super()._play(out, reply)


# ------------------------------------------------------------------------------------ child processes


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def quiet_heap() -> None:
    """No collector pause from here on: what exists is frozen, and nothing is collected (the
    process lives for one bot's run; :mod:`bench.chats` does the same in its driver)."""
    gc.collect()
    gc.freeze()
    gc.disable()


async def serve_fake(role: str, args: argparse.Namespace) -> None:
    """Serve one fake until ``stop`` on stdin; then close its log and say ``done``."""
    log = EventLog(Path(args.log))
    fake: FakeTelegram | FakeOpenAI
    if role == "fake-telegram":
        fake = LoggedTelegram(log)
    else:
        fake = LoggedOpenAI(log, llm_ms=args.llm_ms, chunks=args.chunks)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with fake:
        quiet_heap()
        stalls = Stalls()
        stalls.start()
        url = fake.root if isinstance(fake, FakeTelegram) else fake.base_url
        say("ready", pid=os.getpid(), url=url)
        while (line := (await reader.readline()).decode().strip()) and line != "stop":
            pass
        stalled = stalls.stop()
    log.close()
    say("done", loop_lag_ms=stalled["loop_lag_ms"], gc=stalled["gc"])


async def run_users(args: argparse.Namespace) -> None:
    """The load, over the control route only: :mod:`bench.chats`' schedule for the same seed."""
    users = [args.first_user + i for i in range(args.chats)]
    rng = random.Random(args.seed)
    failures: list[str] = []
    timeout = ClientTimeout(total=None)
    async with ClientSession(connector=TCPConnector(limit=0), timeout=timeout) as session:
        quiet_heap()
        stalls = Stalls()
        stalls.start()
        started = time.monotonic()
        await asyncio.gather(
            *(_one_user(session, args, u, random.Random(rng.random()), failures) for u in users)
        )
        wall = time.monotonic() - started
        stalled = stalls.stop()
    say("done", wall_s=round(wall, 3), failures=failures, loop_lag_ms=stalled["loop_lag_ms"])


async def _one_user(
    session: ClientSession, args: argparse.Namespace, chat: int, rng: random.Random, failures: list[str]
) -> None:
    await asyncio.sleep(rng.uniform(0, args.spread_ms / 1000.0))
    for index in range(args.messages):
        if index and args.think_ms:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * args.think_ms / 1000.0)
        asked = {"chat": chat, "index": index, "timeout": args.turn_timeout}
        async with session.post(args.control + CONTROL, json=asked) as response:
            answer = await response.json()
        if not answer["ok"]:
            failures.append(f"chat {chat} message {index}: no complete reply in {args.turn_timeout}s")
            return


class Child:
    """``python -m bench.ingest_tail ROLE ...`` in its own process, speaking JSON lines on stdout."""

    def __init__(self, role: str, args: Sequence[str], workdir: Path) -> None:
        self.role = role
        self.args = [role, *args]
        self.stderr_path = workdir / f"{role}-stderr.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.stderr_path.open("wb") as stderr:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.ingest_tail", *self.args,
                cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            )  # fmt: skip

    async def expect(self, event: str, timeout: float) -> dict[str, Any]:
        assert self.proc is not None
        return await read_event(self.proc, event, timeout, self.role, self.stderr_path)

    async def stop(self) -> dict[str, Any]:
        """``stop`` on stdin, then its ``done`` line."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"stop\n")
        done = await self.expect("done", 30.0)
        await asyncio.wait_for(self.proc.wait(), 10.0)
        return done

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


# ------------------------------------------------------------------------------------ one bot


async def measure(kind: str, opts: Options, workdir: Path) -> dict[str, Any]:
    """Bot ``kind`` under the load; every figure from the fakes' logs."""
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240  (before the load)
    tg_log, llm_log = workdir / "telegram.jsonl", workdir / "openai.jsonl"
    tg = Child("fake-telegram", ["--log", str(tg_log)], workdir)
    llm_args = ["--log", str(llm_log), "--llm-ms", str(opts.llm_ms), "--chunks", str(opts.chunks)]
    llm = Child("fake-openai", llm_args, workdir)
    try:
        for fake in (tg, llm):
            await fake.start()
        tg_url, llm_url = (await tg.expect("ready", 30.0))["url"], (await llm.expect("ready", 30.0))["url"]
        users = [WARM_USER, *(FIRST_USER + i for i in range(opts.chats))]
        async with BotProcess(
            kind, tg_root=tg_url, llm_url=llm_url, workdir=workdir / "bot", users=users,
            edit_interval=opts.edit_interval,
        ) as bot:  # fmt: skip
            await _users(opts, tg_url, workdir, warm=True)
            before = await bot.stats()
            load = await _users(opts, tg_url, workdir, warm=False)
            after = await bot.stats()
            done = await bot.stop()
        fakes = {"telegram": await tg.stop(), "openai": await llm.stop()}
    finally:
        for fake in (tg, llm):
            await fake.kill()
    result = analyse(read_log(tg_log), read_log(llm_log))
    turns = result["turns"]
    return result | {
        "users_failures": load["failures"],
        "users_wall_s": load["wall_s"],
        "bot_imports_agentgram_from": imports_from(kind),
        "bot_peak_rss_mb": round(done["peak_rss_kb"] / 1024, 1),
        "bot_cpu_ms_per_turn": round((after["cpu_s"] - before["cpu_s"]) * 1000 / max(turns, 1), 2),
        "bot_stalls": done.get("stalls", {}),
        "loop_lag_ms": {
            "fake_telegram": fakes["telegram"]["loop_lag_ms"], "fake_openai": fakes["openai"]["loop_lag_ms"],
            "users": load["loop_lag_ms"],
        },
        "logs": {"telegram": str(tg_log), "openai": str(llm_log)},
    }  # fmt: skip


async def _users(opts: Options, tg_url: str, workdir: Path, *, warm: bool) -> dict[str, Any]:
    """The users' process: the warm-up chat's turns (``warm``) or the load; its ``done`` line."""
    if warm:  # as bench.chats: one extra chat, its turns one after the other, not measured
        shape = ["--chats", "1", "--first-user", str(WARM_USER), "--messages", str(chats.WARM_TURNS)]
        shape += ["--think-ms", "0", "--spread-ms", "0"]
    else:
        shape = [
            "--chats",
            str(opts.chats),
            "--first-user",
            str(FIRST_USER),
            "--messages",
            str(opts.messages),
        ]
        shape += ["--think-ms", str(opts.think_ms), "--spread-ms", str(opts.spread_ms)]
    common = ["--control", tg_url, "--seed", str(opts.seed), "--turn-timeout", str(opts.turn_timeout)]
    users = Child("users", [*shape, *common], workdir)
    bound = opts.spread_ms / 1000 + opts.messages * (1.5 * opts.think_ms / 1000 + opts.turn_timeout) + 60
    try:
        await users.start()
        return await users.expect("done", bound)
    finally:
        await users.kill()


def imports_from(kind: str) -> str:
    """Where the bot process of ``kind`` imports ``agentgram`` from: the same interpreter, folder
    and ``PYTHONPATH`` as :class:`bench.process.BotProcess` gives it."""
    import subprocess

    _, _, root = kind.partition("@")
    env = {**os.environ, "PYTHONPATH": root} if root else None
    found = subprocess.run(
        [sys.executable, "-c", "import agentgram; print(agentgram.__file__)"],
        cwd=root or ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return str(Path(found.stdout.strip()).parent) if found.returncode == 0 else f"? {found.stderr[-200:]}"


# ------------------------------------------------------------------------------------ the figures


@dataclass(slots=True)
class _Times:
    queued: float | None = None
    update_id: int | None = None
    first_shown: float | None = None
    complete: float | None = None
    requests: list[tuple[float, float]] = field(default_factory=list)  # (arrived, end)
    first_token: float | None = None


def analyse(tg_events: Iterator[dict[str, Any]], llm_events: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """Each turn's figures from the two logs; the warm-up chat's turns left out."""
    turns: dict[Key, _Times] = defaultdict(_Times)
    delivered: dict[int, float] = {}
    api: list[tuple[float, str]] = []
    for event in tg_events:
        ev = event["ev"]
        if ev == "api":
            api.append((event["t"], event["method"]))
        elif ev == "delivered":
            delivered[event["update_id"]] = event["t"]
        else:
            times = turns[_key(event["key"])]
            if ev == "queued":
                times.queued, times.update_id = event["t"], event["update_id"]
            elif ev == "first_shown":
                times.first_shown = event["t"]
            elif ev == "complete":
                times.complete = event["t"]
    for event in llm_events:
        if event.get("key") is not None:
            times = turns[_key(event["key"])]
            times.requests.append((event["t"], event["end"]))
            if times.first_token is None and "first_token" in event:
                times.first_token = event["first_token"]
    measured = {k: t for k, t in turns.items() if k[0] != WARM_USER and t.queued is not None}
    return _figures(measured, delivered, api)


def _key(raw: Sequence[int]) -> Key:
    return (int(raw[0]), int(raw[1]))


def _figures(
    turns: dict[Key, _Times], delivered: dict[int, float], api: list[tuple[float, str]]
) -> dict[str, Any]:
    series: dict[str, list[float]] = defaultdict(list)
    complete = {k: t for k, t in turns.items() if t.complete is not None and t.requests}
    for t in complete.values():
        assert t.queued is not None and t.complete is not None
        first_request, llm = min(a for a, _ in t.requests), sum(e - a for a, e in t.requests)
        e2e = t.complete - t.queued
        series["update_to_model_ms"].append(first_request - t.queued)
        if t.update_id in delivered:
            series["update_to_poll_ms"].append(delivered[t.update_id] - t.queued)
            series["poll_to_model_ms"].append(first_request - delivered[t.update_id])
        series["end_to_end_ms"].append(e2e)
        series["llm_ms"].append(llm)
        series["overhead_ms"].append(e2e - llm)
        series["model_to_visible_ms"].append(t.complete - max(e for _, e in t.requests))
        if t.first_shown is not None and t.first_token is not None:
            series["first_text_ms"].append(t.first_shown - t.first_token)
    start = min((t.queued for t in turns.values() if t.queued is not None), default=0.0)
    end = max((t.complete for t in complete.values() if t.complete is not None), default=start)
    in_load = [method for at, method in api if start <= at <= end]
    return {
        "turns": len(complete),
        "failures": sorted(f"chat {k[0]} message {k[1]}" for k in turns if k not in complete)[:50],
        "wall_s": round(end - start, 3),
        **{name: summary_ms(values) for name, values in series.items()},
        "telegram_requests_per_turn": round(len(in_load) / max(len(complete), 1), 2),
        "telegram_requests_in_load": dict(Counter(in_load).most_common()),
    }


# ------------------------------------------------------------------------------------ all bots


async def run(opts: Options) -> dict[str, Any]:
    facts = machine()
    second: dict[str, Any] = {}
    first: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="agentgram-ingest-tail-") as tmp:
        base = opts.logs or Path(tmp)
        for kind in opts.bots:
            second[kind] = await measure(kind, opts, base / "second" / kind.replace("/", "_"))
        if opts.first_way:
            first = await chats.measure_all(first_way_options(opts), base / "first")
    payload: dict[str, Any] = {
        "benchmark": "ingest_tail",
        "machine": facts,
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "options": {name: _plain(getattr(opts, name)) for name in opts.__slots__},  # type: ignore[attr-defined]
        "second_way": second,
        "first_way": first,
    }
    payload["verdicts"] = {
        way: {kind: verdict(results, kind, way) for kind in results if kind != "baseline"}
        for way, results in (("second_way", second), ("first_way", first))
    }
    return payload


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def first_way_options(opts: Options) -> chats.Options:
    """:mod:`bench.latency`'s human-pace scenario with this run's shape."""
    return replace(
        latency.HUMAN, chats=opts.chats, messages=opts.messages, think_ms=opts.think_ms, spread_ms=opts.spread_ms,
        llm_ms=opts.llm_ms, chunks=opts.chunks, edit_interval=opts.edit_interval, turn_timeout=opts.turn_timeout,
        seed=opts.seed, bots=opts.bots,
    )  # fmt: skip


UPDATE_TO_MODEL = {"second_way": "update_to_model_ms", "first_way": "before_llm_ms"}
"""The same figure under each way's name."""


def verdict(results: dict[str, Any], kind: str, way: str) -> dict[str, dict[str, Any]]:
    """Requirement 7's four targets for bot ``kind`` in one way's results."""
    mine, base = results[kind], results.get("baseline")
    figures: dict[str, tuple[float | None, float]] = {}
    for p, limit in TARGETS_MS.items():
        figures[f"update_to_model_{p}_ms"] = (mine[UPDATE_TO_MODEL[way]].get(p), limit)
    for p, limit in E2E_RATIO_TARGETS.items():
        value = ratio(mine["end_to_end_ms"].get(p), base["end_to_end_ms"].get(p)) if base else None
        figures[f"e2e_{p}_ratio"] = (value, limit)
    return {
        name: {"value": value, "limit": limit, "met": value is not None and value <= limit}
        for name, (value, limit) in figures.items()
    }


ROWS: tuple[tuple[str, str, str | None], ...] = (
    # label, the second way's field, the first way's (None: not measured there)
    ("update→model p50 ms", "update_to_model_ms.p50", "before_llm_ms.p50"),
    ("update→model p99 ms", "update_to_model_ms.p99", "before_llm_ms.p99"),
    ("  update→poll p50 ms", "update_to_poll_ms.p50", None),
    ("  update→poll p99 ms", "update_to_poll_ms.p99", None),
    ("  poll→model p50 ms", "poll_to_model_ms.p50", None),
    ("  poll→model p99 ms", "poll_to_model_ms.p99", None),
    ("end-to-end p50 ms", "end_to_end_ms.p50", "end_to_end_ms.p50"),
    ("end-to-end p99 ms", "end_to_end_ms.p99", "end_to_end_ms.p99"),
    ("LLM p50 ms", "llm_ms.p50", "llm_ms.p50"),
    ("LLM p99 ms", "llm_ms.p99", "llm_ms.p99"),
    ("model→visible p50 ms", "model_to_visible_ms.p50", "after_llm_ms.p50"),
    ("1st token→text p50 ms", "first_text_ms.p50", "first_text_ms.p50"),
    ("turns", "turns", "turns"),
    ("Telegram requests/turn", "telegram_requests_per_turn", "telegram_requests_per_turn"),
    ("bot CPU ms/turn", "bot_cpu_ms_per_turn", "bot_cpu_ms_per_turn"),
    ("bot loop lag p99 ms", "bot_stalls.loop_lag_ms.p99", "bot_stalls.loop_lag_ms.p99"),
    ("fakes' loop lag p99 ms", "loop_lag_ms.fake_telegram.p99", "driver_stalls.loop_lag_ms.p99"),
    ("fakes' loop lag max ms", "loop_lag_ms.fake_telegram.max", "driver_stalls.loop_lag_ms.max"),
    ("model fake's lag p99 ms", "loop_lag_ms.fake_openai.p99", None),
    ("users' loop lag p99 ms", "loop_lag_ms.users.p99", None),
)


def _get(result: dict[str, Any], path: str | None) -> Any:
    if path is None:
        return "-"
    value: Any = result
    for part in path.split("."):
        value = value.get(part, "-") if isinstance(value, dict) else "-"
    return value


def table(payload: dict[str, Any]) -> str:
    columns = [("second", kind, payload["second_way"][kind]) for kind in payload["second_way"]]
    columns += [("first", kind, payload["first_way"][kind]) for kind in payload["first_way"]]
    widths = [24] + [max(14, len(f"{way}: {kind}")) for way, kind, _ in columns]
    lines = [row(["", *(f"{way}: {kind}" for way, kind, _ in columns)], widths)]
    for label, second, first in ROWS:
        cells = [_get(result, second if way == "second" else first) for way, _, result in columns]
        lines.append(row([label, *cells], widths))
    for way, kinds in payload["verdicts"].items():
        for kind, verdicts in kinds.items():
            lines.append(f"== targets, {way.replace('_', ' ')}: {kind} ==")
            for name, v in verdicts.items():
                mark = "met" if v["met"] else "NOT met"
                lines.append(row([name, v["value"], f"≤ {v['limit']}", mark], [24, 10, 10, 8]))
    for way in ("second_way", "first_way"):
        for kind, result in payload[way].items():
            if failed := result.get("failures") or result.get("users_failures"):
                lines.append(f"{way} {kind}: {len(failed)} failures (in the result file), e.g. {failed[:3]}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ command line


def parse(argv: Sequence[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = Options()
    parser.add_argument("--chats", type=int, default=defaults.chats)
    parser.add_argument("--messages", type=int, default=defaults.messages)
    parser.add_argument(
        "--think-ms", type=float, default=defaults.think_ms, help="mean pause before a next message"
    )
    parser.add_argument("--spread-ms", type=float, default=defaults.spread_ms, help="users start within this")
    parser.add_argument("--llm-ms", type=float, default=defaults.llm_ms, help="LLM time per reply")
    parser.add_argument("--chunks", type=int, default=defaults.chunks, help="streamed chunks per reply")
    parser.add_argument("--turn-timeout", type=float, default=defaults.turn_timeout)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--bots", default=",".join(defaults.bots), help="as bench.chats' (agentgram@DIR too)")
    parser.add_argument(
        "--first-way", action="store_true", help="then bench.latency's in-process measurement, side by side"
    )
    parser.add_argument(
        "--logs", type=Path, default=None, help="keep the fakes' logs here (default: a temporary folder)"
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    opts = Options(
        chats=args.chats, messages=args.messages, think_ms=args.think_ms, spread_ms=args.spread_ms,
        llm_ms=args.llm_ms, chunks=args.chunks, turn_timeout=args.turn_timeout, seed=args.seed,
        bots=tuple(b.strip() for b in args.bots.split(",") if b.strip()), first_way=args.first_way,
        logs=args.logs,
    )  # fmt: skip
    return opts, args.out


def child_main(role: str, argv: Sequence[str]) -> None:
    """A child process: ``fake-telegram``, ``fake-openai`` or ``users``."""
    parser = argparse.ArgumentParser(prog=f"bench.ingest_tail {role}")
    if role == "users":
        for name, kind in (("chats", int), ("messages", int), ("first-user", int), ("seed", int)):
            parser.add_argument(f"--{name}", type=kind, required=True)
        for name in ("think-ms", "spread-ms", "turn-timeout"):
            parser.add_argument(f"--{name}", type=float, required=True)
        parser.add_argument("--control", required=True, help="the fake Bot API's root URL")
        asyncio.run(run_users(parser.parse_args(argv)))
        return
    parser.add_argument("--log", required=True)
    parser.add_argument("--llm-ms", type=float, default=300.0)
    parser.add_argument("--chunks", type=int, default=10)
    asyncio.run(serve_fake(role, parser.parse_args(argv)))


CHILD_ROLES = ("fake-telegram", "fake-openai", "users")


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in CHILD_ROLES:
        child_main(argv[0], argv[1:])
        return None
    opts, out = parse(argv)
    payload = asyncio.run(run(opts))
    print(table(payload))
    print(f"results: {write_results('ingest_tail', payload, out)}")
    return payload


if __name__ == "__main__":
    main()
