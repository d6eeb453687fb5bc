"""What differs between the root agent's turn and a sub-agent's, as one value: :class:`Frame`.

The turn's steps (:mod:`runtime.turn.graph`) are written once; a frame says
where they read and write. The root frame reads the session's history (under
compaction, with the session's notes), folds in new mail at each round, streams
to the chat and owns the turn: its last round closes it, a /stop settles it, a
restart resumes its children first and keeps its round budget, its calls may
detach. A sub-agent's frame reads its own stack frame's history, takes no mail
(it waits for the root's next round), answers its parent rather than the chat
(only a model fallback is the chat's news) and may name its own model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agentgram.runtime.core.turn.ports import Events
from agentgram.runtime.core.turn.request import HistoryScope, SessionScope, StackScope
from agentgram.runtime.core.turn.subagents import Level
from agentgram.runtime.infra.events import (
    Address,
    Notify,
    RoundEnded,
    StreamEnded,
    StreamReset,
    TextDelta,
    Thinking,
)
from agentgram.runtime.infra.llm.types import ModelFallback, ReasoningDelta, StreamEvent, StreamRestart
from agentgram.runtime.infra.llm.types import TextDelta as LLMTextDelta


class Echo(Protocol):
    """Where a frame's model output is shown."""

    async def stream(self, event: StreamEvent) -> None: ...

    def stream_ended(self, *, has_tool_calls: bool) -> None:
        """The round's completion is whole; it is stored next, then :meth:`round_ended`."""
        ...

    def round_ended(self, text: str, *, has_tool_calls: bool, row_id: int | None) -> None: ...

    def for_child(self) -> Echo:
        """The echo of a sub-agent this frame starts."""
        ...


@dataclass(slots=True, frozen=True)
class ChatEcho:
    """The chat's view of a turn: its text and thinking as they stream, and each round's end."""

    bus: Events
    notice: Notify
    address: Address
    turn_id: int

    async def stream(self, event: StreamEvent) -> None:
        to, turn_id = self.address, self.turn_id
        if isinstance(event, LLMTextDelta):
            self.bus.emit(TextDelta(to=to, turn_id=turn_id, text=event.text))
        elif isinstance(event, ReasoningDelta):
            self.bus.emit(Thinking(to=to, turn_id=turn_id, text=event.text))
        elif isinstance(event, StreamRestart):  # the same model again: nothing to announce
            self.bus.emit(StreamReset(to=to, turn_id=turn_id))
        elif isinstance(event, ModelFallback):
            self.bus.emit(StreamReset(to=to, turn_id=turn_id))
            await self.notice(to, "model-fallback", {"failed": event.failed_model, "next": event.next_model})

    def stream_ended(self, *, has_tool_calls: bool) -> None:
        self.bus.emit(StreamEnded(to=self.address, turn_id=self.turn_id, has_tool_calls=has_tool_calls))

    def round_ended(self, text: str, *, has_tool_calls: bool, row_id: int | None) -> None:
        self.bus.emit(
            RoundEnded(
                to=self.address, turn_id=self.turn_id, text=text, has_tool_calls=has_tool_calls, row_id=row_id
            )
        )

    def for_child(self) -> Echo:
        return ParentEcho(self)


@dataclass(slots=True, frozen=True)
class ParentEcho:
    """A sub-agent answers its parent, not the chat: only a model fallback reaches the chat."""

    chat: Echo

    async def stream(self, event: StreamEvent) -> None:
        if isinstance(event, ModelFallback):
            await self.chat.stream(event)

    def stream_ended(self, *, has_tool_calls: bool) -> None:
        return None

    def round_ended(self, text: str, *, has_tool_calls: bool, row_id: int | None) -> None:
        return None

    def for_child(self) -> Echo:
        return self


class _NoEcho:
    """Shows nothing (a request built to be compared, not streamed: the prefetch's)."""

    async def stream(self, event: StreamEvent) -> None:
        return None

    def stream_ended(self, *, has_tool_calls: bool) -> None:
        return None

    def round_ended(self, text: str, *, has_tool_calls: bool, row_id: int | None) -> None:
        return None

    def for_child(self) -> Echo:
        return self


NO_ECHO: Echo = _NoEcho()


@dataclass(slots=True, frozen=True)
class Frame:
    """One agent's place in a turn: its :class:`Level` (agent, tools, prompt, model, depth, stack
    frame) and how its steps differ (see the module docstring)."""

    level: Level
    scope: HistoryScope
    echo: Echo
    injects_mail: bool
    owns_turn: bool

    @classmethod
    def root(cls, level: Level, echo: Echo) -> Frame:
        return cls(level, SessionScope(), echo, injects_mail=True, owns_turn=True)

    def child(self, level: Level) -> Frame:
        assert level.stack_id is not None
        return Frame(
            level, StackScope(level.stack_id), self.echo.for_child(), injects_mail=False, owns_turn=False
        )

    @property
    def stack_id(self) -> int | None:
        return self.level.stack_id


__all__ = ["NO_ECHO", "ChatEcho", "Echo", "Frame", "ParentEcho"]
