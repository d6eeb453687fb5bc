"""The terminal chat in a real terminal: ``agentgram chat`` as a child process on a pty (pexpect).

The fake OpenAI server runs in the test's event loop; the chat is spawned with
a config pointing at it and no Telegram section (the terminal alone). What the
terminal shows is read as it arrives, its ANSI escapes stripped, so a test
waits for words on screen (:meth:`TerminalRig.wait_for`); :meth:`TerminalRig.type`
sends a line as a user types it.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pexpect
import yaml

from tests.conftest import ALLOWED_USER, config_mapping
from tests.fakes.openai_server import FakeOpenAI

TIMEOUT = 20.0  # a cold interpreter start on a busy machine
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>]|[\r\x07]")


def plain(raw: str) -> str:
    """What a screen shows of ``raw``, roughly: its text without escape sequences."""
    return _ESCAPES.sub("", raw)


@dataclass
class TerminalRig:
    tmp_path: Path
    llm: FakeOpenAI
    config_path: Path
    log_path: Path
    child: pexpect.spawn | None = None  # type: ignore[type-arg]
    seen: str = ""  # everything shown since the last start, escapes stripped
    _raw: str = field(default="", repr=False)

    def start(self) -> None:
        self.seen, self._raw = "", ""
        env = {
            "PATH": "/usr/bin:/bin",
            "TERM": "xterm-256color",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "HOME": str(self.tmp_path),
        }
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "agentgram.bot", "chat", "--config", str(self.config_path), "--log", str(self.log_path)],
            cwd=str(self.tmp_path),
            env=env,
            encoding="utf-8",
            dimensions=(40, 140),
            timeout=TIMEOUT,
        )

    def _read(self) -> None:
        assert self.child is not None
        while True:
            try:
                chunk = self.child.read_nonblocking(65536, timeout=0)
            except (pexpect.TIMEOUT, pexpect.EOF):
                return
            self._raw += chunk
            self.seen = plain(self._raw)

    async def wait_for(self, text: str, timeout: float = TIMEOUT, *, times: int = 1) -> None:
        """Until ``text`` is on screen (``times`` times; polling the pty: the child's output is
        the only signal)."""
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            if self.seen.count(text) >= times:
                return
            if time.monotonic() > deadline:
                log = self.log_path.read_text() if self.log_path.exists() else ""
                raise AssertionError(
                    f"{text!r} never showed; the screen:\n{self.seen[-3000:]}\nlog:\n{log[-3000:]}"
                )
            await asyncio.sleep(0.05)

    def type(self, line: str) -> None:
        assert self.child is not None
        self.child.send(line + "\r")

    def interrupt(self) -> None:
        assert self.child is not None
        self.child.sendcontrol("c")

    async def exited(self, timeout: float = TIMEOUT) -> int:
        """Wait for the chat process to end; its exit status."""
        assert self.child is not None
        deadline = time.monotonic() + timeout
        while self.child.isalive():
            self._read()
            if time.monotonic() > deadline:
                raise AssertionError(f"the chat did not exit; the screen:\n{self.seen[-3000:]}")
            await asyncio.sleep(0.05)
        self._read()
        self.child.close()
        return int(self.child.exitstatus or 0)

    def query(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        with sqlite3.connect(self.tmp_path / "agentgram.db") as db:
            db.row_factory = sqlite3.Row
            return list(db.execute(sql, params))


def write_config(tmp_path: Path, llm_url: str, tg_root: str | None = None, **sections: Any) -> Path:
    """The test config; without ``tg_root`` (a fake Bot API) no ``telegram`` section: the terminal alone."""
    raw = config_mapping(
        tmp_path, llm_url, tg_root or "http://127.0.0.1:9", logging={"level": "INFO"}, **sections
    )
    if tg_root is None:
        del raw["telegram"]
    raw["terminal"] = {"user_id": ALLOWED_USER, **raw.get("terminal", {})}
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@asynccontextmanager
async def terminal_rig(
    tmp_path: Path, tg_root: str | None = None, **sections: Any
) -> AsyncIterator[TerminalRig]:
    llm = FakeOpenAI(models=("main-model",))
    await llm.start()
    config = write_config(tmp_path, llm.base_url, tg_root, **sections)
    rig = TerminalRig(tmp_path, llm, config, tmp_path / "chat.log")
    try:
        yield rig
    finally:
        if rig.child is not None and rig.child.isalive():
            rig.child.terminate(force=True)
        await llm.stop()
