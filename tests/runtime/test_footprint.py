"""What a bot on SQLite without the web view loads, and what it leaves for later (issue 31:
peak RSS at 1,000 chats). In a process of its own: a module once imported stays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]

SQLITE_BOT = """
import asyncio, json, sys
from pathlib import Path
import agentgram.bot.telegram.app  # what a bot imports
from agentgram.runtime.app import Runtime
from tests.conftest import ALLOWED_USER, make_settings

async def main(tmp: Path, llm: str) -> None:
    runtime = Runtime(make_settings(tmp, llm), format_rules="", home_chat_id=ALLOWED_USER)
    await runtime.start()
    await runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")
    await runtime.chat.new_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en", envelope_id="n1")
    dialects = sorted({m.split(".")[2] for m in sys.modules if m.startswith("sqlalchemy.dialects.")})
    started = {"dialects": dialects, "debug_view": "agentgram.runtime.debug_view" in sys.modules}
    await runtime.debug.jobs()
    await runtime.close()
    print(json.dumps({**started, "debug_view_read": "agentgram.runtime.debug_view" in sys.modules}))

asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
"""


def test_a_bot_on_sqlite_loads_neither_the_postgresql_dialect_nor_the_web_views_reader(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """SQLAlchemy's PostgreSQL dialect is 2.3 MiB of modules: a bot on SQLite loads it neither
    for its partial indexes (``models.partial_indexes_for_postgresql``) nor for its ``INSERT …
    ON CONFLICT`` (:func:`~agentgram.runtime.infra.storage.concurrency.insert_for`). The web
    view's reader (``runtime.debug_view``, its pydantic models ≈ 0.4 MiB) loads with its first
    read. From the bot's imports through a fresh database, a chat's session and ``/new``'s."""
    shown = subprocess.run(
        [sys.executable, "-c", SQLITE_BOT, str(tmp_path), fake_llm.base_url],
        capture_output=True, text=True, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert json.loads(shown.stdout.splitlines()[-1]) == {
        "dialects": ["_typing", "sqlite"],
        "debug_view": False,
        "debug_view_read": True,
    }
