"""The adapter uses the runtime's door and nothing behind it (issues 11 and 24).

* ``bot/`` reaches the runtime only through its door, :class:`~runtime.door.protocols.Door`: an
  attribute read on anything called ``runtime`` must be one of the door's members, never a part
  the runtime wires (``db``, ``session_store``, ``approval_manager``, ``hub``, ``bus``…), and a
  read on one of the door's parts (``runtime.chat.…``, ``runtime.approvals.…``) must be one of
  that part's Protocol's members.
* ORM rows stay in the runtime: no module of ``bot/`` imports
  ``agentgram.runtime.infra.storage``, and no method of the door's Protocols takes or returns a
  row (nor a value holding one); what crosses is the door's own values.

* No string literal or docstring in ``runtime/`` names a chat platform (Telegram, aiogram, PTB):
  the runtime knows none, in its words as in its imports (issue 24).

The layer contracts between packages are import-linter's
(``tests/test_import_contracts.py``).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from sqlmodel import SQLModel

from agentgram.runtime.debug_view import DebugView
from agentgram.runtime.door.protocols import (
    ApprovalsDoor,
    CallsDoor,
    ChatDoor,
    Door,
    JobsDoor,
    RollbackDoor,
    SessionsDoor,
)
from agentgram.runtime.infra.storage.models import ApprovalRequestRow, ChatSession

ROOT = Path(__file__).resolve().parents[1]
BOT = ROOT / "agentgram" / "bot"

PARTS: dict[str, type[Any]] = {
    "chat": ChatDoor,
    "approvals": ApprovalsDoor,
    "calls": CallsDoor,
    "jobs": JobsDoor,
    "sessions": SessionsDoor,
    "rollback": RollbackDoor,
}
"""The door's parts, by the attribute an adapter reads them from."""


def _members(protocol: type[Any]) -> frozenset[str]:
    return frozenset(name for name in vars(protocol) if not name.startswith("_"))


def _facade() -> frozenset[str]:
    return _members(Door)


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


def _behind(module: ast.Module) -> Iterator[ast.Attribute]:
    """Reads on ``runtime`` that are not the door's, and reads on a door part not its Protocol's."""
    facade = _facade()
    for node in ast.walk(module):
        if not isinstance(node, ast.Attribute):
            continue
        if _is_runtime(node.value) and node.attr not in facade:
            yield node
        part = node.value
        if isinstance(part, ast.Attribute) and _is_runtime(part.value) and part.attr in PARTS:
            if node.attr not in _members(PARTS[part.attr]):
                yield node


def test_bot_reads_only_the_facade_of_the_runtime() -> None:
    behind = [
        f"{_where(path, node)}: {ast.unparse(node)}"
        for path, module in _modules()
        for node in _behind(module)
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
        "ctx.runtime.approval_manager.pending()\nctx.runtime.approvals.pending_approvals(s)\n"
    )
    reads = [n for n in ast.walk(code) if isinstance(n, ast.Attribute) and _is_runtime(n.value)]
    assert [n.attr for n in reads] == ["approvals", "approval_manager", "approvals"]
    assert "approvals" in _facade() and "approval_manager" not in _facade()
    assert [ast.unparse(n) for n in _behind(code)] == [
        "ctx.runtime.approvals.pending",
        "ctx.runtime.approval_manager",
    ]
    assert "accept_user_message" in _members(ChatDoor) and "subscribe" in _facade()


def _types_in(hint: object, seen: set[int]) -> Iterator[type[Any]]:
    """Every class ``hint`` names, through unions, generics and the fields of dataclasses."""
    if isinstance(hint, list):  # a Callable's parameters
        for arg in hint:
            yield from _types_in(arg, seen)
        return
    if id(hint) in seen:
        return
    seen.add(id(hint))
    for arg in typing.get_args(hint):
        yield from _types_in(arg, seen)
    origin = typing.get_origin(hint)
    cls = origin if isinstance(origin, type) else hint
    if isinstance(cls, type):
        yield cls
        if dataclasses.is_dataclass(cls):
            for field_hint in typing.get_type_hints(cls).values():
                yield from _types_in(field_hint, seen)


def _is_row(cls: type[Any]) -> bool:
    return issubclass(cls, SQLModel) and bool(cls.model_config.get("table"))


LOADED_LATE = {"DebugView": DebugView}
"""Names the protocols import for type checking alone (their modules load late: issue 31)."""


def _rows_crossing(protocol: type[Any]) -> list[str]:
    """Each member of ``protocol`` whose parameters or result name an ORM row."""
    found = []
    for name in sorted(_members(protocol)):
        member = vars(protocol)[name]
        function = member.fget if isinstance(member, property) else member
        hints = typing.get_type_hints(function, localns=LOADED_LATE)
        for where, hint in hints.items():
            for cls in _types_in(hint, set()):
                if _is_row(cls):
                    found.append(f"{protocol.__name__}.{name} ({where}): {cls.__name__}")
    return found


def test_no_orm_row_crosses_the_door() -> None:
    crossing = [line for protocol in (Door, *PARTS.values()) for line in _rows_crossing(protocol)]
    assert crossing == [], "an ORM row crosses the door:\n" + "\n".join(crossing)


def test_the_row_check_sees_a_row_in_a_result_a_parameter_and_a_value() -> None:
    @dataclasses.dataclass
    class Holds:
        request: ApprovalRequestRow | None

    class Leaky(Protocol):
        async def returns(self) -> list[ApprovalRequestRow]: ...
        def takes(self, session: ChatSession | None) -> None: ...
        def wraps(self) -> tuple[Holds, int]: ...
        def clean(self, text: str) -> dict[str, int]: ...

    # the Protocol is local: resolve its names here
    for name in ("returns", "takes", "wraps", "clean"):
        vars(Leaky)[name].__annotations__ = typing.get_type_hints(vars(Leaky)[name], localns=locals())
    assert _rows_crossing(Leaky) == [
        "Leaky.returns (return): ApprovalRequestRow",
        "Leaky.takes (session): ChatSession",
        "Leaky.wraps (return): ApprovalRequestRow",
    ]


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
