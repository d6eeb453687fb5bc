"""The command line: check-config, clear config errors with exit 2, a rejected token exits 2."""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentgram.bot.cli import collector_paused, main
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def _agentgram(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTB_TIMEDELTA": "1"}
    return subprocess.run(
        [sys.executable, "-m", "agentgram.bot", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_check_config_prints_effective_config_with_secrets_masked(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.yml",
        {
            "telegram": {"token": "1:topsecret", "allowed_user_ids": [7]},
            "llm": {"model": "m", "api_key": "sk-zzz"},
        },
    )
    result = _agentgram("check-config", "--config", str(config))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["telegram"]["allowed_user_ids"] == [7]
    assert "topsecret" not in result.stdout and "sk-zzz" not in result.stdout


def test_invalid_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.yml", {"telegram": {"token": "1:x", "allowed_user_ids": "me"}, "llm": {"model": "m"}}
    )
    result = _agentgram("run", "--config", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "telegram.allowed_user_ids" in lines[0]
    assert "Traceback" not in result.stderr


async def test_rejected_token_exits_2_with_one_line(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(models=("m",)) as llm:
        config = _write(
            tmp_path / "c.yml",
            {
                "telegram": {"token": "999:wrong-token", "api_base_url": tg.root, "allowed_user_ids": [1]},
                "llm": {"model": "m", "base_url": llm.base_url},
                "storage": {"url": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"},
                "agent": {"workdir": str(tmp_path / "ws")},
                "tic": {"enabled": False},
            },
        )
        proc = await _spawn("run", "--config", str(config))
        _, stderr = await proc.communicate()
    assert proc.returncode == 2, stderr.decode()
    assert "telegram.token" in stderr.decode()
    assert "wrong-token" not in stderr.decode()


async def _spawn(*args: str):  # type: ignore[no-untyped-def]
    import asyncio

    env = {**os.environ, "PTB_TIMEDELTA": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentgram.bot",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


# --- config is checked completely before anything starts (issue 10) --------------------

UNREACHABLE = "http://192.0.2.1:9"  # TEST-NET-1: a run that got past the checks would try it


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every socket connection attempted, loopback included; a checked-out run must make none."""
    attempts: list[object] = []

    def record(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("no connections in config tests")

    monkeypatch.setattr(socket.socket, "connect", record)
    monkeypatch.setattr(socket.socket, "connect_ex", record)
    return attempts


def _config(tmp_path: Path, **sections: dict) -> Path:
    """A valid config (every check passes) with ``sections`` merged over it."""
    raw: dict = {
        "telegram": {"token": "1:abc", "api_base_url": UNREACHABLE, "allowed_user_ids": [1001]},
        "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1"},
        "storage": {"url": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"},
        "agent": {"workdir": str(tmp_path / "ws")},
        "tic": {"enabled": False},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return _write(tmp_path / "config.yml", raw)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, err.splitlines(), out


def test_start_up_builds_without_the_collector_then_freezes_what_it_built() -> None:
    """Issue 31: the imports, the config check and compose run without the cyclic collector (whose
    passes found nothing to free), and what they built is not walked again (cli's docstring)."""
    frozen = gc.get_freeze_count()
    try:
        with collector_paused():
            assert not gc.isenabled()
            built = [[index] for index in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(built)
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
        gc.unfreeze()


TRIMMED = """
import gc, os
from agentgram.bot.cli import trim_after_full_collections

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def freed_in_holes():
    # 64 MiB of 1 KiB objects (glibc's, not pymalloc's), every 256th kept, so that the heap's top
    # cannot shrink by itself: the freed rest lies in whole pages between the kept ones.
    blocks = [bytes(1024) + bytes([i % 256]) for i in range(64 * 1024)]
    return rss(), blocks[::256]

before, kept = freed_in_holes()
gc.collect()
untrimmed = before - rss()
before, kept = freed_in_holes()
trim_after_full_collections()
trim_after_full_collections()  # a second start in the process adds nothing
assert len(gc.callbacks) == 1, gc.callbacks
gc.collect(1)
after_young = before - rss()
gc.collect()
print(untrimmed >> 20, after_young >> 20, (before - rss()) >> 20)
"""


def test_after_a_full_collection_the_free_heap_goes_back_to_the_system() -> None:
    """What the process freed stays in glibc's heaps, counted in its RSS, until a trim: after each
    full collection once ``run`` started (cli's docstring); a young collection does not trim."""
    shown = subprocess.run([sys.executable, "-c", TRIMMED], capture_output=True, text=True, check=True)
    untrimmed, after_young, trimmed = (int(mib) for mib in shown.stdout.split())
    assert untrimmed < 8 and after_young < 8, shown.stdout
    assert trimmed > 48, shown.stdout


ARENAS = """
import ctypes, sys, threading
from agentgram.bot.cli import limit_malloc_arenas

if sys.argv[1] == "limited":
    limit_malloc_arenas()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
ready = threading.Barrier(6)

def allocate():
    ready.wait()  # all six alive at once: glibc gives each new thread a heap while under its limit
    for _ in range(100):
        libc.free(libc.malloc(4096))

threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.malloc_stats()  # one "Arena n:" line per heap, on stderr
"""


@pytest.mark.parametrize(("mode", "most"), [("limited", 2), ("default", 7)])
def test_the_threads_share_at_most_two_glibc_heaps(mode: str, most: int) -> None:
    """``run`` limits glibc's heaps before any thread starts (cli's docstring): six threads
    allocating at once share two, where glibc's default gives each a heap of its own."""
    env = {key: value for key, value in os.environ.items() if key != "MALLOC_ARENA_MAX"}
    shown = subprocess.run(
        [sys.executable, "-c", ARENAS, mode], capture_output=True, text=True, check=True, env=env
    )
    heaps = shown.stderr.count("Arena ")
    assert heaps == most, shown.stderr


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    env = {**os.environ, "MALLOC_ARENA_MAX": "4"}
    shown = subprocess.run(
        [sys.executable, "-c", ARENAS, "limited"], capture_output=True, text=True, check=True, env=env
    )
    assert shown.stderr.count("Arena ") == 4, shown.stderr


def test_a_command_leaves_the_collector_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    code, _, _ = _main(capsys, "check-config", "--config", str(_config(tmp_path)))
    assert code == 0 and gc.isenabled()
    gc.unfreeze()


def test_the_base_config_of_these_tests_passes_every_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    code, err, out = _main(capsys, "check-config", "--config", str(_config(tmp_path)))
    assert (code, err) == (0, [])
    assert json.loads(out)["telegram"]["api_base_url"] == UNREACHABLE
    assert connections == []


CASES = {
    "tic_cron_every_morning": (
        {"tic": {"cron": "every morning"}},
        "config error: tic.cron: 'every morning': 'morning' is not a duration (e.g. 'every 2h', 'every 45m');"
        " tic.cron takes a crontab such as '0 9 * * 1-5'",
    ),
    "tic_cron_impossible_hour": ({"tic": {"cron": "0 25 * * *"}}, "config error: tic.cron: "),
    "locale_without_translations": (
        {"locale": {"default": "de"}},
        "config error: locale.default: no translations for 'de' in ",
    ),
    "missing_system_prompt_file": (
        {"agent": {"system_prompt_file": "{tmp}/missing.md"}},
        "config error: agent.system_prompt_file: {tmp}/missing.md does not exist",
    ),
    "sqlite_without_async_driver": (
        {"storage": {"url": "sqlite:///{tmp}/db.sqlite"}},
        "config error: storage.url: sqlite:// has no async driver: use sqlite+aiosqlite:///{tmp}/db.sqlite",
    ),
    "postgresql_without_async_driver": (
        {"storage": {"url": "postgresql://me:pw@db.example/agentgram"}},
        "config error: storage.url: postgresql:// has no async driver: use postgresql+asyncpg://me:***@db.example/agentgram",
    ),
    "postgresql_without_the_extra": (
        {"storage": {"url": "postgresql+asyncpg://me:pw@db.example/agentgram"}},
        "config error: storage.url: the asyncpg driver is not installed;"
        " install the [postgres] extra: pip install 'agentgram[postgres]'",
    ),
    "database_folder_that_cannot_be_created": (
        {"storage": {"url": "sqlite+aiosqlite:////proc/nope/db.sqlite"}},
        "config error: storage.url: the database: cannot create /proc/nope: creating a folder in /proc fails: ",
    ),
    "workdir_that_cannot_be_created": (
        {"agent": {"workdir": "/proc/nope"}},
        "config error: agent.workdir: cannot create /proc/nope: creating a folder in /proc fails: ",
    ),
    "workdir_that_is_a_file": (
        {"agent": {"workdir": "{tmp}/config.yml"}},
        "config error: agent.workdir: {tmp}/config.yml is not a directory",
    ),
    "llm_base_url_without_scheme": (
        {"llm": {"base_url": "localhost:11434/v1"}},
        "config error: llm.base_url: 'localhost:11434/v1' is not an http:// or https:// URL",
    ),
    "telegram_base_url_without_scheme": (
        {"telegram": {"api_base_url": "api.telegram.org"}},
        "config error: telegram.api_base_url: 'api.telegram.org' is not an http:// or https:// URL",
    ),
    "approval_rule_source_typo": (
        {"approval": {"rules": [{"tool": "x", "action": "allow", "source": "crom"}]}},
        "config error: approval.rules.0.source: 'crom' is not one of 'telegram', 'tic' or 'cron'",
    ),
    "example_placeholder_user_id": (
        {"telegram": {"allowed_user_ids": [1001, 123456789]}},
        "config error: telegram.allowed_user_ids: 123456789 is the example's placeholder;"
        " put your own Telegram user id (see README)",
    ),
    "empty_token": ({"telegram": {"token": ""}}, "config error: telegram.token: is empty"),
    "wrapper_hook_naming_no_tool": (
        {"tools": {"wrappers": [{"match": {"tool": "*"}, "decorators": [{"after": {"tool": "audit_log"}}]}]}},
        "config error: tools.wrappers.0.decorators.0.after.tool: no tool named 'audit_log'",
    ),
    "wrapper_decorator_with_two_names": (
        {
            "tools": {
                "wrappers": [{"decorators": [{"timeout": {"seconds": 5}, "truncate": {"max_bytes": 500}}]}]
            }
        },
        "config error: tools.wrappers.0.decorators.0: a decorator is exactly one of timeout, retries, truncate",
    ),
    "attach_seconds_not_a_duration": (
        {"tools": {"attach_seconds": "soon"}},
        "config error: tools.attach_seconds: 'soon' is not a duration",
    ),
}


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_config_problem_is_one_line_and_exit_2_before_anything_starts(
    case: str,
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    connections: list[object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sections, expected = CASES[case]
    sections = json.loads(json.dumps(sections).replace("{tmp}", str(tmp_path)))
    expected = expected.replace("{tmp}", str(tmp_path))
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # as without the [postgres] extra
    config = _config(tmp_path, **sections)
    code, err, out = _main(capsys, command, "--config", str(config))
    assert code == 2
    assert len(err) == 1 and err[0].startswith(expected), err
    assert out == ""
    assert connections == []  # not even the unreachable Telegram URL was tried
    assert not (tmp_path / "ws").exists() and not (tmp_path / "db.sqlite").exists()


AGENT_CASES = {
    "unknown_model": (
        "---\nmodel: turbo\n---\nYou summarise.\n",
        "config error: agents/summariser: model 'turbo' is not one of: default",
    ),
    "empty_prompt": ("---\ndescription: nothing\n---\n", "config error: {tmp}/agents/summariser/AGENT.md: "),
    "bad_front_matter": ("---\nmodel: [\n---\nHi.\n", "config error: {tmp}/agents/summariser/AGENT.md: "),
}


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize("case", list(AGENT_CASES))
def test_an_agent_definition_run_would_refuse_is_one_line_and_exit_2(
    case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], connections: list[object]
) -> None:
    text, expected = AGENT_CASES[case]
    folder = tmp_path / "agents" / "summariser"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(text)
    config = _config(
        tmp_path, agent={"workdir": str(tmp_path / "ws"), "agents_dir": str(tmp_path / "agents")}
    )
    code, err, out = _main(capsys, command, "--config", str(config))
    assert code == 2
    assert len(err) == 1 and err[0].startswith(expected.replace("{tmp}", str(tmp_path))), err
    assert out == "" and connections == []


def test_yaml_syntax_error_is_one_line_with_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yml"
    config.write_text("telegram:\n  token: x\n  a: b: c\nllm: {model: m}\n")
    for command in ("check-config", "run"):
        code, err, _ = _main(capsys, command, "--config", str(config))
        assert (code, err) == (2, [f"config error: {config}:3:7: mapping values are not allowed here"])


def test_an_env_override_that_breaks_the_config_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTGRAM_LLM__BASE_URL", "ftp://llm")
    monkeypatch.setenv("AGENTGRAM_AGENT__WORKDIR", "/proc/nope")  # a semantic check's error too
    code, err, _ = _main(capsys, "check-config", "--config", str(_config(tmp_path)))
    assert code == 2
    assert err[0] == (  # and, in the same pass (issue 25), the workdir's problem
        "config error: llm.base_url: 'ftp://llm' is not an http:// or https:// URL (set by AGENTGRAM_LLM__BASE_URL)"
    )
    assert len(err) == 2 and err[1].startswith("config error: agent.workdir: cannot create /proc/nope: ")
    monkeypatch.delenv("AGENTGRAM_LLM__BASE_URL")
    code, err, _ = _main(capsys, "run", "--config", str(_config(tmp_path)))
    assert code == 2 and len(err) == 1
    assert err[0].startswith("config error: agent.workdir: cannot create /proc/nope: ")
    assert err[0].endswith(" (set by AGENTGRAM_AGENT__WORKDIR)")


def test_an_expanded_variable_that_breaks_the_config_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_LANGUAGE", "de")
    code, err, _ = _main(
        capsys, "check-config", "--config", str(_config(tmp_path, locale={"default": "${BOT_LANGUAGE}"}))
    )
    assert code == 2 and len(err) == 1
    assert err[0].startswith("config error: locale.default: no translations for 'de'")
    assert err[0].endswith("(set by ${BOT_LANGUAGE})")


def test_every_field_error_is_reported_not_just_the_first(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "config.yml",
        {
            "telegram": {"token": "1:x", "api_base_url": UNREACHABLE},
            "llm": {"base_url": "localhost:1/v1", "model": "m", "colour": "red"},
            "approval": {"rules": [{"tool": "x", "action": "ask", "source": "crom"}]},
        },
    )
    result = _agentgram("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "config error: telegram.allowed_user_ids: is required",
        "config error: llm.base_url: 'localhost:1/v1' is not an http:// or https:// URL",
        "config error: llm.colour: is not a known key",
        "config error: approval.rules.0.action: 'ask' is not one of 'allow', 'require' or 'deny'",
        "config error: approval.rules.0.source: 'crom' is not one of 'telegram', 'tic' or 'cron'",
    ]


def test_every_semantic_problem_is_reported_by_run_without_a_traceback(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        telegram={"allowed_user_ids": [123456789]},
        storage={"url": "sqlite:///x.db"},
        agent={"workdir": "/proc/nope", "system_prompt_file": str(tmp_path / "none.md")},
        locale={"default": "de"},
        tic={"cron": "every morning"},
    )
    result = _agentgram("run", "--config", str(config), timeout=30)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert [line.split(": ", 2)[1] for line in result.stderr.splitlines()] == [  # the file's key order
        "telegram.allowed_user_ids",
        "storage.url",
        "agent.workdir",
        "agent.system_prompt_file",
        "locale.default",
        "tic.cron",
    ]


def test_the_example_config_fails_only_on_its_placeholder_user_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its relative workdir and database resolve here
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:abc")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    code, err, _ = _main(capsys, "check-config", "--config", str(ROOT / "config.example.yml"))
    assert (code, err) == (
        2,
        [
            "config error: telegram.allowed_user_ids: 123456789 is the example's placeholder;"
            " put your own Telegram user id (see README)"
        ],
    )
    assert list(tmp_path.iterdir()) == []  # checking created nothing
