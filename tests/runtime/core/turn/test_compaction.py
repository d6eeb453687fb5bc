"""Context compaction: when it runs, what it folds, and that a call never loses its result."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgram.runtime.core.turn.compaction import INSTRUCTIONS, SUMMARY_HEADER, Compactor, split_point
from agentgram.runtime.core.turn.context import Compacted, message_count
from agentgram.runtime.core.turn.deps import TurnDeps
from agentgram.runtime.core.turn.request import round_history
from agentgram.runtime.infra.config import CompactionSettings, ConfigInvalid, settings_from_mapping
from agentgram.runtime.infra.errors import LLMError
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    Usage,
)
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.models import HistoryRow, Role, ToolCallRow
from agentgram.runtime.infra.storage.summary_rows import SummaryStore
from tests.runtime.core.turn.scripted import HubRig, hub_rig, users

BIG = Usage(input_tokens=50_000, output_tokens=10)


def _entry(index: int, role: Role, calls: int = 0) -> HistoryEntry:
    row = HistoryRow(id=index + 1, session_id=1, role=role, content=f"m{index}")
    return HistoryEntry.of(
        row,
        [
            ToolCallRow(
                id=index * 10 + c, session_id=1, history_id=index + 1, call_id=f"c{index}.{c}", name="t"
            )
            for c in range(calls)
        ],
    )


histories = st.lists(
    st.tuples(st.sampled_from([Role.USER, Role.ASSISTANT]), st.integers(min_value=0, max_value=3)),
    max_size=30,
).map(
    lambda spec: [
        _entry(i, role, calls if role == Role.ASSISTANT else 0) for i, (role, calls) in enumerate(spec)
    ]
)


@settings(max_examples=300, deadline=None)
@given(histories, st.integers(min_value=2, max_value=12))
def test_the_cut_keeps_enough_whole_entries_and_starts_at_a_user_message_when_it_can(
    entries: list[HistoryEntry], keep_recent: int
) -> None:
    cut = split_point(entries, keep_recent)
    assert 0 <= cut <= len(entries)
    kept = entries[cut:]
    if cut:
        assert sum(message_count(e) for e in kept) >= keep_recent
        users_before = [i for i in range(1, cut + 1) if entries[i].role == Role.USER]
        if entries[cut].role != Role.USER:
            assert not users_before, "a user message could open the kept part, and does not"
    else:  # no cut leaves enough after it: the entries past the first hold fewer messages
        assert sum(message_count(e) for e in entries[1:]) < keep_recent


def _compactor(rig: HubRig, threshold: int = 1000, keep_recent: int = 2) -> Compactor:
    settings = CompactionSettings(threshold_tokens=threshold, keep_recent=keep_recent)
    return Compactor(settings, rig.services.history, SummaryStore(rig.db))


def _is_summary_request(messages: list[ChatMessage]) -> bool:
    return isinstance(messages[0], SystemMessage) and messages[0].content == INSTRUCTIONS


def _paired(messages: list[ChatMessage]) -> bool:
    """Every tool message answers a call of the assistant message before its run of results."""
    declared: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            declared = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolMessage) and message.tool_call_id not in declared:
            return False
    return True


def _model(summaries: list[str]) -> ScriptedLLM:
    """Turn 1 calls ``hold`` then answers; every later turn answers at once. Requests report BIG
    usage until one carries a summary, 600 tokens after."""

    def answer(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        if _is_summary_request(messages):
            summaries.append(str(messages[1].content))
            return Round("User asked about the hold tool; it said released.")
        said = users(messages)[-1]
        compacted = any(
            isinstance(m, SystemMessage) and m.content.startswith(SUMMARY_HEADER) for m in messages
        )
        usage = Usage(input_tokens=600) if compacted else BIG
        if said == "use the tool" and not isinstance(messages[-2], ToolMessage):
            return Round(calls=[Call("hold")], usage=usage)
        return Round(f"answer to {said}", usage=usage)

    return ScriptedLLM(answer)


async def test_a_turn_past_the_threshold_compacts_first_and_never_splits_a_call_from_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded: list[str] = []
    llm = _model(folded)
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        rig.hold.release.set()
        rig.configure(compaction=_compactor(rig))
        session = await rig.chat()
        await rig.say(session, "use the tool")
        await rig.turns_finished(1)
        assert not any(_is_summary_request(r.messages) for r in llm.requests), "nothing measured yet"
        await rig.say(session, "second question")
        await rig.turns_finished(2)

        [summary_call] = [r for r in llm.requests if _is_summary_request(r.messages)]
        [transcript] = folded
        assert "use the tool" in transcript
        assert "Tool call hold({}) -> released" in transcript, "the call is folded with its result"
        assert "second question" not in transcript, "the newest messages stay verbatim"
        rows = await rig.services.history.all_rows(session.id or 0)
        asked = rows[0].created_at
        assert f"[{asked:%Y-%m-%d %H:%M}] User: use the tool" in transcript, "dated as the row was stored"
        summary = await SummaryStore(rig.db).latest(session.id or 0)
        assert summary is not None
        covered = next(row for row in rows if row.id == summary.covers_through)
        assert summary.covers_until == covered.created_at

        after = llm.requests[-1].messages
        assert after[0] == SystemMessage("You are a test.")
        assert after[1] == SystemMessage(SUMMARY_HEADER + "User asked about the hold tool; it said released.")
        assert _paired(after)
        assert "use the tool" not in users(after)
        assert users(after)[-1] == "second question"
        stored = await SummaryStore(rig.db).latest(session.id or 0)
        assert stored is not None and stored.covered_rows >= 2
        assert summary_call is not llm.requests[-1]

        await rig.say(session, "third question")
        await rig.turns_finished(3)
        summaries = [r for r in llm.requests if _is_summary_request(r.messages)]
        assert len(summaries) == 1, "measured below the threshold since the summary: no compaction again"


async def test_a_failed_summary_call_leaves_the_history_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
        if _is_summary_request(messages):
            raise LLMError("the endpoint is down")
        return Round(f"answer to {users(messages)[-1]}", usage=BIG)

    llm = ScriptedLLM(answer)
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        rig.configure(compaction=_compactor(rig))
        session = await rig.chat()
        for count, text in enumerate(["one", "two", "three"], start=1):
            await rig.say(session, text)
            await rig.turns_finished(count)
        attempts = [r for r in llm.requests if _is_summary_request(r.messages)]
        assert len(attempts) == 2, "tried before turns 2 and 3"
        [*_, last] = [r for r in llm.requests if not _is_summary_request(r.messages)]
        assert users(last.messages) == ["one", "two", "three"], "the whole history, as it was"
        assert await SummaryStore(rig.db).latest(session.id or 0) is None
        assert [f.text for f in rig.finished()] == ["answer to one", "answer to two", "answer to three"]


async def test_under_compaction_max_history_messages_does_not_truncate_but_ephemeral_sessions_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM(lambda messages, tools: Round("ok"))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        rig.configure(compaction=_compactor(rig, threshold=10**6), context=_with_limit(rig.services, 2))
        session = await rig.chat()
        for count, text in enumerate(["a", "b", "c"], start=1):
            await rig.say(session, text)
            await rig.turns_finished(count)
        entries, compacted = await round_history(rig.services, session.id or 0, ephemeral=False)
        assert len(entries) == 6 and compacted == Compacted("")
        entries, compacted = await round_history(rig.services, session.id or 0, ephemeral=True)
        assert len(entries) == 2 and compacted is None


def _with_limit(services: TurnDeps, limit: int):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(services.context, max_history_messages=limit)


async def test_forced_compaction_with_too_little_history_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM(lambda messages, tools: Round("ok"))
    async with hub_rig(tmp_path, llm, monkeypatch) as rig:
        compactor = _compactor(rig, keep_recent=6)
        session = await rig.chat()
        await rig.say(session, "hi")
        await rig.turns_finished(1)
        report = await compactor.compact(session.id or 0, llm)
        assert report.outcome == "nothing"
        assert len(llm.requests) == 1


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"threshold_tokens": 10}, "llm.compaction.threshold_tokens"),
        ({"threshold_tokens": "lots"}, "llm.compaction.threshold_tokens"),
        ({"keep_recent": 1}, "llm.compaction.keep_recent"),
        ({"keep": 6}, "llm.compaction.keep"),
    ],
)
def test_a_wrong_compaction_setting_is_refused_naming_its_key(values: dict[str, object], key: str) -> None:
    raw = {"llm": {"model": "m", "compaction": values}}
    with pytest.raises(ConfigInvalid) as refused:
        settings_from_mapping(raw, {})
    assert key in str(refused.value)


def test_compaction_is_off_unless_a_threshold_is_set() -> None:
    settings = settings_from_mapping({"llm": {"model": "m"}}, {})
    assert not settings.llm.compaction.enabled and settings.llm.compaction.keep_recent == 6
