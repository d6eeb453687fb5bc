"""A turn's mutable state, one plain value per frame (pydantic-ai's ``GraphAgentState``).

What is built once lives in :class:`~runtime.turn.deps.TurnDeps`; what a
frame's steps change as they go lives here, and nowhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from agentgram.runtime.capabilities.tools.base import ToolRegistry
from agentgram.runtime.core.mailbox import Envelope
from agentgram.runtime.core.turn.prefetch import Prefetch


@dataclass(slots=True)
class TurnState:
    rounds: int = 0
    partial_text: str = ""  # what the model wrote in the round under way (kept on a stop)
    tokens_in: int = 0
    tokens_out: int = 0
    tools_used: list[str] = field(default_factory=list)  # for the turn's log line, in call order
    offered: ToolRegistry | None = None  # the tools the model was offered in the latest round
    first_mail: list[Envelope] | None = None  # the unread mail that started the turn, already read
    prefetch: Prefetch | None = None  # the first round's request, sent while the turn was opened
    started: float = field(default_factory=time.monotonic)

    def add_usage(self, tokens_in: int, tokens_out: int) -> None:
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out


__all__ = ["TurnState"]
