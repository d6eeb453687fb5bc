"""OpenAIClient driven through the real ``openai`` SDK against :class:`FakeOpenAI`."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from agentgram.runtime.infra.config import LLMSettings
from agentgram.runtime.infra.errors import FailureKind, LLMError
from agentgram.runtime.infra.llm.openai_client import OpenAIClient, to_openai_message
from agentgram.runtime.infra.llm.types import (
    AssistantMessage,
    ModelFallback,
    ReasoningDelta,
    StreamEvent,
    StreamRestart,
    StreamStarted,
    SystemMessage,
    TextDelta,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.fakes.openai_server import BadChunk, Drop, Error, FakeOpenAI, Hang, StreamError, Text, ToolCalls

HELLO = [SystemMessage("be brief"), UserMessage("hi")]
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
SHELL = ToolSpec("shell", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})


class Sink:
    """Collects the events of a round; ``started`` holds the start of each attempt apart."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.started: list[StreamStarted] = []

    async def __call__(self, event: StreamEvent) -> None:
        if isinstance(event, StreamStarted):
            self.started.append(event)
            assert not self.events or isinstance(self.events[-1], ModelFallback | StreamRestart), (
                "a start comes first"
            )
        else:
            self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main", "backup")) as server:
        yield server


def make_client(fake: FakeOpenAI, **overrides: Any) -> OpenAIClient:
    fields: dict[str, Any] = {"base_url": fake.base_url, "model": "main", "max_retries": 1}
    fields.update(overrides)
    return OpenAIClient(LLMSettings(**fields), retry_base_delay=0.01)


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[OpenAIClient]:
    llm = make_client(fake, fallback_models=["backup"])
    yield llm
    await llm.aclose()


async def test_streamed_text_forwards_deltas_in_order_and_records_usage(fake, client):
    fake.script(Text("Hello there, friend!", chunk_size=5, usage=(42, 7)))
    sink = Sink()
    result = await client.stream_round(HELLO, [], sink)
    assert [e.text for e in sink.of(TextDelta)] == ["Hello", " ther", "e, fr", "iend!"]
    assert sink.started == [StreamStarted("main")], "told once the endpoint took the request"
    assert result.text == "Hello there, friend!"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (42, 7)
    assert result.model == "main"
    body = fake.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert "tools" not in body
    fake.assert_complete()


async def test_two_tool_calls_with_fragmented_arguments_keep_order(fake, client):
    fake.script(
        ToolCalls(
            [("read_file", {"path": "/etc/hosts"}), ("shell", {"cmd": "ls -la /tmp"})], text="Let me look."
        )
    )
    result = await client.stream_round(HELLO, [READ, SHELL], Sink())
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_1", "read_file"), ("call_2", "shell")]
    assert json.loads(result.tool_calls[0].arguments) == {"path": "/etc/hosts"}
    assert json.loads(result.tool_calls[1].arguments) == {"cmd": "ls -la /tmp"}
    assert result.text == "Let me look."
    tools = fake.requests[0]["tools"]
    assert tools[0] == {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file", "parameters": READ.parameters},
    }


async def test_tool_round_trip_is_accepted_by_the_strict_fake(fake, client):
    call = ToolCallRequest("call_9", "read_file", '{"path": "a"}')
    history = [*HELLO, AssistantMessage("", (call,)), ToolMessage("call_9", "contents"), UserMessage("and?")]
    fake.script(Text("done"))
    result = await client.stream_round(history, [READ], Sink())
    assert result.text == "done"
    sent = fake.requests[0]["messages"][2]
    assert sent == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a"}'},
            }
        ],
    }


async def test_unpaired_tool_call_is_a_non_retriable_400(fake, client):
    call = ToolCallRequest("call_1", "read_file", "{}")
    with pytest.raises(LLMError) as info:
        await client.stream_round(
            [*HELLO, AssistantMessage("", (call,)), UserMessage("next")], [READ], Sink()
        )
    assert info.value.status == 400 and not info.value.retriable
    assert "tool_call_id" in str(info.value)
    assert fake.calls == 1  # neither retried nor sent to the fallback model


async def test_reasoning_content_is_kept_and_forwarded_before_text(fake, client):
    fake.script(Text("42", reasoning="think think", chunk_size=4))
    sink = Sink()
    result = await client.stream_round(HELLO, [], sink)
    assert result.reasoning == "think think" and result.text == "42"
    kinds = [type(e) for e in sink.events]
    assert kinds == [ReasoningDelta, ReasoningDelta, ReasoningDelta, TextDelta]


async def test_429_is_retried_on_the_same_model_honouring_retry_after(fake, client):
    fake.script(Error(429, "Rate limit reached", retry_after=0.2), Text("ok"))
    sink = Sink()
    started = time.monotonic()
    result = await client.stream_round(HELLO, [], sink)
    assert time.monotonic() - started >= 0.2
    assert result.text == "ok" and result.model == "main"
    assert [r["model"] for r in fake.requests] == ["main", "main"]
    assert sink.of(ModelFallback) == []


async def test_500_on_primary_falls_back_and_tells_the_sink(fake, client):
    fake.on_model("main", Error(500, "boom"), Error(503, "still down"))
    fake.on_model("backup", Text("from backup"))
    sink = Sink()
    result = await client.stream_round(HELLO, [], sink)
    assert result.text == "from backup" and result.model == "backup"
    assert [r["model"] for r in fake.requests] == ["main", "main", "backup"]
    [fallback] = sink.of(ModelFallback)
    assert (fallback.failed_model, fallback.next_model) == ("main", "backup")
    assert "503" in fallback.reason
    fake.assert_complete()


async def test_all_models_failing_raises_retriable_error_without_the_key(fake):
    llm = make_client(fake, api_key=SecretStr("sk-secret-123"), fallback_models=["backup"], max_retries=0)
    fake.script(Error(500, "down"), Error(500, "down, key sk-secret-123"))
    with pytest.raises(LLMError) as info:
        await llm.stream_round(HELLO, [], Sink())
    assert info.value.retriable and info.value.status == 500
    assert "sk-secret-123" not in str(info.value)
    await llm.aclose()


async def test_401_raises_non_retriable_at_once_without_fallback(fake, client):
    fake.script(Error(401, "Incorrect API key provided"))
    sink = Sink()
    with pytest.raises(LLMError) as info:
        await client.stream_round(HELLO, [], sink)
    assert info.value.status == 401 and not info.value.retriable
    assert fake.calls == 1 and sink.events == []


async def test_retry_after_partial_output_tells_the_sink_to_restart(fake, client):
    fake.script(Drop("partial "), Text("whole answer"))
    sink = Sink()
    result = await client.stream_round(HELLO, [], sink)
    assert result.text == "whole answer"
    assert sink.events[0] == TextDelta("partial ")
    assert isinstance(sink.events[1], StreamRestart) and sink.events[1].model == "main"
    assert sink.of(ModelFallback) == [], "the same model again is no fallback"


async def test_a_fallback_naming_the_primary_is_not_a_fallback(fake):
    """Regression: "main isn't responding, switching to main" when the config listed it twice."""
    llm = make_client(fake, fallback_models=["main", "backup", "main"], max_retries=0)
    assert llm.models == ["main", "backup"]
    fake.script(Error(500, "down"), Error(500, "down too"))
    sink = Sink()
    with pytest.raises(LLMError) as info:
        await llm.stream_round(HELLO, [], sink)
    assert [(f.failed_model, f.next_model) for f in sink.of(ModelFallback)] == [("main", "backup")]
    assert [r["model"] for r in fake.requests] == ["main", "backup"]
    assert info.value.model == "backup"
    await llm.aclose()


# --- classification: what the user is told comes from here, once ---------------------


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (Error(500, "The server had an error while processing your request."), FailureKind.UNAVAILABLE, 500),
        (Error(503, "overloaded"), FailureKind.UNAVAILABLE, 503),
        (Error(429, "Rate limit reached for requests"), FailureKind.RATE_LIMITED, 429),
        (Error(401, "Incorrect API key provided"), FailureKind.AUTH_FAILED, 401),
        (Error(403, "Country, region, or territory not supported"), FailureKind.AUTH_FAILED, 403),
        (Error(404, "The model `main` does not exist"), FailureKind.MODEL_NOT_FOUND, 404),
        (
            Error(400, "This model's maximum context length is 8192 tokens. However, you requested 9000."),
            FailureKind.CONTEXT_TOO_LONG,
            400,
        ),
        (Error(400, "Invalid value for 'temperature'."), FailureKind.BAD_REQUEST, 400),
        (Error(422, "Unprocessable entity"), FailureKind.BAD_REQUEST, 422),
        (Drop("half an ans"), FailureKind.STREAM_CUT, None),
    ],
)
async def test_each_failure_is_classified_with_the_servers_words_not_the_sdks(fake, reply, kind, status):
    llm = make_client(fake, max_retries=1)
    fake.handler = lambda body: reply  # every attempt fails alike
    with pytest.raises(LLMError) as info:
        await llm.stream_round(HELLO, [], Sink())
    error = info.value
    assert (error.kind, error.status, error.model) == (kind, status, "main")
    assert error.failure.kind == kind and error.retriable == kind.retriable
    assert fake.calls == (2 if kind.retriable else 1), "only a retriable kind is retried"
    assert "Error code" not in str(error), "the SDK's wrapping stays out"
    if isinstance(reply, Error):
        assert str(error).endswith(f"HTTP {status}: {reply.message}")
    await llm.aclose()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (BadChunk("so far "), "malformed response from the LLM endpoint"),
        (StreamError("so far ", message="overloaded mid-stream"), "stream error: overloaded mid-stream"),
    ],
)
async def test_a_broken_stream_event_cuts_the_stream_after_the_text_it_forwarded(fake, reply, reason):
    llm = make_client(fake, max_retries=0)
    fake.script(reply)
    sink = Sink()
    with pytest.raises(LLMError) as info:
        await llm.stream_round(HELLO, [], sink)
    assert (info.value.kind, str(info.value)) == (FailureKind.STREAM_CUT, f"LLM unavailable: {reason}")
    assert [e.text for e in sink.of(TextDelta)] == ["so far "]
    await llm.aclose()


@pytest.mark.parametrize(
    "raw",
    [
        "5",
        '["a list"]',
        '{"choices": "not a list"}',
        '{"choices": [null, {"delta": {"content": "not the first choice"}}]}',
        '{"choices": [{"delta": {"content": 7, "reasoning": ["x"], "tool_calls": [3, null]}}]}',
        '{"choices": [{"delta": {"tool_calls": "none"}}], "usage": {"prompt_tokens": "many"}}',
    ],
)
async def test_a_chunk_of_the_wrong_shape_is_read_as_empty_and_the_answer_goes_on(fake, raw):
    llm = make_client(fake, max_retries=0)
    fake.script(BadChunk("the answer", raw=raw))
    sink = Sink()
    answer = await llm.stream_round(HELLO, [], sink)
    assert (answer.text, answer.reasoning, answer.tool_calls) == ("the answer", "", [])
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (10, 5)
    assert [e.text for e in sink.of(TextDelta)] == ["the answer"]
    await llm.aclose()


async def test_a_stalled_answer_is_a_timeout(fake):
    llm = make_client(fake, request_timeout=0.3, max_retries=0)
    fake.script(Hang(seconds=5))
    with pytest.raises(LLMError) as info:
        await llm.stream_round(HELLO, [], Sink())
    assert (info.value.kind, info.value.status) == (FailureKind.TIMEOUT, None)
    assert info.value.retriable
    await llm.aclose()


async def test_a_closed_port_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAIClient(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0))
    with pytest.raises(LLMError) as info:
        await llm.stream_round(HELLO, [], Sink())
    assert (info.value.kind, info.value.status, info.value.model) == (FailureKind.UNREACHABLE, None, "m")
    await llm.aclose()


async def test_a_wrong_key_is_an_authentication_failure():
    async with FakeOpenAI(models=("main",), api_key="sk-right") as server:
        llm = make_client(server, api_key=SecretStr("sk-wrong"))
        with pytest.raises(LLMError) as info:
            await llm.stream_round(HELLO, [], Sink())
        assert (info.value.kind, info.value.status) == (FailureKind.AUTH_FAILED, 401)
        assert server.calls == 1
        await llm.aclose()


async def test_cancelling_a_hanging_stream_closes_the_http_stream(fake, client):
    fake.script(Hang("thinking…", seconds=30))
    sink = Sink()
    first_text = asyncio.Event()

    async def on_event(event: StreamEvent) -> None:
        await sink(event)
        if sink.events:
            first_text.set()

    task = asyncio.create_task(client.stream_round(HELLO, [], on_event))
    await asyncio.wait_for(first_text.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.wait_stream_closed(timeout=1.0)
    assert fake.closed_streams == 1
    assert sink.events == [TextDelta("thinking…")]


async def test_cancelling_while_the_sink_is_busy_closes_the_http_stream(fake, client):
    """Regression: cancellation arriving outside the SDK's iterator must still close the response."""
    fake.script(Hang("partial", seconds=30))
    entered = asyncio.Event()

    async def slow_sink(event: StreamEvent) -> None:
        entered.set()
        await asyncio.Event().wait()  # e.g. a Telegram edit that never returns

    task = asyncio.create_task(client.stream_round(HELLO, [], slow_sink))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.wait_stream_closed(timeout=1.0)


async def test_probe_ok(fake, client):
    assert await client.probe() is None


async def test_probe_warns_on_missing_model(fake):
    llm = make_client(fake, model="nope")
    warning = await llm.probe()
    assert warning is not None and "nope" in warning.text and not warning.retry
    await llm.aclose()


async def test_probe_warns_on_bad_key():
    async with FakeOpenAI(api_key="sk-right") as server:
        llm = make_client(server, api_key=SecretStr("sk-wrong"))
        warning = await llm.probe()
        assert warning is not None and "401" in warning.text and not warning.retry
        await llm.aclose()


async def test_probe_warns_on_unreachable_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAIClient(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m"))
    warning = await llm.probe()
    assert warning is not None and "unreachable" in warning.text and warning.retry
    await llm.aclose()


def test_assistant_text_without_calls_has_no_tool_calls_key():
    assert to_openai_message(AssistantMessage("hi")) == {"role": "assistant", "content": "hi"}
