"""What a turn, a round and a tool call can come to, as typed values."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentgram.runtime.infra.errors import Failure
from agentgram.runtime.infra.events import OutcomeKind


@dataclass(slots=True, frozen=True)
class Final:
    text: str
    closed: bool = False  # the turn was already ended ``final`` with its last round
    kind: OutcomeKind = OutcomeKind.FINAL


@dataclass(slots=True, frozen=True)
class Cancelled:
    kind: OutcomeKind = OutcomeKind.CANCELLED


@dataclass(slots=True, frozen=True)
class Exhausted:
    rounds: int
    kind: OutcomeKind = OutcomeKind.EXHAUSTED


@dataclass(slots=True, frozen=True)
class Failed:
    """The turn broke: ``error`` is the detail for the log and the turn's row, ``failure``
    what the user is told (by default: a bug on our side)."""

    error: str
    failure: Failure = field(default_factory=Failure)
    kind: OutcomeKind = OutcomeKind.FAILED


@dataclass(slots=True, frozen=True)
class Paused:
    kind: OutcomeKind = OutcomeKind.PAUSED


TurnOutcome = Final | Cancelled | Exhausted | Failed | Paused


@dataclass(slots=True, frozen=True)
class RunAgain:
    """The round ended in tool calls; the loop goes round again."""


RoundStep = RunAgain | TurnOutcome


@dataclass(slots=True, frozen=True)
class Proceed:
    """The gate let the call run."""


@dataclass(slots=True, frozen=True)
class Rejected:
    """The gate refused the call; the refusal is already recorded as its result."""

    text: str


@dataclass(slots=True, frozen=True)
class GateCancelled:
    """The turn was stopped while the call waited for the user."""


GateOutcome = Proceed | Rejected | GateCancelled


class CancelToken:
    """Sticky per-turn cancellation: once set, every level of the turn sees it."""

    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled
