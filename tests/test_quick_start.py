"""The README's quick start, run from the README's own text, so it cannot drift from what works.

The test reads the ``# run the bot`` line of the README's Quick start, splits it at ``&&`` and runs
each step in a copy of the repository (a fresh clone, as the README assumes), against the fake
Telegram and OpenAI servers. Three steps cannot run as written in a test, and are replaced by their
equivalent — nothing else is:

* ``python3 -m venv .venv`` is made ``--without-pip`` with this test's interpreter: the next step
  does not need the venv's own pip (creating one costs ~20 s);
* ``pip install .`` builds the wheel and installs it with ``--no-deps``, its dependencies coming from
  this test run's environment through a ``.pth`` file (the trick of tests/test_packaging.py), so the
  test needs no network;
* ``agentgram init`` is given ``--telegram-api-base-url`` (the fake's address; the one thing a
  README cannot know), and its questions are answered in a real pseudo-terminal (pexpect) as a
  newcomer would: the token, the fake endpoint, the model, an empty user id (then the user writes to
  the bot and confirms it is them), the default workdir.

``agentgram run`` then runs as written until the bot answers a message through the fake Telegram,
and stops on SIGTERM. The ``# run the tests`` line is checked against ``.ci/run``, which runs it in CI.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import signal
import site
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect

from tests.conftest import ALLOWED_USER
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "123456:TEST-token"
ANSWER = "Hello! I am up and running."
PATIENCE = 120.0
"""Seconds a cold start of ``agentgram`` may take: ~7 s of CPU for its imports, much longer on a busy machine."""
_NOT_SOURCE = (".git", "build", "dist", "site", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
_NOT_A_FRESH_CLONE = (".venv", "data", "workspace", "config.yml")  # what a previous quick start leaves
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>]|[\r\x07]")


def quick_start_blocks() -> dict[str, str]:
    """The README's Quick start code blocks, by their first line (``# run the bot``, ``# run the tests``)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    found = {}
    for block in blocks:
        lines = [line for line in block.strip().splitlines() if line.strip()]
        found[lines[0]] = " ".join(line.rstrip("\\").strip() for line in lines[1:])
    return found


def steps(command: str) -> list[str]:
    return [step.strip() for step in command.split("&&")]


def _run(args: list[str | Path], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_readme_test_command_is_what_ci_runs() -> None:
    blocks = quick_start_blocks()
    assert set(blocks) == {"# run the bot", "# run the tests"}, blocks
    tests = steps(blocks["# run the tests"])
    assert tests[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"], tests
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert " && ".join(tests[2:]) in ci, ".ci/run runs the README's test command exactly"


class Screen:
    """What ``agentgram init`` shows on its terminal, read as it arrives."""

    def __init__(self, child: pexpect.spawn) -> None:  # type: ignore[type-arg]
        self.child, self.seen, self.read_to = child, "", 0

    def poll(self) -> None:
        while True:
            try:
                self.seen += _ESCAPES.sub("", self.child.read_nonblocking(65536, timeout=0))
            except (pexpect.TIMEOUT, pexpect.EOF):
                return

    def unread(self) -> str:
        return self.seen[self.read_to :]


async def answer_init(child: pexpect.spawn, tg: FakeTelegram, llm: FakeOpenAI) -> str:  # type: ignore[type-arg]
    """Answer ``agentgram init``'s questions as the user would, until it exits; what it showed."""

    def user_writes_to_the_bot() -> str | None:
        tg.send_text(ALLOWED_USER, "hi, it's me", first_name="Ann")
        return None  # nothing to type: init reads the message from Telegram

    answers: list[tuple[str, Callable[[], str | None]]] = [
        (r"Bot token[^\n]*: $", lambda: TOKEN),
        (r"LLM endpoint[^\n]*: $", lambda: llm.base_url),
        (r"LLM API key[^\n]*: $", lambda: "sk-quick-start"),
        (r"Model[^\n]*: $", lambda: "main-model"),
        (r"Your user id[^\n]*: $", lambda: ""),  # empty: find it from the first message
        (r"Send @\S+ any message now[^\n]*\n", user_writes_to_the_bot),
        (r"Is that you\?[^\n]*: $", lambda: "y"),
        (r"Workdir[^\n]*: $", lambda: ""),  # the default, ./workspace
    ]
    screen = Screen(child)
    deadline = time.monotonic() + PATIENCE
    while child.isalive():
        screen.poll()
        for pattern, answer in answers:
            match = re.search(pattern, screen.unread())
            if match:
                screen.read_to += match.end()
                typed = answer()
                if typed is not None:
                    child.sendline(typed)
                break
        else:
            assert time.monotonic() < deadline, f"init is stuck; its screen:\n{screen.seen}"
            await asyncio.sleep(0.05)
    screen.poll()
    child.close()
    assert child.exitstatus == 0, f"init failed ({child.exitstatus}); its screen:\n{screen.seen}"
    return screen.seen


async def test_the_quick_start_installs_writes_a_config_and_runs_a_bot_that_answers(tmp_path: Path) -> None:
    command = quick_start_blocks()["# run the bot"]
    clone = tmp_path / "agentgram"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(*_NOT_SOURCE, *_NOT_A_FRESH_CLONE))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["HOME"] = str(tmp_path)
    venv: Path | None = None
    done: list[str] = []
    async with FakeTelegram(token=TOKEN) as tg, FakeOpenAI(models=("main-model", "backup-model")) as llm:
        for step in steps(command):
            argv = shlex.split(step)
            if re.fullmatch(r"python3 -m venv \S+", step):
                venv = clone / argv[-1]
                made = _run([sys.executable, "-m", "venv", "--without-pip", venv], clone, env)
                assert made.returncode == 0, made.stderr
            elif re.fullmatch(r"\. \S+/bin/activate", step):
                assert venv is not None and (clone / argv[1]) == venv / "bin" / "activate", step
                env["VIRTUAL_ENV"] = str(venv)
                env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
            elif step in ("pip install .", "pip install -e ."):
                assert venv is not None, "pip install before the venv"
                install_without_network(clone, venv, env, editable="-e" in argv)
            elif argv[:2] == ["agentgram", "init"]:
                executable = shutil.which("agentgram", path=env["PATH"])
                assert executable is not None and executable.startswith(str(venv)), executable
                child = pexpect.spawn(
                    executable,
                    [*argv[1:], "--telegram-api-base-url", tg.root],
                    cwd=str(clone),
                    env=env,
                    encoding="utf-8",
                    dimensions=(40, 160),
                )
                shown = await answer_init(child, tg, llm)
                assert "✓ the token works: @agentgram_test_bot" in shown, shown
                config = clone / "config.yml"
                assert stat.S_IMODE(config.stat().st_mode) == 0o600
            elif argv[:2] == ["agentgram", "run"]:
                await run_until_it_answers(argv, clone, env, tg, llm, tmp_path / "bot.log")
            else:
                raise AssertionError(f"the quick start has a step this test does not know: {step!r}")
            done.append(step)
    assert done == steps(command)
    assert {s.split()[1] for s in done if s.startswith("agentgram ")} == {"init", "run"}


def read(path: Path) -> str:
    """The bot's log so far (sync: for failure messages)."""
    return path.read_text(errors="replace")


def install_without_network(clone: Path, venv: Path, env: dict[str, str], *, editable: bool) -> None:
    """``pip install .`` into ``venv``: the built wheel (or an editable install), with ``--no-deps``;
    the dependencies are this test run's own, through a ``.pth`` file (tests/test_packaging.py)."""
    python = venv / "bin" / "python"
    venv_site = Path(
        _run([python, "-c", "import site; print(site.getsitepackages()[0])"], clone, env).stdout.strip()
    )
    (venv_site / "test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps"]
    if editable:
        installed = _run([*pip, "-e", clone], clone, env)
    else:
        built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", "dist", "."], clone, env)
        assert built.returncode == 0, built.stderr
        (wheel,) = (clone / "dist").glob("agentgram-*.whl")
        installed = _run([*pip, wheel], clone, env)
    assert installed.returncode == 0, installed.stderr


async def run_until_it_answers(
    argv: list[str], clone: Path, env: dict[str, str], tg: FakeTelegram, llm: FakeOpenAI, log_path: Path
) -> None:
    """``agentgram run`` as written, until the bot answers a message; then SIGTERM, exit code 0."""
    executable = shutil.which(argv[0], path=env["PATH"])
    assert executable is not None and executable.startswith(str(clone)), executable
    polls = len(tg.calls("getUpdates"))
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            executable,
            *argv[1:],
            cwd=clone,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:

        async def until(predicate: Callable[[], bool], what: str, timeout: float) -> None:
            try:
                await tg.wait_for(lambda: predicate() or proc.returncode is not None, timeout)
            except AssertionError:
                raise AssertionError(f"waiting for {what}; the log:\n{read(log_path)}") from None
            assert predicate(), f"the bot exited ({proc.returncode}) waiting for {what}:\n{read(log_path)}"

        await until(lambda: len(tg.calls("getUpdates")) > polls, "the bot to poll Telegram", PATIENCE)
        llm.script(Text(ANSWER))
        tg.send_text(ALLOWED_USER, "are you there?", first_name="Ann")
        await until(
            lambda: any(m.visible_text.strip() == ANSWER for m in tg.messages(ALLOWED_USER)),
            "the bot's answer",
            30.0,
        )
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 20.0)
        assert code == 0, f"exit code {code}; the log:\n{read(log_path)}"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = read(log_path)
    assert "Traceback" not in log, log
    assert TOKEN not in log, "the token never reaches the log"
