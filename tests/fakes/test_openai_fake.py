"""FakeOpenAI itself: strict validation, scripting, and the wire format the SDK parses."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.fakes.openai_server import (
    BadChunk,
    Call,
    Cut,
    Error,
    FakeOpenAI,
    FaultKind,
    GatewayTimeout,
    StreamError,
    Text,
    ToolCalls,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def sdk(fake: FakeOpenAI) -> AsyncIterator[AsyncOpenAI]:
    client = AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0)
    yield client
    await client.close()


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


async def test_unpaired_tool_call_is_400(fake, sdk):
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_a"), call("call_b")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    with pytest.raises(openai.BadRequestError) as info:
        await sdk.chat.completions.create(model="gpt-test", messages=messages)
    assert "must be followed by tool messages responding to each 'tool_call_id'" in info.value.message
    assert "call_b" in info.value.message


async def test_stray_tool_message_is_400(fake, sdk):
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "?"}]
    with pytest.raises(openai.BadRequestError) as info:
        await sdk.chat.completions.create(model="gpt-test", messages=messages)
    assert "must be a response to a preceeding message with 'tool_calls'" in info.value.message


async def test_duplicate_tool_names_are_400(fake, sdk):
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError):
        await sdk.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], tools=[tool, tool]
        )


async def test_missing_messages_is_400(fake, sdk):
    with pytest.raises(openai.BadRequestError) as info:
        await sdk.post("/chat/completions", body={"model": "gpt-test"}, cast_to=object)
    assert "messages" in info.value.message


async def test_no_scripted_reply_fails_loudly(fake, sdk):
    with pytest.raises(openai.InternalServerError) as info:
        await sdk.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert "FakeOpenAI: no scripted reply" in info.value.message


async def test_non_streamed_completion_parses(fake, sdk):
    fake.script(ToolCalls([Call("f", {"a": 1}, id="call_own")], text="sure"))
    done = await sdk.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    message = done.choices[0].message
    assert message.content == "sure" and done.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None and message.tool_calls[0].id == "call_own"
    assert done.usage is not None and done.usage.total_tokens == 15


async def test_streamed_chunks_and_usage_only_when_asked(fake, sdk):
    fake.script(Text("abcdef", chunk_size=2), Text("xy"))
    messages = [{"role": "user", "content": "hi"}]
    stream = await sdk.chat.completions.create(
        model="gpt-test", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "abcdef"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    stream = await sdk.chat.completions.create(model="gpt-test", messages=messages, stream=True)
    assert all(c.usage is None for c in [c async for c in stream])
    fake.assert_complete()


async def test_error_reply_carries_retry_after(fake, sdk):
    fake.script(Error(429, "slow down", retry_after=2))
    with pytest.raises(openai.RateLimitError) as info:
        await sdk.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.code == "rate_limit_exceeded"


async def test_handler_computes_replies_and_wait_for_requests(fake, sdk):
    fake.handler = lambda body: Text(f"echo {body['messages'][-1]['content']}")
    done = await sdk.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hey"}])
    await fake.wait_for_requests(1)
    assert done.choices[0].message.content == "echo hey"


async def test_assert_complete_reports_leftovers(fake):
    fake.on_model("other", Text("never"))
    with pytest.raises(AssertionError, match="never requested"):
        fake.assert_complete()


# ------------------------------------------------------------------------------------------ faults
HI: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


async def stream_text(sdk: AsyncOpenAI) -> tuple[str, str | None]:
    """The streamed text and the last finish_reason seen."""
    stream = await sdk.chat.completions.create(model="gpt-test", messages=HI, stream=True)
    text, finish = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish


@pytest.mark.parametrize(
    ("status", "html"), [(500, False), (502, False), (502, True), (503, False), (503, True)]
)
async def test_5xx_errors_are_internal_server_errors(fake, sdk, status, html):
    fake.script(Error(status, "boom", html=html))
    with pytest.raises(openai.InternalServerError) as info:
        await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert info.value.status_code == status
    if html:
        assert info.value.response.headers["content-type"].startswith("text/html")
        assert f"<title>{status} " in info.value.response.text
    else:
        assert info.value.message == f"Error code: {status} - boom"


async def test_gateway_timeout_hangs_then_504(fake, sdk):
    fake.fail_next(GatewayTimeout(0.3))
    fake.script(Text("after the timeout"))
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as info:
        await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert info.value.status_code == 504 and time.monotonic() - started >= 0.3
    done = await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert done.choices[0].message.content == "after the timeout"  # the script was left alone
    assert [type(f.fault) for f in fake.injected] == [GatewayTimeout]
    fake.assert_complete()


async def test_gateway_timeout_longer_than_the_client_timeout(fake):
    fake.fail_next(GatewayTimeout(5))
    async with AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0, timeout=0.2) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="gpt-test", messages=HI)


async def test_cut_stream_raises_connection_error(fake, sdk):
    fake.script(Cut("abcdefghijkl", after_chunks=2, chunk_size=3))
    chunks: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        stream = await sdk.chat.completions.create(model="gpt-test", messages=HI, stream=True)
        async for chunk in stream:
            chunks.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(chunks) == "abcdef"


async def test_clean_cut_stream_just_ends_without_finish_reason(fake, sdk):
    fake.script(Cut("abcdefghijkl", after_chunks=2, chunk_size=3, clean=True), Text("whole"))
    assert await stream_text(sdk) == ("abcdef", None)
    assert await stream_text(sdk) == ("whole", "stop")


async def test_cut_non_streamed_body_is_a_connection_error(fake, sdk):
    fake.script(Cut())
    with pytest.raises(openai.APIConnectionError):
        await sdk.chat.completions.create(model="gpt-test", messages=HI)


async def test_bad_chunk_raises_json_decode_error(fake, sdk):
    fake.script(BadChunk("ok so far"), BadChunk())
    with pytest.raises(json.JSONDecodeError):
        await stream_text(sdk)
    with pytest.raises(json.JSONDecodeError):
        await sdk.chat.completions.create(model="gpt-test", messages=HI)


async def test_stream_error_event_raises_api_error(fake, sdk):
    fake.script(StreamError("partial", message="overloaded mid-stream"))
    with pytest.raises(openai.APIError) as info:
        await stream_text(sdk)
    assert info.value.message == "overloaded mid-stream"
    assert not isinstance(info.value, openai.APIStatusError)  # the HTTP status was 200


async def test_fail_next_times_and_model(fake, sdk):
    fake.fail_next(Error(503, "busy"), times=2, model="gpt-test")
    fake.script(Text("finally"))
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await sdk.chat.completions.create(model="gpt-test", messages=HI)
    done = await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert done.choices[0].message.content == "finally"
    assert [(f.source, f.model, f.kind) for f in fake.injected] == [("fail_next", "gpt-test", None)] * 2


async def chaos_run(seed: int, kinds: tuple[str, ...], stream: bool) -> tuple[list[FaultKind | None], int]:
    """12 requests under chaos; the kinds injected and how many requests succeeded."""
    async with FakeOpenAI() as server:
        server.handler = lambda body: Text("fine")
        server.chaos(0.5, kinds=kinds, seed=seed, hang=0.05, max_faults=4)
        ok = 0
        async with AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
            for _ in range(12):
                try:
                    if stream:
                        assert await stream_text(client) == ("fine", "stop")
                    else:
                        done = await client.chat.completions.create(model="gpt-test", messages=HI)
                        assert done.choices[0].message.content == "fine"
                    ok += 1
                except (openai.APIError, json.JSONDecodeError):
                    pass
        assert all(f.source == "chaos" and f.stream == stream for f in server.injected)
        return [f.kind for f in server.injected], ok


@pytest.mark.parametrize("stream", [True, False])
async def test_chaos_is_seeded_and_bounded(stream):
    kinds = tuple(FaultKind)
    first, ok = await chaos_run(7, kinds, stream)
    assert len(first) == 4 and ok == 12 - 4  # every fault failed its request; then chaos stopped
    again, _ = await chaos_run(7, kinds, stream)
    assert again == first
    other, _ = await chaos_run(8, kinds, stream)
    assert other != first


async def test_chaos_off_and_bad_kinds(fake, sdk):
    fake.handler = lambda body: Text("fine")
    fake.chaos(1.0, kinds=("500",))
    with pytest.raises(openai.InternalServerError):
        await sdk.chat.completions.create(model="gpt-test", messages=HI)
    fake.chaos_off()
    done = await sdk.chat.completions.create(model="gpt-test", messages=HI)
    assert done.choices[0].message.content == "fine" and len(fake.injected) == 1
    with pytest.raises(ValueError):
        fake.chaos(0.5, kinds=("teapot",))
