"""The runtime's metrics counted from what it already tells: its event bus and its mailbox.

Observing beats threading counters through the turn loop: the bus carries every
turn's end, every round and every tool call's last phase, the mailbox tells each
accepted envelope once it is committed. :class:`MetricsObserver` listens to both
(:func:`watch`, called once by the runtime as it is wired).

Design choices:

* A turn's rounds are the :class:`~runtime.events.RoundEnded` events between its
  :class:`~runtime.events.TurnStarted` and :class:`~runtime.events.TurnFinished`; a
  ``RoundEnded`` outside a running turn (an answer re-sent after a restart) is no round.
* Active sessions are those with a turn running (started, not yet finished), as the bus
  sees it; a turn that waits for the user's approval is still running.
* A tool call is counted at its last phase (done, failed, rejected, cancelled, detached);
  a detached call is counted again when its background run ends, in
  ``agentgram_background_calls_total``.
* A tool name the runtime does not know (one the model invented, which fails as an
  unknown tool) is labelled ``unknown``: the model must not be able to grow the
  label set. What is known is the runtime's to say (``known``): its registered
  tools and the ``mcp__<server>__`` tools of configured servers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.infra import metrics
from agentgram.runtime.infra.events import (
    CallFinished,
    RoundEnded,
    RuntimeEvent,
    ToolActivity,
    ToolPhase,
    TurnFinished,
    TurnStarted,
)

UNKNOWN_TOOL = "unknown"
"""The ``tool`` label of a call to a tool the runtime does not know."""

CLOSING_PHASES = frozenset(
    {ToolPhase.DONE, ToolPhase.FAILED, ToolPhase.REJECTED, ToolPhase.CANCELLED, ToolPhase.DETACHED}
)


@dataclass(slots=True)
class _RunningTurn:
    session_id: int
    rounds: int = 0


def _any_tool(name: str) -> bool:
    return True


@dataclass(slots=True)
class MetricsObserver:
    """Counts runtime events into :mod:`runtime.metrics`; holds only the turns now running."""

    known: Callable[[str], bool] = _any_tool
    """Whether a tool name is one the runtime knows; others are labelled :data:`UNKNOWN_TOOL`."""
    running: dict[int, _RunningTurn] = field(default_factory=dict)  # turn id → its session, its rounds

    def __call__(self, event: RuntimeEvent) -> None:
        match event:
            case TurnStarted():
                self.running.setdefault(event.turn_id, _RunningTurn(event.to.session_id))
            case RoundEnded() if event.turn_id in self.running:
                self.running[event.turn_id].rounds += 1
            case ToolActivity() if event.phase in CLOSING_PHASES:
                metrics.TOOL_CALLS.labels(tool=self._tool_label(event.name), status=event.phase).inc()
            case CallFinished():
                metrics.BACKGROUND_CALLS.labels(tool=event.name, status=event.status).inc()
            case TurnFinished():
                self._turn_finished(event)
            case _:
                return
        metrics.SESSIONS_ACTIVE.set(len({turn.session_id for turn in self.running.values()}))

    def _tool_label(self, name: str) -> str:
        return name if self.known(name) else UNKNOWN_TOOL

    def _turn_finished(self, event: TurnFinished) -> None:
        metrics.TURNS.labels(outcome=event.outcome).inc()
        turn = self.running.pop(event.turn_id, None)
        if turn is not None:
            metrics.TURN_ROUNDS.observe(turn.rounds)

    @staticmethod
    def mail_accepted(envelope: Envelope) -> None:
        metrics.MAIL_ACCEPTED.labels(kind=envelope.kind).inc()


def watch(
    subscribe: Callable[[Callable[[RuntimeEvent], None]], object],
    subscribe_mail: Callable[[Callable[[Envelope], None]], None],
    known: Callable[[str], bool],
) -> MetricsObserver:
    """Count the events ``subscribe`` delivers and the mail ``subscribe_mail`` reports accepted;
    ``known`` tells the tool names the runtime knows."""
    observer = MetricsObserver(known)
    subscribe(observer)
    subscribe_mail(observer.mail_accepted)
    return observer
