"""What a session worker is doing, as one value, and the moves it may make.

A worker is always in exactly one :class:`WorkerState`; :data:`TRANSITIONS`
is the whole list of moves, and :func:`may_enter` the one place that checks
them. A move not listed is refused, which the worker relies on: a turn
stopped while it was opened stays ``stopping`` when it starts (so it starts
cancelled), and a gate that stops waiting for a stopped turn does not make
it ``running`` again.
"""

from __future__ import annotations

import enum


class WorkerState(enum.StrEnum):
    NEW = "new"
    """Just made: whether the session has a paused turn is not read yet."""
    IDLE = "idle"
    """No turn in memory and none paused: the next message starts one."""
    OPENING = "opening"
    """A turn is being opened (its first request prefetched, its row written): busy already."""
    RUNNING = "running"
    """The turn's task runs its rounds."""
    WAITING_APPROVAL = "waiting_approval"
    """The turn's approval gate waits for the user's decision."""
    PAUSED = "paused"
    """The session's latest turn is paused: messages wait for /resume."""
    STOPPING = "stopping"
    """A /stop cancelled the turn being opened or run; it is unwinding (its clean-up runs)."""


BUSY = frozenset(
    {WorkerState.OPENING, WorkerState.RUNNING, WorkerState.WAITING_APPROVAL, WorkerState.STOPPING}
)
"""A turn is being opened or run: new mail is read by it, at its next round."""

RESTING = frozenset({WorkerState.NEW, WorkerState.IDLE, WorkerState.PAUSED})
"""Nothing lives in memory only: the database holds all the worker knows."""

TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    # read the session's latest turn, or continue a turn a previous process left running
    WorkerState.NEW: frozenset({WorkerState.IDLE, WorkerState.PAUSED, WorkerState.RUNNING}),
    WorkerState.IDLE: frozenset({WorkerState.OPENING, WorkerState.RUNNING, WorkerState.NEW}),
    # opened and started; stopped meanwhile; the opening failed
    WorkerState.OPENING: frozenset(
        {WorkerState.RUNNING, WorkerState.STOPPING, WorkerState.IDLE, WorkerState.NEW}
    ),
    # the gate waits; stopped; the turn ended (paused or otherwise)
    WorkerState.RUNNING: frozenset(
        {
            WorkerState.WAITING_APPROVAL,
            WorkerState.STOPPING,
            WorkerState.IDLE,
            WorkerState.PAUSED,
            WorkerState.NEW,
        }
    ),
    WorkerState.WAITING_APPROVAL: frozenset({WorkerState.RUNNING, WorkerState.STOPPING, WorkerState.NEW}),
    # the turn ended (a pause it met before the stop landed is settled by the stop next)
    WorkerState.STOPPING: frozenset({WorkerState.IDLE, WorkerState.PAUSED, WorkerState.NEW}),
    # /resume (or a message, if configured); /stop settles the paused turn
    WorkerState.PAUSED: frozenset({WorkerState.RUNNING, WorkerState.IDLE, WorkerState.NEW}),
}
"""From each state, the states a worker may enter. Any state may go back to ``new``: after its
consumer failed, a worker reads again what it knows (it holds no live turn by then)."""


def may_enter(current: WorkerState, target: WorkerState) -> bool:
    return target in TRANSITIONS[current]


__all__ = ["BUSY", "RESTING", "TRANSITIONS", "WorkerState", "may_enter"]
