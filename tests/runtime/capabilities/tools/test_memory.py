"""Memory: the remember/recall tools, the prompt's memory block and its per-session snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgram.runtime.capabilities.tools.base import ProtectedPaths, ToolContext
from agentgram.runtime.capabilities.tools.memory import Recall, Remember, memory_tools
from agentgram.runtime.core.approvals.rules import SEEDED_RULES, Action, decide
from agentgram.runtime.core.prompt import MEMORY_HEADER, MemoryPrompt, memory_block, with_memory
from agentgram.runtime.core.turn.gate import call_facts
from agentgram.runtime.infra.config import AgentSettings, ConfigInvalid, settings_from_mapping
from agentgram.runtime.infra.errors import ToolError


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workdir=tmp_path)


async def _remember(ctx: ToolContext, text: str, file: str | None = None) -> str:
    tool = Remember()
    return await tool.execute(tool.parse({"text": text} | ({"file": file} if file else {})), ctx)


async def _recall(ctx: ToolContext, query: str | None = None) -> str:
    tool = Recall()
    return await tool.execute(tool.parse({"query": query} if query else {}), ctx)


async def test_remember_appends_one_item_and_skips_a_repeat(ctx: ToolContext) -> None:
    assert "Remembered" in await _remember(ctx, "Anna's birthday is 3 May")
    assert "Remembered" in await _remember(ctx, "Prefers short answers\nand no emoji")
    assert "Already" in await _remember(ctx, "Anna's birthday is 3 May")
    text = (ctx.workdir / "memory" / "MEMORY.md").read_text()
    assert text == "- Anna's birthday is 3 May\n- Prefers short answers\n  and no emoji\n"


async def test_remember_writes_to_a_named_file_and_never_outside_memory(ctx: ToolContext) -> None:
    await _remember(ctx, "ship v2", "projects/agentgram.md")
    assert (ctx.workdir / "memory" / "projects" / "agentgram.md").read_text() == "- ship v2\n"
    for escape in ("../notes.md", "/etc/passwd", "."):
        with pytest.raises(ToolError, match="inside memory/"):
            await _remember(ctx, "x", escape)


async def test_remember_refuses_a_protected_path(tmp_path: Path) -> None:
    secret = tmp_path / "memory" / "secret.md"
    secret.parent.mkdir()
    secret.write_text("")
    ctx = ToolContext(workdir=tmp_path, protected=ProtectedPaths.of({secret: "it is secret"}))
    with pytest.raises(ToolError, match="denied"):
        await _remember(ctx, "x", "secret.md")


async def test_recall_searches_every_memory_file_best_match_first(ctx: ToolContext) -> None:
    assert "empty" in await _recall(ctx)
    await _remember(ctx, "The cat is called Miso")
    await _remember(ctx, "Miso the cat likes tuna", "pets.md")
    await _remember(ctx, "Car is blue", "car.md")
    hits = (await _recall(ctx, "cat tuna")).splitlines()
    assert hits == ["pets.md:1: - Miso the cat likes tuna", "MEMORY.md:1: - The cat is called Miso"]
    assert "Nothing in memory" in await _recall(ctx, "dog")
    everything = await _recall(ctx)
    assert "## car.md" in everything and "## pets.md" in everything and "Car is blue" in everything


def test_the_default_file_is_the_first_injected_one() -> None:
    remember, recall = memory_tools(AgentSettings(inject_memory=["profile.md", "MEMORY.md"]))
    assert isinstance(remember, Remember) and remember.default_file == "profile.md"
    assert isinstance(recall, Recall)
    assert memory_tools(AgentSettings(inject_memory=[]))[0].default_file == "MEMORY.md"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        (Remember(), {"text": "x"}, Action.ALLOW),
        (Recall(), {}, Action.ALLOW),
    ],
)
def test_the_memory_tools_are_allowed_by_the_seeded_rules(
    ctx: ToolContext, tool: Remember | Recall, args: dict[str, str], expected: Action
) -> None:
    facts = call_facts(tool, tool.parse(args), ctx)  # type: ignore[arg-type]
    assert decide(list(SEEDED_RULES), facts)[0] == expected


def test_inject_memory_refuses_a_path_leaving_memory() -> None:
    for bad in ("../secrets.md", "/etc/passwd", ""):
        with pytest.raises(ConfigInvalid) as caught:
            settings_from_mapping({"llm": {"model": "m"}, "agent": {"inject_memory": [bad]}}, {})
        assert caught.value.problems[0].key == "agent.inject_memory.0"


# --- the prompt ----------------------------------------------------------------------------


def test_memory_block_holds_the_injected_files_in_order_and_is_cut(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("bee\n")
    (tmp_path / "a.md").write_text("ant\n")
    (tmp_path / "empty.md").write_text("  \n")
    block = memory_block(tmp_path, ["b.md", "missing.md", "empty.md", "a.md"], 1000)
    assert block == f"{MEMORY_HEADER}\n\n## b.md\nbee\n\n## a.md\nant"
    assert memory_block(tmp_path, ["missing.md"], 1000) == ""
    assert memory_block(tmp_path, ["a.md"], 0) == ""
    (tmp_path / "long.md").write_text("x" * 500)
    cut = memory_block(tmp_path, ["long.md"], 100)
    assert "x" * 91 not in cut and "use recall" in cut
    assert with_memory("static", "") == "static" and with_memory("static", "m") == "static\n\nm"


def test_a_sessions_memory_stays_as_it_first_read_and_a_new_session_reads_again(tmp_path: Path) -> None:
    notes = tmp_path / "MEMORY.md"
    notes.write_text("- first\n")
    prompt = MemoryPrompt(tmp_path, ["MEMORY.md"], 1000, kept=2)
    before = prompt.for_session(1)
    notes.write_text("- first\n- second\n")
    assert prompt.for_session(1) == before, "byte-identical for the whole session"
    assert "second" in prompt.for_session(2), "the next session reads the files again"
    prompt.for_session(3)
    assert "second" in prompt.for_session(1), "a session the bounded cache let go reads again"
    assert MemoryPrompt(tmp_path, [], 1000).for_session(1) == ""
