"""The scripted in-process LLM client (runtime/llm/scripted.py) plays rounds as the real one streams."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentgram.runtime.infra.errors import FailureKind, LLMError
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import (
    ChatMessage,
    ProbeWarning,
    ReasoningDelta,
    StreamEvent,
    StreamStarted,
    TextDelta,
    ToolSpec,
    Usage,
    UserMessage,
)

ASK = [UserMessage("hi")]
TOOLS = [ToolSpec("hold", "waits", {"type": "object"})]


class Events:
    def __init__(self) -> None:
        self.seen: list[StreamEvent] = []
        self.text = asyncio.Event()

    async def __call__(self, event: StreamEvent) -> None:
        self.seen.append(event)
        if isinstance(event, TextDelta):
            self.text.set()


async def test_a_round_streams_its_chunks_after_the_start_and_returns_the_whole() -> None:
    llm = ScriptedLLM.script(Round(chunks=("Hel", "lo"), reasoning="hmm", usage=Usage(3, 2)), model="m")
    sink = Events()
    result = await llm.stream_round(ASK, TOOLS, sink)
    assert sink.seen == [StreamStarted("m"), ReasoningDelta("hmm"), TextDelta("Hel"), TextDelta("lo")]
    assert (result.text, result.reasoning, result.usage, result.model) == ("Hello", "hmm", Usage(3, 2), "m")
    assert llm.requests[0].messages == ASK and llm.requests[0].tools == TOOLS
    assert llm.remaining == 0


async def test_tool_calls_get_ids_unless_given_and_json_arguments() -> None:
    llm = ScriptedLLM.script(Round(calls=[Call("hold", {"n": 1}), Call("ask", id="mine")]))
    result = await llm.stream_round(ASK, TOOLS, Events())
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("call_1", "hold", {"n": 1}),
        ("mine", "ask", {}),
    ]


async def test_the_function_sees_the_request_and_may_be_async() -> None:
    async def model(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        await asyncio.sleep(0)
        return Round(f"{len(messages)} message, {tools[0].name}")

    assert (await ScriptedLLM(model).stream_round(ASK, TOOLS, Events())).text == "1 message, hold"


async def test_an_exception_fails_the_round_and_a_request_past_the_script_fails_the_test() -> None:
    llm = ScriptedLLM.script(LLMError("down", kind=FailureKind.TIMEOUT))
    with pytest.raises(LLMError) as raised:
        await llm.stream_round(ASK, TOOLS, Events())
    assert raised.value.kind == FailureKind.TIMEOUT
    with pytest.raises(AssertionError, match="no round scripted for request 2"):
        await llm.stream_round(ASK, TOOLS, Events())


async def test_a_held_round_is_closed_by_cancelling_it_and_answers_once_released() -> None:
    held = asyncio.Event()
    llm = ScriptedLLM.script(Round(chunks=("partial",), hold=asyncio.Event()), Round("done", hold=held))
    sink = Events()
    request = asyncio.create_task(llm.stream_round(ASK, TOOLS, sink))
    await sink.text.wait()
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert llm.closed == 1
    second = asyncio.create_task(llm.stream_round(ASK, TOOLS, Events()))
    await asyncio.sleep(0)
    held.set()
    assert (await second).text == "done" and llm.closed == 1


async def test_probe_answers_as_configured() -> None:
    assert await ScriptedLLM.script().probe() is None
    warning = ProbeWarning("the key was refused", retry=False)
    assert await ScriptedLLM(lambda m, t: Round(), probe_warning=warning).probe() is warning
