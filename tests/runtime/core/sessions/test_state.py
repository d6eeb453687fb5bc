"""The worker's moves (runtime/sessions/state.py): each allowed one, and every other refused;
and the notes every status carries (a turn to continue, a stop's mark) until the worker acts on them.

The list below is written out again on purpose: a move added to or dropped from the table
must change this test too.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest

from agentgram.runtime.core.mailbox import UserMessageBody
from agentgram.runtime.core.sessions.hub import SessionWorker
from agentgram.runtime.core.sessions.state import (
    BUSY,
    RESTING,
    IllegalMove,
    Notes,
    Opening,
    Resting,
    Running,
    Status,
    Stopping,
    WorkerState,
    allowed,
    kept,
    may_enter,
)
from agentgram.runtime.core.sessions.state import IDLE as IDLE_STATUS
from agentgram.runtime.core.sessions.state import NEW as NEW_STATUS
from agentgram.runtime.core.sessions.state import PAUSED as PAUSED_STATUS
from agentgram.runtime.infra.events import OutcomeKind
from agentgram.runtime.infra.llm.scripted import Call, Round, ScriptedLLM
from agentgram.runtime.infra.storage.models import TurnStatus
from tests.runtime.core.turn.scripted import Hold, hub_rig

S = WorkerState
ALLOWED = {
    (S.NEW, S.IDLE),  # read: no paused turn
    (S.NEW, S.PAUSED),  # read: the latest turn is paused
    (S.NEW, S.RUNNING),  # a turn a crash left running continues
    (S.IDLE, S.OPENING),  # mail starts a turn
    (S.IDLE, S.RUNNING),  # a crash-left turn continues
    (S.OPENING, S.RUNNING),
    (S.OPENING, S.STOPPING),  # /stop while the turn is opened
    (S.OPENING, S.IDLE),  # the opening failed
    (S.RUNNING, S.WAITING_APPROVAL),
    (S.RUNNING, S.STOPPING),
    (S.RUNNING, S.IDLE),  # the turn ended
    (S.RUNNING, S.PAUSED),  # the turn ended paused
    (S.WAITING_APPROVAL, S.RUNNING),  # decided
    (S.WAITING_APPROVAL, S.STOPPING),
    (S.STOPPING, S.IDLE),
    (S.STOPPING, S.PAUSED),  # it met a pause before the stop landed
    (S.PAUSED, S.RUNNING),  # /resume
    (S.PAUSED, S.IDLE),  # /stop settled the paused turn
    *((state, S.NEW) for state in S if state is not S.NEW),  # the consumer failed: read again
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_each_move_is_allowed_or_refused_as_listed(current: WorkerState, target: WorkerState) -> None:
    assert may_enter(current, target) == ((current, target) in ALLOWED)


def test_busy_and_resting_split_the_states() -> None:
    assert BUSY | RESTING == set(S) and not BUSY & RESTING
    assert {S.OPENING, S.RUNNING, S.WAITING_APPROVAL, S.STOPPING} == BUSY


async def test_an_illegal_move_raises_and_a_stop_with_nothing_to_stop_is_refused_at_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with hub_rig(tmp_path, ScriptedLLM.script(), monkeypatch) as rig:
        session = await rig.chat()
        worker = rig.hub.workers[session.id or 0]
        assert worker.state is S.IDLE, "a session created just now has no turn to read"
        with pytest.raises(IllegalMove, match="idle -> paused"):
            worker._enter(PAUSED_STATUS)  # only a turn that ends pauses
        assert worker.state is S.IDLE, "an illegal move changes nothing"
        with caplog.at_level(logging.DEBUG, logger="agentgram"):
            assert not worker.cancel_turn(), "nothing to stop: idle → stopping is refused"
        assert worker.state is S.IDLE
        refusals = [r for r in caplog.records if "refused" in r.getMessage()]
        assert len(refusals) == 1 and refusals[0].levelno == logging.DEBUG
        assert "idle -> stopping refused" in refusals[0].getMessage()


def test_notes_outlive_every_change_and_a_note_the_new_status_names_wins() -> None:
    noted = Resting(S.NEW, Notes(resume=7))
    assert allowed(NEW_STATUS, noted), "a note is new data, no move"
    assert kept(noted, IDLE_STATUS) == Resting(S.IDLE, Notes(resume=7))
    assert kept(noted, Opening()) == Opening(notes=Notes(resume=7)), "a busy worker keeps it too"
    marked = kept(Opening(notes=Notes(resume=7)), Stopping(notes=Notes(stopped=True)))
    assert marked == Stopping(notes=Notes(resume=7, stopped=True))
    assert kept(marked, IDLE_STATUS) == Resting(S.IDLE, Notes(resume=7, stopped=True))
    assert kept(marked, Resting(S.IDLE, Notes(resume=8))).notes == Notes(resume=8, stopped=True)
    with pytest.raises(IllegalMove, match="not a resting state"):
        Resting(S.RUNNING)


async def test_an_illegal_move_keeps_the_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with hub_rig(tmp_path, ScriptedLLM.script(), monkeypatch) as rig:
        session = await rig.chat()
        worker = rig.hub.workers[session.id or 0]
        worker.note_resume(7)
        assert worker.status == Resting(S.IDLE, Notes(resume=7)) and not worker.idle
        with pytest.raises(IllegalMove, match="idle -> paused"):
            worker._enter(PAUSED_STATUS)
        assert worker.status == Resting(S.IDLE, Notes(resume=7)), "nothing changed"


def record_statuses(monkeypatch: pytest.MonkeyPatch) -> list[Status]:
    """The status after every move any worker tries, through the real ``_move``."""
    statuses: list[Status] = []
    move = SessionWorker._move

    def recorded(self: SessionWorker, target: Status, *, may_not_apply: bool) -> bool:
        entered = move(self, target, may_not_apply=may_not_apply)
        statuses.append(self.status)
        return entered

    monkeypatch.setattr(SessionWorker, "_move", recorded)
    return statuses


async def test_a_stop_marks_the_resting_worker_until_its_mail_is_consumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statuses = record_statuses(monkeypatch)
    async with hub_rig(tmp_path, ScriptedLLM.script(Round(calls=[Call("hold")])), monkeypatch) as rig:
        session = await rig.chat()
        await rig.say(session, "long job")
        await rig.hold.running.wait()
        assert await rig.stop(session)
        await rig.rec.wait_for(lambda: "stopped" in rig.notices())
        [finished] = rig.finished()
        assert finished.outcome == OutcomeKind.CANCELLED
        after_stop = statuses[[type(s) for s in statuses].index(Stopping) :]
        assert isinstance(after_stop[0], Stopping) and after_stop[0].notes == Notes(stopped=True)
        assert [s for s in after_stop if isinstance(s, Resting)] == [
            Resting(S.IDLE, Notes(stopped=True)),  # the turn ended: marked until the stop mail is read
            IDLE_STATUS,  # the stop mail consumed: the mark went with it
        ]


async def test_a_turn_left_running_is_noted_then_taken_by_the_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = Hold()
    async with hub_rig(
        tmp_path, ScriptedLLM.script(Round(calls=[Call("hold")])), monkeypatch, hold=hold
    ) as rig:
        session = await rig.chat()
        await rig.say(session, "long job")
        await hold.running.wait()
    hold.release.set()  # the hub shut down mid-call, as a killed process leaves it
    statuses = record_statuses(monkeypatch)
    async with hub_rig(tmp_path, ScriptedLLM.script(Round("Done.")), monkeypatch, hold=hold) as rig:
        [turn] = await rig.services.sessions.open_turns()
        assert turn.status == TurnStatus.RUNNING and turn.id is not None
        rig.hub.resume(turn.session_id, turn.id)
        worker = rig.hub.workers[turn.session_id]
        assert worker.status == Resting(S.NEW, Notes(resume=turn.id))
        assert not worker.idle, "a turn to continue lives in memory only: the worker stays"
        [finished] = await rig.turns_finished()
        assert finished.turn_id == turn.id
        assert [type(s) for s in statuses[:3]] == [Resting, Resting, Running]
        assert statuses[:2] == [Resting(S.NEW, Notes(resume=turn.id)), NEW_STATUS], "taken before it runs"


async def test_a_turn_left_running_noted_while_another_runs_continues_once_that_one_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a restart, mail (e.g. an orphaned call's result) may start a turn before the runtime
    notes the one left running: the busy worker carries the note and continues it afterwards."""
    first = Hold()
    async with hub_rig(
        tmp_path, ScriptedLLM.script(Round(calls=[Call("hold")])), monkeypatch, hold=first
    ) as rig:
        session = await rig.chat()
        await rig.say(session, "long job")
        await first.running.wait()
    first.release.set()
    second = Hold()
    llm = ScriptedLLM.script(Round(calls=[Call("hold")]), Round("Two done."), Round("One done."))
    async with hub_rig(tmp_path, llm, monkeypatch, hold=second) as rig:
        [left] = await rig.services.sessions.open_turns()
        assert left.id is not None
        another = rig.envelope(session, UserMessageBody(text="another job"))
        await rig.services.mailbox.accept(another.model_copy(update={"id": "after-restart"}))  # ids restart
        await second.running.wait()
        rig.hub.resume(left.session_id, left.id)
        worker = rig.hub.workers[left.session_id]
        assert isinstance(worker.status, Running) and worker.status.notes == Notes(resume=left.id)
        second.release.set()
        [new, resumed] = await rig.turns_finished(2)
        assert (new.text, resumed.turn_id, resumed.text) == ("Two done.", left.id, "One done.")
