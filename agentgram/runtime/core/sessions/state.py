"""What a session worker is doing, as one value carrying its data, and the moves it may make.

A worker is always in exactly one :data:`Status` — :data:`NEW`, :data:`IDLE` or
:data:`PAUSED` (:class:`Resting`), :class:`Opening` (the prefetched request),
:class:`Running` (the turn), :class:`WaitingApproval` (the turn and the request
it waits on) or :class:`Stopping` (what it stops) — whose :class:`WorkerState`
is its kind. Every status also carries the worker's :class:`Notes`, what it has
yet to act on whatever it is doing: a turn a previous process left running, to
continue once it rests (``SessionHub.resume`` may note one while a turn that
mail started first runs), and the mark that a /stop ended a turn (set entering
:class:`Stopping`, or when a stop the turn met ended it), read by the stop's
report once its mail is consumed. :func:`kept` is the one rule for them: every
change keeps them, a note the new status names wins, and only the worker's
taking a note drops it. Nothing else of a worker changes as it works.

:data:`TRANSITIONS` is the whole list of moves between kinds, and :func:`allowed`
the one place that checks them (a change of data within a kind is no move). A
move not listed raises :class:`IllegalMove` (a bug), except the few the worker
makes knowing a stop may have got there first, which are refused instead
(nothing changes; logged at debug): a /stop with nothing to stop, and a gate
that starts or stops waiting for a turn that was stopped meanwhile, which must
not make it ``running`` again.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from dataclasses import dataclass, replace
from typing import ClassVar

from agentgram.runtime.core.turn.loop import TurnRunner
from agentgram.runtime.core.turn.outcome import TurnOutcome
from agentgram.runtime.core.turn.prefetch import Prefetch


class IllegalMove(RuntimeError):
    """A worker tried a move :data:`TRANSITIONS` does not list."""


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


@dataclass(slots=True, frozen=True)
class LiveTurn:
    """A turn a worker runs: its runner (the cancel token) and its task."""

    runner: TurnRunner
    task: asyncio.Task[TurnOutcome]

    def cancel(self) -> None:
        """Stop the turn: its token, and its task once that has begun.

        A task cancelled before its first step never runs its coroutine at all, so the turn's
        clean-up would not run either: the stop recorded, the request sent while the turn was
        opened closed (it streamed on until the model was done). Such a turn meets its token
        at its first step instead (``Receive``), inside that clean-up.
        """
        self.runner.token.cancel()
        coro = self.task.get_coro()
        if not (inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED):
            self.task.cancel()


@dataclass(slots=True, frozen=True)
class Notes:
    """What a worker has yet to act on, carried by its status whatever it does (:func:`kept`)."""

    resume: int | None = None
    """A turn a previous process left running (``SessionHub.resume``): the worker continues it
    at its next drain once it rests, before any mail but a stop."""
    stopped: bool = False
    """A /stop ended a turn here: the stop's report says "stopped". Kept until the stop's mail
    is consumed (the worker takes it then); a worker evicted meanwhile tells from the turn's end."""


NO_NOTES = Notes()


@dataclass(slots=True, frozen=True)
class Resting:
    """New, idle or paused: the worker holds nothing the database does not (see :data:`RESTING`)
    but its notes."""

    kind: WorkerState
    notes: Notes = NO_NOTES

    def __post_init__(self) -> None:
        if self.kind not in RESTING:
            raise IllegalMove(f"{self.kind} is not a resting state")


NEW, IDLE, PAUSED = (Resting(kind) for kind in (WorkerState.NEW, WorkerState.IDLE, WorkerState.PAUSED))


@dataclass(slots=True, frozen=True)
class Opening:
    prefetch: Prefetch | None = None  # the new turn's first request, once it is sent
    notes: Notes = NO_NOTES
    kind: ClassVar[WorkerState] = WorkerState.OPENING


@dataclass(slots=True, frozen=True)
class Running:
    turn: LiveTurn
    notes: Notes = NO_NOTES
    kind: ClassVar[WorkerState] = WorkerState.RUNNING


@dataclass(slots=True, frozen=True)
class WaitingApproval:
    turn: LiveTurn
    request_id: str  # the one answer to "what does this session wait for?"
    notes: Notes = NO_NOTES
    kind: ClassVar[WorkerState] = WorkerState.WAITING_APPROVAL


@dataclass(slots=True, frozen=True)
class Stopping:
    turn: LiveTurn | None = None  # None: the turn was still being opened
    prefetch: Prefetch | None = None
    notes: Notes = NO_NOTES
    kind: ClassVar[WorkerState] = WorkerState.STOPPING


Status = Resting | Opening | Running | WaitingApproval | Stopping


def allowed(current: Status, target: Status) -> bool:
    """Whether a worker in ``current`` may take ``target``: a listed move, or new data for the same
    kind (the prefetch of the turn it opens, sent; the turn a stop while it opened will start; a
    note, made or taken)."""
    return current.kind is target.kind or may_enter(current.kind, target.kind)


def live_turn(status: Status) -> LiveTurn | None:
    """The turn a worker in ``status`` runs (running, waiting or stopping), if any."""
    return status.turn if isinstance(status, Running | WaitingApproval | Stopping) else None


def kept(current: Status, target: Status) -> Status:
    """``target`` keeping ``current``'s notes, a note ``target`` names winning: a note outlives every
    change of status until the worker, having acted on it, drops it (``SessionWorker._take``: the
    current status with the note gone, not passed through here)."""
    notes = Notes(
        resume=target.notes.resume if target.notes.resume is not None else current.notes.resume,
        stopped=target.notes.stopped or current.notes.stopped,
    )
    return target if notes == target.notes else replace(target, notes=notes)


__all__ = [
    "BUSY",
    "IDLE",
    "NEW",
    "NO_NOTES",
    "PAUSED",
    "RESTING",
    "TRANSITIONS",
    "IllegalMove",
    "LiveTurn",
    "Notes",
    "Opening",
    "Resting",
    "Running",
    "Status",
    "Stopping",
    "WaitingApproval",
    "WorkerState",
    "allowed",
    "kept",
    "live_turn",
    "may_enter",
]
