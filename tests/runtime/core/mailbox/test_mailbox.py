"""The mailbox contract (session-mailbox spec §1): idempotent accept, total order per
session, reads that never consume, a cursor that commits with its effect, and a bound
that never refuses control mail or results."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

from agentgram.runtime.core.mailbox import (
    ApprovalDecisionBody,
    Checkpoint,
    ControlAction,
    ControlBody,
    Envelope,
    MailBody,
    Sender,
    SenderKind,
    ToolCallFinishedBody,
    UserMessageBody,
)
from agentgram.runtime.infra.errors import MailboxFull
from agentgram.runtime.infra.storage.history import HistoryStore
from agentgram.runtime.infra.storage.sessions import SessionStore
from tests.runtime.core.mailbox.conftest import MAX_UNREAD, Box, memory_box, sql_box


def mail(envelope_id: str, session_id: int, body: MailBody | None = None) -> Envelope:
    return Envelope(
        id=envelope_id,
        session_id=session_id,
        sender=Sender(kind=SenderKind.USER, ref="1001"),
        body=body or UserMessageBody(text=f"text of {envelope_id}"),
    )


async def test_accept_assigns_increasing_seq(box: Box) -> None:
    session = await box.new_session()
    receipts = [await box.mailbox.accept(mail(f"m{i}", session)) for i in range(3)]
    assert [r.seq for r in receipts] == [1, 2, 3]
    assert not any(r.duplicate for r in receipts)
    assert [e.id for e in await box.mailbox.unread(session)] == ["m0", "m1", "m2"]


async def test_duplicate_id_returns_the_first_receipt_marked_duplicate(box: Box) -> None:
    session = await box.new_session()
    woken: list[str] = []
    box.mailbox.subscribe(lambda e: woken.append(e.id))
    first = await box.mailbox.accept(mail("tg:7", session))
    await box.mailbox.accept(mail("tg:8", session))
    again = await box.mailbox.accept(mail("tg:7", session, UserMessageBody(text="redelivered")))
    assert (again.id, again.seq, again.duplicate) == ("tg:7", first.seq, True)
    unread = await box.mailbox.unread(session)
    assert [e.id for e in unread] == ["tg:7", "tg:8"]
    assert isinstance(unread[0].body, UserMessageBody) and unread[0].body.text == "text of tg:7"
    assert woken == ["tg:7", "tg:8"], "a duplicate must not wake the consumer again"


async def test_duplicate_is_recognised_after_it_was_consumed(box: Box) -> None:
    session = await box.new_session()
    first = await box.mailbox.accept(mail("tg:1", session))
    await box.mailbox.consume(session, first.seq)
    again = await box.mailbox.accept(mail("tg:1", session))
    assert again.duplicate and again.seq == first.seq
    assert await box.mailbox.unread(session) == []


async def test_seq_is_independent_per_session(box: Box) -> None:
    a, b = await box.new_session(), await box.new_session()
    seqs = [(await box.mailbox.accept(mail(f"{sid}-{i}", sid))).seq for i in range(3) for sid in (a, b)]
    assert seqs == [1, 1, 2, 2, 3, 3]
    assert [e.id for e in await box.mailbox.unread(a)] == [f"{a}-0", f"{a}-1", f"{a}-2"]
    assert [e.session_id for e in await box.mailbox.unread(b)] == [b, b, b]


async def test_reading_never_consumes(box: Box) -> None:
    session = await box.new_session()
    await box.mailbox.accept(mail("m1", session))
    await box.mailbox.accept(mail("m2", session))
    first = await box.mailbox.unread(session)
    second = await box.mailbox.unread(session)
    assert [e.id for e in first] == [e.id for e in second] == ["m1", "m2"]
    assert [e.seq for e in first] == [1, 2]
    assert await box.mailbox.cursor(session) == 0


async def test_unread_after_peeks_past_a_seq(box: Box) -> None:
    session = await box.new_session()
    for i in range(3):
        await box.mailbox.accept(mail(f"m{i}", session))
    assert [e.seq for e in await box.mailbox.unread(session, after=1)] == [2, 3]
    assert await box.mailbox.cursor(session) == 0


async def test_advance_consumes_up_to_a_seq_and_never_goes_back(box: Box) -> None:
    session = await box.new_session()
    for i in range(3):
        await box.mailbox.accept(mail(f"m{i}", session))
    await box.mailbox.consume(session, 2)
    assert await box.mailbox.cursor(session) == 2
    assert [e.id for e in await box.mailbox.unread(session)] == ["m2"]
    await box.mailbox.consume(session, 1)
    assert await box.mailbox.cursor(session) == 2


async def test_seq_keeps_growing_after_everything_was_consumed(box: Box) -> None:
    session = await box.new_session()
    await box.mailbox.accept(mail("m1", session))
    await box.mailbox.consume(session, 1)
    assert (await box.mailbox.accept(mail("m2", session))).seq == 2


async def test_accepted_envelope_round_trips_its_body(box: Box) -> None:
    session = await box.new_session()
    bodies: list[MailBody] = [
        UserMessageBody(text="hi", chat_message_id=5),
        ControlBody(action=ControlAction.PAUSE),
        ToolCallFinishedBody(call_id="call_1", status="done", result="ok"),
        ApprovalDecisionBody(request_id="r1", approved=False, reason="no"),
    ]
    for i, body in enumerate(bodies):
        await box.mailbox.accept(mail(f"m{i}", session, body))
    assert [e.body for e in await box.mailbox.unread(session)] == bodies


async def test_concurrent_accepts_get_distinct_seqs_and_one_wins_a_duplicate(box: Box) -> None:
    session = await box.new_session()
    ids = [f"m{i}" for i in range(MAX_UNREAD)] + ["m0"]
    receipts = await asyncio.gather(*(box.mailbox.accept(mail(i, session)) for i in ids))
    fresh = [r for r in receipts if not r.duplicate]
    assert sorted(r.seq for r in fresh) == list(range(1, MAX_UNREAD + 1))
    assert [r.id for r in receipts if r.duplicate] == ["m0"]


async def test_subscribers_see_the_accepted_envelope_with_its_seq(box: Box) -> None:
    session = await box.new_session()
    seen: list[tuple[str, int]] = []
    box.mailbox.subscribe(lambda e: seen.append((e.id, e.seq)))
    await box.mailbox.accept(mail("a", session))
    await box.mailbox.accept(mail("b", session))
    assert seen == [("a", 1), ("b", 2)]


# --- the cursor commits with the effect -----------------------------------------------------


async def test_advance_commits_together_with_the_user_row(tmp_path: Path) -> None:
    box = await sql_box(tmp_path / "mail.db")
    assert box.db is not None
    try:
        session = await box.new_session()
        receipt = await box.mailbox.accept(mail("m1", session))
        history = HistoryStore(box.db)

        def fold(tx: Connection) -> None:
            history.add_user_row(tx, session_id=session, turn_id=None, content="m1", mail_seq=1)
            box.mailbox.advance(tx, session, receipt.seq)

        await box.db.write_sync(fold)
        rows = await history.all_rows(session)
        assert [(r.content, r.mail_seq) for r in rows] == [("m1", 1)]
        assert await box.mailbox.cursor(session) == 1
        assert await box.mailbox.unread(session) == []
    finally:
        await box.db.close()


async def test_a_transaction_that_fails_after_advance_leaves_the_cursor(tmp_path: Path) -> None:
    box = await sql_box(tmp_path / "mail.db")
    assert box.db is not None
    try:
        session = await box.new_session()
        await box.mailbox.accept(mail("m1", session))
        history = HistoryStore(box.db)

        def fold_then_crash(tx: Connection) -> None:
            history.add_user_row(tx, session_id=session, turn_id=None, content="m1")
            box.mailbox.advance(tx, session, 1)
            raise RuntimeError("crash between advance and commit")

        with pytest.raises(RuntimeError, match="crash"):
            await box.db.write_sync(fold_then_crash)
        assert await box.mailbox.cursor(session) == 0
        assert [e.id for e in await box.mailbox.unread(session)] == ["m1"], "redelivered, not lost"
        assert await HistoryStore(box.db).all_rows(session) == []
    finally:
        await box.db.close()


async def test_cursor_and_mail_survive_reopening_the_database(tmp_path: Path) -> None:
    path = tmp_path / "mail.db"
    box = await sql_box(path)
    assert box.db is not None
    session = await box.new_session()
    for i in range(3):
        await box.mailbox.accept(mail(f"m{i}", session))
    await box.mailbox.consume(session, 2)
    await box.db.close()

    reopened = await sql_box(path)
    assert reopened.db is not None
    try:
        assert await reopened.mailbox.cursor(session) == 2
        assert [e.id for e in await reopened.mailbox.unread(session)] == ["m2"]
        assert (await reopened.mailbox.accept(mail("m0", session))).duplicate
        assert (await reopened.mailbox.accept(mail("m3", session))).seq == 4
    finally:
        await reopened.db.close()


# --- the bound -------------------------------------------------------------------------------


async def test_bound_refuses_beyond_max_unread(box: Box) -> None:
    session = await box.new_session()
    for i in range(MAX_UNREAD):
        await box.mailbox.accept(mail(f"m{i}", session))
    with pytest.raises(MailboxFull):
        await box.mailbox.accept(mail("one-too-many", session))
    assert len(await box.mailbox.unread(session)) == MAX_UNREAD
    await box.mailbox.consume(session, 1)
    assert (await box.mailbox.accept(mail("after-reading-one", session))).seq == MAX_UNREAD + 1


async def test_duplicate_of_accepted_mail_is_not_refused_when_full(box: Box) -> None:
    session = await box.new_session()
    for i in range(MAX_UNREAD):
        await box.mailbox.accept(mail(f"m{i}", session))
    receipt = await box.mailbox.accept(mail("m0", session))
    assert receipt.duplicate and receipt.seq == 1


async def test_the_bound_is_per_session(box: Box) -> None:
    full, other = await box.new_session(), await box.new_session()
    for i in range(MAX_UNREAD):
        await box.mailbox.accept(mail(f"full-{i}", full))
    assert (await box.mailbox.accept(mail("other-0", other))).seq == 1


@pytest.mark.parametrize(
    "body",
    [
        ControlBody(action=ControlAction.STOP),
        ControlBody(action=ControlAction.RESUME),
        ToolCallFinishedBody(call_id="call_9", status="done", result="42"),
        ApprovalDecisionBody(request_id="req", approved=True),
    ],
    ids=["control-stop", "control-resume", "tool-result", "approval-decision"],
)
async def test_control_results_and_decisions_are_exempt_from_the_bound(box: Box, body: MailBody) -> None:
    session = await box.new_session()
    for i in range(MAX_UNREAD):
        await box.mailbox.accept(mail(f"m{i}", session))
    for i in range(3):
        receipt = await box.mailbox.accept(mail(f"exempt-{i}", session, body))
        assert receipt.seq == MAX_UNREAD + 1 + i
    with pytest.raises(MailboxFull):
        await box.mailbox.accept(mail("still-full", session))


async def test_exempt_mail_does_not_count_against_the_bound(box: Box) -> None:
    session = await box.new_session()
    for i in range(MAX_UNREAD):
        await box.mailbox.accept(mail(f"c{i}", session, ControlBody(action=ControlAction.PAUSE)))
    for i in range(MAX_UNREAD):
        await box.mailbox.accept(mail(f"m{i}", session))
    assert len(await box.mailbox.unread(session)) == 2 * MAX_UNREAD


# --- properties ------------------------------------------------------------------------------

_ops = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7)), min_size=1, max_size=30)


async def _check_order_and_idempotency(box: Box, ops: list[tuple[int, int]]) -> None:
    sessions = [await box.new_session() for _ in range(3)]
    first: dict[str, int] = {}
    expected: dict[int, list[str]] = {s: [] for s in sessions}
    for session_index, key in ops:
        session = sessions[session_index]
        envelope_id = f"s{session_index}-k{key}"
        receipt = await box.mailbox.accept(mail(envelope_id, session))
        if envelope_id in first:
            assert receipt.duplicate and receipt.seq == first[envelope_id]
        else:
            assert not receipt.duplicate
            first[envelope_id] = receipt.seq
            expected[session].append(envelope_id)
    for session in sessions:
        unread = await box.mailbox.unread(session)
        assert [e.id for e in unread] == expected[session]
        assert [e.seq for e in unread] == list(range(1, len(unread) + 1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_property_memory_order_and_idempotency(ops: list[tuple[int, int]]) -> None:
    asyncio.run(_check_order_and_idempotency(memory_box(max_unread=100), ops))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_property_sql_order_and_idempotency(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[int, int]]
) -> None:
    async def run() -> None:
        box = await sql_box(tmp_path_factory.mktemp("mail") / "mail.db", max_unread=100)
        assert box.db is not None
        try:
            await _check_order_and_idempotency(box, ops)
        finally:
            await box.db.close()

    asyncio.run(run())


# --- a source's checkpoint commits with its mail -----------------------------------------------


async def test_a_checkpoint_is_stored_in_the_transaction_of_its_mail(tmp_path: Path) -> None:
    box = await sql_box(tmp_path / "mail.db")
    assert box.db is not None
    values = SessionStore(box.db)
    try:
        session = await box.new_session()
        first = Checkpoint("telegram.update_offset", "8")
        receipt = await box.mailbox.accept(mail("tg:7", session), first)
        assert receipt.checkpoint_stored and await values.get_value("telegram.update_offset") == "8"
        redelivered = Checkpoint("telegram.update_offset", "8")
        again = await box.mailbox.accept(mail("tg:7", session), redelivered)
        assert again.duplicate
        assert again.checkpoint_stored, "a redelivered update is confirmed again"
        together = [Checkpoint("telegram.update_offset", str(n)) for n in (9, 10)]
        receipts = await asyncio.gather(
            *(box.mailbox.accept(mail(f"tg:{n}", session), c) for n, c in zip((8, 9), together, strict=True))
        )
        assert all(r.checkpoint_stored for r in receipts)
        assert await values.get_value("telegram.update_offset") == "10", "the latest in a batch wins"
    finally:
        await box.db.close()


async def test_a_refused_envelope_does_not_store_its_checkpoint(tmp_path: Path) -> None:
    box = await sql_box(tmp_path / "mail.db", max_unread=1)
    assert box.db is not None
    try:
        session = await box.new_session()
        await box.mailbox.accept(mail("tg:1", session), Checkpoint("offset", "2"))
        refused = Checkpoint("offset", "3")
        with pytest.raises(MailboxFull):  # no receipt: the source learns nothing was stored
            await box.mailbox.accept(mail("tg:2", session), refused)
        assert await SessionStore(box.db).get_value("offset") == "2"
    finally:
        await box.db.close()


async def test_the_memory_mailbox_leaves_the_checkpoint_to_the_source() -> None:
    box = memory_box()
    checkpoint = Checkpoint("offset", "2")
    receipt = await box.mailbox.accept(mail("tg:1", await box.new_session()), checkpoint)
    assert not receipt.checkpoint_stored
