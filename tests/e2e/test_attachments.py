"""Photos, voice notes and files, both ways, through the real python-telegram-bot and openai SDK.

The fake Bot API serves ``getFile`` and the file route; the fake OpenAI server answers
``/v1/audio/transcriptions`` and decodes the ``image_url`` parts a chat request carries, so each
test checks the bytes that really arrived: at the model, in the workspace, in the chat.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image

from tests.conftest import STRANGER
from tests.e2e.harness import Rig, fakes, running_bot
from tests.fakes.openai_server import Call, Error, Text, ToolCalls

MB = 1024 * 1024


def jpeg(color: str = "red", size: tuple[int, int] = (64, 48)) -> bytes:
    """A small real JPEG: the model is sent it byte for byte (nothing to downscale)."""
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "JPEG")
    return out.getvalue()


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of every user message of a chat request (text parts joined)."""
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.append("\n".join(part["text"] for part in content if part["type"] == "text"))
    return texts


def message_id_of(rig: Rig, update_id: int) -> int:
    """The chat message id of an update the bot has not confirmed yet (read it at once)."""
    message_id: int = rig.tg.pending_update(update_id)["message"]["message_id"]
    return message_id


def inbox_files(rig: Rig, name: str) -> list[Path]:
    return sorted((rig.workdir / "inbox").rglob(name))


async def test_a_photo_reaches_the_model_as_an_image_with_its_exact_bytes(tmp_path: Path) -> None:
    photo = jpeg()
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("A red rectangle."))
        rig.send_photo(photo, caption="what is on this screen?")
        await rig.wait_text("A red rectangle.")
        assert rig.llm.images() == [photo]
        assert "what is on this screen?" in user_texts(rig.llm.requests[-1])[-1]
        saved = inbox_files(rig, "*.jpg")
        assert [path.read_bytes() for path in saved] == [photo]
        assert [c.params["file_id"] for c in rig.tg.calls("getFile")], "fetched through getFile"


async def test_an_album_is_one_model_request_with_every_image(tmp_path: Path) -> None:
    first, second = jpeg("red"), jpeg("blue")
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("Red, then blue."))
        rig.send_photo(first, caption="which is brighter?", media_group_id="album-1")
        rig.send_photo(second, media_group_id="album-1")
        await rig.wait_text("Red, then blue.")
        await rig.wait_turns()
        assert rig.llm.calls == 1
        assert rig.llm.images() == [first, second]


async def test_a_voice_note_is_transcribed_shown_to_the_user_and_read_by_the_model(
    tmp_path: Path,
) -> None:
    audio = b"OggS\x00\x02 a voice note's bytes"
    async with running_bot(tmp_path) as rig:
        rig.llm.transcribe("buy milk on the way home")
        rig.llm.script(Text("Noted: milk."))
        voice = message_id_of(rig, rig.send_voice(audio, duration=4))
        await rig.wait_text("Noted: milk.")
        heard = await rig.wait_text("🎙")
        assert heard.visible_text == "🎙 “buy milk on the way home”"
        assert heard.reply_to_message_id == voice
        [request] = rig.llm.transcriptions
        assert (request.content, request.model) == (audio, "whisper-1")
        assert "(voice) buy milk on the way home" in user_texts(rig.llm.requests[-1])[-1]


async def test_a_premium_transcript_is_used_without_a_transcription_call(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("Tomorrow, then."))
        rig.send_voice(b"OggS premium", transcript="call Anna tomorrow")
        await rig.wait_text("Tomorrow, then.")
        assert rig.llm.transcriptions == []
        assert "(voice) call Anna tomorrow" in user_texts(rig.llm.requests[-1])[-1]


async def test_a_failed_transcription_tells_the_user_why_and_keeps_the_audio(tmp_path: Path) -> None:
    audio = b"OggS unheard"
    async with running_bot(tmp_path) as rig:
        rig.llm.transcribe(Error(500))
        rig.llm.script(Text("I could not hear it."))
        rig.send_voice(audio)
        await rig.wait_text("couldn't transcribe your voice note")
        await rig.wait_text("I could not hear it.")
        assert [path.read_bytes() for path in inbox_files(rig, "*.og*")] == [audio]


async def test_a_document_is_saved_byte_identical_and_named_in_the_request(tmp_path: Path) -> None:
    content = bytes(range(256)) * 8
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("A binary file."))
        rig.send_document(content, "dump.bin", "application/octet-stream", caption="what is this?")
        await rig.wait_text("A binary file.")
        [saved] = inbox_files(rig, "dump.bin")
        assert saved.read_bytes() == content
        told = user_texts(rig.llm.requests[-1])[-1]
        relative = saved.relative_to(rig.workdir).as_posix()
        assert told.startswith("what is this?") and relative in told and "application/octet-stream" in told


async def test_a_file_over_the_download_limit_is_explained_and_never_asked_for(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.llm.script(Text("That one is too big for me."))
        rig.send_document(b"PK", "backup.zip", "application/zip", caption="unpack this", size=25 * MB)
        told = await rig.wait_text("backup.zip")
        assert "20 MB" in told.visible_text
        await rig.wait_text("That one is too big for me.")
        assert rig.tg.calls("getFile") == []
        assert "over the 20 MB download limit" in user_texts(rig.llm.requests[-1])[-1]


async def test_a_strangers_photo_and_voice_are_never_fetched_nor_heard(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.tg.send_photo(STRANGER, jpeg(), caption="look")
        rig.tg.send_voice(STRANGER, b"OggS stranger")
        rig.say("/help")
        await rig.wait_text("/stop")
        await rig.tg.wait_for(lambda: rig.tg.messages(STRANGER) != [])
        await rig.tg.wait_for(lambda: rig.tg.unconfirmed() == [])
        assert rig.tg.calls("getFile") == [] and rig.tg.downloads == []
        assert rig.llm.transcriptions == [] and rig.llm.calls == 0


async def test_a_sticker_gets_a_friendly_answer_and_no_model_call(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.send_sticker("🐱")
        answer = await rig.wait_text("stickers")
        assert answer.visible_text.startswith("🐱")
        assert rig.llm.calls == 0 and rig.tg.calls("getFile") == []


async def test_send_file_delivers_the_exact_bytes_as_a_document_and_an_image_as_a_photo(
    tmp_path: Path,
) -> None:
    report, chart = b"%PDF-1.4 quarterly numbers", jpeg("green")
    async with running_bot(tmp_path) as rig:
        rig.workdir.mkdir(parents=True, exist_ok=True)
        (rig.workdir / "report.pdf").write_bytes(report)
        (rig.workdir / "chart.jpg").write_bytes(chart)
        rig.llm.script(
            ToolCalls([Call("send_file", {"path": "report.pdf", "caption": "The **report**"})]),
            ToolCalls([Call("send_file", {"path": "chart.jpg"})]),
            Text("Both sent."),
        )
        rig.say("send me the report and the chart")
        await rig.wait_text("Both sent.")
        document, photo = rig.files()
        assert (document.kind, document.document_filename, document.document_content) == (
            "document",
            "report.pdf",
            report,
        )
        assert document.visible_text == "The report"
        assert (photo.kind, photo.document_content) == ("photo", chart)
        assert "upload_document" in {call.action for call in rig.tg.chat_actions}


async def test_a_file_not_yet_delivered_is_sent_again_after_a_restart(tmp_path: Path) -> None:
    report = b"%PDF-1.4 sent after all"
    refusing = True
    async with fakes() as chat:
        tg, _ = chat
        tg.fail_next("sendDocument", status=502, times=10_000, when=lambda _: refusing)
        async with running_bot(tmp_path, on=chat) as rig:
            rig.workdir.mkdir(parents=True, exist_ok=True)
            (rig.workdir / "report.pdf").write_bytes(report)
            rig.llm.script(ToolCalls([Call("send_file", {"path": "report.pdf"})]), Text("On its way."))
            rig.say("send me the report")
            await tg.wait_for(lambda: len(tg.calls("sendDocument")) >= 2)
        refusing = False
        async with running_bot(tmp_path, on=chat) as rig:
            await tg.wait_for(lambda: rig.files() != [], timeout=10)
            [document] = rig.files()
            assert (document.document_filename, document.document_content) == ("report.pdf", report)
