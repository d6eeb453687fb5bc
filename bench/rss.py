"""Where agentgram's memory goes: RSS at import, after start and at 1,000 chats, split by package.

Issue 31 asked why peak RSS at 1,000 chats grew from 148 to 179 MiB. ``bench.latency`` gives one
number, the peak; this gives the parts, so a change can be named:

``imports`` — each heavy library imported alone in a fresh interpreter (its RSS over the bare
interpreter's), then the bot's start-up imports one after another in one interpreter, so each
line is what that library adds to what came before (the lines sum to the total). ``--root DIR``
imports another checkout's ``agentgram`` (a git worktree), to compare commits.

``run`` — the human-paced load of ``bench.latency`` (1,000 chats, two messages each) against one
bot, sampled when it is ready and once the load is over: RSS split into anonymous memory (the
heap) and file-backed memory (the libraries' code), glibc's malloc figures (in use, free but held,
arenas), threads, and the peak (``VmHWM``, the figure ``bench.latency`` reports). ``--trace N``
runs the bot under tracemalloc (N frames) and adds the Python allocations grouped by the package
that made them; tracing costs memory and time, so take RSS figures from an untraced run.
``--bot agentgram@DIR`` runs another checkout, as ``bench.latency`` does.

The bot runs in ``bench.botproc`` (the checkout's own) behind a small wrapper that answers
``SIGUSR1`` with a sample (from a thread of its own), so older checkouts run unchanged. Nothing from ``bench`` is imported at
this module's top, because the wrapper runs it inside the bot.

Usage: ``python -m bench.rss imports``; ``python -m bench.rss run`` (≈ 3 min);
``python -m bench.rss run --trace 1``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
SERVE = f"import runpy; runpy.run_path({str(HERE)!r}, run_name='bench_rss_serve')"
"""The bot's command line: this file run as the wrapper (``-c``, so the checkout's own ``bench``
package is the one on the path, not this folder)."""

ALONE = (
    "pydantic", "yaml", "sqlalchemy", "sqlmodel", "aiosqlite", "openai", "httpx", "telegram", "aiogram",
    "apscheduler", "fluent.runtime", "markdown_it", "PIL.Image", "mcp", "mcp.client.streamable_http",
    "starlette.applications", "fastapi", "uvicorn", "alembic", "rich", "prompt_toolkit",
)  # fmt: skip
"""Heavy imports, each measured alone."""

START = (
    "pydantic", "yaml", "sqlalchemy", "sqlmodel", "aiosqlite", "httpx", "openai", "telegram",
    "apscheduler", "fluent.runtime", "markdown_it", "agentgram.runtime", "agentgram.bot.cli",
    "agentgram.bot.telegram.app", "agentgram.bot.telegram.drivers.ptb", "bench.botproc",
)  # fmt: skip
"""What a bot imports before it is ready, in an order where each library's own dependencies come
first; a name missing from a checkout (the driver module before issue 18) is skipped. Libraries a
checkout imports that are not listed (``mcp`` from issue 16 until the lazy imports of issue 31) land
in the line of the module that imports them."""


# --- in the bot: the wrapper and its samples -----------------------------------------------------


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")
    ]  # fmt: skip


def malloc_figures() -> dict[str, Any]:
    """glibc's view of the heap: bytes in use, bytes free but kept (fragmentation, or arenas not
    trimmed), mmapped blocks and the number of arenas (threads that allocated get their own)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        with tempfile.NamedTemporaryFile("r", suffix=".xml") as out:
            libc.fopen.restype = ctypes.c_void_p
            stream = libc.fopen(out.name.encode(), b"w")
            libc.malloc_info(0, ctypes.c_void_p(stream))
            libc.fclose(ctypes.c_void_p(stream))
            arenas = len(re.findall(r"<heap nr=", out.read()))
    except (OSError, AttributeError):
        return {}
    mib = 1024 * 1024
    return {
        "malloc_in_use_mib": round(info.uordblks / mib, 1),
        "malloc_free_held_mib": round(info.fordblks / mib, 1),
        "malloc_mmapped_mib": round(info.hblkhd / mib, 1),
        "malloc_arenas": arenas,
    }


def status_figures() -> dict[str, Any]:
    fields = {"VmRSS": "rss", "VmHWM": "peak_rss", "RssAnon": "anon", "RssFile": "file", "Threads": "threads"}
    found: dict[str, Any] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in fields:
            number = int(value.split()[0])
            found[fields[key] + ("" if key == "Threads" else "_mib")] = (
                number if key == "Threads" else round(number / 1024, 1)
            )
    return found


def package_of(filename: str) -> str:
    """The distribution-ish name a source file belongs to: the folder under site-packages, the
    stdlib module, ``agentgram`` (any checkout) or what tracemalloc calls it (``<frozen …>``)."""
    parts = Path(filename).parts
    if "site-packages" in parts:
        name = parts[parts.index("site-packages") + 1]
        return name.removesuffix(".py")
    if "agentgram" in parts or any(p in ("runtime", "bot") for p in parts[-4:-1]):
        return "agentgram"
    if "bench" in parts:
        return "bench"
    if filename.startswith("<"):
        return filename
    lib = next((i for i, p in enumerate(parts) if re.fullmatch(r"python3\.\d+", p)), None)
    if lib is not None and lib + 1 < len(parts):
        return "stdlib:" + parts[lib + 1].removesuffix(".py")
    return filename


def traced_by_package(top: int = 15) -> dict[str, Any]:
    import tracemalloc

    if not tracemalloc.is_tracing():
        return {}
    snapshot = tracemalloc.take_snapshot()
    sizes: Counter[str] = Counter()
    for stat in snapshot.statistics("filename"):
        sizes[package_of(stat.traceback[0].filename)] += stat.size
    mib = 1024 * 1024
    return {
        "traced_mib": round(sum(sizes.values()) / mib, 1),
        "traced_by_package_mib": {name: round(size / mib, 2) for name, size in sizes.most_common(top)},
    }


def sample(path: str, label: str) -> None:
    """One line of figures appended to ``path`` (the driver reads it)."""
    import gc
    import sys as _sys

    figures = {"label": label, **status_figures(), **malloc_figures(), "py_blocks": _sys.getallocatedblocks()}
    figures["gc_objects"] = len(gc.get_objects())
    loaded = Counter(name.partition(".")[0] for name in list(_sys.modules))
    figures["modules"] = sum(loaded.values())
    figures["modules_by_package"] = dict(loaded.most_common(25))
    figures.update(traced_by_package())
    with open(path, "a") as out:
        out.write(json.dumps(figures) + "\n")


def serve(argv: list[str]) -> None:
    """Run the checkout's ``bench.botproc`` with tracemalloc if asked and a sample on ``SIGUSR1``.

    The signal is blocked before any thread starts (threads inherit the mask) and taken by a thread
    of its own with ``sigwait``: a handler would run only when the main thread next wakes, which an
    idle bot in a long poll may not do for seconds."""
    frames = int(os.environ.get("BENCH_RSS_TRACE", "0"))
    if frames:
        import tracemalloc

        tracemalloc.start(frames)
    out = os.environ["BENCH_RSS_SAMPLES"]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    def sampler() -> None:
        for count in range(1_000_000):
            signal.sigwait({signal.SIGUSR1})
            sample(out, f"sample {count}")

    threading.Thread(target=sampler, name="bench-rss-sampler", daemon=True).start()
    from bench.botproc import main as botproc_main  # the checkout's, on PYTHONPATH

    botproc_main(argv)


# --- in the driver: imports -----------------------------------------------------------------------

_MEASURE = """
import importlib, json, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
rows, before = [], rss()
for name in sys.argv[1:]:
    mods = len(sys.modules)
    try:
        importlib.import_module(name)
    except ImportError:
        rows.append([name, None, None]); continue
    after = rss()
    rows.append([name, round((after - before) / 1024, 1), len(sys.modules) - mods]); before = after
print(json.dumps({"rows": rows, "rss_mib": round(rss() / 1024, 1), "modules": len(sys.modules)}))
"""


def _python(names: Sequence[str], root: Path | None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(root or HERE.parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *names], capture_output=True, text=True, env=env,
        cwd=root or HERE.parent.parent, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def imports(
    root: Path | None, *, alone: Sequence[str] = ALONE, start: Sequence[str] = START
) -> dict[str, Any]:
    """Each of ``alone`` in an interpreter of its own, then ``start`` one after another in one."""
    floor = _python([], root)["rss_mib"]
    each = {}
    for name in alone:
        row = _python([name], root)["rows"][0]
        each[name] = {"mib": row[1], "modules": row[2]}
    started = _python(start, root)
    return {
        "interpreter_mib": floor,
        "alone": each,
        "start_cumulative": [{"import": n, "adds_mib": m, "modules": c} for n, m, c in started["rows"]],
        "start_total_mib": started["rss_mib"],
        "start_modules": started["modules"],
    }


# --- in the driver: the run ----------------------------------------------------------------------


def _lines(path: Path) -> list[str]:
    """The samples written so far (a small file, read between the load's phases)."""
    return path.read_text().splitlines() if path.exists() else []


async def _samples(bot: Any, path: Path, label: str) -> dict[str, Any]:
    """Ask the bot for a sample and wait for its line."""
    assert bot.proc is not None
    lines = _lines(path)
    bot.proc.send_signal(signal.SIGUSR1)
    for _ in range(1200):
        await asyncio.sleep(0.05)
        now = _lines(path)
        if len(now) > len(lines):
            return {**json.loads(now[-1]), "label": label}
    raise TimeoutError(f"no sample from the bot ({label})")


async def run(kind: str, chat_count: int, frames: int, workdir: Path) -> dict[str, Any]:
    """The human-paced load of ``bench.latency`` against one bot, sampled at ready and at the end."""
    import random

    from bench import chats, latency
    from bench.common import MODEL
    from bench.fakes import TimedOpenAI, TimedTelegram
    from bench.process import BotProcess

    opts = latency.HUMAN if chat_count == latency.HUMAN.chats else _fewer(latency.HUMAN, chat_count)
    samples = workdir / "samples.jsonl"

    class Wrapped(BotProcess):
        """``bench.botproc`` behind the wrapper (:func:`serve`), the checkout's on the path."""

        async def __aenter__(self) -> Wrapped:
            self.workdir.mkdir(parents=True, exist_ok=True)
            root = Path(self.root) if self.root else HERE.parent.parent
            # the caller's PYTHONPATH after the checkout: a folder of extra packages (pip install
            # --target) tries a library's effect without another venv
            path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
            env = {**os.environ, "PYTHONPATH": path, "BENCH_RSS_SAMPLES": str(samples),
                   "BENCH_RSS_TRACE": str(frames)}  # fmt: skip
            with self.stderr_path.open("wb") as stderr:
                self.proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", SERVE, *self.args, cwd=root, env=env,
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                )  # fmt: skip
            self.ready = await self._expect("ready", 120.0)
            return self

    users = [chats.FIRST_USER + i for i in range(opts.chats)]
    rng = random.Random(opts.seed)
    async with (
        TimedTelegram() as tg,
        TimedOpenAI(chats.key_of, chats.replier(opts), models=(MODEL,)) as llm,
        Wrapped(kind, tg_root=tg.root, llm_url=llm.base_url, workdir=workdir / "bot",
                users=[chats.WARM_USER, *users], edit_interval=opts.edit_interval) as bot,
    ):  # fmt: skip
        ready = await _samples(bot, samples, "ready")
        for index in range(chats.WARM_TURNS):
            await chats.one_turn(tg, llm, chats.WARM_USER, index, opts.turn_timeout)
        load = chats.Load()
        started = time.perf_counter()
        await asyncio.gather(
            *(chats.one_chat(tg, llm, u, opts, random.Random(rng.random()), load) for u in users)
        )
        wall = time.perf_counter() - started
        end = await _samples(bot, samples, f"{opts.chats} chats")
        await bot.stop()
    return {
        "bot": kind, "chats": opts.chats, "turns": len(load.samples), "failures": len(load.failures),
        "wall_s": round(wall, 1), "trace_frames": frames, "ready": ready, "end": end,
    }  # fmt: skip


def _fewer(opts: Any, chat_count: int) -> Any:
    """The same pace with fewer chats (the spread shrinks with them, so the rate is the same)."""
    from dataclasses import replace

    return replace(opts, chats=chat_count, spread_ms=opts.spread_ms * chat_count / opts.chats)


# --- tables and the command line ------------------------------------------------------------------


def imports_table(result: dict[str, Any]) -> str:
    lines = [f"interpreter alone: {result['interpreter_mib']} MiB", "", "import alone: +MiB (modules)"]
    lines += [f"  {name:32} {v['mib']!s:>6}  ({v['modules']})" for name, v in result["alone"].items()]
    lines += ["", "start-up imports in turn: +MiB (modules)"]
    lines += [
        f"  {r['import']:32} {r['adds_mib']!s:>6}  ({r['modules']})" for r in result["start_cumulative"]
    ]
    lines.append(f"  {'total':32} {result['start_total_mib']:>6}  ({result['start_modules']})")
    return "\n".join(lines)


def run_table(result: dict[str, Any]) -> str:
    keys = ("rss_mib", "peak_rss_mib", "anon_mib", "file_mib", "threads", "malloc_in_use_mib",
            "malloc_free_held_mib", "malloc_mmapped_mib", "malloc_arenas", "py_blocks", "traced_mib")  # fmt: skip
    ready, end = result["ready"], result["end"]
    lines = [f"{result['bot']}: {result['turns']} turns, {result['failures']} failed, {result['wall_s']} s",
             f"  {'':22} {'ready':>10} {end['label']:>12}"]  # fmt: skip
    lines += [f"  {k:22} {ready.get(k, '-')!s:>10} {end.get(k, '-')!s:>12}" for k in keys]
    for name, sampled in (("ready", ready), ("end", end)):
        if "traced_by_package_mib" in sampled:
            lines.append(f"  traced by package at {name}, MiB:")
            lines += [f"    {p:40} {m}" for p, m in sampled["traced_by_package_mib"].items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser("imports", help="import-time RSS of each heavy import")
    imp.add_argument("--root", type=Path, default=None, help="another checkout's agentgram")
    loaded = commands.add_parser("run", help="RSS at ready and after the 1,000-chat load")
    loaded.add_argument("--bot", default="agentgram", help="agentgram or agentgram@/path/to/checkout")
    loaded.add_argument("--chats", type=int, default=1000)
    loaded.add_argument("--trace", type=int, default=0, help="tracemalloc frames (0: off)")
    for sub in (imp, loaded):
        sub.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    args = parser.parse_args(argv)
    from bench.common import machine, write_results

    if args.command == "imports":
        result = imports(args.root)
        print(imports_table(result))
    else:
        with tempfile.TemporaryDirectory(prefix="agentgram-rss-") as tmp:
            result = asyncio.run(run(args.bot, args.chats, args.trace, Path(tmp)))
        print(run_table(result))
    payload = {"benchmark": f"rss-{args.command}", "machine": machine(), "args": sys.argv[1:], **result}
    print(f"\nwritten to {write_results(f'rss-{args.command}', payload, args.out)}")
    return payload


if __name__ == "__main__":
    main()
elif __name__ == "bench_rss_serve":
    serve(sys.argv[1:])
