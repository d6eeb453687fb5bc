"""An in-process :class:`~runtime.llm.types.LLMClient` driven by a function, for fast tests.

As pydantic-ai's ``FunctionModel``: a test writes a function from the request
(the messages and the tools) to a :class:`Round`, plain or ``async``, and
:class:`ScriptedLLM` plays it as the OpenAI client plays a response — a
:class:`StreamStarted` first (a prefetched request counts as under way at
once), the text in its chunks, then the :class:`LLMRound`. A function that
raises (an :class:`~runtime.errors.LLMError`, say) fails the round; one that
waits, or a round that holds, keeps the request open until the turn is
cancelled, which closes it as closing the HTTP stream would (counted in
:attr:`ScriptedLLM.closed`). :meth:`ScriptedLLM.script` makes the function from
a queue of rounds. Nothing leaves the process: the HTTP fakes in
``tests/fakes`` are for the real client.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgram.runtime.infra.llm.types import (
    ChatMessage,
    LLMRound,
    ProbeWarning,
    ReasoningDelta,
    StreamSink,
    StreamStarted,
    TextDelta,
    ToolCallRequest,
    ToolSpec,
    Usage,
)


@dataclass(slots=True, frozen=True)
class Call:
    """A tool call the scripted model makes; its id is given by the client unless set."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(slots=True, frozen=True)
class Round:
    """What the model answers one request with: text and/or tool calls.

    ``chunks`` is how the text streams (by default in one piece; when given, they
    make up the text). ``hold``, when given, is waited for after the chunks
    streamed: a round that hangs mid-answer until the test sets it, or the turn
    is cancelled.
    """

    text: str = ""
    calls: Sequence[Call] = ()
    chunks: Sequence[str] | None = None
    reasoning: str = ""
    usage: Usage = field(default_factory=Usage)
    hold: asyncio.Event | None = None

    @property
    def streamed(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        return [self.text] if self.text else []


@dataclass(slots=True, frozen=True)
class Request:
    """One request the client was given, as it was given."""

    messages: list[ChatMessage]
    tools: list[ToolSpec]


RoundFunction = Callable[[list[ChatMessage], list[ToolSpec]], Round | Awaitable[Round]]
"""The scripted model: the request in, the round out (or an exception raised)."""


class ScriptedLLM:
    def __init__(
        self, function: RoundFunction, *, model: str = "scripted", probe_warning: ProbeWarning | None = None
    ) -> None:
        self.function = function
        self.model = model
        self.probe_warning = probe_warning
        self.requests: list[Request] = []
        self.closed = 0  # requests cancelled before they were answered
        self._call_ids = 0
        self._queue: deque[Round | BaseException] | None = None  # what ``script`` has left

    @classmethod
    def script(cls, *rounds: Round | BaseException, model: str = "scripted") -> ScriptedLLM:
        """Answer each request with the next round (an exception is raised instead); a request
        past the end fails the test with an :class:`AssertionError`."""
        queue: deque[Round | BaseException] = deque(rounds)

        def next_round(messages: list[ChatMessage], tools: list[ToolSpec]) -> Round:
            if not queue:
                raise AssertionError(f"no round scripted for request {len(client.requests)}")
            answer = queue.popleft()
            if isinstance(answer, BaseException):
                raise answer
            return answer

        client = cls(next_round, model=model)
        client._queue = queue
        return client

    @property
    def remaining(self) -> int:
        """Scripted rounds not asked for yet (``script`` only)."""
        return len(self._queue) if self._queue is not None else 0

    async def stream_round(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], sink: StreamSink
    ) -> LLMRound:
        request = Request(list(messages), list(tools))
        self.requests.append(request)
        try:
            await sink(StreamStarted(self.model))
            answer = self.function(request.messages, request.tools)
            scripted = await answer if inspect.isawaitable(answer) else answer
            return await self._play(scripted, sink)
        except asyncio.CancelledError:
            self.closed += 1
            raise

    async def _play(self, scripted: Round, sink: StreamSink) -> LLMRound:
        if scripted.reasoning:
            await sink(ReasoningDelta(scripted.reasoning))
        streamed = scripted.streamed
        for chunk in streamed:
            await sink(TextDelta(chunk))
            await asyncio.sleep(0)  # as a stream does: others run between chunks
        if scripted.hold is not None:
            await scripted.hold.wait()
        return LLMRound(
            text="".join(streamed),
            reasoning=scripted.reasoning,
            tool_calls=[self._request(call) for call in scripted.calls],
            usage=scripted.usage,
            model=self.model,
        )

    def _request(self, call: Call) -> ToolCallRequest:
        self._call_ids += 1
        call_id = call.id or f"call_{self._call_ids}"
        return ToolCallRequest(call_id, call.name, json.dumps(call.arguments))

    async def probe(self) -> ProbeWarning | None:
        return self.probe_warning


__all__ = ["Call", "Request", "Round", "RoundFunction", "ScriptedLLM"]
