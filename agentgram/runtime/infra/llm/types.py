"""Provider-neutral chat messages, tool calls and streamed-round results.

The turn loop and the context builder speak only these types; the OpenAI
client converts them to the wire format at its edge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(slots=True, frozen=True)
class ToolCallRequest:
    """One tool call as the model declared it (arguments still raw JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True, frozen=True)
class SystemMessage:
    content: str
    role: Literal["system"] = "system"


@dataclass(slots=True, frozen=True)
class TextPart:
    text: str


@dataclass(slots=True, frozen=True)
class ImagePart:
    """An image the model sees; ``url`` is a ``data:`` URL (:mod:`runtime.attachments.images`)."""

    url: str


ContentPart = TextPart | ImagePart


@dataclass(slots=True, frozen=True)
class UserMessage:
    """``content`` is plain text, or parts when the message carries images (or inlined files)."""

    content: str | tuple[ContentPart, ...]
    role: Literal["user"] = "user"

    @property
    def text(self) -> str:
        """The words alone, for code that needs no images (size estimates, logs)."""
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(part.text for part in self.content if isinstance(part, TextPart))


@dataclass(slots=True, frozen=True)
class AssistantMessage:
    content: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    role: Literal["assistant"] = "assistant"


@dataclass(slots=True, frozen=True)
class ToolMessage:
    tool_call_id: str
    content: str
    role: Literal["tool"] = "tool"


ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(slots=True, frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True, frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(slots=True)
class LLMRound:
    """Everything one streamed completion produced."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@dataclass(slots=True, frozen=True)
class TextDelta:
    text: str


@dataclass(slots=True, frozen=True)
class ReasoningDelta:
    text: str


@dataclass(slots=True, frozen=True)
class ModelFallback:
    """The client gave up on ``failed_model`` and is retrying with ``next_model``."""

    failed_model: str
    next_model: str
    reason: str


@dataclass(slots=True, frozen=True)
class StreamRestart:
    """The attempt that streamed so far failed and ``model`` is asked again: its output is void."""

    model: str
    reason: str


@dataclass(slots=True, frozen=True)
class StreamStarted:
    """The endpoint took the request and its answer streams from here (response headers came)."""

    model: str


StreamEvent = TextDelta | ReasoningDelta | ModelFallback | StreamRestart | StreamStarted
StreamSink = Callable[[StreamEvent], Awaitable[None]]


@dataclass(slots=True, frozen=True)
class ProbeWarning:
    """What a start-up check of the endpoint found wrong; ``retry`` when checking again can help
    (unreachable, 5xx), not for a configuration mistake (a refused key, a model it does not list)."""

    text: str
    retry: bool


class LLMClient(Protocol):
    """Streams one completion; cancelling the awaiting task closes the request.

    Raises :class:`runtime.errors.LLMError` when every model failed.
    """

    async def stream_round(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        sink: StreamSink,
    ) -> LLMRound: ...

    async def probe(self) -> ProbeWarning | None:
        """Check the endpoint at start; a warning, or ``None`` when it answers as configured."""
        ...
