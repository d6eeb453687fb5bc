"""The runtime's metrics: what the bus observer counts, and the LLM client's latencies by model.

The registry is the process's: every assertion is a delta over what earlier tests counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentgram.runtime.infra.config import LLMSettings
from agentgram.runtime.infra.events import (
    Address,
    CallFinished,
    RoundEnded,
    ToolActivity,
    ToolPhase,
    TurnFinished,
    TurnStarted,
)
from agentgram.runtime.infra.events import OutcomeKind as Outcome
from agentgram.runtime.infra.llm.openai_client import OpenAIClient
from agentgram.runtime.infra.llm.types import StreamEvent, SystemMessage, UserMessage
from agentgram.runtime.infra.metrics import REGISTRY, render
from agentgram.runtime.metrics_bus import UNKNOWN_TOOL, MetricsObserver
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import Error, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import started_runtime

HERE = Address(session_id=7, source="chat", chat_id=1)
THERE = Address(session_id=8, source="chat", chat_id=2)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def counting(name: str, **labels: str) -> Callable[[], float]:
    """The sample's growth since this call."""
    start = sample(name, **labels)
    return lambda: sample(name, **labels) - start


def round_ended(turn_id: int, address: Address = HERE) -> RoundEnded:
    return RoundEnded(to=address, turn_id=turn_id, text="", has_tool_calls=True)


def finished(turn_id: int, outcome: Outcome = Outcome.FINAL, address: Address = HERE) -> TurnFinished:
    return TurnFinished(to=address, turn_id=turn_id, outcome=outcome)


def test_a_turns_rounds_are_observed_when_it_finishes() -> None:
    observer = MetricsObserver()
    turns, rounds, runs = (
        counting("agentgram_turns_total", outcome="exhausted"),
        counting("agentgram_turn_rounds_sum"),
        counting("agentgram_turn_rounds_count"),
    )
    observer(TurnStarted(to=HERE, turn_id=1))
    for _ in range(3):
        observer(round_ended(1))
    assert (rounds(), runs()) == (0, 0)
    observer(finished(1, Outcome.EXHAUSTED))
    assert (turns(), rounds(), runs()) == (1, 3, 1)
    assert observer.running == {}


def test_an_answer_resent_after_a_restart_is_no_round() -> None:
    observer = MetricsObserver()
    rounds = counting("agentgram_turn_rounds_sum")
    observer(round_ended(2))  # no turn of it runs: the runtime re-sends a stored answer
    observer(TurnStarted(to=HERE, turn_id=3))
    observer(round_ended(3))
    observer(TurnStarted(to=HERE, turn_id=3, resumed=True))  # the same run goes on
    observer(round_ended(3))
    observer(finished(3))
    assert rounds() == 2


def test_active_sessions_are_those_with_a_running_turn() -> None:
    observer = MetricsObserver()
    observer(TurnStarted(to=HERE, turn_id=10))
    observer(TurnStarted(to=THERE, turn_id=11))
    assert sample("agentgram_sessions_active") == 2
    observer(finished(10))
    assert sample("agentgram_sessions_active") == 1
    observer(finished(11, Outcome.CANCELLED, THERE))
    assert sample("agentgram_sessions_active") == 0


def test_a_tool_call_counts_once_at_its_last_phase() -> None:
    observer = MetricsObserver()
    done = counting("agentgram_tool_calls_total", tool="read_file", status="done")
    started = counting("agentgram_tool_calls_total", tool="read_file", status="started")
    rejected = counting("agentgram_tool_calls_total", tool="execute_cmd", status="rejected")
    for name, phase in [
        ("read_file", ToolPhase.STARTED),
        ("read_file", ToolPhase.RUNNING),
        ("read_file", ToolPhase.DONE),
        ("execute_cmd", ToolPhase.REJECTED),
    ]:
        observer(ToolActivity(to=HERE, turn_id=1, tool_call_id=1, name=name, summary="", phase=phase))
    assert (done(), started(), rejected()) == (1, 0, 1)


def test_a_tool_the_runtime_does_not_know_is_counted_as_unknown() -> None:
    observer = MetricsObserver(known={"read_file"}.__contains__)
    known = counting("agentgram_tool_calls_total", tool="read_file", status="failed")
    unknown = counting("agentgram_tool_calls_total", tool=UNKNOWN_TOOL, status="failed")
    for name in ("read_file", "invented_by_the_model_1", "invented_by_the_model_2"):
        observer(
            ToolActivity(to=HERE, turn_id=1, tool_call_id=1, name=name, summary="", phase=ToolPhase.FAILED)
        )
    assert (known(), unknown()) == (1, 2)
    assert b"invented_by_the_model" not in render()[0]


async def test_a_runtime_counts_a_call_to_an_invented_tool_as_unknown(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(ToolCalls([("made_up_tool", {}), ("list_dir", {"path": "."})]), Text("Done."))
    unknown = counting("agentgram_tool_calls_total", tool=UNKNOWN_TOOL, status="failed")
    listed = counting("agentgram_tool_calls_total", tool="list_dir", status="done")
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")
        await runtime.chat.post_user_message(session, "look around", envelope_id="m1")
        await rec.wait_kind("turn_finished")
    finally:
        await runtime.close()
    assert (unknown(), listed()) == (1, 1)
    assert b"made_up_tool" not in render()[0]


def test_a_background_calls_end_counts_by_its_status() -> None:
    observer = MetricsObserver()
    orphaned = counting("agentgram_background_calls_total", tool="execute_cmd", status="orphaned")
    moment = datetime.now(UTC)
    observer(
        CallFinished(
            to=HERE,
            run_id=1,
            name="execute_cmd",
            summary="sleep 99",
            runs_command=True,
            status="orphaned",
            started_at=moment,
            finished_at=moment,
        )
    )
    assert orphaned() == 1


def test_render_is_the_prometheus_text_format_of_agentgrams_metrics() -> None:
    body, content_type = render()
    assert content_type.startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(body.decode())}
    assert {"agentgram_turns", "agentgram_llm_request_duration_seconds", "agentgram_mail_accepted"} <= names
    assert "python_gc_objects_collected" not in names, "the process-global registry is not ours"


# --- LLM latency and tokens, counted in the OpenAI client ------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(models=("main", "backup")) as server:
        yield server


async def ignore(event: StreamEvent) -> None:
    pass


HELLO = [SystemMessage("be brief"), UserMessage("hi")]


async def test_latency_and_tokens_are_counted_by_the_model_that_answered(fake: FakeOpenAI) -> None:
    settings = LLMSettings(base_url=fake.base_url, model="main", fallback_models=["backup"], max_retries=0)
    client = OpenAIClient(settings, retry_base_delay=0.01)
    fake.on_model("main", Error(503, "down"))
    fake.on_model("backup", Text("slow and steady", chunk_size=5, delay=0.1, usage=(30, 4)))
    main, backup = (
        counting("agentgram_llm_request_duration_seconds_count", model=m) for m in ("main", "backup")
    )
    prompt = counting("agentgram_llm_tokens_total", model="backup", kind="prompt")
    completion = counting("agentgram_llm_tokens_total", model="backup", kind="completion")
    first_sum = counting("agentgram_llm_time_to_first_token_seconds_sum", model="backup")
    total_sum = counting("agentgram_llm_request_duration_seconds_sum", model="backup")
    try:
        await client.stream_round(HELLO, [], ignore)
    finally:
        await client.aclose()
    assert (main(), backup()) == (0, 1), "a failed attempt is no completed request"
    assert (prompt(), completion()) == (30, 4)
    assert 0.1 <= first_sum() and total_sum() - first_sum() >= 0.2 - 0.05  # two more chunks after the first
