"""The adapter uses the runtime's facade and nothing behind it (issue 11).

* ``bot/`` reaches the runtime only through :class:`~runtime.app.Runtime`'s
  public methods and properties (and the few ports it hands out): an attribute
  read on anything called ``runtime`` must be one of them, never a part the
  facade wires (``db``, ``sessions``, ``approvals``, ``hub``, ``bus``…).
* ORM rows stay in the runtime: no module of ``bot/`` imports
  ``agentgram.runtime.infra.storage``; what crosses is the facade's own values.

The layer contracts between packages are import-linter's
(``tests/test_import_contracts.py``).
"""

from __future__ import annotations

import ast
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
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


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
