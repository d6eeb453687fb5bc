"""Delivery of files and file activity on its own: ``FileOutput`` / ``AttachmentActivity`` in,
what the chat gets out (the rig of :mod:`tests.bot.telegram.test_delivery`: each driver's real
client against the fake Bot API, a real ``Runtime``, events fed directly)."""

from __future__ import annotations

from pathlib import Path

from agentgram.bot.telegram.views.delivery import Delivery
from agentgram.runtime.infra.events import AttachmentAction, AttachmentActivity, FileOutput
from agentgram.runtime.infra.i18n import Translator
from tests.bot.telegram import test_delivery
from tests.bot.telegram.test_delivery import CHAT, Rig

MB = 1024 * 1024
rig = test_delivery.rig  # the fixture


def file_output(rig: Rig, path: Path, caption: str | None = None, *, as_photo: bool = False) -> FileOutput:
    return FileOutput(to=rig.to, path=str(path), caption=caption, as_photo=as_photo)


def actions(rig: Rig) -> list[str]:
    return [call.action for call in rig.tg.chat_actions]


async def test_a_file_is_sent_as_a_document_with_its_bytes_and_caption(rig: Rig, tmp_path: Path) -> None:
    content = bytes(range(256))
    (tmp_path / "dump.bin").write_bytes(content)
    rig.feed(file_output(rig, tmp_path / "dump.bin", "The **dump** you asked for"))
    await rig.delivered()
    [sent] = rig.chat()
    assert (sent.kind, sent.document_filename, sent.document_content) == ("document", "dump.bin", content)
    assert sent.visible_text == "The dump you asked for" and "<b>dump</b>" in (sent.text or "")
    assert "upload_document" in actions(rig)


async def test_an_image_is_a_photo_only_when_asked_and_small_enough(rig: Rig, tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(b"\x89PNG chart")
    (tmp_path / "huge.jpg").write_bytes(b"\xff\xd8" + b"\x00" * (11 * MB))
    (tmp_path / "notes.txt").write_text("not an image")
    rig.feed(
        file_output(rig, tmp_path / "chart.png", as_photo=True),
        file_output(rig, tmp_path / "huge.jpg", as_photo=True),  # over sendPhoto's 10 MB
        file_output(rig, tmp_path / "notes.txt", as_photo=True),
        file_output(rig, tmp_path / "chart.png", as_photo=False),
    )
    await rig.delivered()
    assert [m.kind for m in rig.chat()] == ["photo", "document", "document", "document"]


async def test_a_photo_telegram_refuses_goes_again_as_a_document(rig: Rig, tmp_path: Path) -> None:
    (tmp_path / "strip.png").write_bytes(b"\x89PNG 20000x10")
    rig.tg.fail_next("sendPhoto", status=400, description="Bad Request: PHOTO_INVALID_DIMENSIONS")
    rig.feed(file_output(rig, tmp_path / "strip.png", "wide", as_photo=True))
    await rig.delivered()
    [sent] = rig.chat()
    assert (sent.kind, sent.document_content, sent.visible_text) == ("document", b"\x89PNG 20000x10", "wide")


async def test_a_caption_too_long_for_telegram_follows_the_file_as_a_reply(rig: Rig, tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("line\n")
    caption = "word " * 400  # 2000 characters: over the 1024 a caption may have
    rig.feed(file_output(rig, tmp_path / "log.txt", caption))
    await rig.delivered()
    file, text = rig.chat()
    assert file.kind == "document" and not file.visible_text
    assert text.reply_to_message_id == file.message_id and text.visible_text.split() == caption.split()


async def test_a_file_gone_before_it_is_sent_is_explained(rig: Rig, tmp_path: Path) -> None:
    rig.feed(file_output(rig, tmp_path / "gone.txt"))
    await rig.delivered()
    [said] = rig.chat()
    assert said.visible_text == "📎 I couldn't send “gone.txt”: the file is no longer there."


async def test_a_file_over_the_upload_limit_is_explained_not_sent(rig: Rig, tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"\x00" * (2 * MB))
    small = Delivery(rig.delivery.bot, rig.runtime, Translator(), edit_interval=0.05, upload_limit_mb=1)
    try:
        small(file_output(rig, tmp_path / "big.bin"))
        await small.idle()
    finally:
        await small.close()
    [said] = rig.chat()
    assert said.visible_text == "📎 I couldn't send “big.bin”: it is over the 1 MB a bot may send."
    assert rig.tg.calls("sendDocument") == []


async def test_fetching_and_transcribing_show_their_chat_actions_until_idle(rig: Rig) -> None:
    rig.feed(AttachmentActivity(to=rig.to, action=AttachmentAction.FETCHING))
    await rig.tg.wait_for(lambda: "upload_document" in actions(rig))
    rig.feed(AttachmentActivity(to=rig.to, action=AttachmentAction.TRANSCRIBING))
    await rig.tg.wait_for(lambda: "record_voice" in actions(rig))
    rig.feed(AttachmentActivity(to=rig.to, action=AttachmentAction.IDLE))
    await rig.delivered()
    box = rig.delivery.outboxes[(CHAT, 0, 0)]  # the chat, no topic, its own sessions' outbox
    assert box.actions.action is None
    assert [a for a in actions(rig) if a != "typing"] == ["upload_document", "record_voice"]
