"""Receive point R1 (``runtime/turn/inject.py``): unread mail folded into a turn at a round
boundary — user rows and the cursor move in one transaction; a stop consumes nothing;
a pause holds unless a later resume cancels it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgram.runtime.core.mailbox import (
    ApprovalDecisionBody,
    ControlAction,
    ControlBody,
    Envelope,
    MailBody,
    Sender,
    SenderKind,
    SqlMailbox,
    UserMessageBody,
)
from agentgram.runtime.core.turn.inject import Injected, control_action, inject_mail, take_until_pause
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.models import Role, Turn
from tests.runtime.core.mailbox.conftest import sql_box


def envelope(envelope_id: str, session_id: int, body: MailBody) -> Envelope:
    return Envelope(id=envelope_id, session_id=session_id, sender=Sender(kind=SenderKind.USER), body=body)


def text(envelope_id: str, session_id: int, words: str, message_id: int | None = None) -> Envelope:
    return envelope(envelope_id, session_id, UserMessageBody(text=words, chat_message_id=message_id))


def control(envelope_id: str, session_id: int, action: ControlAction) -> Envelope:
    return envelope(envelope_id, session_id, ControlBody(action=action))


class Fixture:
    def __init__(self, db: Database, mailbox: SqlMailbox, session_id: int, turn_id: int) -> None:
        self.db, self.mailbox, self.session_id, self.turn_id = db, mailbox, session_id, turn_id
        self.history = HistoryStore(db)

    async def inject(self) -> Injected:
        folded = await inject_mail(self.db, self.mailbox, self.history, self.session_id, self.turn_id)
        return folded.injected

    async def user_rows(self) -> list[tuple[str, int | None, int | None]]:
        rows = await self.history.all_rows(self.session_id)
        return [(r.content, r.mail_seq, r.turn_id) for r in rows if r.role == Role.USER]


@pytest.fixture
async def r1(tmp_path: Path):  # type: ignore[no-untyped-def]
    box = await sql_box(tmp_path / "r1.db", max_unread=50)
    assert box.db is not None and isinstance(box.mailbox, SqlMailbox)
    session_id = await box.new_session()
    async with box.db.write() as tx:
        turn = Turn(session_id=session_id)
        tx.add(turn)
        await tx.flush()
        assert turn.id is not None
        turn_id = turn.id
    yield Fixture(box.db, box.mailbox, session_id, turn_id)
    await box.db.close()


async def test_each_message_becomes_its_own_user_row_and_the_cursor_moves(r1: Fixture) -> None:
    await r1.mailbox.accept(text("tg:1", r1.session_id, "first", message_id=11))
    await r1.mailbox.accept(text("tg:2", r1.session_id, "second"))
    assert await r1.inject() is Injected.MESSAGES
    assert await r1.user_rows() == [("first", 1, r1.turn_id), ("second", 2, r1.turn_id)]
    rows = await r1.history.all_rows(r1.session_id)
    assert rows[0].meta == {"envelope_id": "tg:1", "chat_message_id": 11}
    assert await r1.mailbox.cursor(r1.session_id) == 2


async def test_injecting_twice_stores_nothing_twice(r1: Fixture) -> None:
    await r1.mailbox.accept(text("tg:1", r1.session_id, "once"))
    assert await r1.inject() is Injected.MESSAGES
    assert await r1.inject() is Injected.NOTHING
    assert await r1.user_rows() == [("once", 1, r1.turn_id)]


async def test_nothing_unread_is_nothing(r1: Fixture) -> None:
    assert await r1.inject() is Injected.NOTHING
    assert await r1.mailbox.cursor(r1.session_id) == 0


async def test_decisions_and_stale_controls_are_consumed_without_rows(r1: Fixture) -> None:
    await r1.mailbox.accept(
        envelope("d1", r1.session_id, ApprovalDecisionBody(request_id="r", approved=True))
    )
    await r1.mailbox.accept(control("c1", r1.session_id, ControlAction.RESUME))
    assert await r1.inject() is Injected.NOTHING
    assert await r1.user_rows() == []
    assert await r1.mailbox.cursor(r1.session_id) == 2


async def test_an_unread_stop_consumes_nothing(r1: Fixture) -> None:
    await r1.mailbox.accept(text("tg:1", r1.session_id, "queued before the stop"))
    await r1.mailbox.accept(control("stop", r1.session_id, ControlAction.STOP))
    await r1.mailbox.accept(text("tg:3", r1.session_id, "after the stop"))
    assert await r1.inject() is Injected.STOP
    assert await r1.user_rows() == []
    assert await r1.mailbox.cursor(r1.session_id) == 0


async def test_a_pause_consumes_up_to_itself_and_holds(r1: Fixture) -> None:
    await r1.mailbox.accept(text("tg:1", r1.session_id, "before"))
    await r1.mailbox.accept(control("pause", r1.session_id, ControlAction.PAUSE))
    await r1.mailbox.accept(text("tg:3", r1.session_id, "after"))
    assert await r1.inject() is Injected.PAUSE
    assert await r1.user_rows() == [("before", 1, r1.turn_id)]
    assert [e.id for e in await r1.mailbox.unread(r1.session_id)] == ["tg:3"]


async def test_pause_then_resume_before_the_step_cancel_out(r1: Fixture) -> None:
    await r1.mailbox.accept(control("pause", r1.session_id, ControlAction.PAUSE))
    await r1.mailbox.accept(text("tg:2", r1.session_id, "meanwhile"))
    await r1.mailbox.accept(control("resume", r1.session_id, ControlAction.RESUME))
    assert await r1.inject() is Injected.MESSAGES
    assert await r1.user_rows() == [("meanwhile", 2, r1.turn_id)]
    assert await r1.mailbox.unread(r1.session_id) == []


async def test_rows_and_cursor_commit_together_or_not_at_all(
    r1: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    await r1.mailbox.accept(text("tg:1", r1.session_id, "must not be lost"))

    def crash(tx: object, session_id: int, upto: int) -> None:
        raise OSError("disk gone between the row and the cursor")

    monkeypatch.setattr(r1.mailbox, "advance", crash)
    with pytest.raises(OSError):
        await r1.inject()
    assert await r1.user_rows() == [], "no row without its cursor move"
    monkeypatch.undo()
    assert [e.id for e in await r1.mailbox.unread(r1.session_id)] == ["tg:1"], "redelivered"
    assert await r1.inject() is Injected.MESSAGES
    assert await r1.user_rows() == [("must not be lost", 1, r1.turn_id)]


# --- take_until_pause, as a property -----------------------------------------------------------

_actions = st.lists(
    st.sampled_from(["text", ControlAction.PAUSE, ControlAction.RESUME, ControlAction.CANCEL_CALLS]),
    max_size=12,
)


@given(actions=_actions)
def test_property_r1_takes_a_prefix_ending_at_a_pause_that_holds(actions: list[str]) -> None:
    unread = [
        text(f"m{i}", 1, "x") if action == "text" else control(f"m{i}", 1, ControlAction(action))
        for i, action in enumerate(actions)
    ]
    taken, pause = take_until_pause(unread)
    assert taken == unread[: len(taken)], "a prefix, in seq order"
    if not pause:
        assert taken == unread
        return
    assert control_action(taken[-1]) == ControlAction.PAUSE
    assert ControlAction.RESUME not in [control_action(e) for e in unread[len(taken) :]]
