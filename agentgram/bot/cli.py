"""``agentgram run``, ``agentgram chat`` and ``agentgram check-config``.

``agentgram chat`` is the terminal chat (:mod:`bot.terminal`): with a bot token
configured it runs :func:`_run`'s bot with the terminal subscribed to the same
runtime, and exits when the terminal does; without one, the terminal alone.

Every command validates the config the same way, in one pass
(:func:`bot.config_check.inspect`): its warnings and problems go to stderr, one
line each; ``check-config`` prints the effective config (relative paths resolved
against the config file's folder, tuning knobs under ``advanced``) on stdout.

Exit codes: 0 clean shutdown (a signal, also during the start-up retries), 2
configuration problem (including a bot token Telegram rejects, another
agentgram already running on the same database, and a ``web.listen`` the web
view cannot bind), 1 anything unexpected (a web view that fails to start, a
terminal chat that ends with an error). The web view's socket (:mod:`bot.web`,
when enabled) is bound right after the instance lock, before the bot starts, so
a bad ``web.listen`` costs no start-up; the server starts once the bot has
started. On shutdown the front ends go first (the terminal cancelled, the web
view stopped, both bounded), then the bot, which closes the database.
Configuration errors are one line, never a traceback; Telegram unreachable at
start is waited out with logged retries (see :mod:`bot.telegram.app`), and so
is a database server (the instance lock is the first touch of it:
:func:`runtime.schema.take_instance_lock`); its refused credentials are exit 2.

The garbage collector and start-up (issue 31: the time to the first poll): start-up builds about a
million long-lived objects (modules, pydantic and ORM models, the composed bot) and next to no
garbage, yet the cyclic collector's full passes walk all of them as they grow; measured, four
passes (≈0.4 s of the ≈3.7 s to the first poll) that freed a few dozen objects. So the parts that
only build, without waiting on anything (the imports, the config check, :func:`compose
<bot.telegram.app.compose>`), run with the collector paused and then hand what they built to the
permanent generation (:func:`collector_paused`); the parts that wait (the instance lock, Telegram,
the database) run with it on, so a start that waits out an outage for hours collects as usual.
:func:`freeze_startup_heap` freezes the rest of start-up once the bot has started.

Memory given back (issue 31): after each full collection the C allocator hands the free pages of its
heaps back to the system (:func:`trim_after_full_collections`, glibc's ``malloc_trim``). The
database's threads, the HTTP parsers and every Python object over 512 bytes allocate from glibc,
whose per-thread heaps keep what was freed: 2–7 MB at 200 busy chats, which the process's RSS
counted as its own. A trim takes ≈ 0.3 ms beside a full collection's tens. And glibc keeps at most
two heaps for all threads (:func:`limit_malloc_arenas`, before the first thread starts): with its
default, up to eight per core, each thread that allocates while another does gets a heap of its own,
and what the database's readers freed in theirs stayed there between turns; RSS grew by 6–8 MB over
8,000 turns of 200 chats with Python's blocks and SQLite's heap nearly flat (``bench/README.md``,
session 21).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.log import configure, get_logger, register_secret
from agentgram.runtime.infra.tasks import cancel_and_wait

# The rest is imported by the command that needs it: `agentgram --version` loads none of it, and
# `run` only its own (issue 31: the web view, the terminal and webhook mode when they are used).
if TYPE_CHECKING:
    from agentgram.bot.settings import AgentgramSettings, BotSettings
    from agentgram.bot.telegram.app import TelegramBot
    from agentgram.bot.terminal.chat import TerminalChat
    from agentgram.bot.web.serve import WebServer
    from agentgram.runtime.app import InstanceLock

log = get_logger("cli")
EXIT_CONFIG = 2


def _version() -> str:
    return f"agentgram {version('agentgram')}"


def _parser() -> argparse.ArgumentParser:
    from agentgram.bot import config_reference, db_command, doctor, init

    parser = argparse.ArgumentParser(prog="agentgram", description="A personal LLM agent in Telegram.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("run", "run the bot"),
        ("check-config", "validate and print the effective config"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--config", "-c", type=Path, default=Path("config.yml"), help="YAML config file")
    chat = sub.add_parser("chat", help="chat in this terminal (beside the bot when a token is configured)")
    chat.add_argument("--config", "-c", type=Path, default=Path("config.yml"), help="YAML config file")
    chat.add_argument("--log", type=Path, default=None, help="write the whole log to this file")
    init.add_parser(sub)
    doctor.add_parser(sub)
    db_command.add_parser(sub)
    config_reference.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:  # before any command's imports
        print(_version())
        return 0
    os.environ.setdefault("PTB_TIMEDELTA", "1")  # PTB 22: retry_after as timedelta (no deprecation path)
    limit_malloc_arenas()  # before any thread allocates
    with collector_paused():  # the commands' imports
        args = _parser().parse_args(argv)
    if args.command in (
        "init",
        "doctor",
        "db",
        "config-reference",
    ):  # bot/init.py, doctor.py, db_command.py: their own exit codes
        return int(args.entry(args))
    with collector_paused():
        settings = _checked(args.config, need_telegram=args.command != "chat")
    if settings is None:
        return EXIT_CONFIG
    if args.command == "check-config":  # the effective config, its relative paths resolved
        from agentgram.runtime.infra.config import masked

        print(json.dumps(masked(settings), indent=2, ensure_ascii=False))
        return 0
    configure(
        settings.logging.level,
        settings.logging.redact_payloads,
        libraries=settings.logging.libraries,
        fmt=settings.logging.format,
    )
    if args.command == "chat":
        from agentgram.bot.terminal.app import route_logs

        route_logs(args.log)
    try:
        return asyncio.run(_main_task(settings, terminal=args.command == "chat"))
    except ConfigError as error:  # a check missed it: still one line, never a traceback
        print(str(error), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 0


def _checked(path: Path, *, need_telegram: bool) -> BotSettings | AgentgramSettings | None:
    """The one validation (:func:`bot.config_check.inspect`): its warnings and problems on
    stderr, one line each; the settings, or ``None`` when there is a problem (exit 2)."""
    from agentgram.bot.config_check import inspect
    from agentgram.bot.settings import with_telegram

    found = inspect(path, need_telegram=need_telegram)
    for line in (*found.warnings, *found.problems):
        print(str(line), file=sys.stderr)
    if found.settings is None:
        return None
    if found.settings.telegram is None:
        return found.settings  # chat alone
    return with_telegram(found.settings)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a part of start-up that only builds (no waiting) without the cyclic garbage collector,
    then freeze what it built (the module docstring says why). The collection first keeps garbage
    made before (a test calling :func:`main` in its own process) out of the permanent generation;
    at a process's start it finds a small heap."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def freeze_startup_heap() -> None:
    """Take what start-up built (modules, ORM metadata, models, handlers) out of the garbage
    collector's sight, so a full collection scans only what the turns create since.

    Without it the occasional full collection walks every object of the process and stalls the
    event loop for ~100 ms at a time (measured at 100 chats); see bench/README.md.
    """
    gc.collect()
    gc.freeze()


@cache
def trim_after_full_collections() -> None:
    """From now on, glibc trims its heaps after each full collection (the module docstring says
    why); with another C library (musl, macOS) nothing changes. Once per process: a test that runs
    the bot twice in one process installs one callback."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def trimmed(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            trim(0)

    gc.callbacks.append(trimmed)


MALLOC_ARENAS = 2
"""glibc heaps (arenas) the process's threads share: the main thread's and one more."""
M_ARENA_MAX = -8
"""``mallopt``'s parameter for it (glibc's ``malloc.h``)."""


@cache
def limit_malloc_arenas() -> None:
    """Let glibc keep at most :data:`MALLOC_ARENAS` heaps (the module docstring says why), unless
    the operator chose with ``MALLOC_ARENA_MAX``; with another C library nothing changes."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(M_ARENA_MAX, MALLOC_ARENAS)


async def _main_task(settings: BotSettings | AgentgramSettings, *, terminal: bool) -> int:
    from agentgram.bot.settings import BotSettings

    if isinstance(settings, BotSettings):
        return await _run(settings, terminal=terminal)
    from agentgram.bot.terminal.app import run_alone

    return await run_alone(settings)


async def _run(settings: BotSettings, *, terminal: bool = False) -> int:
    """Take the instance lock, start (waiting out outages), serve until a signal or a fatal error
    (or, with the ``terminal`` beside the bot, until the user leaves it)."""
    from agentgram.runtime.app import AlreadyRunning, fingerprint

    token = fingerprint(settings.telegram.token.get_secret_value())
    try:
        lock = await _lock_unless_signalled(settings.storage.url, token, shared=settings.cluster.enabled)
    except AlreadyRunning as error:  # before anything touches the database or Telegram
        print(str(error), file=sys.stderr)
        return EXIT_CONFIG
    if lock is None:
        log.info("stopped while waiting for the database")
        return 0
    with lock:
        try:
            listening = _bind_web(settings)
        except ConfigError as error:  # the port is taken, or no such address: one line
            print(str(error), file=sys.stderr)
            return EXIT_CONFIG
        try:
            return await _run_locked(settings, listening, terminal=terminal)
        finally:
            if listening is not None:
                listening.close()  # closed already once the web view ran; else never used


async def _lock_unless_signalled(url: str, token: str, *, shared: bool) -> InstanceLock | None:
    """The instance lock, a database server out of reach waited out (the process's first touch of
    the database); ``None`` when SIGINT or SIGTERM came first: nothing has started, exit 0."""
    from agentgram.runtime.schema import take_instance_lock

    loop = asyncio.get_running_loop()
    taking = asyncio.ensure_future(take_instance_lock(url, token, shared=shared))
    signalled = asyncio.Event()

    def on_signal() -> None:
        signalled.set()
        taking.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        return await taking
    except asyncio.CancelledError:
        if signalled.is_set():
            return None
        raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _bind_web(settings: BotSettings) -> socket.socket | None:
    if not settings.web.enabled:
        return None
    from agentgram.bot.web.serve import bind

    return bind(settings.web.host, settings.web.port)


async def _run_locked(settings: BotSettings, listening: socket.socket | None, *, terminal: bool) -> int:
    """Compose, start, serve; the lock is held and the web view's socket bound."""
    from agentgram.bot.telegram.core.port import InvalidToken, TelegramError

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with collector_paused():
        from agentgram.bot.telegram.app import compose

        bot = compose(settings)
    chat = _terminal(bot) if terminal else None  # subscribed before the runtime starts
    try:
        started = await _start(bot, stop)
    except InvalidToken:
        print(
            "config error: telegram.token: Telegram rejected the bot token (401 Unauthorized)",
            file=sys.stderr,
        )
        await bot.stop()
        return EXIT_CONFIG
    except TelegramError as error:  # a refusal no retry changes (a 400): one line, not a traceback
        log.error("start-up failed: Telegram refused it: %s: %s", type(error).__name__, error)
        await bot.stop()
        return 1
    if not started:
        log.info("stopped during start-up")
        await bot.stop()
        return 0
    try:
        web = await _start_web(bot, listening)
    except Exception:
        log.exception("the web view failed to start")
        await bot.stop()
        return 1
    talking = _talk(chat, stop) if chat is not None else None

    async def front_ends_first() -> None:
        if talking is not None:
            await cancel_and_wait(talking)
        if web is not None:
            await web.stop()

    try:
        code = await _serve(bot, stop, front_ends_first)
    finally:
        await front_ends_first()  # done already, unless serving itself failed
    chat_failed = talking is not None and not talking.cancelled() and talking.result() is False
    return 1 if chat_failed else code


def _terminal(bot: TelegramBot) -> TerminalChat:
    from agentgram.bot.terminal.app import terminal_for

    return terminal_for(bot.runtime, bot.translator, bot.settings)


def _talk(chat: TerminalChat, stop: asyncio.Event) -> asyncio.Task[bool]:
    """The terminal beside the bot: when the user leaves it, the bot stops as on a signal.
    False when the chat ended with an error (logged; the run then exits 1)."""

    async def talk() -> bool:
        try:
            await chat.run()
        except Exception:
            log.exception("the terminal chat failed")
            return False
        finally:
            stop.set()
        return True

    return asyncio.create_task(talk(), name="terminal")


async def _start_web(bot: TelegramBot, listening: socket.socket | None) -> WebServer | None:
    """The web view (:mod:`bot.web`) beside the bot on its bound socket when ``web.enabled``; it
    is stopped before the bot, whose stop closes the database its pages read."""
    web = bot.settings.web
    if listening is None:
        return None
    from agentgram.bot.web.app import create_app
    from agentgram.bot.web.serve import WebServer

    assert web.token is not None  # WebSettings refuses an enabled web view without one
    register_secret(web.token.get_secret_value())
    server = WebServer(create_app(bot.runtime, web, bot.last_ingest_ok), listening)
    await server.start()
    return server


async def _start(bot: TelegramBot, stop: asyncio.Event) -> bool:
    """Start the bot; False when a signal came first — the start-up (and its retries) is then
    cancelled and awaited, for :meth:`TelegramBot.stop` to clean up."""
    starting = asyncio.create_task(bot.start(), name="start-up")
    waiter = asyncio.create_task(stop.wait(), name="start-up signal")
    try:
        await asyncio.wait({starting, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(waiter)
    if starting.done():
        starting.result()  # its error, if any
        return True
    await cancel_and_wait(starting)  # stopping anyway: its error is nothing to report
    return False


async def _serve(
    bot: TelegramBot, stop: asyncio.Event, front_ends_first: Callable[[], Awaitable[None]]
) -> int:
    """Run until a signal (exit 0) or until polling ends on its own (a revoked token: exit 2);
    then stop the front ends and the bot, in that order."""
    from agentgram.bot.telegram.core.port import InvalidToken

    freeze_startup_heap()
    trim_after_full_collections()
    waiter = asyncio.create_task(stop.wait())
    polling = asyncio.ensure_future(bot.wait())
    done, _ = await asyncio.wait({waiter, polling}, return_when=asyncio.FIRST_COMPLETED)
    log.info("shutting down")
    await front_ends_first()
    await bot.stop()
    await cancel_and_wait(waiter)
    if polling not in done:  # stopped by a signal: polling ended because we stopped it
        await cancel_and_wait(polling)
        return 0
    error = polling.exception()
    if isinstance(error, InvalidToken):
        print(
            "config error: telegram.token: Telegram no longer accepts the bot token (401 Unauthorized);"
            " it was revoked or changed in @BotFather — put the new token in the config",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if error is not None:
        log.error("polling stopped: %s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
