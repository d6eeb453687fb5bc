"""The tools of sessions that talk to each other, as the docs print them, are the tools' own: each
JSON schema in docs/guide/agents-talking.md is what the model is offered (descriptions left out),
and the README's one-line signatures name every argument, ``?`` marking the optional ones. A changed
argument fails here until the docs follow."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

from agentgram.runtime.capabilities.tools.base import Tool
from agentgram.runtime.core.peer_tools import (
    ListSessions,
    SendMessage,
    SpawnSession,
    UnwatchSession,
    WatchSession,
)

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "guide" / "agents-talking.md").read_text()
README = (ROOT / "README.md").read_text()
TOOLS = {tool.name: tool for tool in (SpawnSession, SendMessage, ListSessions, WatchSession, UnwatchSession)}


def offered(name: str) -> dict[str, Any]:
    """The tool's parameters as the model gets them (``Tool.spec``), without the descriptions."""
    tool = cast(Tool[Any], object.__new__(TOOLS[name]))  # the spec needs the class, not its services
    return dict(_without_descriptions(tool.spec.parameters))


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def guide_schemas() -> dict[str, dict[str, Any]]:
    """Each ```json block of the guide, under the tool named at the start of the line before it."""
    found: dict[str, dict[str, Any]] = {}
    for match in re.finditer(r"^`(\w+)` →[^\n]*(?:\n[^\n`][^\n]*)*\n\n```json\n(.*?)```", GUIDE, re.M | re.S):
        found[match.group(1)] = json.loads(match.group(2))
    return found


def test_the_guide_prints_each_tools_schema() -> None:
    schemas = guide_schemas()
    assert sorted(schemas) == sorted(TOOLS)
    for name, schema in schemas.items():
        assert schema == offered(name), f"docs/guide/agents-talking.md: {name}'s schema differs"


def test_the_readme_names_each_tools_arguments() -> None:
    block = README.split("## Agents that talk to each other", 1)[1].split("\n## ", 1)[0]
    for name in TOOLS:
        line = re.search(rf"^{name}\s+\{{(.*?)\}}(?:\s|$)", block, re.M | re.S)
        assert line is not None, f"the README does not list {name}"
        written = dict(re.findall(r"(\w+)(\??):", line.group(1)))
        schema = offered(name)
        required = set(schema.get("required", []))
        assert set(written) == set(schema["properties"]), f"README: {name}'s arguments"
        assert {arg for arg, optional in written.items() if not optional} == required, f"README: {name}"
