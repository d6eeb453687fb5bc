"""Crash harness: the real bot as a child process between two in-process fakes.

FakeTelegram and FakeOpenAI run in the test's event loop on 127.0.0.1; the bot
runs as ``python -m bot run --config FILE`` in its own process group, so a test
can ``SIGKILL`` it at a precise point (from inside a fake's request handler, or
when the fakes observe a state), start it again on the same database, and read
that database afterwards: a SQLite file in the test's folder, or the PostgreSQL database
:func:`tests.conftest.use_database` chose (an ``also_on_postgres`` test's ``[ptb-postgres]`` run).

A killed bot leaves the process groups of shell commands it started (they run in
their own sessions) orphaned; :meth:`CrashRig.kill` kills them as well, as a
service manager does when it kills a crashed service's control group.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import asyncpg
import yaml
from sqlalchemy.engine import make_url

from agentgram.runtime.infra.storage.models import ToolCallStatus, TurnStatus
from tests.conftest import config_mapping
from tests.fakes.openai_server import FakeOpenAI, validate_chat_request
from tests.fakes.telegram_server import FakeTelegram, SentMessage
from tests.fakes.user_chat import UserChat

TIMEOUT = 15.0
START_TIMEOUT = 30.0  # a cold interpreter start on a busy machine
RESTARTED = "Restarted — continuing your last request."
TERMINAL_CALL_STATUSES = {s.value for s in ToolCallStatus if s.terminal}


Hook = Callable[[dict[str, Any]], None]


class HookedTelegram(FakeTelegram):
    """FakeTelegram that calls ``before[method](params)`` before answering a Bot API method
    (lower-case name): a place to kill the bot at an exact point, e.g. the ``getUpdates`` that
    confirms an offset, or the ``sendMessage`` of an approval prompt before its id is returned."""

    def __init__(self) -> None:
        super().__init__()
        self.before: dict[str, Hook] = {}
        for name, method in list(self._methods.items()):
            self._methods[name] = self._hooked(name, method)

    def _hooked(
        self, name: str, method: Callable[[dict[str, Any]], Awaitable[Any]]
    ) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        async def call(params: dict[str, Any]) -> Any:
            hook = self.before.get(name)
            if hook is not None:
                hook(params)
            return await method(params)

        return call


def _process_table() -> dict[int, tuple[int, int]]:
    """pid → (ppid, pgid) for every process we can see."""
    table: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return table


def descendants(pid: int) -> list[int]:
    table = _process_table()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, (ppid, _) in table.items() if ppid == parent]
        found.extend(children)
        frontier.extend(children)
    return found


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Row(Protocol):
    """A row of the bot's database, by column name or position (``sqlite3.Row``, ``asyncpg.Record``)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqliteFile:
    """The bot's SQLite database, read while the bot runs (safe: the database is in WAL mode)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, sql: str, params: tuple[Any, ...]) -> list[Row]:
        if not self.path.exists():
            return []
        connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5.0)
        connection.row_factory = sqlite3.Row
        try:
            return list(connection.execute(sql, params))
        except sqlite3.OperationalError:  # tables not created yet
            return []
        finally:
            connection.close()

    def write(self, sql: str, params: tuple[Any, ...]) -> None:
        with contextlib.closing(sqlite3.connect(self.path)) as connection, connection:
            connection.execute(sql, params)

    def close(self) -> None:
        pass


Result = TypeVar("Result")


class PostgresDatabase:
    """The bot's PostgreSQL database, read from the tests' synchronous predicates: asyncpg on an
    event loop of its own in a thread, over one connection kept until :meth:`close`. The tests'
    SQL is SQLite's: its ``?`` placeholders become ``$1``, ``$2``, …"""

    def __init__(self, url: str) -> None:
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="crash-rig-db", daemon=True)
        self._thread.start()
        self._connection: asyncpg.Connection | None = None

    def _run(self, work: Callable[[asyncpg.Connection], Awaitable[Result]]) -> Result:
        async def call() -> Result:
            if self._connection is None:
                self._connection = await asyncpg.connect(self._dsn)
            return await work(self._connection)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(TIMEOUT)

    @staticmethod
    def _numbered(sql: str) -> str:
        numbers = itertools.count(1)
        return re.sub(r"\?", lambda _: f"${next(numbers)}", sql)

    def rows(self, sql: str, params: tuple[Any, ...]) -> list[Row]:
        try:
            return list(self._run(lambda connection: connection.fetch(self._numbered(sql), *params)))
        except asyncpg.UndefinedTableError:  # tables not created yet
            return []

    def write(self, sql: str, params: tuple[Any, ...]) -> None:
        self._run(lambda connection: connection.execute(self._numbered(sql), *params))

    def close(self) -> None:
        if self._connection is not None:
            self._run(lambda connection: connection.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(TIMEOUT)
        self._loop.close()


def open_database(url: str) -> SqliteFile | PostgresDatabase:
    """Test-side access to the database at ``url`` (the bot's ``storage.url``)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return SqliteFile(Path(parsed.database or ""))
    return PostgresDatabase(url)


@dataclass
class CrashRig(UserChat):
    tmp_path: Path
    tg: HookedTelegram
    llm: FakeOpenAI
    config_path: Path
    log_path: Path
    database_url: str
    workdir: Path
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0
    kills: int = 0
    _orphan_groups: set[int] = field(default_factory=set)
    database: SqliteFile | PostgresDatabase = field(init=False)

    def __post_init__(self) -> None:
        self.database = open_database(self.database_url)

    # --- the bot process -----------------------------------------------------

    async def start(
        self, ready: Callable[[], bool] | None = None, what: str = "the bot to start polling"
    ) -> None:
        """Start the bot and wait until it polls Telegram (migrations and recovery are done), or
        until ``ready()`` holds (a cluster's standby never polls: it says so in its log)."""
        assert self.proc is None or self.proc.returncode is not None, "the bot is already running"
        polls = len(self.tg.calls("getUpdates"))
        self.starts += 1
        env = dict(os.environ, PTB_TIMEDELTA="1", PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts} =====\n".encode())
            log.flush()
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agentgram.bot",
                "run",
                "--config",
                str(self.config_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=self.tmp_path,
                start_new_session=True,
            )
        await self.wait(ready or (lambda: len(self.tg.calls("getUpdates")) > polls), what, START_TIMEOUT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def kill_now(self, *, kill_commands: bool = True) -> None:
        """SIGKILL the bot at once (synchronous: callable from inside a fake's handler), and — unless
        ``kill_commands`` is false — the process groups of the commands it was running."""
        assert self.proc is not None and self.proc.returncode is None, "the bot is not running"
        pid = self.proc.pid
        groups = {_process_table().get(child, (0, 0))[1] for child in descendants(pid)}
        os.kill(pid, signal.SIGKILL)
        self.kills += 1
        if not kill_commands:
            return
        for pgid in groups - {0, pid, os.getpgid(0)}:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self._orphan_groups.add(pgid)

    async def kill(self) -> None:
        self.kill_now()
        await self.reap_killed()

    async def reap_killed(self) -> None:
        assert self.proc is not None
        code = await asyncio.wait_for(self.proc.wait(), TIMEOUT)
        assert code == -signal.SIGKILL, f"expected death by SIGKILL, got exit code {code}"

    async def terminate(self, within: float = 10.0) -> int:
        """SIGTERM; the exit code (the process must be gone ``within`` seconds)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            raise AssertionError(f"the bot did not exit within {within}s of SIGTERM") from None

    async def wait(self, predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
        """Wait until ``predicate()`` holds: re-checked on every change of the Telegram fake and at
        least every 0.25 s (for states outside the fakes: the database, files, processes).
        Fails at once if the bot process exits meanwhile."""

        def done() -> bool:
            return predicate() or (self.proc is not None and self.proc.returncode is not None)

        try:
            await self.tg.wait_for(done, timeout)
        except AssertionError as error:
            raise AssertionError(f"waiting for {what}: {error}") from None
        if not predicate():
            raise AssertionError(f"the bot exited ({self.proc and self.proc.returncode}) waiting for {what}")

    # --- the chat ----------------------------------------------------------------

    def count(self, text: str) -> int:
        """Bot messages whose visible text is exactly ``text``."""
        return sum(1 for m in self.chat() if m.visible_text.strip() == text)

    def count_containing(self, needle: str) -> int:
        return sum(1 for m in self.chat() if needle in m.visible_text)

    async def wait_text(self, text: str, what: str | None = None) -> SentMessage:
        await self.wait(lambda: self.count(text) >= 1, what or f"the message {text!r}")
        return next(m for m in self.chat() if m.visible_text.strip() == text)

    async def wait_containing(self, needle: str) -> SentMessage:
        await self.wait(lambda: self.count_containing(needle) >= 1, f"a message containing {needle!r}")
        return next(m for m in self.chat() if needle in m.visible_text)

    # --- the database ------------------------------------------------------------

    def write_db(self, sql: str, *params: Any) -> None:
        """Change the database while the bot is down (to stage a state a crash can leave)."""
        assert not self.running, "stop the bot before writing to its database"
        self.database.write(sql, params)

    def query(self, sql: str, *params: Any) -> list[Row]:
        """The rows of ``sql`` (SQLite's dialect and ``?`` placeholders, on either backend); none
        while the tables do not exist yet."""
        return self.database.rows(sql, params)

    def turn_statuses(self) -> list[str]:
        return [row["status"] for row in self.query("SELECT status FROM turns ORDER BY id")]

    def all_turns_settled(self) -> bool:
        statuses = self.turn_statuses()
        return bool(statuses) and all(s not in (TurnStatus.RUNNING, TurnStatus.PAUSED) for s in statuses)

    def unread_mail(self) -> list[str]:
        rows = self.query(
            "SELECT m.envelope_id FROM session_mail m JOIN sessions s ON s.id = m.session_id "
            "WHERE m.seq > s.mail_cursor ORDER BY m.seq"
        )
        return [row["envelope_id"] for row in rows]

    async def wait_settled(self, turns: int = 1) -> None:
        """Wait until ``turns`` turns exist, none is running or paused, and all mail is read."""
        await self.wait(
            lambda: (
                len(self.turn_statuses()) >= turns and self.all_turns_settled() and not self.unread_mail()
            ),
            f"{turns} settled turn(s) and no unread mail",
        )

    def tool_calls(self) -> list[Row]:
        return self.query("SELECT * FROM tool_calls ORDER BY id")

    def user_rows(self, text: str) -> list[Row]:
        return self.query("SELECT * FROM chat_history WHERE role = 'user' AND content = ?", text)

    def assert_consistent(self, *user_texts: str) -> None:
        """The invariants every crash scenario must leave: see the module docstring of the tests."""
        # every user message stored exactly once, and not orphaned (its turn ran)
        for text in user_texts:
            rows = self.user_rows(text)
            assert len(rows) == 1, f"user message {text!r} stored {len(rows)} times"
            assert rows[0]["status"] == "ok", f"user message {text!r} is {rows[0]['status']}"
        # no turn left running, no mail left unread
        assert self.all_turns_settled(), f"turns: {self.turn_statuses()}"
        assert not self.unread_mail(), f"unread mail left: {self.unread_mail()}"
        # history paired: each call of an assistant row once, with one terminal status
        assistant_ids = {r["id"] for r in self.query("SELECT id FROM chat_history WHERE role = 'assistant'")}
        seen: set[tuple[int, str]] = set()
        for call in self.tool_calls():
            assert call["history_id"] in assistant_ids, f"call {call['call_id']} has no assistant row"
            key = (call["history_id"], call["call_id"])
            assert key not in seen, f"call {call['call_id']} stored twice"
            seen.add(key)
            assert call["status"] in TERMINAL_CALL_STATUSES, f"call {call['call_id']} left {call['status']}"
        # what the model was sent, before and after the restart, passes OpenAI's validation
        for body in self.llm.requests:
            validate_chat_request(body)
        assert not any("_invalid" in body for body in self.llm.requests)


def write_config(
    path: Path, *, tg_root: str, llm_url: str, tmp_path: Path, **sections: dict[str, Any]
) -> dict[str, Any]:
    """The bot's configuration, written to ``path``; returned as written."""
    raw = config_mapping(tmp_path, llm_url, tg_root, logging={"level": "INFO"}, **sections)
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return raw


@asynccontextmanager
async def crash_rig(tmp_path: Path, **sections: dict[str, Any]) -> AsyncIterator[CrashRig]:
    """Fakes up, config written; the bot is *not* started (call :meth:`CrashRig.start`).
    On failure the bot's log is printed; on exit a still-running bot is killed."""
    async with HookedTelegram() as tg, FakeOpenAI(models=("main-model", "backup-model")) as llm:
        config = tmp_path / "config.yml"
        raw = write_config(config, tg_root=tg.root, llm_url=llm.base_url, tmp_path=tmp_path, **sections)
        workdir = tmp_path / "workspace"
        workdir.mkdir(parents=True, exist_ok=True)
        rig = CrashRig(
            tmp_path=tmp_path,
            tg=tg,
            llm=llm,
            config_path=config,
            log_path=tmp_path / "bot.log",
            database_url=raw["storage"]["url"],
            workdir=workdir,
        )
        try:
            yield rig
        except BaseException:
            log = rig.log_path.read_text(errors="replace") if rig.log_path.exists() else "(no log)"
            print(f"----- bot log ({rig.log_path}) -----\n{log[-30000:]}")
            print(f"----- LLM requests: {len(llm.requests)} -----")
            for body in llm.requests:
                print(json.dumps(body.get("messages", body), ensure_ascii=False)[:2000])
            raise
        finally:
            if rig.running:
                rig.kill_now()
                await rig.reap_killed()
            for pgid in rig._orphan_groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
            rig.database.close()
