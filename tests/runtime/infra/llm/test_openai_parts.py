"""Content parts on the wire: the real ``openai`` SDK against :class:`FakeOpenAI`, which checks
parts (and the image bytes in a ``data:`` URL) as the real API does."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator

import pytest
from PIL import Image

from agentgram.runtime.infra.config import LLMSettings
from agentgram.runtime.infra.llm.openai_client import OpenAIClient, to_openai_message
from agentgram.runtime.infra.llm.types import ImagePart, StreamEvent, SystemMessage, TextPart, UserMessage
from tests.fakes.openai_server import FakeOpenAI, Text


def png(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(out, format="PNG")
    return out.getvalue()


def image(data: bytes) -> ImagePart:
    return ImagePart("data:image/png;base64," + base64.b64encode(data).decode())


async def ignore(event: StreamEvent) -> None:
    return None


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main",)) as server:
        yield server


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[OpenAIClient]:
    llm = OpenAIClient(LLMSettings(base_url=fake.base_url, model="main", max_retries=0))
    yield llm
    await llm.aclose()


def test_parts_become_text_and_image_url_dicts() -> None:
    message = UserMessage((TextPart("look"), ImagePart("data:image/png;base64,AAAA")))
    assert to_openai_message(message) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }


def test_a_plain_user_message_stays_a_string() -> None:
    assert to_openai_message(UserMessage("hi")) == {"role": "user", "content": "hi"}


async def test_the_endpoint_takes_a_message_of_text_and_images(
    fake: FakeOpenAI, client: OpenAIClient
) -> None:
    red, blue = png("red"), png("blue")
    message = UserMessage((TextPart("two photos"), image(red), TextPart("[image: b]"), image(blue)))
    fake.script(Text("a red and a blue square"))
    result = await client.stream_round([SystemMessage("be brief"), message], [], ignore)
    assert result.text == "a red and a blue square"
    parts = fake.requests[0]["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url"]
    sent = [
        base64.b64decode(p["image_url"]["url"].partition(",")[2]) for p in parts if p["type"] == "image_url"
    ]
    assert sent == [red, blue], "the exact bytes"
    fake.assert_complete()
