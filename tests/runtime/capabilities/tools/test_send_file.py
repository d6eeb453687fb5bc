"""``send_file`` in real turns (issue 15 req. 5): recorded in the outbox first, allowed inside the
workdir, asking outside it, refusing over the upload limit. The upload itself is the adapter's
(tests/e2e/test_attachments.py)."""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.infra.events import FileOutput
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import started_runtime


def tool_results(request: dict[str, object]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]  # type: ignore[attr-defined,index]


async def test_a_workspace_file_is_recorded_then_published_and_an_image_goes_as_a_photo(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls(
            [
                Call("send_file", {"path": "chart.png", "caption": "the chart"}),
                Call("send_file", {"path": "r.csv"}),
            ]
        ),
        Text("Sent."),
    )
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        (runtime.parts.workdir / "chart.png").write_bytes(b"\x89PNG fake")
        (runtime.parts.workdir / "r.csv").write_text("a,b\n1,2\n")
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "send them", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        photo, doc = (e for e in rec.events if isinstance(e, FileOutput))
        assert (photo.path, photo.caption, photo.as_photo) == (
            str(runtime.parts.workdir / "chart.png"),
            "the chart",
            True,
        )
        assert (doc.path, doc.as_photo) == (str(runtime.parts.workdir / "r.csv"), False)
        assert photo.outbox_id is not None and photo.to.chat_id == 1001  # recorded before it was emitted
        assert not rec.of("approval_requested")
        first, second = tool_results(fake_llm.requests[1])
        assert first.startswith("sent chart.png") and "as a photo" in first
        assert "as a document" in second
    finally:
        await runtime.close()


async def test_a_file_over_the_upload_limit_is_an_error_naming_the_limit(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("send_file", {"path": "big.bin"})]), Text("Too big."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        runtime.parts.output.max_upload_bytes = 1024 * 1024
        with (runtime.parts.workdir / "big.bin").open("wb") as fh:
            fh.truncate(2 * 1024 * 1024)
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "send it", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        [result] = tool_results(fake_llm.requests[1])
        assert "big.bin is 2.0 MB; the chat takes files up to 1.0 MB" in result
        assert not [e for e in rec.events if isinstance(e, FileOutput)]
    finally:
        await runtime.close()


async def test_a_file_outside_the_workdir_asks_first(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("secret-ish")
    fake_llm.script(ToolCalls([Call("send_file", {"path": str(outside)})]), Text("ok"))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "send it", envelope_id="u1")
        await rec.wait_kind("approval_requested")
        assert not [e for e in rec.events if isinstance(e, FileOutput)]
    finally:
        await runtime.close()
