"""A session's instructions (a forum topic's configured prompt) in its static system message: after
the line naming the group, before the memory, under one header, the same at every build."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agentgram.runtime.core.prompt import INSTRUCTIONS_HEADER, MemoryPrompt, in_group, with_instructions
from agentgram.runtime.infra.events import EventBus
from agentgram.runtime.infra.llm.scripted import ScriptedLLM
from tests.runtime.core.turn.scripted import build_services


@pytest.mark.parametrize("instructions", [None, "", "  \n "])
def test_no_instructions_leave_the_prompt_as_it_is(instructions: str | None) -> None:
    assert with_instructions("static", instructions) == "static"


def test_instructions_come_under_their_header_without_the_spaces_around_them() -> None:
    assert with_instructions("static", "\n Cite sources.\nBe brief. \n") == (
        f"static\n\n{INSTRUCTIONS_HEADER}\nCite sources.\nBe brief."
    )


async def test_a_sessions_static_message_is_prompt_group_instructions_memory_and_stable(
    tmp_path: Path,
) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "MEMORY.md").write_text("The user likes tea.\n")
    deps = await build_services(tmp_path, ScriptedLLM.script(), [], EventBus())
    try:
        deps = replace(deps, memory=MemoryPrompt(tmp_path / "memory", ["MEMORY.md"], 1000))
        built = deps.context_for(
            7, title="Team / Research", instructions="Cite the file you read."
        ).static_system
        prompt = in_group("You are a test.", "Team / Research")
        assert built.startswith(f"{prompt}\n\n{INSTRUCTIONS_HEADER}\nCite the file you read.\n\n# Memory")
        assert built.endswith("The user likes tea.")
        (tmp_path / "memory" / "MEMORY.md").write_text("The user likes coffee.\n")
        again = deps.context_for(7, title="Team / Research", instructions="Cite the file you read.")
        assert again.static_system == built, "byte-identical for the whole session"
        plain = deps.context_for(8, title="Team / Research").static_system
        assert INSTRUCTIONS_HEADER not in plain and plain.startswith(f"{prompt}\n\n# Memory")
    finally:
        await deps.db.close()
