"""The worker's moves (runtime/sessions/state.py): each allowed one, and every other refused.

The list below is written out again on purpose: a move added to or dropped from the table
must change this test too.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest

from agentgram.runtime.core.sessions.state import BUSY, RESTING, IllegalMove, WorkerState, may_enter
from agentgram.runtime.core.sessions.state import PAUSED as PAUSED_STATUS
from agentgram.runtime.infra.llm.scripted import ScriptedLLM
from tests.runtime.core.turn.scripted import hub_rig

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
