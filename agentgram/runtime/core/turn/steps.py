"""A turn's named steps around its rounds: **prefetch → open → run → finish**.

The session worker (:mod:`runtime.sessions.hub`) takes a new turn through
them in this order and owns what lies between them (its state, a /stop that
lands meanwhile); a turn that continues (resumed, restarted) starts at *run*.
*Run* is :meth:`TurnRunner.run` (:mod:`runtime.turn.loop`), the rounds
themselves as the steps of :mod:`runtime.turn.graph` (receive, build request,
call model, persist round, call tools; cancel); a stopped turn ends through
:func:`runtime.turn.loop.settle_cancelled`.
"""

from __future__ import annotations

from sqlalchemy import Connection

from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.core.turn import texts
from agentgram.runtime.core.turn.deps import TurnDeps
from agentgram.runtime.core.turn.frame import NO_ECHO, Frame
from agentgram.runtime.core.turn.inject import Prepared, fold_into_turn
from agentgram.runtime.core.turn.loop import TurnRunner
from agentgram.runtime.core.turn.outcome import Exhausted, Failed, Final, TurnOutcome
from agentgram.runtime.core.turn.prefetch import Prefetch
from agentgram.runtime.core.turn.request import build_request, level_client, main_level
from agentgram.runtime.infra.events import OutcomeKind, TurnFinished
from agentgram.runtime.infra.storage.models import ChatSession, TurnStatus

PREFETCH_PATIENCE = 0.2
"""How long the opening waits for the prefetched request to be under way (:meth:`Prefetch.under_way`)."""

_STATUS = {
    OutcomeKind.FINAL: TurnStatus.FINAL,
    OutcomeKind.CANCELLED: TurnStatus.CANCELLED,
    OutcomeKind.EXHAUSTED: TurnStatus.EXHAUSTED,
    OutcomeKind.FAILED: TurnStatus.FAILED,
    OutcomeKind.PAUSED: TurnStatus.PAUSED,
}


async def prefetch(deps: TurnDeps, session: ChatSession, mail: list[Envelope]) -> Prefetch:
    """Step 1: send the new turn's first LLM request before the turn exists.

    What it saves: opening the turn (step 2) is a durable write — the turn row,
    the mail as user rows, the mailbox cursor, ~1.5 ms of database round trips
    on the hot path. Asked first, the model's time to first token overlaps
    them instead of following them. The request is the one the first round
    will build once the mail is stored — built by the same
    :func:`~runtime.turn.request.build_request`, with the mail not stored yet —
    and the round adopts it only if it asks exactly that, so the turn can only
    get faster, never different (:mod:`runtime.turn.prefetch`).
    """
    assert session.id is not None
    frame = Frame.root(main_level(deps, session), NO_ECHO)  # nothing streams before a round adopts it
    request = await build_request(deps, session, frame, now=deps.clock(), mail=mail)
    llm = await level_client(deps, session.id, frame.level)
    return Prefetch(llm, request.messages, request.tools.specs(), request.now, tasks=deps.requests)


async def open_turn(
    deps: TurnDeps, session_id: int, mail: list[Envelope], prepared: Prepared | None = None
) -> int:
    """Step 2, one transaction: settle orphans, open the turn, fold in the mail that starts it
    (the user rows and the cursor move commit together), with its files as the inbox prepared them."""
    s = deps
    settle = s.history.may_end_unanswered(session_id)

    def write(tx: Connection) -> int:
        if settle:
            s.history.mark_orphans_failed(tx, session_id)
        turn_id = s.sessions.open_turn(tx, session_id)
        fold_into_turn(tx, s.mailbox, s.history, session_id, turn_id, mail, prepared)
        return turn_id

    return await s.db.write_sync(write)


async def finish(runner: TurnRunner, outcome: TurnOutcome) -> None:
    """Step 4: the turn's row gets its end (unless its last round already closed it), the
    operator its log line, the adapter :class:`TurnFinished`."""
    s = runner.deps
    if not (isinstance(outcome, Final) and outcome.closed):
        await s.sessions.finish_turn(runner.turn_id, _STATUS[outcome.kind], _error(outcome))
    runner.log_finished(outcome)
    s.bus.emit(
        TurnFinished(
            to=runner.address,
            turn_id=runner.turn_id,
            outcome=outcome.kind,
            text=outcome.text if isinstance(outcome, Final) else "",
            failure=outcome.failure if isinstance(outcome, Failed) else None,
        )
    )


def _error(outcome: TurnOutcome) -> str | None:
    """What the turn's row keeps of why it did not end well."""
    if isinstance(outcome, Exhausted):
        return texts.exhausted(outcome.rounds)
    if isinstance(outcome, Failed):
        return outcome.error
    return None


__all__ = ["PREFETCH_PATIENCE", "finish", "open_turn", "prefetch"]
