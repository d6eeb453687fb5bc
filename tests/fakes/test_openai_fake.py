"""FakeOpenAI itself: strict validation, scripting, and the wire format the SDK parses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from tests.fakes.openai_server import Call, Error, FakeOpenAI, Text, ToolCalls


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
