"""The tool contract: typed arguments, a group for approval rules, one ``execute``.

A tool's own failure is a :class:`~runtime.errors.ToolError` whose message the
model reads; anything else escaping ``execute`` is a bug and is reported as a
failed result too (the turn never crashes on a tool). Cancellation arrives as
``asyncio.CancelledError`` in ``execute``: a tool that holds outside resources
(a process group) must release them and re-raise.
"""

from __future__ import annotations

import enum
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from runtime.errors import ToolError
from runtime.llm.types import ToolSpec


class ToolGroup(enum.StrEnum):
    """Groups named in approval rules as ``@fs_read``, ``@fs_write``, ``@shell``."""

    FS_READ = "fs_read"
    FS_WRITE = "fs_write"
    SHELL = "shell"
    SCHEDULE = "schedule"
    OTHER = "other"


class ProcessLedger(Protocol):
    """Where tools record the process groups they start (see runtime.tools.processes)."""

    async def started(self, pgid: int) -> None: ...

    async def finished(self, pgid: int) -> None: ...


@dataclass(slots=True, frozen=True)
class ToolContext:
    """What a tool may know about where it runs."""

    workdir: Path
    session_id: int = 0
    source: str = "telegram"
    chat_id: int | None = None
    processes: ProcessLedger | None = None

    def resolve(self, path: str) -> Path:
        """Resolve ``path`` against the workdir (absolute paths stay as given)."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.workdir / candidate
        return candidate.resolve()


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown keys are an error the model can read."""

    model_config = ConfigDict(extra="forbid")


ArgsT = TypeVar("ArgsT", bound=ToolArgs)


class Tool(ABC, Generic[ArgsT]):
    """Subclass with ``name``, ``description``, ``group``, ``Args`` and ``execute``."""

    name: ClassVar[str]
    description: ClassVar[str]
    group: ClassVar[ToolGroup] = ToolGroup.OTHER
    Args: type[ArgsT]

    @property
    def spec(self) -> ToolSpec:
        schema = self.Args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def parse(self, raw: str | dict[str, Any]) -> ArgsT:
        """Parse the model's JSON arguments; a clear :class:`ToolError` otherwise."""
        try:
            data = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise ToolError("arguments must be a JSON object")
        try:
            return self.Args.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments: {problems}") from None

    def target(self, args: ArgsT, ctx: ToolContext) -> str | None:
        """The path or command approval rules match against (``None`` if none)."""
        return None

    @abstractmethod
    async def execute(self, args: ArgsT, ctx: ToolContext) -> str:
        """Do the work and return the text the model reads."""


class ToolRegistry:
    """Tools by name, in registration order (the order the model sees)."""

    def __init__(self, tools: list[Tool[Any]] | None = None) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._specs: list[ToolSpec] | None = None
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        self._specs = None

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        # cached: pydantic's JSON-schema generation costs ~2 ms per round otherwise (bench/README.md)
        if self._specs is None:
            self._specs = [tool.spec for tool in self._tools.values()]
        return list(self._specs)

    def names(self) -> list[str]:
        return list(self._tools)
