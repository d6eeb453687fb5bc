"""A terminal session is an interactive chat of its own source: the same user's chat id, another
session, its events addressed to ``terminal``, its answers searchable, its history shown again."""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.app import SessionSource, past_exchanges
from agentgram.runtime.infra.events import RoundEnded
from agentgram.runtime.infra.storage.history_tail import HistoryEntry
from agentgram.runtime.infra.storage.models import HistoryRow, Role
from tests.conftest import ALLOWED_USER, make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.runtime.core.turn.harness import started_runtime


async def test_the_terminal_and_the_telegram_chat_of_one_user_are_two_sessions(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    runtime, _ = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        chat = await runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en")
        terminal = await runtime.chat.chat_session(
            ALLOWED_USER, user_id=ALLOWED_USER, language=None, source=SessionSource.TERMINAL
        )
        assert terminal.id != chat.id and terminal.source == SessionSource.TERMINAL
        fresh = await runtime.chat.new_session(
            ALLOWED_USER, user_id=ALLOWED_USER, language=None, envelope_id="n1", source=SessionSource.TERMINAL
        )
        assert (
            await runtime.chat.chat_session(ALLOWED_USER, user_id=ALLOWED_USER, language="en") == chat
        )  # untouched
        again = await runtime.chat.chat_session(
            ALLOWED_USER, user_id=None, language=None, source=SessionSource.TERMINAL
        )
        assert again == fresh != terminal
    finally:
        await runtime.close()


async def test_a_terminal_turn_speaks_to_the_terminal_and_is_shown_again_and_searchable(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(Text("Paris is the capital."))
    runtime, rec = await started_runtime(make_settings(tmp_path, fake_llm.base_url))
    try:
        session = await runtime.chat.chat_session(
            ALLOWED_USER, user_id=ALLOWED_USER, language=None, source=SessionSource.TERMINAL
        )
        await runtime.chat.post_user_message(session, "capital of France?", envelope_id="t1")
        await rec.wait_kind("turn_finished")
        assert {event.to.source for event in rec.events} == {SessionSource.TERMINAL}
        [answer] = [e for e in rec.events if isinstance(e, RoundEnded)]
        [past] = await runtime.chat.recent_exchanges(session, 3)
        assert (past.question, past.answer, past.answer_row_id) == (
            "capital of France?",
            "Paris is the capital.",
            answer.row_id,
        )
        hits = await runtime.chat.search_history(ALLOWED_USER, "Paris")
        assert [hit.session_id for hit in hits] == [session.id]
    finally:
        await runtime.close()


def test_an_answer_to_mail_the_runtime_wrote_does_not_replace_the_answer_to_the_question() -> None:
    rows = [
        HistoryRow(id=1, session_id=1, role=Role.USER, content="capital of France?"),
        HistoryRow(id=2, session_id=1, role=Role.ASSISTANT, content="Paris."),
        HistoryRow(id=3, session_id=1, role=Role.USER, content="[job 4 finished]", is_synthetic=True),
        HistoryRow(id=4, session_id=1, role=Role.ASSISTANT, content="The job is done."),
    ]
    [past] = past_exchanges([HistoryEntry.of(row, []) for row in rows], 3)
    assert (past.question, past.answer, past.answer_row_id) == ("capital of France?", "Paris.", 2)
