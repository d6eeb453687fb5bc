"""A session whose ``agent_id`` names another agent than ``main`` (a forum topic's) runs as that
agent at the root: its prompt, only its tools, its model — the prefetched first request too — and
the session's instructions after the group line, the same in every round. An agent the catalog
does not know is ``main``, with one warning per session. Through the real ``openai`` SDK against
the fake server."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from agentgram.runtime.capabilities.agents import AgentCatalog, AgentSpec
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext
from agentgram.runtime.core.prompt import BUILTIN_PROMPT, INSTRUCTIONS_HEADER
from agentgram.runtime.core.turn.request import main_level
from agentgram.runtime.core.turn.subagents import AgentBook
from agentgram.runtime.infra.events import EventBus
from agentgram.runtime.infra.llm.scripted import ScriptedLLM
from agentgram.runtime.infra.storage.models import ChatSession, SessionSource
from agentgram.runtime.infra.storage.sessions import About
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import started_runtime
from tests.runtime.core.turn.scripted import Ask, Hold, build_services

GROUP = -1001234567890
TOPIC = 42
RESEARCHER = """\
---
description: finds facts
tools: [read_file, list_dir]
model: backup
---
You are the researcher. Answer with the fact only.
"""
MODELS = {"models": [{"name": "backup", "model": "backup-model"}]}
GROUP_LINE = "This conversation is the group chat “Team / Research”."


def _agents(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "agents" / "researcher"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text(RESEARCHER)


def _system(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list) and messages[0]["role"] == "system"
    content = messages[0]["content"]
    assert isinstance(content, str)
    return content


def _tools(request: dict[str, object]) -> list[str]:
    tools = request.get("tools") or []
    assert isinstance(tools, list)
    return [tool["function"]["name"] for tool in tools]


async def test_a_topic_session_runs_as_its_agent_with_its_prompt_tools_model_and_instructions(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    _agents(tmp_path)
    fake_llm.script(ToolCalls([Call("list_dir", {})]), Text("Three files."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url, llm=MODELS))
    try:
        about = About(title="Team / Research", agent="researcher", instructions="Cite the file you read.")
        session = await runtime.chat.chat_session(
            GROUP, user_id=1001, language="en", thread_id=TOPIC, about=about
        )
        await runtime.chat.post_user_message(session, "what is in the folder?", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        first, second = fake_llm.requests  # the first is the prefetch's, adopted by the first round
        system = _system(first)
        assert system.startswith("You are the researcher. Answer with the fact only.")
        assert BUILTIN_PROMPT.splitlines()[0] not in system, "the researcher's prompt, not main's"
        assert "Reply in Telegram HTML." in system, "it answers the chat: the chat's format rules too"
        group_at = system.index(GROUP_LINE)
        assert system.index(f"{INSTRUCTIONS_HEADER}\nCite the file you read.") > group_at
        assert _system(second) == system, "byte-identical from round to round"
        assert _tools(first) == _tools(second) == ["read_file", "list_dir"]
        assert first["model"] == second["model"] == "backup-model"
    finally:
        await runtime.close()


async def test_main_in_a_topic_gets_its_own_prompt_and_every_tool_with_the_instructions(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    _agents(tmp_path)
    fake_llm.script(Text("Hi."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url, llm=MODELS))
    try:
        about = About(title="Team / Research", instructions="Cite the file you read.")
        session = await runtime.chat.chat_session(
            GROUP, user_id=1001, language="en", thread_id=TOPIC, about=about
        )
        await runtime.chat.post_user_message(session, "hi", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        [request] = fake_llm.requests
        system = _system(request)
        assert system.startswith(BUILTIN_PROMPT.splitlines()[0]) and "Reply in Telegram HTML." in system
        assert system.index(GROUP_LINE) < system.index(f"{INSTRUCTIONS_HEADER}\nCite the file you read.")
        assert {"read_file", "list_dir", "execute_task"} <= set(_tools(request))
        assert request["model"] == "main-model"
    finally:
        await runtime.close()


async def test_an_agent_the_catalog_does_not_know_is_main_with_one_warning_per_session(
    tmp_path: Path, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    _agents(tmp_path)
    fake_llm.script(Text("One."), Text("Two."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url, llm=MODELS))
    try:
        about = About(title="Team / Research", agent="ghost")
        session = await runtime.chat.chat_session(
            GROUP, user_id=1001, language="en", thread_id=TOPIC, about=about
        )
        with caplog.at_level(logging.WARNING, logger="agentgram.turn"):
            await runtime.chat.post_user_message(session, "one", envelope_id="u1")
            await rec.wait_kind("turn_finished")
            await runtime.chat.post_user_message(session, "two", envelope_id="u2")
            await rec.wait_kind("turn_finished", count=2)
        warnings = [r.getMessage() for r in caplog.records if "'ghost'" in r.getMessage()]
        assert warnings == [
            f"session {session.id} names the agent 'ghost', which agents/ does not define: main answers "
            "instead (agents: main, researcher)"
        ], "once for the session, not at each turn or prefetch"
        for request in fake_llm.requests:
            assert _system(request).startswith(BUILTIN_PROMPT.splitlines()[0])
            assert request["model"] == "main-model"
            assert "execute_task" in _tools(request)
    finally:
        await runtime.close()


class NoArgs(ToolArgs):
    pass


class AsksUser(Tool[NoArgs]):
    """Waits for the user's answer: a headless session is never offered it."""

    name = "ask_the_user"
    description = "asks the user"
    Args = NoArgs
    asks_user = True

    async def execute(self, args: NoArgs, ctx: ToolContext) -> str:
        return "an answer"


@pytest.mark.parametrize(
    ("source", "offered"),
    [(SessionSource.CHAT, ["hold", "ask_the_user"]), (SessionSource.TIC, ["hold"])],
)
async def test_the_root_level_as_an_agent_is_its_allowlist_prompt_and_model_built_once(
    tmp_path: Path, source: SessionSource, offered: list[str]
) -> None:
    researcher = AgentSpec("researcher", prompt="r", model="fast", tools=frozenset({"hold", "ask_the_user"}))
    book = AgentBook(AgentCatalog((AgentSpec("main"), researcher)))
    deps = await build_services(tmp_path, ScriptedLLM.script(), [Hold(), Ask(), AsksUser()], EventBus())
    try:
        deps = replace(deps, agents=book)
        session = ChatSession(id=7, source=source, chat_id=GROUP, agent_id="researcher")
        level = main_level(deps, session)
        assert [spec.name for spec in level.tools.specs()] == offered
        assert (level.agent, level.system, level.model, level.chain) == (
            "researcher",
            "r",
            "fast",
            ("researcher",),
        )
        assert level.is_root and level.depth == 0
        assert main_level(deps, session).tools is level.tools, "built once: the offered specs stay cached"
        main = main_level(deps, ChatSession(id=8, source=source, chat_id=GROUP))
        assert (main.agent, main.system, main.model) == ("main", None, None)
        assert "ask" in [spec.name for spec in main.tools.specs()], "main's own tools: every one"
    finally:
        await deps.db.close()
