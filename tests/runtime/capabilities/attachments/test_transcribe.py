"""OpenAITranscriber through the real ``openai`` SDK against FakeOpenAI's ``/v1/audio/transcriptions``."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from agentgram.runtime.capabilities.attachments.transcribe import OpenAITranscriber, upload_name
from agentgram.runtime.infra.config import LLMSettings, TranscriptionSettings
from agentgram.runtime.infra.errors import TranscriptionFailed
from agentgram.runtime.infra.log import redact
from tests.fakes.openai_server import Error, FakeOpenAI, GatewayTimeout, Transcript

OGG = b"OggS\x00\x02 a voice note"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="sk-llm-key") as server:
        yield server


def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(base_url=fake.base_url, api_key=SecretStr("sk-llm-key"), model="m")


@pytest.fixture
async def transcriber(fake: FakeOpenAI) -> AsyncIterator[OpenAITranscriber]:
    client = OpenAITranscriber(TranscriptionSettings(), llm_settings(fake))
    yield client
    await client.aclose()


@pytest.fixture
def voice(tmp_path: Path) -> Path:
    path = tmp_path / "voice-17.oga"
    path.write_bytes(OGG)
    return path


async def test_the_transcript_of_a_voice_note_on_the_llm_endpoint(
    fake: FakeOpenAI, transcriber: OpenAITranscriber, voice: Path
) -> None:
    fake.transcribe("  buy milk and bread \n")
    assert await transcriber.transcribe(voice, mime_type="audio/ogg") == "buy milk and bread"
    (received,) = fake.transcriptions
    assert (received.content, received.filename, received.content_type) == (OGG, "voice-17.oga", "audio/ogg")
    assert (received.model, received.language, received.response_format) == ("whisper-1", None, "json")


async def test_its_own_endpoint_key_model_and_language(fake: FakeOpenAI, voice: Path) -> None:
    async with FakeOpenAI(api_key="sk-speech-key") as speech:
        settings = TranscriptionSettings(
            base_url=speech.base_url, api_key=SecretStr("sk-speech-key"), model="gpt-4o-transcribe",
            language="ru",
        )  # fmt: skip
        transcriber = OpenAITranscriber(settings, llm_settings(fake))
        speech.transcribe(Transcript("купи молоко", language="russian"))
        assert await transcriber.transcribe(voice, mime_type=None) == "купи молоко"
        await transcriber.aclose()
    (received,) = speech.transcriptions
    assert (received.model, received.language, received.content_type) == (
        "gpt-4o-transcribe", "ru", "application/octet-stream",
    )  # fmt: skip
    assert fake.transcriptions == []


async def test_an_extension_the_service_does_not_know_is_named_by_the_mime_type(
    fake: FakeOpenAI, transcriber: OpenAITranscriber, tmp_path: Path
) -> None:
    opus = tmp_path / "memo.opus"
    opus.write_bytes(OGG)
    fake.transcribe("hello")
    assert await transcriber.transcribe(opus, mime_type="audio/ogg") == "hello"
    assert fake.transcriptions[-1].filename == "memo.ogg"
    assert upload_name(Path("inbox/a.mp4"), None) == "a.mp4"
    assert upload_name(Path("inbox/a.bin"), "audio/mpeg; charset=binary") == "a.mp3"
    assert upload_name(Path("inbox/a.bin"), "application/zip") == "a.bin"


async def test_a_refused_upload_says_what_the_service_said(
    fake: FakeOpenAI, transcriber: OpenAITranscriber, tmp_path: Path
) -> None:
    strange = tmp_path / "note.xyz"
    strange.write_bytes(OGG)
    with pytest.raises(TranscriptionFailed, match=r"answered 400: Invalid file format\. Supported formats"):
        await transcriber.transcribe(strange, mime_type="application/x-strange")
    broken = tmp_path / "broken.ogg"
    broken.write_bytes(b"not audio at all")
    with pytest.raises(
        TranscriptionFailed, match="answered 400: Audio file might be corrupted or unsupported"
    ):
        await transcriber.transcribe(broken, mime_type="audio/ogg")
    assert len(fake.transcriptions) == 2, "a 400 is not retried"


async def test_a_server_error_is_retried_once_then_fails(
    fake: FakeOpenAI, transcriber: OpenAITranscriber, voice: Path
) -> None:
    fake.transcribe(Error(500, "The server had an error"), "second time lucky")
    assert await transcriber.transcribe(voice, mime_type="audio/ogg") == "second time lucky"
    fake.transcribe(Error(503, "overloaded"), Error(502, "Bad Gateway", html=True))
    with pytest.raises(TranscriptionFailed) as failed:
        await transcriber.transcribe(voice, mime_type="audio/ogg")
    assert str(failed.value) == "the transcription service answered 502: Bad Gateway"
    assert len(fake.transcriptions) == 4


async def test_a_refused_key_is_named_and_the_key_is_never_shown(fake: FakeOpenAI, voice: Path) -> None:
    settings = TranscriptionSettings(api_key=SecretStr("sk-wrong-speech-key"))
    transcriber = OpenAITranscriber(settings, llm_settings(fake))
    with pytest.raises(TranscriptionFailed) as failed:
        await transcriber.transcribe(voice, mime_type="audio/ogg")
    await transcriber.aclose()
    assert str(failed.value) == "the transcription service answered 401: Incorrect API key provided."
    assert len(fake.transcriptions) == 1
    assert redact("Bearer sk-wrong-speech-key") == "Bearer ***"


async def test_a_silent_service_times_out(fake: FakeOpenAI, voice: Path) -> None:
    transcriber = OpenAITranscriber(TranscriptionSettings(timeout=0.3), llm_settings(fake))
    fake.transcribe(GatewayTimeout(5.0), GatewayTimeout(5.0))
    with pytest.raises(
        TranscriptionFailed, match=r"^the transcription service did not answer within 0\.3 s$"
    ):
        await transcriber.transcribe(voice, mime_type="audio/ogg")
    await transcriber.aclose()
    assert len(fake.transcriptions) == 2


async def test_an_unreachable_service(fake: FakeOpenAI, voice: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = TranscriptionSettings(base_url=f"http://127.0.0.1:{port}/v1")
    transcriber = OpenAITranscriber(settings, llm_settings(fake))
    with pytest.raises(TranscriptionFailed, match=r"^the transcription service could not be reached$"):
        await transcriber.transcribe(voice, mime_type="audio/ogg")
    await transcriber.aclose()


async def test_nothing_heard_or_nothing_to_read(
    fake: FakeOpenAI, transcriber: OpenAITranscriber, voice: Path, tmp_path: Path
) -> None:
    fake.transcribe(" \n")
    with pytest.raises(TranscriptionFailed, match="no speech was recognised"):
        await transcriber.transcribe(voice, mime_type="audio/ogg")
    with pytest.raises(TranscriptionFailed, match="the recording could not be read"):
        await transcriber.transcribe(tmp_path / "gone.ogg", mime_type="audio/ogg")
    assert len(fake.transcriptions) == 1
