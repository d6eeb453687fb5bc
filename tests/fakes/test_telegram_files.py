"""The fake Bot API's files: user media updates, getFile, the file route, uploads and their limits,
driven with the real python-telegram-bot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from telegram import Bot, Update
from telegram.constants import ChatAction
from telegram.error import BadRequest, NetworkError

from tests.conftest import ALLOWED_USER
from tests.fakes.telegram_server import MAX_PHOTO_UPLOAD, MAX_UPLOAD, MB, FakeTelegram
from tests.fakes.user_chat import UserChat

USER = 42


@pytest.fixture(autouse=True)
def ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as b:
        yield b


async def only_update(bot: Bot) -> Update:
    updates = await bot.get_updates(timeout=0)
    assert len(updates) == 1
    await bot.get_updates(offset=updates[0].update_id + 1, timeout=0)
    return updates[0]


async def fetch(bot: Bot, file_id: str) -> bytes:
    file = await bot.get_file(file_id)
    return bytes(await file.download_as_bytearray())


async def test_photo_comes_in_sizes_and_the_largest_holds_the_bytes(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_photo(USER, b"\x89PNG the real photo", caption="look", width=1600, height=900)
    message = (await only_update(bot)).message
    assert message is not None and message.caption == "look"
    thumb, largest = message.photo
    assert (largest.width, largest.height) == (1600, 900)
    assert (thumb.width, thumb.height) == (90, 51)
    assert thumb.file_id != largest.file_id and thumb.file_unique_id != largest.file_unique_id
    assert await fetch(bot, largest.file_id) == b"\x89PNG the real photo"
    assert await fetch(bot, thumb.file_id) != b"\x89PNG the real photo"


async def test_voice_note_with_a_premium_transcript(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_voice(USER, b"OggS spoken", duration=7, transcript="buy milk")
    voice = (await only_update(bot)).message.voice  # type: ignore[union-attr]
    assert voice is not None
    assert (voice.duration, voice.mime_type, voice.file_size) == (timedelta(seconds=7), "audio/ogg", 11)
    assert voice.api_kwargs == {"transcript": "buy milk"}
    file = await bot.get_file(voice.file_id)
    assert file.file_path is not None and file.file_path.endswith(".oga")
    assert bytes(await file.download_as_bytearray()) == b"OggS spoken"


async def test_audio_video_note_video_animation_and_document(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_audio(USER, b"ID3 song", filename="tune.mp3", duration=61)
    tg.send_video_note(USER, b"round", duration=4)
    tg.send_video(USER, b"clip", caption="watch")
    tg.send_animation(USER, b"gif")
    tg.send_user_document(USER, "notes.txt", b"hello", mime_type="text/plain", caption="read")
    updates = await bot.get_updates(timeout=0)
    audio, note, video, animation, document = (u.message for u in updates)
    assert audio is not None and audio.audio is not None
    assert (audio.audio.file_name, audio.audio.mime_type) == ("tune.mp3", "audio/mpeg")
    assert note is not None and note.video_note is not None and note.video_note.length == 384
    assert (await bot.get_file(note.video_note.file_id)).file_path.endswith(".mp4")  # type: ignore[union-attr]
    assert video is not None and video.video is not None and video.caption == "watch"
    assert animation is not None and animation.animation is not None and animation.document is not None
    assert document is not None and document.document is not None
    assert (document.document.file_name, document.caption) == ("notes.txt", "read")
    contents = [
        await fetch(bot, audio.audio.file_id),
        await fetch(bot, note.video_note.file_id),
        await fetch(bot, video.video.file_id),
        await fetch(bot, animation.animation.file_id),
        await fetch(bot, document.document.file_id),
    ]
    assert contents == [b"ID3 song", b"round", b"clip", b"gif", b"hello"]


async def test_album_items_share_a_media_group_id(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_photo(USER, b"one", caption="trip", media_group_id="album-1")
    tg.send_photo(USER, b"two", media_group_id="album-1")
    tg.send_user_document(USER, "c.pdf", b"%PDF", media_group_id="album-2")
    messages = [u.message for u in await bot.get_updates(timeout=0)]
    assert [m.media_group_id for m in messages if m is not None] == ["album-1", "album-1", "album-2"]


async def test_get_file_refuses_files_over_20_mb_like_telegram(bot: Bot, tg: FakeTelegram) -> None:
    tg.send_user_document(USER, "big.zip", b"PK", size=21 * MB)
    document = (await only_update(bot)).message.document  # type: ignore[union-attr]
    assert document is not None and document.file_size == 21 * MB
    with pytest.raises(BadRequest, match=r"^File is too big$"):
        await bot.get_file(document.file_id)
    assert tg.calls("getFile")[-1].description == "Bad Request: file is too big"
    tg.max_download_bytes = 2000 * MB  # a local Bot API server
    assert (await bot.get_file(document.file_id)).file_size == 21 * MB


async def test_add_file_then_download_and_unknown_paths(bot: Bot, tg: FakeTelegram) -> None:
    file_id, unique_id = tg.add_file(b"stored", name="a.bin", mime_type="application/octet-stream")
    file = await bot.get_file(file_id)
    assert (file.file_unique_id, file.file_size) == (unique_id, 6)
    assert await fetch(bot, file_id) == b"stored"
    assert tg.downloaded(file_id) == 1
    async with httpx.AsyncClient() as http:
        missing = await http.get(f"{tg.base_file_url}{tg.token}/documents/nothing.bin")
        wrong_token = await http.get(f"{tg.base_file_url}1:wrong/{file.file_path}")
    assert (missing.status_code, missing.json()["description"]) == (404, "Not Found")
    assert wrong_token.status_code == 401
    assert [d.file_id for d in tg.downloads] == [file_id, None]  # a wrong token is no download
    with pytest.raises(BadRequest, match="Invalid file_id"):
        await bot.get_file("no-such-file")


async def test_held_downloads_hang_until_released(bot: Bot, tg: FakeTelegram) -> None:
    file_id, _ = tg.add_file(b"slow")
    file = await bot.get_file(file_id)
    tg.hold_downloads()
    download = asyncio.create_task(file.download_as_bytearray())
    await tg.wait_for(lambda: tg.downloaded(file_id) == 1)
    await asyncio.sleep(0.05)
    assert not download.done()
    tg.release_downloads()
    assert bytes(await download) == b"slow"


async def test_send_photo_and_document_store_the_upload(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    await bot.send_chat_action(USER, ChatAction.UPLOAD_DOCUMENT)
    photo = await bot.send_photo(USER, b"\xff\xd8\xff jpeg", filename="shot.jpg", caption="here")
    await bot.send_document(USER, b"a,b\n1,2\n", filename="t.csv", caption="table")
    sent_photo, sent_doc = tg.files_sent(USER)
    assert (sent_photo.kind, sent_photo.document_content, sent_photo.caption) == (
        "photo", b"\xff\xd8\xff jpeg", "here",
    )  # fmt: skip
    assert (sent_doc.kind, sent_doc.document_filename, sent_doc.document_content) == (
        "document", "t.csv", b"a,b\n1,2\n",
    )  # fmt: skip
    assert await fetch(bot, photo.photo[-1].file_id) == b"\xff\xd8\xff jpeg"
    assert tg.actions(USER) == ["upload_document"]


async def test_upload_limits_10_mb_photos_50_mb_files(bot: Bot, tg: FakeTelegram) -> None:
    tg.add_chat(USER)
    with pytest.raises(BadRequest, match="Photo_save_file_invalid"):
        await bot.send_photo(USER, b"\xff" * (MAX_PHOTO_UPLOAD + 1), filename="huge.jpg")
    await bot.send_document(USER, b"\xff" * (MAX_PHOTO_UPLOAD + 1), filename="huge.jpg")  # fine as a file
    with pytest.raises(NetworkError, match="Request Entity Too Large"):
        await bot.send_document(USER, b"\0" * (MAX_UPLOAD + 1), filename="too.bin", write_timeout=30)
    assert [m.kind for m in tg.files_sent(USER)] == ["document"]


async def test_user_chat_sends_as_the_allowed_user(bot: Bot, tg: FakeTelegram) -> None:
    class Rig(UserChat):
        def __init__(self, fake: FakeTelegram) -> None:
            self.tg = fake

    user = Rig(tg)
    user.send_photo(b"p", caption="c", media_group_id="g")
    user.send_voice(b"v", duration=2)
    user.send_document(b"d", "d.txt", "text/plain", caption="doc")
    user.send_sticker("🙂")
    messages = [u.message for u in await bot.get_updates(timeout=0)]
    assert all(m is not None and m.from_user is not None and m.from_user.id == ALLOWED_USER for m in messages)
    photo, voice, document, sticker = messages
    assert photo is not None and (photo.caption, photo.media_group_id) == ("c", "g")
    assert voice is not None and voice.voice is not None and voice.voice.duration == timedelta(seconds=2)
    assert document is not None and document.document is not None and document.caption == "doc"
    assert sticker is not None and sticker.sticker is not None and sticker.sticker.emoji == "🙂"
    assert user.files() == []
