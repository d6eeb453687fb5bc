"""Context building: stored history → one request's messages (pure, no database).

Examples pin the documented behaviour; hypothesis properties check the invariants
for any history: every tool call answered by exactly one tool message in declared
order, truncation never splitting a call from its result, consecutive user rows
coalesced, tool results hidden only for earlier turns, a byte-identical static
system message.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.context import (
    ContextSettings,
    build_messages,
    current_turn_start,
    message_count,
    truncate,
)
from agentgram.runtime.infra.llm.types import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agentgram.runtime.infra.storage.history import HistoryEntry
from agentgram.runtime.infra.storage.models import HistoryRow, Role, RowStatus, ToolCallRow, ToolCallStatus

STATIC = "You are agentgram.\nReply in Telegram HTML."
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def context_settings(max_history: int = 200, hide_over: int | None = 40) -> ContextSettings:
    return ContextSettings(
        static_system=STATIC,
        workdir=Path("/home/ann/workspace"),
        timezone=ZoneInfo("Europe/Berlin"),
        timezone_name="Europe/Berlin",
        max_history_messages=max_history,
        max_tool_result_chars=hide_over,
    )


@dataclass
class Calls:
    """Spec of one call for :class:`HistoryBuilder`: ``(name, status, result)``."""

    name: str
    status: ToolCallStatus
    result: str | None


class HistoryBuilder:
    """Builds :class:`HistoryEntry` values the way the stores would return them."""

    def __init__(self) -> None:
        self.entries: list[HistoryEntry] = []
        self._row_ids = itertools.count(1)
        self._call_ids = itertools.count(1)

    def user(self, text: str, turn: int | None) -> HistoryBuilder:
        row = HistoryRow(id=next(self._row_ids), session_id=1, turn_id=turn, role=Role.USER, content=text)
        self.entries.append(HistoryEntry.of(row, []))
        return self

    def assistant(
        self,
        text: str,
        turn: int | None,
        calls: list[Calls] = [],  # noqa: B006 (never mutated)
        status: RowStatus = RowStatus.OK,
    ) -> HistoryBuilder:
        row_id = next(self._row_ids)
        row = HistoryRow(
            id=row_id, session_id=1, turn_id=turn, role=Role.ASSISTANT, content=text, status=status
        )
        rows = [
            ToolCallRow(
                id=next(self._call_ids),
                session_id=1,
                history_id=row_id,
                position=position,
                call_id=f"call_{row_id}_{position}",
                name=spec.name,
                arguments='{"path": "x"}',
                status=spec.status,
                result=spec.result,
            )
            for position, spec in enumerate(calls)
        ]
        self.entries.append(HistoryEntry.of(row, rows))
        return self


def conversation(messages: list[ChatMessage]) -> list[ChatMessage]:
    assert isinstance(messages[0], SystemMessage) and isinstance(messages[-1], SystemMessage)
    return messages[1:-1]


# --- examples -------------------------------------------------------------------------------------


def test_order_is_static_system_conversation_dynamic_tail() -> None:
    history = HistoryBuilder().user("hi", 1).assistant("hello", 1)
    messages = build_messages(history.entries, context_settings(), NOW)
    assert messages[0] == SystemMessage(STATIC)
    assert conversation(messages) == [UserMessage("hi"), AssistantMessage("hello")]
    tail = messages[-1]
    assert isinstance(tail, SystemMessage)
    assert "2026-03-01T13:00:00+01:00 (Europe/Berlin)" in tail.content
    assert "Working directory: /home/ann/workspace" in tail.content


def test_each_call_gets_one_tool_message_derived_from_its_status() -> None:
    history = (
        HistoryBuilder()
        .user("go", 1)
        .assistant(
            "",
            1,
            [
                Calls("read_file", ToolCallStatus.DONE, "contents"),
                Calls("execute_cmd", ToolCallStatus.FAILED, "boom"),
                Calls("write_file", ToolCallStatus.REJECTED, texts.rejection_message("no")),
                Calls("execute_cmd", ToolCallStatus.CANCELLED, texts.CANCELLED_BY_USER),
                Calls("edit_file", ToolCallStatus.PENDING, None),
                Calls("list_dir", ToolCallStatus.RUNNING, None),
            ],
        )
    )
    tools = [
        m for m in build_messages(history.entries, context_settings(), NOW) if isinstance(m, ToolMessage)
    ]
    assert [m.content for m in tools] == [
        "contents",
        "Error: boom",
        "User rejected this tool call. Reason: no",
        "Cancelled by user.",
        texts.INTERRUPTED,
        texts.INTERRUPTED,
    ]
    assert [m.tool_call_id for m in tools] == [f"call_2_{i}" for i in range(6)]


def test_a_failed_result_reads_with_one_error_prefix_even_if_stored_with_one() -> None:
    """Rows stored before results were kept bare carry the prefix already: not doubled."""
    assert texts.failed_result("boom") == "Error: boom"
    assert texts.failed_result("Error: unknown tool 'x'.") == "Error: unknown tool 'x'."


def test_consecutive_user_rows_are_coalesced() -> None:
    history = (
        HistoryBuilder()
        .user("first", 1)
        .assistant("", 1, [Calls("read_file", ToolCallStatus.DONE, "r")])
        .user("also this", 1)
        .user("and that", 1)
    )
    messages = conversation(build_messages(history.entries, context_settings(), NOW))
    assert messages[-1] == UserMessage("also this\n\nand that")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]


def test_a_reply_cut_by_stop_is_marked_for_the_model() -> None:
    history = HistoryBuilder().user("essay", 1).assistant("Once upon", 1, status=RowStatus.CANCELLED)
    history.user("go on", 2)
    messages = conversation(build_messages(history.entries, context_settings(), NOW))
    assert messages[1] == AssistantMessage("Once upon\n\n[stopped by the user]")


def test_long_results_of_earlier_turns_are_hidden_and_the_current_turns_kept() -> None:
    long = "x" * 100
    history = (
        HistoryBuilder()
        .user("old", 1)
        .assistant("", 1, [Calls("read_file", ToolCallStatus.DONE, long)])
        .assistant("done", 1)
        .user("new", 2)
        .assistant("", 2, [Calls("read_file", ToolCallStatus.DONE, long)])
    )
    tools = [
        m
        for m in build_messages(history.entries, context_settings(hide_over=40), NOW)
        if isinstance(m, ToolMessage)
    ]
    assert tools[0].content == texts.hidden_result("read_file", 100, 40)
    assert tools[1].content == long


def test_a_message_injected_mid_turn_does_not_hide_that_turns_results() -> None:
    """Regression: the boundary was the last user row, so an injected message hid the
    result of the call that just ran — one the model had never read."""
    long = "y" * 100
    history = (
        HistoryBuilder()
        .user("run it", 7)
        .assistant("", 7, [Calls("execute_cmd", ToolCallStatus.DONE, long)])
        .user("ALSO check /var/log", 7)
    )
    tools = [
        m
        for m in build_messages(history.entries, context_settings(hide_over=40), NOW)
        if isinstance(m, ToolMessage)
    ]
    assert tools[0].content == long
    assert current_turn_start(history.entries) == 0


def test_rows_without_a_turn_id_fall_back_to_the_last_user_row() -> None:
    history = (
        HistoryBuilder()
        .user("a", None)
        .assistant("", None, [Calls("read_file", ToolCallStatus.DONE, "z" * 100)])
        .user("b", None)
    )
    assert current_turn_start(history.entries) == 2


def test_nothing_is_hidden_without_a_limit() -> None:
    history = (
        HistoryBuilder()
        .user("old", 1)
        .assistant("", 1, [Calls("read_file", ToolCallStatus.DONE, "z" * 9000)])
    )
    history.user("new", 2)
    tools = [
        m
        for m in build_messages(history.entries, context_settings(hide_over=None), NOW)
        if isinstance(m, ToolMessage)
    ]
    assert tools[0].content == "z" * 9000


def test_truncation_keeps_whole_entries_and_opens_with_a_user_row() -> None:
    history = (
        HistoryBuilder()
        .user("one", 1)
        .assistant(
            "",
            1,
            [Calls("read_file", ToolCallStatus.DONE, "r1"), Calls("list_dir", ToolCallStatus.DONE, "r2")],
        )
        .assistant("answer one", 1)
        .user("two", 2)
        .assistant("answer two", 2)
    )
    # the newest 4 messages would start inside the first turn's tool round: it is dropped whole
    kept = truncate(history.entries, 4)
    assert [e.content for e in kept] == ["two", "answer two"]
    messages = conversation(build_messages(history.entries, context_settings(max_history=4), NOW))
    assert messages == [UserMessage("two"), AssistantMessage("answer two")]


def test_one_entry_larger_than_the_limit_is_still_sent_whole() -> None:
    calls = [Calls("read_file", ToolCallStatus.DONE, f"r{i}") for i in range(5)]
    history = HistoryBuilder().user("go", 1).assistant("", 1, calls)
    kept = truncate(history.entries, 3)
    assert len(kept) == 1 and len(kept[0].calls) == 5


# --- properties -----------------------------------------------------------------------------------

_status = st.sampled_from(list(ToolCallStatus))
_result = st.text(alphabet="ab \n", max_size=80)
_call = st.builds(lambda status, result: (status, result), _status, _result)
_step = st.one_of(
    st.tuples(st.just("assistant"), st.lists(_call, max_size=3), st.booleans()),
    st.tuples(st.just("user"), st.just([]), st.just(False)),
)
_turn = st.lists(_step, max_size=5)
_history = st.lists(_turn, min_size=1, max_size=6)


def build_history(
    turns: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]],
) -> list[HistoryEntry]:
    builder = HistoryBuilder()
    for turn_id, steps in enumerate(turns, start=1):
        builder.user(f"request {turn_id}", turn_id)
        for kind, calls, cut in steps:
            if kind == "user":
                builder.user(f"injected in {turn_id}", turn_id)
                continue
            specs = [
                Calls("read_file", status, None if not status.terminal else result)
                for status, result in calls
            ]
            builder.assistant(
                "thinking" if calls else "answer",
                turn_id,
                specs,
                RowStatus.CANCELLED if cut and not calls else RowStatus.OK,
            )
    return builder.entries


def check_pairing(messages: list[ChatMessage]) -> None:
    """Each assistant's calls are followed by exactly their tool messages, in declared order."""
    index = 0
    while index < len(messages):
        message = messages[index]
        assert not isinstance(message, ToolMessage), f"stray tool message at {index}"
        index += 1
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answers = messages[index : index + len(message.tool_calls)]
            assert [a.tool_call_id for a in answers if isinstance(a, ToolMessage)] == [
                c.id for c in message.tool_calls
            ]
            index += len(message.tool_calls)


@settings(max_examples=150, deadline=None)
@given(turns=_history, limit=st.integers(1, 40), hide_over=st.one_of(st.none(), st.integers(0, 60)))
def test_property_every_call_is_answered_once_in_declared_order(
    turns: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]], limit: int, hide_over: int | None
) -> None:
    entries = build_history(turns)
    messages = conversation(build_messages(entries, context_settings(limit, hide_over), NOW))
    check_pairing(messages)
    kept = truncate(entries, limit)
    sent_calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert sent_calls == [c.call_id for e in kept for c in e.calls]


@settings(max_examples=150, deadline=None)
@given(turns=_history, limit=st.integers(1, 40))
def test_property_truncation_keeps_a_suffix_of_whole_entries(
    turns: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]], limit: int
) -> None:
    entries = build_history(turns)
    kept = truncate(entries, limit)
    assert kept and kept == entries[len(entries) - len(kept) :], "a suffix of whole entries"
    assert sum(message_count(e) for e in kept) <= limit or len(kept) == 1
    assert kept[0].role == Role.USER or len(kept) == 1


@settings(max_examples=150, deadline=None)
@given(turns=_history, limit=st.integers(1, 40))
def test_property_consecutive_user_rows_become_one_message(
    turns: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]], limit: int
) -> None:
    entries = build_history(turns)
    messages = conversation(build_messages(entries, context_settings(limit), NOW))
    assert not any(
        isinstance(a, UserMessage) and isinstance(b, UserMessage) for a, b in itertools.pairwise(messages)
    )
    kept = truncate(entries, limit)
    runs = [
        "\n\n".join(e.content for e in group)
        for is_user, group_iter in itertools.groupby(kept, key=lambda e: e.role == Role.USER)
        if is_user
        for group in [list(group_iter)]
    ]
    assert [m.content for m in messages if isinstance(m, UserMessage)] == runs


@settings(max_examples=150, deadline=None)
@given(turns=_history, hide_over=st.integers(0, 60))
def test_property_only_earlier_turns_results_are_hidden(
    turns: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]], hide_over: int
) -> None:
    entries = build_history(turns)
    messages = conversation(build_messages(entries, context_settings(10_000, hide_over), NOW))
    current_turn = len(turns)
    calls = {c.call_id: (e.turn_id, c) for e in entries for c in e.calls}
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        turn_id, call = calls[message.tool_call_id]
        text = unhidden(call)
        hide = turn_id != current_turn and call.status not in OPEN and len(text) > hide_over
        assert message.content == (texts.hidden_result(call.name, len(text), hide_over) if hide else text)


OPEN = (ToolCallStatus.PENDING, ToolCallStatus.RUNNING)


def unhidden(call: ToolCallRow) -> str:
    if call.status in OPEN:
        return texts.INTERRUPTED
    if call.status == ToolCallStatus.FAILED:
        return texts.failed_result(call.result or "")
    return call.result or ""


@settings(max_examples=100, deadline=None)
@given(
    turns=_history,
    other=_history,
    shift=st.integers(0, 10**6),
    limit=st.integers(1, 40),
)
def test_property_static_system_message_is_byte_identical_across_builds(
    turns: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]],
    other: list[list[tuple[str, list[tuple[ToolCallStatus, str]], bool]]],
    shift: int,
    limit: int,
) -> None:
    first = build_messages(build_history(turns), context_settings(limit), NOW)
    later = build_messages(build_history(other), context_settings(), NOW + timedelta(seconds=shift))
    assert first[0] == later[0] == SystemMessage(STATIC)
    assert first[0].content.encode() == later[0].content.encode()
    tails = {first[-1].content, later[-1].content}
    assert all(STATIC not in tail for tail in tails), "nothing dynamic leaks into the static prefix"
