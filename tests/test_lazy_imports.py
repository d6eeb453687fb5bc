"""Load only what is used (issue 31, requirement 2): what a default config does not use is never
imported, and ``agentgram --version`` imports no part of the app.

The bot is the real ``agentgram run`` process between the fakes (tests/crash/harness.py), started
with ``PYTHONPROFILEIMPORTTIME`` set: Python then writes every module it imports to stderr, the
bot's log, so the test reads what the process loaded without changing anything in it. The config
is the tests' default one: polling, web view off, no MCP servers, no terminal, no image sent; the
database is already at this release's schema, the usual start (migrations need Alembic; a start
with nothing to migrate must not load it), or, on python-telegram-bot, an empty SQLite file, which
the start builds from the schema's snapshot (``storage.fresh_schema``), again without Alembic.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from agentgram.runtime.app import migrate_database
from agentgram.runtime.infra.storage import migrations
from tests.crash.harness import crash_rig

HEAVY = frozenset(
    {
        "fastapi",  # the web view and webhook mode
        "starlette",
        "uvicorn",
        "mcp",  # MCP servers
        "mcp_types",
        "aiogram",  # the other driver
        "telegram",
        "prompt_toolkit",  # agentgram chat
        "rich",
        "PIL",  # the first image
        "alembic",  # a migration
        "cryptography",  # installed by mcp; python-telegram-bot's Telegram Passport would load it
    }
)
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)\s*$", re.MULTILINE)


TRIED_IN_VAIN = frozenset({"cryptography.hazmat", "cryptography.hazmat.backends"})
"""Imports python-telegram-bot tries and that fail on purpose (``drivers._ptb_without_passport``):
Python lists a failed import too. A ``cryptography`` really loaded lists many more modules."""


def heavy_in(names: set[str]) -> set[str]:
    """The heavy top-level packages among ``names`` (module names, dotted or not)."""
    return {name.split(".")[0] for name in names - TRIED_IN_VAIN} & HEAVY


async def _modules_of_a_started_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, library: str, *, fresh: bool = False
) -> set[str]:
    """Every module ``agentgram run`` imported from start to a clean exit on SIGTERM, once it polled;
    ``fresh``: on an empty database, else on one at the head already."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    async with crash_rig(tmp_path, telegram={"library": library}) as rig:
        if not fresh:
            await migrate_database(rig.database_url)  # at head already: nothing for Alembic to do
        await rig.start()
        assert await rig.terminate() == 0
        return set(IMPORTED.findall(rig.log_path.read_text(errors="replace")))


async def test_a_default_bot_on_ptb_loads_no_web_stack_mcp_aiogram_terminal_pillow_or_alembic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = await _modules_of_a_started_bot(tmp_path, monkeypatch, "ptb", fresh=True)
    assert heavy_in(loaded) == {"telegram"}  # its own driver's library, and nothing else heavy
    assert "agentgram.bot.telegram.drivers.ptb" in loaded  # it did start


async def test_a_default_bot_on_aiogram_loads_no_python_telegram_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = await _modules_of_a_started_bot(tmp_path, monkeypatch, "aiogram")
    assert heavy_in(loaded) == {"aiogram"}


def test_version_prints_the_version_and_imports_no_part_of_the_app() -> None:
    entry = "import sys; from agentgram.bot.cli import main; sys.exit(main())"  # the console script's
    shown = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", entry, "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == f"agentgram {version('agentgram')}\n"
    loaded = set(IMPORTED.findall(shown.stderr))
    assert "agentgram.bot.cli" in loaded
    assert heavy_in(loaded) == set()
    assert not {"pydantic", "sqlalchemy", "openai", "yaml", "httpx"} & {m.split(".")[0] for m in loaded}
    assert not {m for m in loaded if m.startswith(("agentgram.bot.", "agentgram.runtime.app"))} - {
        "agentgram.bot.cli"
    }


def test_the_head_known_without_alembic_is_alembics_head() -> None:
    """:data:`migrations.HEAD_REVISION` (read from the revisions' file names) decides that a database
    needs no upgrade without importing Alembic: it must be Alembic's own head, and every revision
    file must be named so that it counts."""
    versions = migrations.ALEMBIC_DIR / "versions"
    files = sorted(path.name for path in versions.glob("*.py") if path.name != "__init__.py")
    assert files and all(migrations.REVISION_FILE.fullmatch(name) for name in files), files
    assert migrations.HEAD_REVISION == migrations.head()
    ids = [script.revision for script in migrations.scripts().walk_revisions()]
    assert sorted(ids) == sorted(name[1:5] for name in files)  # each file's id is the one its name says
