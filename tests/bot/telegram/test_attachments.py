"""A Telegram message's file as an ``Attachment`` (parsed from the wire form by each driver's
parser, as updates arrive), and ``telegram.max_download_mb``'s rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from agentgram.bot.settings import TelegramSettings
from agentgram.bot.telegram.core.attachments import attachment_of
from agentgram.bot.telegram.core.incoming import Message
from agentgram.bot.telegram.drivers import Driver

MB = 1024 * 1024

MakeMessage = Callable[..., Message]


@pytest.fixture
def message(driver: Driver) -> MakeMessage:
    """A message with these fields, as the driver's parser reads it off ``getUpdates``."""

    def parsed(**fields: Any) -> Message:
        raw = {"message_id": 7, "date": 1_700_000_000, "chat": {"id": 1, "type": "private"}, **fields}
        update = driver.parse({"update_id": 1, "message": raw})
        assert update.message is not None
        return update.message

    return parsed


def file(n: int, size: int = 1000, **fields: Any) -> dict[str, Any]:
    return {"file_id": f"F{n}", "file_unique_id": f"U{n}", "file_size": size, **fields}


def test_a_photo_is_its_largest_size_as_a_jpeg(message: MakeMessage) -> None:
    sizes = [file(1, width=90, height=60), file(3, width=1280, height=853), file(2, width=320, height=213)]
    attachment = attachment_of(message(photo=sizes, caption="look"), limit_mb=20)
    assert attachment is not None
    assert (attachment.kind, attachment.file_id, attachment.unique_id) == ("photo", "F3", "U3")
    assert (attachment.width, attachment.height, attachment.mime_type) == (1280, 853, "image/jpeg")
    assert attachment.path is None and attachment.skipped is None


def test_a_voice_note_keeps_its_duration_and_a_premium_transcript(message: MakeMessage) -> None:
    voice = file(1, duration=12, mime_type="audio/ogg", transcript="  call Anna  ")
    attachment = attachment_of(message(voice=voice), limit_mb=20)
    assert attachment is not None
    assert (attachment.kind, attachment.duration, attachment.transcript) == ("voice", 12, "call Anna")


def test_a_gif_is_an_animation_not_the_document_telegram_sends_with_it(message: MakeMessage) -> None:
    gif = file(1, width=320, height=240, duration=3, file_name="cat.mp4", mime_type="video/mp4")
    attachment = attachment_of(message(animation=gif, document=gif), limit_mb=20)
    assert attachment is not None and (attachment.kind, attachment.name) == ("animation", "cat.mp4")


@pytest.mark.parametrize(
    ("field", "kind"),
    [("audio", "audio"), ("video_note", "video_note"), ("video", "video"), ("document", "document")],
)
def test_each_file_kind_is_named(message: MakeMessage, field: str, kind: str) -> None:
    body = file(1, duration=5, length=240, width=640, height=360)
    attachment = attachment_of(message(**{field: body}), limit_mb=20)
    assert attachment is not None and attachment.kind == kind


def test_a_file_over_the_limit_is_skipped_with_the_reason(message: MakeMessage) -> None:
    document = file(1, size=25 * MB, file_name="backup.zip", mime_type="application/zip")
    attachment = attachment_of(message(document=document), limit_mb=20)
    assert attachment is not None and attachment.skipped == "over the 20 MB download limit"
    assert attachment_of(message(document=document), limit_mb=30) is not None
    unknown = attachment_of(message(document={"file_id": "F", "file_unique_id": "U"}), limit_mb=1)
    assert unknown is not None and unknown.skipped is None, "an unknown size is tried"


def test_text_and_stickers_carry_no_attachment(message: MakeMessage) -> None:
    assert attachment_of(message(text="hi"), limit_mb=20) is None
    sticker = file(1, type="regular", width=512, height=512, is_animated=False, is_video=False, emoji="👍")
    assert attachment_of(message(sticker=sticker), limit_mb=20) is None


def test_a_download_limit_over_20_mb_needs_a_local_bot_api_server() -> None:
    base = {"token": "1:a", "allowed_user_ids": [1]}
    assert TelegramSettings.model_validate(base).max_download_mb == 20
    with pytest.raises(ValidationError, match="needs a local Bot API server"):
        TelegramSettings.model_validate({**base, "max_download_mb": 50})
    local = TelegramSettings.model_validate(
        {**base, "api_base_url": "http://127.0.0.1:8081", "max_download_mb": 500}
    )
    assert (local.max_download_mb, local.max_upload_mb) == (500, 2000)
    assert TelegramSettings.model_validate(base).max_upload_mb == 50
