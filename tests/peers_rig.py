"""What the tests of sessions that talk to each other (issue 29) share: a helper agent whose
requests go to a model of their own, so the fake OpenAI server answers the chat's agent and the
helper from separate scripts (``FakeOpenAI.on_model(HELPER_MODEL, …)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.openai_server import ToolCalls

HELPER_MODEL = "helper-model"
HELPER = """\
---
description: helps
model: helper
---
You are the helper.
"""
LLM = {"models": [{"name": "helper", "model": HELPER_MODEL}]}
"""The ``llm`` settings that give the helper its model."""


def helper_agent(tmp_path: Path, definition: str = HELPER, name: str = "helper") -> None:
    """``agents/<name>/AGENT.md`` in the workspace the test's settings use."""
    folder = tmp_path / "workspace" / "agents" / name
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(definition)


def call(tool: str, **arguments: Any) -> ToolCalls:
    """One tool call as the model's reply."""
    one: tuple[str, dict[str, Any] | str] = (tool, arguments)
    return ToolCalls([one])
