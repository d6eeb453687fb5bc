"""The inbox in the real runtime (issue 15): paths given before the mail is stored, fetched off the
message path, the prepared files in the user row, resumed after a restart, stopped by /stop.

The chat platform is a small in-test file source (the Telegram one is tested end to end in
tests/e2e/test_attachments.py); the model is the real openai SDK against the fake endpoint.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentgram.runtime.app import Runtime
from agentgram.runtime.core.mailbox.envelope import Attachment
from agentgram.runtime.infra.errors import FetchFailed
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.runtime.core.turn.harness import Recorder


class PlatformFiles:
    """What a chat platform would serve: bytes by file id; ``gate`` holds every fetch until set."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.fetched: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = asyncio.Event()

    async def fetch(self, file_id: str, dest: Path) -> None:
        self.fetched.append(file_id)
        self.asked.set()
        await self.gate.wait()
        if file_id not in self.files:
            raise FetchFailed("the file is no longer available")
        await asyncio.to_thread(dest.write_bytes, self.files[file_id])

    async def asked_for(self, file_ids: list[str], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while self.fetched != file_ids:
                self.asked.clear()
                await self.asked.wait()


def settings(tmp_path: Path, llm: FakeOpenAI, **sections: Any) -> Any:
    return make_settings(tmp_path, llm.base_url, transcription={"enabled": False}, **sections)


async def with_files(config: Any, files: PlatformFiles) -> tuple[Runtime, Recorder]:
    """A started runtime whose adapter set its file source first, as ``compose()`` does."""
    runtime = Runtime(config, format_rules="")
    runtime.set_file_source(files)
    recorder = Recorder()
    runtime.parts.bus.subscribe(recorder)
    await runtime.start()
    return runtime, recorder


async def posted(runtime: Runtime, text: str, attachments: list[Attachment], envelope: str = "u1") -> Any:
    session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
    await runtime.chat.accept_user_message(session, text, envelope_id=envelope, attachments=attachments)
    return session


async def test_a_document_is_saved_byte_identical_under_a_dated_collision_free_name(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    data = bytes(range(256)) * 40
    files = PlatformFiles({"f1": data, "f2": b"second"})
    fake_llm.script(Text("Got both."))
    runtime, rec = await with_files(settings(tmp_path, fake_llm), files)
    try:
        (runtime.parts.workdir / "inbox").mkdir()
        doc = Attachment(
            kind="document", file_id="f1", name="report.pdf", mime_type="application/pdf", size=len(data)
        )
        twin = Attachment(
            kind="document", file_id="f2", name="report.pdf", mime_type="application/pdf", size=6
        )
        session = await posted(runtime, "two reports", [doc, twin])
        await rec.wait_kind("turn_finished")
        [row] = [r for r in await runtime.parts.history.all_rows(session.id) if r.role == "user"]
        first, second = row.meta["attachments"]
        assert first["status"] == "ready" and first["path"].endswith("/report.pdf")
        assert second["path"].endswith("/report (2).pdf") and first["path"].startswith("inbox/2")
        assert (runtime.parts.workdir / first["path"]).read_bytes() == data
        assert (runtime.parts.workdir / second["path"]).read_bytes() == b"second"
        assert row.content == "two reports"  # the attachment lines are built per round, never stored
        assert not list((runtime.parts.workdir / "inbox").rglob("*.part"))
    finally:
        await runtime.close()


async def test_a_failed_fetch_tells_the_user_and_the_message_still_reaches_the_model(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(Text("I could not open it."))
    runtime, rec = await with_files(settings(tmp_path, fake_llm), PlatformFiles({}))
    try:
        gone = Attachment(kind="document", file_id="gone", name="old.zip", size=10)
        session = await posted(runtime, "look at this", [gone])
        await rec.wait_kind("turn_finished")
        [notice] = [n for n in rec.of("notice") if n.key == "attachment-failed"]
        assert notice.params == {"name": "old.zip", "reason": "the file is no longer available"}
        [row] = [r for r in await runtime.parts.history.all_rows(session.id) if r.role == "user"]
        assert row.meta["attachments"][0]["status"] == "failed"
        assert fake_llm.calls == 1
    finally:
        await runtime.close()


async def test_a_skipped_file_is_never_fetched(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Text("Too big, sorry."))
    files = PlatformFiles({"big": b"x"})
    runtime, rec = await with_files(settings(tmp_path, fake_llm), files)
    try:
        big = Attachment(
            kind="document", file_id="big", name="movie.mkv", size=90 << 20, skipped="over the 20 MB limit"
        )
        session = await posted(runtime, "", [big])
        await rec.wait_kind("turn_finished")
        assert files.fetched == []
        [row] = [r for r in await runtime.parts.history.all_rows(session.id) if r.role == "user"]
        assert row.meta["attachments"][0]["status"] == "skipped"
        assert row.meta["attachments"][0]["error"] == "over the 20 MB limit"
    finally:
        await runtime.close()


async def test_stop_cancels_a_fetch_and_the_message_is_dropped(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    files = PlatformFiles({"slow": b"data"})
    files.gate.clear()  # the platform never finishes this one
    runtime, rec = await with_files(settings(tmp_path, fake_llm), files)
    try:
        doc = Attachment(kind="document", file_id="slow", name="big.bin", size=4)
        session = await posted(runtime, "take this", [doc])
        await files.asked_for(["slow"])
        stopped = await runtime.chat.stop(session, "s1")
        assert stopped.was_running
        await rec.wait_kind("notice")
        assert [n.key for n in rec.of("notice")] in (["stopped-dropped"], ["stopped"])
        assert fake_llm.calls == 0
        assert not runtime.parts.inbox.busy(session.id)
    finally:
        await runtime.close()


async def test_a_fetch_cut_short_by_a_restart_is_done_again_and_a_finished_one_is_not(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    files = PlatformFiles({"a": b"alpha", "b": b"beta"})
    files.gate.clear()
    config = settings(tmp_path, fake_llm)
    runtime, rec = await with_files(config, files)
    try:
        docs = [Attachment(kind="document", file_id=f, name=f"{f}.txt", size=5) for f in ("a", "b")]
        await posted(runtime, "files", docs)
        await files.asked_for(["a"])
    finally:
        await runtime.close()  # the fetch is cut short: the mail is still unread
    files.gate.set()
    fake_llm.script(Text("Both read."))
    runtime, rec = await with_files(config, files)
    try:  # the unread mail is read again on start
        await rec.wait_kind("turn_finished")
        assert files.fetched == ["a", "a", "b"]
        saved = sorted(p.name for p in (runtime.parts.workdir / "inbox").rglob("*") if p.is_file())
        assert saved == ["a.txt", "b.txt"]
    finally:
        await runtime.close()


async def test_a_voice_note_is_transcribed_the_chat_told_and_the_model_reads_it_as_spoken(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    ogg = b"OggS fake voice bytes"
    files = PlatformFiles({"v1": ogg})
    fake_llm.transcribe("Remind me to water the plants.")
    fake_llm.script(Text("I will."))
    config = make_settings(tmp_path, fake_llm.base_url, transcription={"language": "en"})
    runtime, rec = await with_files(config, files)
    try:
        voice = Attachment(kind="voice", file_id="v1", mime_type="audio/ogg", size=len(ogg), duration=3)
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.accept_user_message(
            session, "", envelope_id="u1", chat_message_id=77, attachments=[voice]
        )
        await rec.wait_kind("turn_finished")
        [heard] = fake_llm.transcriptions
        assert heard.content == ogg and heard.language == "en" and heard.model == "whisper-1"
        [told] = [n for n in rec.of("notice") if n.key == "voice-transcript"]
        assert told.params == {"text": "Remind me to water the plants."} and told.refers_to_message == 77
        [row] = [r for r in await runtime.parts.history.all_rows(session.id) if r.role == "user"]
        assert row.content == "(voice) Remind me to water the plants."
        assert row.meta["attachments"][0]["transcript"] == "Remind me to water the plants."
        user = [m for m in fake_llm.requests[0]["messages"] if m["role"] == "user"][-1]
        assert "(voice) Remind me to water the plants." in str(user["content"])
    finally:
        await runtime.close()


async def test_a_failed_transcription_says_why_and_keeps_the_audio(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    from tests.fakes.openai_server import Error

    files = PlatformFiles({"v1": b"OggS"})
    fake_llm.transcribe(Error(500, "upstream broke"))
    fake_llm.script(Text("Sorry, I could not hear it."))
    runtime, rec = await with_files(make_settings(tmp_path, fake_llm.base_url), files)
    try:
        voice = Attachment(kind="voice", file_id="v1", mime_type="audio/ogg", size=4)
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.accept_user_message(session, "", envelope_id="u1", attachments=[voice])
        await rec.wait_kind("turn_finished")
        [failed] = [n for n in rec.of("notice") if n.key == "voice-failed"]
        assert "transcription failed" in str(failed.params["reason"])
        [row] = [r for r in await runtime.parts.history.all_rows(session.id) if r.role == "user"]
        kept = row.meta["attachments"][0]
        assert kept["status"] == "ready" and (runtime.parts.workdir / kept["path"]).read_bytes() == b"OggS"
    finally:
        await runtime.close()
