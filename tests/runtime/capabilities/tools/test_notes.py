"""The scratchpad and the todo list: stored per session, injected right after the static prompt."""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.capabilities.tools.notes import notes_text
from agentgram.runtime.infra.events import TodoItem, TodosChanged, TodoStatus
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.llm.types import SystemMessage
from tests.runtime.capabilities.questions.test_questions import CHAT, runtime_with


def test_the_notes_message_escapes_and_sorts() -> None:
    text = notes_text({"z": "last", "a&b": "<x>"}, [TodoItem(text="ship", status=TodoStatus.DONE)])
    assert text == (
        '<scratchpad>\n<entry key="a&amp;b">&lt;x&gt;</entry>\n<entry key="z">last</entry>\n</scratchpad>\n'
        "<todos>\n[x] ship\n</todos>"
    )
    assert notes_text({}, []) is None


async def test_scratchpad_is_its_own_system_message_and_the_static_prefix_stays_identical(
    tmp_path: Path,
) -> None:
    note = Call("update_scratchpad", {"key": "db_url", "value": "postgres://localhost/mydb"})
    llm = ScriptedLLM.script(Round(calls=[note]), Round(text="Noted."), Round(text="Still here."))
    async with runtime_with(tmp_path, llm) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        await runtime.chat.post_user_message(session, "remember the db", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        await runtime.chat.post_user_message(session, "and now?", envelope_id="u2")
        await rec.wait_kind("turn_finished", 2)
    before, after_note, next_turn = (request.messages for request in llm.requests)
    assert before[0] == after_note[0] == next_turn[0]  # the static message, byte-identical
    assert isinstance(before[0], SystemMessage) and before[1].role == "user"  # no notes yet: none sent
    pad = '<scratchpad>\n<entry key="db_url">postgres://localhost/mydb</entry>\n</scratchpad>'
    for messages in (after_note, next_turn):
        assert messages[1] == SystemMessage(pad)  # right after the static one, before the history
        assert messages[2].role == "user" and messages[-1].role == "system"


async def test_write_todos_tells_the_chat_only_when_the_list_changes(tmp_path: Path) -> None:
    items = [{"text": "read the logs", "status": "done"}, {"text": "fix it", "status": "in_progress"}]
    write = Call("write_todos", {"items": items})
    llm = ScriptedLLM.script(Round(calls=[write]), Round(calls=[write]), Round(text="Working."))
    async with runtime_with(tmp_path, llm) as (runtime, rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        await runtime.chat.post_user_message(session, "fix the bug", envelope_id="u1")
        await rec.wait_kind("turn_finished")
        changed = rec.of("todos_changed")
        assert len(changed) == 1 and isinstance(changed[0], TodosChanged)
        expected = (
            TodoItem(text="read the logs", status=TodoStatus.DONE),
            TodoItem(text="fix it", status=TodoStatus.IN_PROGRESS),
        )
        assert changed[0].items == expected
        assert await runtime.chat.todos(session) == expected
        fresh = await runtime.chat.new_session(CHAT, user_id=CHAT, language="en", envelope_id="n1")
        assert await runtime.chat.todos(fresh) == ()


async def test_the_notes_message_is_read_once_and_follows_every_write(tmp_path: Path) -> None:
    from sqlalchemy import text

    from agentgram.runtime.capabilities.tools.notes import NoteStore
    from agentgram.runtime.infra.storage.db import Database
    from agentgram.runtime.infra.storage.migrations import migrate
    from agentgram.runtime.infra.storage.sessions import SessionStore

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'notes.db'}")
    await migrate(db)
    session, _ = await SessionStore(db).find_or_open(CHAT, user_id=CHAT, language="en")
    assert session.id is not None
    store = NoteStore(db)
    try:
        assert await store.context_text(session.id) is None
        await store.set_note(session.id, "plan", "step one")
        first = await store.context_text(session.id)
        assert first is not None and "step one" in first
        async with db.write() as tx:  # behind the store's back: the copy in memory is what rounds read
            await tx.exec(text("UPDATE session_scratchpad SET value = 'edited by hand'"))  # type: ignore[call-overload]
        assert await store.context_text(session.id) == first, "read once, not twice a round"
        await store.set_todos(session.id, [TodoItem(text="ship it", status=TodoStatus.PENDING)])
        after = await store.context_text(session.id)
        assert after is not None and "edited by hand" in after and "ship it" in after
    finally:
        await db.close()


async def test_a_session_opened_just_now_reads_no_notes_until_its_first_write(tmp_path: Path) -> None:
    """A chat's first message is not kept waiting for a read of notes it cannot have yet."""
    from sqlalchemy import text

    llm = ScriptedLLM.script(Round(text="Hello."))
    async with runtime_with(tmp_path, llm) as (runtime, _rec):
        session = await runtime.chat.chat_session(CHAT, user_id=CHAT, language="en")
        store = runtime.chat.notes
        async with runtime.parts.db.write() as tx:  # behind the store's back: a read would see this
            await tx.exec(  # type: ignore[call-overload]
                text(
                    "INSERT INTO session_scratchpad (session_id, key, value, updated_at)"
                    f" VALUES ({session.id}, 'planted', 'by hand', CURRENT_TIMESTAMP)"
                )
            )
        assert await store.context_text(session.id) is None, "known to be empty: not read"
        await store.set_note(session.id, "plan", "step one")
        after = await store.context_text(session.id)
        assert after is not None and "by hand" in after and "step one" in after, "a write drops the copy"
