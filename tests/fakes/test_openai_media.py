"""FakeOpenAI's images and speech: content parts checked like OpenAI checks them, and
``/v1/audio/transcriptions`` answering the real ``openai`` SDK."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tests.fakes.openai_server import MAX_AUDIO_BYTES, Error, FakeOpenAI, Text, Transcript

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
JPEG = b"\xff\xd8\xff\xe0 a jpeg"
OGG = b"OggS\x00\x02 speech"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def sdk(fake: FakeOpenAI) -> AsyncIterator[AsyncOpenAI]:
    client = AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0)
    yield client
    await client.close()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


async def chat(sdk: AsyncOpenAI, messages: list[Any]) -> str | None:
    reply = await sdk.chat.completions.create(model="gpt-test", messages=messages)
    return reply.choices[0].message.content


async def refused(sdk: AsyncOpenAI, messages: list[Any]) -> str:
    with pytest.raises(openai.BadRequestError) as err:
        await chat(sdk, messages)
    return err.value.message.removeprefix("Error code: 400 - ")


# ------------------------------------------------------------------------------------------ images
async def test_images_in_a_user_message_are_read_back_decoded(fake: FakeOpenAI, sdk: AsyncOpenAI) -> None:
    fake.script(Text("a cat"))
    parts = [
        {"type": "text", "text": "what is it?"},
        image(data_url(PNG)),
        image(data_url(JPEG, "image/jpeg"), detail="high"),
    ]
    assert (
        await chat(sdk, [{"role": "system", "content": "s"}, {"role": "user", "content": parts}]) == "a cat"
    )
    assert fake.images() == [PNG, JPEG]
    assert [(s.message_index, s.mime_type, s.detail) for s in fake.seen_images()] == [
        (1, "image/png", None), (1, "image/jpeg", "high"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (image(data_url(PNG, "image/bmp")), "but got unsupported MIME type 'image/bmp'."),
        (image("data:image/png;base64,@@not base64@@"), "but got an invalid base64 encoding."),
        (image(data_url(b"just text")), "You uploaded an unsupported image."),
        (
            image(data_url(PNG), detail="ultra"),
            "Invalid value: 'ultra'. Supported values are: 'auto', 'low', and 'high'.",
        ),
        (image("file:///etc/passwd"), "Expected a valid URL"),
        (image("https://example.com/cat.png"), "image URLs are not fetched"),
        ({"type": "image_url"}, "Missing required parameter: 'messages[0].content[0].image_url.url'."),
        ({"type": "text"}, "Missing required parameter: 'messages[0].content[0].text'."),
        ({"type": "picture"}, "Invalid value: 'picture'. Supported values are: 'text', 'image_url'"),
    ],
)
async def test_bad_parts_are_refused_like_openai(
    sdk: AsyncOpenAI, part: dict[str, Any], message: str
) -> None:
    assert message in await refused(sdk, [{"role": "user", "content": [part]}])


async def test_images_only_in_user_messages_and_never_an_empty_list(sdk: AsyncOpenAI) -> None:
    system = [{"role": "system", "content": [image(data_url(PNG))]}, {"role": "user", "content": "hi"}]
    assert "Image URLs are only allowed for messages with role 'user'" in await refused(sdk, system)
    assert "empty array" in await refused(sdk, [{"role": "user", "content": []}])


# ------------------------------------------------------------------------------------------ speech
async def test_transcription_is_recorded_and_answered_in_each_format(
    fake: FakeOpenAI, sdk: AsyncOpenAI
) -> None:
    fake.transcribe("hello there", Transcript("hola", language="spanish", duration=2.5), "plain", "sub")
    heard = await sdk.audio.transcriptions.create(
        file=("voice.oga", OGG, "audio/ogg"), model="whisper-1", language="en", prompt="names: Ann"
    )
    assert heard.text == "hello there"
    verbose = await sdk.audio.transcriptions.create(
        file=("a.mp3", b"ID3 mp3", "audio/mpeg"), model="whisper-1", response_format="verbose_json"
    )
    assert (verbose.text, verbose.language, verbose.duration) == ("hola", "spanish", 2.5)
    text = await sdk.audio.transcriptions.create(
        file=("a.wav", b"RIFF\0\0\0\0WAVEfmt ", "audio/wav"), model="whisper-1", response_format="text"
    )
    assert text == "plain\n"
    srt = await sdk.audio.transcriptions.create(
        file=("a.m4a", b"\0\0\0\x20ftypM4A ", "audio/mp4"), model="whisper-1", response_format="srt"
    )
    assert "sub" in srt and "-->" in srt
    first = fake.transcriptions[0]
    assert (first.content, first.filename, first.content_type, first.model) == (
        OGG,
        "voice.oga",
        "audio/ogg",
        "whisper-1",
    )
    assert (first.language, first.prompt, first.response_format) == ("en", "names: Ann", None)
    assert [t.response_format for t in fake.transcriptions[1:]] == ["verbose_json", "text", "srt"]
    assert fake.calls == 0, "transcriptions are not chat requests"


@pytest.mark.parametrize(
    ("name", "content", "extra", "message"),
    [
        (
            "voice",
            OGG,
            {},
            "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']",
        ),
        ("voice.ogg", b"hello", {}, "Audio file might be corrupted or unsupported"),
        (
            "voice.ogg",
            OGG,
            {"language": "english"},
            "Invalid language 'english'. Language parameter must be specified in ISO-639-1 format.",
        ),
    ],
)
async def test_transcription_refuses_what_openai_refuses(
    sdk: AsyncOpenAI, name: str, content: bytes, extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        await sdk.audio.transcriptions.create(file=(name, content, "audio/ogg"), model="whisper-1", **extra)
    assert err.value.body == {
        "message": message,
        "type": "invalid_request_error",
        "param": err.value.param,
        "code": None,
    }


async def test_transcription_size_limit_content_type_and_missing_file(
    fake: FakeOpenAI, sdk: AsyncOpenAI
) -> None:
    with pytest.raises(openai.APIStatusError) as err:
        await sdk.audio.transcriptions.create(
            file=("big.ogg", b"OggS" + b"\0" * MAX_AUDIO_BYTES, "audio/ogg"), model="whisper-1"
        )
    assert (
        err.value.status_code == 413 and "Maximum content size limit (26214400) exceeded" in err.value.message
    )
    async with httpx.AsyncClient() as http:
        as_json = await http.post(f"{fake.base_url}/audio/transcriptions", json={"model": "whisper-1"})
        no_file = await http.post(
            f"{fake.base_url}/audio/transcriptions", files={"model": (None, "whisper-1")}
        )
    assert as_json.status_code == 400 and "expected multipart/form-data" in as_json.json()["error"]["message"]
    assert no_file.json()["error"]["message"] == "Missing required parameter: 'file'."


async def test_transcription_errors_handler_and_nothing_scripted(fake: FakeOpenAI, sdk: AsyncOpenAI) -> None:
    upload = ("v.ogg", OGG, "audio/ogg")
    fake.transcribe(Error(429, "Rate limit reached"))
    with pytest.raises(openai.RateLimitError):
        await sdk.audio.transcriptions.create(file=upload, model="whisper-1")
    with pytest.raises(openai.InternalServerError, match="no scripted transcript"):
        await sdk.audio.transcriptions.create(file=upload, model="whisper-1")
    fake.transcription_handler = lambda req: Transcript(f"{len(req.content)} bytes")
    assert (await sdk.audio.transcriptions.create(file=upload, model="whisper-1")).text == f"{len(OGG)} bytes"
    await fake.wait_for_transcriptions(3)


async def test_transcription_checks_the_key() -> None:
    async with FakeOpenAI(api_key="sk-right") as fake:
        client = AsyncOpenAI(base_url=fake.base_url, api_key="sk-wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            await client.audio.transcriptions.create(file=("v.ogg", OGG, "audio/ogg"), model="whisper-1")
        await client.close()
        assert len(fake.transcriptions) == 1
