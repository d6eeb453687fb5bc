"""The adapter uses the runtime's facade and nothing behind it (issue 11).

* ``bot/`` reaches the runtime only through :class:`~runtime.app.Runtime`'s
  public methods and properties (and the few ports it hands out): an attribute
  read on anything called ``runtime`` must be one of them, never a part the
  facade wires (``db``, ``sessions``, ``approvals``, ``hub``, ``bus``…).
* ORM rows stay in the runtime: no module of ``bot/`` imports
  ``agentgram.runtime.infra.storage``; what crosses is the facade's own values.

* No string literal or docstring in ``runtime/`` names a chat platform (Telegram, aiogram, PTB):
  the runtime knows none, in its words as in its imports (issue 24).

The layer contracts between packages are import-linter's
(``tests/test_import_contracts.py``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from agentgram.runtime.app import Runtime

ROOT = Path(__file__).resolve().parents[1]
BOT = ROOT / "agentgram" / "bot"

PORTS = frozenset({"values", "scheduler", "timezone"})
"""Instance attributes the facade hands out on purpose: the key-value port, the scheduler's own
facade, and the zone the agent's times are shown in."""


def _facade() -> frozenset[str]:
    return frozenset(name for name in dir(Runtime) if not name.startswith("_")) | PORTS


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(BOT.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_runtime(node: ast.expr) -> bool:
    """``runtime``, ``self.runtime``, ``ctx.runtime``…"""
    return (isinstance(node, ast.Name) and node.id == "runtime") or (
        isinstance(node, ast.Attribute) and node.attr == "runtime"
    )


def _where(path: Path, node: ast.AST) -> str:
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{shown}:{getattr(node, 'lineno', '?')}"


def test_bot_reads_only_the_facade_of_the_runtime() -> None:
    facade = _facade()
    behind = [
        f"{_where(path, node)}: runtime.{node.attr}"
        for path, module in _modules()
        for node in ast.walk(module)
        if isinstance(node, ast.Attribute) and _is_runtime(node.value) and node.attr not in facade
    ]
    assert behind == [], "bot/ reaches behind the runtime facade:\n" + "\n".join(behind)


def test_no_orm_row_reaches_the_adapter() -> None:
    imports = []
    for path, module in _modules():
        for node in ast.walk(module):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(name.startswith("agentgram.runtime.infra.storage") for name in names):
                imports.append(f"{_where(path, node)}: {ast.unparse(node)}")
    assert imports == [], "bot/ imports the runtime's storage:\n" + "\n".join(imports)


def test_the_check_sees_what_it_forbids() -> None:
    """The walk itself: a reach behind the facade and a storage import are both found."""
    code = ast.parse(
        "ctx.runtime.approvals.pending()\nfrom agentgram.runtime.infra.storage.models import ChatSession\n"
    )
    reads = [n for n in ast.walk(code) if isinstance(n, ast.Attribute) and _is_runtime(n.value)]
    assert [n.attr for n in reads] == ["approvals"] and "approvals" not in _facade()
    assert "post_user_message" in _facade() and "subscribe" in _facade()


RUNTIME = ROOT / "agentgram" / "runtime"
PLATFORM_WORDS = re.compile(r"telegram|aiogram|\bPTB\b", re.IGNORECASE)
"""A chat platform's or its libraries' names: the runtime knows no chat platform (issue 24)."""
PLATFORM_WORDS_ALLOWED = {
    # The v3 migration renames the source stored as 'telegram' before it to 'chat': old databases
    # hold that word, so the migration must name it.
    "agentgram/runtime/infra/storage/legacy_migrations.py",
    # config.yml's documented ``telegram`` section and its rule-source alias: the config helper's
    # pending change (one root model, the adapter sections validated in the adapter) moves them out.
    "agentgram/runtime/infra/config.py",
}


def _platform_words(path: Path) -> list[str]:
    """Every string literal (docstrings included) in ``path`` that names a chat platform."""
    module = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{_where(path, node)}: {match.group(0)!r} in {node.value[:80]!r}"
        for node in ast.walk(module)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for match in [PLATFORM_WORDS.search(node.value)]
        if match is not None
    ]


def test_the_runtime_names_no_chat_platform_in_its_strings() -> None:
    """Imports are import-linter's; this is the words: no string literal or docstring in
    ``runtime/`` names Telegram, aiogram or PTB, except the files listed with their reason."""
    found = [
        hit
        for path in sorted(RUNTIME.rglob("*.py"))
        if path.relative_to(ROOT).as_posix() not in PLATFORM_WORDS_ALLOWED
        for hit in _platform_words(path)
    ]
    assert found == [], "runtime/ names a chat platform:\n" + "\n".join(found)
    for allowed in PLATFORM_WORDS_ALLOWED:  # an allowance that is no longer needed goes
        assert _platform_words(ROOT / allowed), f"{allowed} names no platform any more: drop it from the list"


def test_the_word_check_sees_docstrings_and_f_strings(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Sent through the Telegram API."""\nx = f"via {1} aiogram"\ny = "PTB"\nz = "ptbx"\n')
    assert len(_platform_words(probe)) == 3
