"""Sub-agents with the scripted LLM: inline children, parallel batches, /stop, restart repair, tools per level."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentgram.runtime.capabilities.agents import AgentCatalog, AgentSpec
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolRegistry, ToolScope
from agentgram.runtime.capabilities.tools.builtin import builtin_tools
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.deps import ChosenModels
from agentgram.runtime.core.turn.subagents import (
    EXECUTE_TASK,
    MAX_DEPTH,
    AgentBook,
    ExecuteTask,
    child_level,
    root_level,
)
from agentgram.runtime.infra.config import LLMSettings, settings_from_mapping
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import (
    ApprovalRequested,
    OutcomeKind,
    SubAgentFinished,
    SubAgentStarted,
    ToolActivity,
    ToolPhase,
)
from agentgram.runtime.infra.llm.models import ModelRegistry
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import (
    ChatMessage,
    LLMRound,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentgram.runtime.infra.storage.models import ChatSession, StackFrame, ToolCallRow, ToolCallStatus
from agentgram.runtime.infra.storage.usage_rows import SessionModels, UsageStore
from tests.runtime.core.turn.scripted import HubRig, events_of, hub_rig

ROOT = "You are a test."
RESEARCHER = "You are the researcher."
CATALOG = AgentCatalog(
    (AgentSpec("main"), AgentSpec("researcher", prompt=RESEARCHER, description="finds things out"))
)


def task_call(task: str, agent: str = "researcher") -> Call:
    return Call(EXECUTE_TASK, {"agent": agent, "task": task})


def with_agents(rig: HubRig, *, parallel: int = 4) -> HubRig:
    rig.services.tools.register(ExecuteTask(CATALOG))
    rig.configure(agents=AgentBook(CATALOG), max_parallel_subagents=parallel)
    return rig


def system(messages: list[ChatMessage]) -> str:
    first = messages[0]
    assert isinstance(first, SystemMessage)
    return first.content


def task_of(messages: list[ChatMessage]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))


def results(messages: list[ChatMessage]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolMessage)]


@dataclass
class Children:
    """Children that answer once the test releases their task; counts how many run at once."""

    release: dict[str, asyncio.Event] = field(default_factory=dict)
    active: int = 0
    peak: int = 0
    started: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def gate(self, task: str) -> asyncio.Event:
        return self.release.setdefault(task, asyncio.Event())

    async def answer(self, task: str) -> Round:
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.started.append(task)
        self.changed.set()
        try:
            await self.gate(task).wait()
        finally:
            self.active -= 1
        return Round(f"answer to {task}")

    async def until(self, predicate: Any) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), 5.0)


def parent_then_children(children: Children, *tasks: str) -> ScriptedLLM:
    async def model(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        if system(messages) == ROOT:
            done = results(messages)
            if not done:
                return Round(calls=[task_call(t) for t in tasks])
            return Round("all done: " + " | ".join(done))
        return await children.answer(task_of(messages))

    return ScriptedLLM(model)


async def calls_of(rig: HubRig, session: ChatSession) -> list[ToolCallRow]:
    async with rig.db.read() as tx:
        from sqlmodel import col, select

        rows = await tx.exec(
            select(ToolCallRow)
            .where(ToolCallRow.session_id == session.id, ToolCallRow.name == EXECUTE_TASK)
            .order_by(col(ToolCallRow.id))
        )
        return list(rows.all())


async def frames_of(rig: HubRig, session: ChatSession) -> list[StackFrame]:
    async with rig.db.read() as tx:
        from sqlmodel import col, select

        rows = await tx.exec(
            select(StackFrame)
            .where(StackFrame.session_id == session.id, col(StackFrame.depth) > 0)
            .order_by(col(StackFrame.id))
        )
        return list(rows.all())


async def test_a_sub_agent_answers_inline_and_its_answer_is_the_calls_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = Children()
    children.gate("look it up").set()
    llm = parent_then_children(children, "look it up")
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        with_agents(rig)
        session = await rig.chat()
        await rig.say(session, "research please")
        [finished] = await rig.turns_finished()
        assert finished.text == "all done: answer to look it up"
        child_request = llm.requests[1]
        assert system(child_request.messages) == RESEARCHER
        assert [task_of(child_request.messages)] == [
            m.content for m in child_request.messages if isinstance(m, UserMessage)
        ]  # the child's history is its own: only its task, nothing of the parent's conversation
        assert "research please" not in str(child_request.messages)
        last_root = llm.requests[2].messages
        assert "look it up" not in [m.content for m in last_root if isinstance(m, UserMessage)]
        [started] = events_of(rig.rec, SubAgentStarted)
        assert (started.parent, started.agent, started.depth) == ("main", "researcher", 1)
        [done] = events_of(rig.rec, SubAgentFinished)
        assert done.ok and done.preview == "answer to look it up"
        assert [f.active for f in await frames_of(rig, session)] == [False]


async def test_an_agent_that_names_a_model_asks_that_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = ScriptedLLM.script(Round(calls=[task_call("summarise", "summariser")]), Round("relayed"))
    asked: list[str] = []

    def fast_model(settings: LLMSettings) -> ScriptedLLM:
        def answer(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
            asked.append(task_of(messages))
            return Round("the gist")

        return ScriptedLLM(answer, model=settings.model)

    catalog = AgentCatalog((AgentSpec("main"), AgentSpec("summariser", prompt="Summarise.", model="fast")))
    async with hub_rig(tmp_path, parent, monkeypatch) as rig:
        llm_settings = settings_from_mapping(
            {"llm": {"model": "main", "models": [{"name": "fast", "model": "small-1"}]}}, {}
        ).llm
        registry = ModelRegistry(llm_settings, parent, factory=fast_model)
        rig.services.tools.register(ExecuteTask(catalog))
        rig.configure(
            models=ChosenModels(SessionModels(registry, UsageStore(rig.services.db))),
            agents=AgentBook(catalog),
        )
        session = await rig.chat()
        await rig.say(session, "shorten it")
        await rig.turns_finished()
        assert asked == ["summarise"], "the child's round went to the model its definition names"
        assert len(parent.requests) == 2, "the parent's rounds stay on the session's model"
        assert results(parent.requests[1].messages) == ["the gist"]


async def test_a_sub_agents_tool_call_is_gated_and_its_prompt_reaches_the_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def model(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        if system(messages) == ROOT:
            return Round("parent done") if results(messages) else Round(calls=[task_call("ask for me")])
        return (
            Round("child done: " + results(messages)[0]) if results(messages) else Round(calls=[Call("ask")])
        )

    async with hub_rig(tmp_path, ScriptedLLM(model), monkeypatch) as rig:
        with_agents(rig)
        session = await rig.chat()
        await rig.say(session, "go")
        await rig.rec.wait_kind("approval_requested")
        [asked] = events_of(rig.rec, ApprovalRequested)
        assert asked.to.session_id == session.id and asked.to.chat_id == session.chat_id
        assert asked.details.tool_name == "ask"
        await rig.services.approvals.decide(asked.request_id, True, None)
        [finished] = await rig.turns_finished()
        assert finished.text == "parent done"
        [call] = await calls_of(rig, session)
        assert call.result == "child done: asked and done"


async def test_a_parallel_batch_is_bounded_and_recorded_in_call_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = Children()
    llm = parent_then_children(children, "one", "two", "three")
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        with_agents(rig, parallel=2)
        session = await rig.chat()
        await rig.say(session, "three things")
        await children.until(lambda: children.active == 2)
        await asyncio.sleep(0.05)  # a third would have started by now if the bound let it
        assert sorted(children.started) == ["one", "two"]  # the first two, in whichever order
        children.gate("two").set()  # finishing order: two, three, one
        await children.until(lambda: "three" in children.started)
        children.gate("three").set()
        await children.until(lambda: children.active == 1)
        children.gate("one").set()
        [finished] = await rig.turns_finished()
        assert children.peak == 2
        assert finished.text == "all done: answer to one | answer to two | answer to three"
        calls = await calls_of(rig, session)
        assert [c.result for c in calls] == ["answer to one", "answer to two", "answer to three"]
        assert [c.position for c in calls] == [0, 1, 2]  # rows allocated in call order up front
        finished_at = [c.finished_at for c in calls if c.finished_at is not None]
        assert len(finished_at) == 3 and finished_at == sorted(
            finished_at
        )  # recorded in call order, not finishing order
        done = [
            e.tool_call_id
            for e in events_of(rig.rec, ToolActivity)
            if e.name == EXECUTE_TASK and e.phase is ToolPhase.DONE
        ]
        assert done == [c.id for c in calls]
        finished_agents = [e.tool_call_id for e in events_of(rig.rec, SubAgentFinished)]
        assert finished_agents == [calls[1].id, calls[2].id, calls[0].id]


async def test_one_stop_cancels_every_child_of_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = Children()
    llm = parent_then_children(children, "left", "right")
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        with_agents(rig)
        session = await rig.chat()
        await rig.say(session, "both")
        await children.until(lambda: children.active == 2)
        assert await rig.stop(session)
        [finished] = await rig.turns_finished()
        assert finished.outcome == OutcomeKind.CANCELLED
        assert children.active == 0  # both children's requests were closed
        calls = await calls_of(rig, session)
        assert [c.status for c in calls] == [ToolCallStatus.CANCELLED, ToolCallStatus.CANCELLED]
        assert [f.active for f in await frames_of(rig, session)] == [False, False]


async def test_a_restart_resumes_an_interrupted_child_and_its_answer_reaches_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = Children()
    llm = parent_then_children(children, "long job")
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        with_agents(rig)
        session = await rig.chat()
        await rig.say(session, "go")
        await children.until(lambda: children.active == 1)
        await rig.hub.shutdown()  # the process dies: turn running, child frame active
    children.gate("long job").set()
    async with hub_rig(tmp_path, llm, monkeypatch) as again:
        with_agents(again)
        [turn] = await again.services.sessions.open_turns()
        again.hub.resume(session.id or 0, turn.id or 0)
        [finished] = await again.turns_finished()
        assert finished.text == "all done: answer to long job"
        assert children.started == ["long job", "long job"]  # the child's turn ran again
        [call] = await calls_of(again, session)
        assert (call.status, call.result) == (ToolCallStatus.DONE, "answer to long job")
        assert [f.active for f in await frames_of(again, session)] == [False]


async def test_a_completed_child_that_never_propagated_gives_its_stored_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = Children()
    llm = parent_then_children(children, "long job")
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        with_agents(rig)
        session = await rig.chat()
        await rig.say(session, "go")
        await children.until(lambda: children.active == 1)
        await rig.hub.shutdown()
        [frame] = await frames_of(rig, session)
        [turn] = await rig.services.sessions.open_turns()
        await rig.services.history.record_round(  # the child's answer landed, then the process died
            session_id=session.id or 0,
            turn_id=turn.id or 0,
            result=LLMRound(text="stored answer"),
            stack_id=frame.id,
        )
    async with hub_rig(tmp_path, llm, monkeypatch) as again:
        with_agents(again)
        again.hub.resume(session.id or 0, turn.id or 0)
        [finished] = await again.turns_finished()
        assert finished.text == "all done: stored answer"
        assert children.started == ["long job"]  # not asked again
        assert [f.active for f in await frames_of(again, session)] == [False]


async def test_an_interrupted_batch_is_reaped_and_the_parent_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = Children()
    llm = parent_then_children(children, "a", "b", "c")
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        with_agents(rig, parallel=2)
        session = await rig.chat()
        await rig.say(session, "batch")
        await children.until(lambda: children.active == 2)
        await rig.hub.shutdown()  # a and b have frames, c never started
        [turn] = await rig.services.sessions.open_turns()
        first_call = (await calls_of(rig, session))[0]
        [frame_a] = [f for f in await frames_of(rig, session) if f.parent_tool_call_id == first_call.id]
        await rig.services.history.record_round(  # a had answered before the crash
            session_id=session.id or 0,
            turn_id=turn.id or 0,
            result=LLMRound(text="a's answer"),
            stack_id=frame_a.id,
        )
    async with hub_rig(tmp_path, llm, monkeypatch) as again:
        with_agents(again, parallel=2)
        again.hub.resume(session.id or 0, turn.id or 0)
        [finished] = await again.turns_finished()
        interrupted = texts.SUBAGENT_INTERRUPTED
        assert finished.text == f"all done: a's answer | {interrupted} | {interrupted}"
        calls = await calls_of(again, session)
        assert [c.status for c in calls] == [
            ToolCallStatus.DONE,
            ToolCallStatus.FAILED,
            ToolCallStatus.FAILED,
        ]
        assert [f.active for f in await frames_of(again, session)] == [False, False]
        assert sorted(children.started) == ["a", "b"]  # nothing re-run after the restart


# --- tools per level ------------------------------------------------------------------------------


class NoArgs(ToolArgs):
    pass


class Probe(Tool[NoArgs]):
    name = "probe"
    description = "probe"
    Args = NoArgs

    async def execute(self, args: NoArgs, ctx: ToolContext) -> str:
        return ""


class RootOnly(Probe):
    name = "root_thing"
    scope = ToolScope.ROOT_ONLY


class PerLevel(Probe):
    name = "ask_user_clarification"
    scope = ToolScope.PER_LEVEL


@pytest.mark.parametrize(
    "allowlist", [None, frozenset({"read_file", EXECUTE_TASK, "ask_user_clarification", "root_thing"})]
)
def test_no_sub_agent_at_any_depth_has_a_tool_name_twice(allowlist: frozenset[str] | None) -> None:
    catalog = AgentCatalog((AgentSpec("main"), AgentSpec("deep", prompt="deep", tools=allowlist)))
    book = AgentBook(catalog)
    root = ToolRegistry([*builtin_tools(), ExecuteTask(catalog), PerLevel(), RootOnly()])
    level = root_level(root)
    for depth in range(1, MAX_DEPTH + 1):
        level = child_level(level, catalog.get("deep") or AgentSpec("deep"), depth, book)
        names = [spec.name for spec in level.tools.specs()]
        assert len(names) == len(set(names)), names
        assert level.depth == depth
        assert "root_thing" not in names
        assert names.count("ask_user_clarification") == 1
        assert (EXECUTE_TASK in names) == (depth < MAX_DEPTH)
        assert ("read_file" in names) is True
        if allowlist is not None:
            assert set(names) <= allowlist


def test_the_chats_own_tools_never_reach_a_sub_agent() -> None:
    from agentgram.runtime.capabilities.tools.notes import WriteTodos
    from agentgram.runtime.scheduler.tools import schedule_tools

    chat_only = [*schedule_tools(None), WriteTodos(None, None)]  # type: ignore[arg-type]
    root = ToolRegistry([*builtin_tools(), ExecuteTask(CATALOG), *chat_only])
    child = child_level(root_level(root), AgentSpec("researcher", prompt="r"), 1, AgentBook(CATALOG))
    names = {spec.name for spec in child.tools.specs()}
    assert names.isdisjoint(tool.name for tool in chat_only), "jobs and the todo list are the chat's"
    assert {"read_file", EXECUTE_TASK} <= names


def test_no_level_below_the_limit() -> None:
    from agentgram.runtime.infra.errors import ToolError

    book = AgentBook(CATALOG)
    level = root_level(ToolRegistry([ExecuteTask(CATALOG)]))
    for depth in range(1, MAX_DEPTH + 1):
        level = child_level(level, CATALOG.get("researcher") or AgentSpec("researcher"), depth, book)
    with pytest.raises(ToolError):
        child_level(level, CATALOG.get("researcher") or AgentSpec("researcher"), 99, book)


def test_a_sub_agents_static_prompt_is_built_once_and_stays_byte_identical() -> None:
    book = AgentBook(CATALOG, prompt=lambda spec: f"{spec.prompt} #{len(seen)}")
    seen: list[int] = []
    spec = CATALOG.get("researcher")
    assert spec is not None
    first = book.static_prompt(spec)
    seen.append(1)
    assert book.static_prompt(spec) == first


async def test_an_unknown_agent_is_a_failed_result_the_parent_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def model(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        return Round("ok") if results(messages) else Round(calls=[task_call("x", agent="nobody")])

    async with hub_rig(tmp_path, ScriptedLLM(model), monkeypatch) as rig:
        with_agents(rig)
        session = await rig.chat()
        await rig.say(session, "go")
        await rig.turns_finished()
        [call] = await calls_of(rig, session)
        assert call.status == ToolCallStatus.FAILED
        assert call.result == texts.unknown_agent("nobody", ["main", "researcher"])


async def test_execute_task_outside_a_turn_is_an_error_the_model_reads(tmp_path: Path) -> None:
    tool = ExecuteTask(CATALOG)
    args = tool.parse({"agent": "researcher", "task": "x"})
    with pytest.raises(ToolError) as raised:
        await tool.execute(args, ToolContext(workdir=tmp_path))  # NO_SUB_AGENTS
    assert str(raised.value) == "sub-agents can only be started from a turn"
