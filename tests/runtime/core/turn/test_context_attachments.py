"""What the model sees of attachments: lines, inlined text and images built from a row's metadata.

The rows carry ``meta["attachments"]`` as the runtime stores it (the mail's attachment plus
``status``/``error``/``transcript``); the files are real, written with Pillow into a workdir.
"""

from __future__ import annotations

import base64
import io
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import ExifTags, Image

from agentgram.runtime.capabilities.attachments.images import ImageCache
from agentgram.runtime.core.turn.context import ContextSettings, build_messages, coalesce_users, images_needed
from agentgram.runtime.infra.llm.types import (
    AssistantMessage,
    ChatMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    UserMessage,
)
from agentgram.runtime.infra.storage.history import HistoryEntry
from agentgram.runtime.infra.storage.models import HistoryRow, Role

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = "inbox/2026-12-01"


class Chat:
    """History entries with attachments, and the files they name under ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.entries: list[HistoryEntry] = []
        self._ids = itertools.count(1)

    def file(self, name: str, data: bytes) -> str:
        path = self.workdir / DAY / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return f"{DAY}/{name}"

    def photo(self, name: str, size: tuple[int, int] = (64, 48), color: str = "blue") -> dict[str, Any]:
        out = io.BytesIO()
        Image.new("RGB", size, color).save(out, format="JPEG")
        path = self.file(name, out.getvalue())
        return attachment("photo", path=path, width=size[0], height=size[1], size=len(out.getvalue()))

    def user(self, text: str, turn: int, *attachments: dict[str, Any]) -> Chat:
        meta = {"attachments": list(attachments)} if attachments else {}
        row = HistoryRow(
            id=next(self._ids), session_id=1, turn_id=turn, role=Role.USER, content=text, meta=meta
        )
        self.entries.append(HistoryEntry.of(row, []))
        return self

    def assistant(self, text: str, turn: int) -> Chat:
        row = HistoryRow(id=next(self._ids), session_id=1, turn_id=turn, role=Role.ASSISTANT, content=text)
        self.entries.append(HistoryEntry.of(row, []))
        return self

    def read(self, path: str) -> bytes:
        return (self.workdir / path).read_bytes()


def attachment(
    kind: str, *, status: str = "ready", error: str | None = None, **fields: Any
) -> dict[str, Any]:
    """One record of ``meta["attachments"]``: ``Attachment.model_dump(mode="json")`` and the outcome."""
    record: dict[str, Any] = {
        "kind": kind,
        "file_id": f"file-{kind}",
        "name": None,
        "mime_type": None,
        "size": None,
        "unique_id": None,
        "width": None,
        "height": None,
        "duration": None,
        "transcript": None,
        "skipped": None,
        "path": None,
    }
    record.update(fields)
    return record | {"status": status, "error": error}


def settings(chat: Chat, **overrides: Any) -> ContextSettings:
    fields: dict[str, Any] = {
        "static_system": "You are agentgram.",
        "workdir": chat.workdir,
        "timezone": ZoneInfo("UTC"),
        "timezone_name": "UTC",
        "images": ImageCache(2048),
    }
    fields.update(overrides)
    return ContextSettings(**fields)


async def build(chat: Chat, context: ContextSettings) -> list[ChatMessage]:
    """The round's order: load the images the context needs, then the sync build."""
    assert context.images is not None or not context.vision
    if context.images is not None:
        await context.images.load(images_needed(chat.entries, context))
    messages = build_messages(chat.entries, context, NOW)
    assert isinstance(messages[0], SystemMessage) and isinstance(messages[-1], SystemMessage)
    return messages[1:-1]


def image_bytes(part: TextPart | ImagePart) -> bytes:
    assert isinstance(part, ImagePart)
    head, _, body = part.url.partition(",")
    assert head in ("data:image/jpeg;base64", "data:image/png;base64")
    return base64.b64decode(body)


@pytest.fixture
def chat(tmp_path: Path) -> Chat:
    return Chat(tmp_path / "workspace")


# --- photos ------------------------------------------------------------------------------------


async def test_a_photo_with_a_caption_is_one_message_of_text_and_the_exact_image(chat: Chat) -> None:
    photo = chat.photo("photo.jpg")
    chat.user("what is this error?", 1, photo)
    [message] = await build(chat, settings(chat))
    assert isinstance(message, UserMessage) and isinstance(message.content, tuple)
    text, image = message.content
    assert text == TextPart(f"what is this error?\n\n[image: {DAY}/photo.jpg]")
    assert image_bytes(image) == chat.read(photo["path"])
    assert message.text == text.text
    assert chat.entries[0].content == "what is this error?", "the line is built, never stored"


async def test_with_vision_off_the_model_is_told_the_path(chat: Chat) -> None:
    chat.user("", 1, chat.photo("photo.jpg"))
    context = settings(chat, vision=False)
    assert images_needed(chat.entries, context) == []
    assert await build(chat, context) == [UserMessage(f"[image: {DAY}/photo.jpg]")]


async def test_an_exif_rotated_jpeg_reaches_the_model_upright(chat: Chat) -> None:
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6
    out = io.BytesIO()
    Image.new("RGB", (300, 100), "white").save(out, format="JPEG", exif=exif)
    path = chat.file("sideways.jpg", out.getvalue())
    chat.user("", 1, attachment("photo", path=path))
    [message] = await build(chat, settings(chat))
    assert isinstance(message, UserMessage) and isinstance(message.content, tuple)
    assert Image.open(io.BytesIO(image_bytes(message.content[1]))).size == (100, 300)


async def test_a_big_png_document_with_alpha_is_an_image_downscaled_to_max_px(chat: Chat) -> None:
    out = io.BytesIO()
    Image.new("RGBA", (4000, 1000), (255, 0, 0, 50)).save(out, format="PNG")
    path = chat.file("screen.png", out.getvalue())
    chat.user("", 1, attachment("document", path=path, name="screen.png", mime_type="image/png"))
    [message] = await build(chat, settings(chat, images=ImageCache(800)))
    assert isinstance(message, UserMessage) and isinstance(message.content, tuple)
    assert message.content[0] == TextPart(f"[image: {DAY}/screen.png]")
    image = Image.open(io.BytesIO(image_bytes(message.content[1])))
    assert (image.format, image.mode, image.size) == ("PNG", "RGBA", (800, 200))


async def test_an_album_is_one_message_with_every_image_next_to_its_line(chat: Chat) -> None:
    photos = [chat.photo(f"album-{i}.jpg", color=color) for i, color in enumerate(["red", "green", "blue"])]
    chat.user("our trip", 1, photos[0]).user("", 1, photos[1]).user("", 1, photos[2])
    [message] = await build(chat, settings(chat, max_history_images=0))
    assert isinstance(message, UserMessage) and isinstance(message.content, tuple)
    kinds = [type(part).__name__ for part in message.content]
    assert kinds == ["TextPart", "ImagePart", "TextPart", "ImagePart", "TextPart", "ImagePart"]
    assert message.content[0] == TextPart(f"our trip\n\n[image: {DAY}/album-0.jpg]")
    assert message.content[2] == TextPart(f"[image: {DAY}/album-1.jpg]")
    assert [image_bytes(p) for p in message.content[1::2]] == [chat.read(p["path"]) for p in photos]


async def test_earlier_turns_resend_only_the_newest_max_history_images(chat: Chat) -> None:
    for turn in range(1, 7):
        chat.user(f"photo {turn}", turn, chat.photo(f"p{turn}.jpg")).assistant(f"seen {turn}", turn)
    chat.user("and this one", 7, chat.photo("p7.jpg"))
    context = settings(chat, max_history_images=2)
    assert images_needed(chat.entries, context) == [chat.workdir / DAY / f"p{n}.jpg" for n in (5, 6, 7)]
    users = [m for m in await build(chat, context) if isinstance(m, UserMessage)]
    with_images = [i + 1 for i, m in enumerate(users) if isinstance(m.content, tuple)]
    assert with_images == [5, 6, 7], "the current turn's image and the two newest earlier ones"
    assert users[0] == UserMessage(f"photo 1\n\n[image: {DAY}/p1.jpg]"), "older ones are a reference"


async def test_an_image_that_cannot_be_decoded_says_so(chat: Chat) -> None:
    path = chat.file("broken.jpg", b"\xff\xd8 not really a jpeg")
    chat.user("", 1, attachment("photo", path=path))
    assert await build(chat, settings(chat)) == [
        UserMessage(f"[image: {DAY}/broken.jpg — could not be shown as an image]")
    ]


# --- documents, voice, failures ----------------------------------------------------------------


async def test_a_document_is_a_line_naming_path_size_and_type(chat: Chat) -> None:
    path = chat.file("report.pdf", b"%PDF-1.7 \x00\x01 binary")
    record = attachment("document", path=path, name="report.pdf", mime_type="application/pdf", size=1_250_000)
    chat.user("see attached", 1, record)
    assert await build(chat, settings(chat)) == [
        UserMessage(f"see attached\n\n[file: {path} · 1.2 MB · application/pdf — read it with read_file]")
    ]


async def test_a_small_text_document_is_inlined_after_its_line(chat: Chat) -> None:
    path = chat.file("notes.txt", "buy milk\nфикс бага\n".encode())
    chat.user("", 1, attachment("document", path=path, name="notes.txt", mime_type="text/plain", size=24))
    [message] = await build(chat, settings(chat))
    assert message == UserMessage(
        (
            TextPart(f"[file: {path} · 24 B · text/plain — read it with read_file]"),
            TextPart(f"--- {path} ---\nbuy milk\nфикс бага\n"),
        )
    )


@pytest.mark.parametrize(
    ("data", "limit_kb"),
    [(b"x" * 2048, 1), ("latin-1: caf\xe9".encode("latin-1"), 32), (b"text\x00with a NUL", 32)],
    ids=["over the limit", "not utf-8", "binary"],
)
async def test_a_document_is_not_inlined_when_it_is_not_small_utf8_text(
    chat: Chat, data: bytes, limit_kb: int
) -> None:
    path = chat.file("data.log", data)
    chat.user("", 1, attachment("document", path=path, name="data.log", mime_type="text/plain"))
    [message] = await build(chat, settings(chat, inline_text_kb=limit_kb))
    assert isinstance(message, UserMessage) and isinstance(message.content, str)


async def test_a_voice_note_is_its_transcript_and_a_line(chat: Chat) -> None:
    path = chat.file("voice.ogg", b"OggS voice")
    record = attachment("voice", path=path, duration=12, mime_type="audio/ogg", transcript="call mom")
    chat.user("(voice) call mom", 1, record)
    assert await build(chat, settings(chat)) == [
        UserMessage(f"(voice) call mom\n\n[voice note: {path}, 12 s]")
    ]


async def test_a_voice_note_kept_but_not_transcribed_names_why(chat: Chat) -> None:
    path = chat.file("voice.ogg", b"OggS voice")
    record = attachment("voice", path=path, duration=3, error="transcription failed: HTTP 500")
    chat.user("", 1, record)
    assert await build(chat, settings(chat)) == [
        UserMessage(f"[voice note: {path}, 3 s — transcription failed: HTTP 500]")
    ]


async def test_skipped_and_failed_attachments_name_why(chat: Chat) -> None:
    skipped = attachment(
        "document",
        status="skipped",
        error="over the 20 MB download limit",
        name="backup.zip",
        mime_type="application/zip",
        size=25 * 1024 * 1024,
        path=f"{DAY}/backup.zip",
    )
    failed = attachment("photo", status="failed", error="the download broke off", path=f"{DAY}/photo.jpg")
    sticker = attachment(
        "sticker", status="skipped", error="a sticker is not fetched", mime_type="image/webp"
    )
    chat.user("two files", 1, skipped, failed, sticker)
    assert await build(chat, settings(chat)) == [
        UserMessage(
            "two files\n\n"
            "[file: backup.zip · 25.0 MB · application/zip — not downloaded: over the 20 MB download limit]\n"
            "[image — failed: the download broke off]\n"
            "[sticker — not downloaded: a sticker is not fetched]"
        )
    ]


async def test_a_malformed_record_is_left_out(chat: Chat) -> None:
    chat.user("hi", 1, {"kind": "photo", "status": "weird"}, "not even a dict")  # type: ignore[arg-type]
    assert await build(chat, settings(chat)) == [UserMessage("hi")]


async def test_text_and_parts_coalesce_in_order(chat: Chat) -> None:
    photo = chat.photo("photo.jpg")
    chat.user("first", 1).user("second", 1, photo).user("third", 1).assistant("ok", 1)
    first, answer = await build(chat, settings(chat))
    assert answer == AssistantMessage("ok")
    assert isinstance(first, UserMessage) and isinstance(first.content, tuple)
    text, image, tail = first.content
    assert text == TextPart(f"first\n\nsecond\n\n[image: {DAY}/photo.jpg]")
    assert image_bytes(image) == chat.read(photo["path"])
    assert tail == TextPart("third")
    assert first.text == f"{text.text}\n\nthird"


# --- properties --------------------------------------------------------------------------------

TEXTS = st.text(alphabet="ab \n", max_size=6)
PARTS = st.lists(st.one_of(TEXTS.map(TextPart), st.sampled_from("xyz").map(lambda c: ImagePart(f"data:{c}"))))
USERS = st.one_of(
    TEXTS.map(UserMessage), st.tuples(TEXTS.map(TextPart), PARTS).map(lambda p: UserMessage((p[0], *p[1])))
)


@given(st.lists(USERS, min_size=1, max_size=6))
def test_coalescing_keeps_every_word_and_image_in_order(users: list[UserMessage]) -> None:
    messages: list[ChatMessage] = [*users]
    [merged] = coalesce_users(messages)
    assert isinstance(merged, UserMessage)
    assert merged.text == "\n\n".join(u.text for u in users)
    parts = [p for u in users if isinstance(u.content, tuple) for p in u.content]
    images = [p for p in parts if isinstance(p, ImagePart)]
    assert [
        p for p in (merged.content if isinstance(merged.content, tuple) else ()) if isinstance(p, ImagePart)
    ] == images
