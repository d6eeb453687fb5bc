"""The FastMCP test server in real turns (issue 16 req. 4, 7): a call that times out, one stopped with
/stop, an erroring tool, structured content and images, as the model's next request shows them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentgram.runtime.app import Runtime
from agentgram.runtime.capabilities.mcp.servers import ServerState
from agentgram.runtime.infra.events import OutcomeKind, ToolActivity, ToolPhase, TurnFinished
from agentgram.runtime.infra.storage.models import ToolCallStatus
from tests.conftest import make_settings
from tests.fakes.mcp_server import PIXEL_COLOUR, STRUCTURED
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import Recorder, started_runtime

TEST_SERVER = str(Path(__file__).resolve().parents[3] / "fakes" / "mcp_server.py")
ALLOW = {"rules": [{"tool": "mcp__test__*", "action": "allow"}]}


def settings(tmp_path: Path, fake: FakeOpenAI, timeout: float = 30, **sections: Any) -> Any:
    server = {"command": sys.executable, "args": [TEST_SERVER], "lazy": False, "timeout": timeout}
    return make_settings(
        tmp_path, fake.base_url, mcp={"servers": {"test": server}}, approval=ALLOW, **sections
    )


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def one_turn(runtime: Runtime, rec: Recorder, text: str) -> TurnFinished:
    session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
    count = len(rec.of("turn_finished"))
    await runtime.chat.post_user_message(session, text, envelope_id=f"u-{text}")
    await rec.wait_kind("turn_finished", count + 1, timeout=30)
    finished = rec.of("turn_finished")[-1]
    assert isinstance(finished, TurnFinished)
    return finished


async def test_a_call_beyond_the_timeout_is_a_readable_error_and_the_turn_goes_on(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("mcp__test__slow", {"seconds": 30}, id="c_s")]), Text("it hung"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, timeout=1))
    try:
        finished = await one_turn(runtime, rec, "take your time")
        assert finished.outcome is OutcomeKind.FINAL and finished.text == "it hung"
        (result,) = tool_results(fake_llm.requests[1])
        assert "did not answer within 1s" in result and "'test'" in result
    finally:
        await runtime.close()


async def test_stop_cancels_a_call_in_flight_and_the_server_still_answers(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        ToolCalls([Call("mcp__test__slow", {"seconds": 60}, id="c_s")]),
        ToolCalls([Call("mcp__test__slow", {"seconds": 0}, id="c_q")]),
        Text("quick this time"),
    )
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        await runtime.chat.post_user_message(session, "sleep long", envelope_id="u1")
        await rec.wait_for(lambda: any(running(e, "mcp__test__slow") for e in rec.events), timeout=30)
        stopped = await runtime.chat.stop(session, "s1")
        assert stopped.was_running
        await rec.wait_kind("turn_finished", timeout=10)
        (finished,) = rec.of("turn_finished")
        assert isinstance(finished, TurnFinished) and finished.outcome is OutcomeKind.CANCELLED
        call = await runtime.parts.history.call_by_model_id(session.id or 0, "c_s")
        assert call is not None and call.status == ToolCallStatus.CANCELLED
        server = runtime.parts.mcp.get("test")
        assert server is not None and server.state is ServerState.RUNNING

        finished = await one_turn(runtime, rec, "now quickly")
        assert finished.text == "quick this time"
        assert tool_results(fake_llm.requests[-1])[-1] == "slept 0s"
    finally:
        await runtime.close()


def running(event: object, name: str) -> bool:
    return isinstance(event, ToolActivity) and event.name == name and event.phase is ToolPhase.RUNNING


async def test_an_erroring_tool_gives_the_model_its_message(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("mcp__test__fail", {"message": "disk on fire"}, id="c_f")]), Text("ok"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await one_turn(runtime, rec, "try it")
        (result,) = tool_results(fake_llm.requests[1])
        assert "disk on fire" in result
        session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
        call = await runtime.parts.history.call_by_model_id(session.id or 0, "c_f")
        assert call is not None and call.status == ToolCallStatus.FAILED
    finally:
        await runtime.close()


async def test_structured_content_reaches_the_model_as_json(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("mcp__test__structured", {}, id="c_j")]), Text("21.5 C"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await one_turn(runtime, rec, "how warm?")
        (result,) = tool_results(fake_llm.requests[1])
        assert json.loads(result) == STRUCTURED
    finally:
        await runtime.close()


async def test_an_image_result_reaches_a_vision_model_as_an_image_part(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([Call("mcp__test__image", {}, id="c_i")]), Text("a red square"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await one_turn(runtime, rec, "draw")
        (note,) = tool_results(fake_llm.requests[1])
        assert note.startswith("[image 1: image/png, saved as .agentgram/tool-images/")
        saved = runtime.parts.workdir / note.removesuffix("]").rsplit(" ", 1)[1]
        (seen,) = fake_llm.seen_images(1)
        assert seen.mime_type == "image/png" and seen.data == saved.read_bytes()
        messages = fake_llm.requests[1]["messages"]
        assert [m["role"] for m in messages[seen.message_index - 2 : seen.message_index + 1]] == [
            "assistant",
            "tool",
            "user",
        ]
        assert "mcp__test__image (call c_i)" in messages[seen.message_index]["content"][0]["text"]
        assert red(seen.data)
    finally:
        await runtime.close()


async def test_a_restart_shows_the_saved_image_again(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("mcp__test__image", {}, id="c_i")]), Text("a red square"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await one_turn(runtime, rec, "draw")
    finally:
        await runtime.close()
    fake_llm.script(Text("still red"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm))
    try:
        await one_turn(runtime, rec, "what colour was it?")
        assert fake_llm.images(1), "the first run's vision request showed the image"
        assert fake_llm.images(-1) == fake_llm.images(1)
    finally:
        await runtime.close()


async def test_without_vision_the_model_reads_only_the_note(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(ToolCalls([Call("mcp__test__image", {}, id="c_i")]), Text("an image, I am told"))
    runtime, rec = await started_runtime(settings(tmp_path, fake_llm, llm={"vision": False}))
    try:
        await one_turn(runtime, rec, "draw")
        (note,) = tool_results(fake_llm.requests[1])
        assert note.startswith("[image 1: image/png, saved as ")
        assert fake_llm.seen_images(1) == []
        assert [m["role"] for m in fake_llm.requests[1]["messages"]][-3:] == ["assistant", "tool", "system"]
    finally:
        await runtime.close()


def red(png: bytes) -> bool:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB").getpixel((0, 0)) == PIXEL_COLOUR
