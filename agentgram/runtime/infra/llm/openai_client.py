"""The :class:`~runtime.llm.types.LLMClient` for OpenAI-compatible endpoints.

Owns the wire edge: converting neutral messages and tool specs to OpenAI
dicts, assembling streamed deltas into an :class:`LLMRound`, and our own
retry/fallback policy (the SDK's retries are off so there is one policy, in
one place). Every failure is classified once, here, into a
:class:`~runtime.errors.FailureKind` (the rule for HTTP statuses is
:func:`~runtime.errors.kind_for_status`). For each distinct model in
``[model, *fallback_models]`` a retriable failure (429, 5xx, timeout,
connection, a cut stream) is retried ``max_retries`` times, then the next
model is tried after telling the sink with :class:`ModelFallback`.
Non-retriable failures (400, 401, 403, 404, 422) raise at once.

A retry of the same model after text was already forwarded emits
:class:`StreamRestart` instead, so the consumer discards the partial output it
showed without announcing a switch to the model already in use.

Cancellation: the stream is used as an async context manager, so cancelling
the awaiting task closes the HTTP response before ``CancelledError``
propagates.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI, RequestOptions

from agentgram.runtime.infra.backoff import Backoff
from agentgram.runtime.infra.config import LLMSettings
from agentgram.runtime.infra.errors import FailureKind, LLMError, kind_for_status
from agentgram.runtime.infra.http import model_http_client
from agentgram.runtime.infra.llm.types import (
    AssistantMessage,
    ChatMessage,
    ContentPart,
    ImagePart,
    LLMRound,
    ModelFallback,
    ProbeWarning,
    ReasoningDelta,
    StreamRestart,
    StreamSink,
    StreamStarted,
    SystemMessage,
    TextDelta,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agentgram.runtime.infra.log import get_logger, register_secret
from agentgram.runtime.infra.metrics import observe_llm_round

log = get_logger("llm")

MAX_RETRY_AFTER = 10.0
PROBE_TIMEOUT = 5.0
_USAGE = {"include_usage": True}
_OPTIONS: RequestOptions = {"security": {"bearer_auth": True}}  # as ``chat.completions.create`` sends


@dataclass(slots=True, frozen=True)
class _Failure:
    """One failed attempt, classified; ``reason`` is for the log and the stored turn error."""

    kind: FailureKind
    reason: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def retriable(self) -> bool:
        return self.kind.retriable


class _AttemptFailed(Exception):
    def __init__(self, failure: _Failure, forwarded: bool) -> None:
        super().__init__(failure.reason)
        self.failure = failure
        self.forwarded = forwarded  # the sink already received deltas from this attempt


class OpenAIClient:
    """Streams chat completions through the ``openai`` SDK with retry and model fallback."""

    def __init__(self, settings: LLMSettings, *, retry_base_delay: float = 0.5) -> None:
        self._settings = settings
        self._api_key = settings.api_key.get_secret_value()
        register_secret(self._api_key)
        self._retry_base_delay = retry_base_delay
        self._client = AsyncOpenAI(
            base_url=settings.base_url,
            api_key=self._api_key or "not-needed",
            timeout=settings.request_timeout,
            max_retries=0,
            http_client=model_http_client(str(settings.base_url)),
        )

    @property
    def models(self) -> list[str]:
        """The models to try, in order, each once (a fallback naming the model itself is no fallback)."""
        return list(dict.fromkeys([self._settings.model, *self._settings.fallback_models]))

    async def stream_round(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], sink: StreamSink
    ) -> LLMRound:
        request = _request(messages, tools)
        del messages  # the request is the bytes from here on: the context may go while the model thinks
        models = self.models
        last: _Failure | None = None
        for i, model in enumerate(models):
            try:
                return await self._with_retries(model, request, sink)
            except _AttemptFailed as exc:
                last = exc.failure
            if i + 1 < len(models):
                log.warning("model %s failed (%s); falling back to %s", model, last.reason, models[i + 1])
                await sink(ModelFallback(model, models[i + 1], last.reason))
        assert last is not None
        raise LLMError(f"LLM unavailable: {last.reason}", kind=last.kind, status=last.status, model=model)

    async def _with_retries(self, model: str, request: bytes, sink: StreamSink) -> LLMRound:
        """Try ``model`` up to ``1 + max_retries`` times; raise the last :class:`_AttemptFailed`."""
        retries = self._settings.max_retries
        for attempt in range(retries + 1):
            try:
                return await self._attempt(model, request, sink)
            except _AttemptFailed as exc:
                failure = exc.failure
                if not failure.retriable:
                    raise LLMError(
                        failure.reason, kind=failure.kind, status=failure.status, model=model
                    ) from None
                if attempt == retries:
                    raise
                delay = self._backoff(attempt, failure)
                log.info(
                    "model %s: %s; retry %d/%d in %.2fs", model, failure.reason, attempt + 1, retries, delay
                )
                await asyncio.sleep(delay)
                if exc.forwarded:
                    await sink(StreamRestart(model, failure.reason))
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int, failure: _Failure) -> float:
        if failure.retry_after is not None and 0 <= failure.retry_after <= MAX_RETRY_AFTER:
            return failure.retry_after
        return Backoff(self._retry_base_delay, MAX_RETRY_AFTER).next_delay(attempt + 1)

    async def _attempt(self, model: str, request: bytes, sink: StreamSink) -> LLMRound:
        builder = _RoundBuilder(model=model)
        streaming = False  # the endpoint took the request: a connection error now cuts the answer
        try:
            # The request is the JSON body already (:func:`_request`), and each chunk is read as
            # the dict it was sent as: ``chat.completions.create`` would re-validate every message
            # (25+ ms a round at 200 messages) and build a ``ChatCompletionChunk`` model for every
            # chunk (0.1 ms each, the larger part of a streamed round's CPU). The SDK still sends,
            # decodes the SSE events, raises on error events and maps the HTTP failures.
            stream = await self._client.post(
                "/chat/completions",
                content=_body(model, request),
                cast_to=object,
                options=_OPTIONS,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
            streaming = True
            async with stream:  # a cancel from here on closes the HTTP stream
                await sink(StreamStarted(model))
                async for chunk in stream:
                    await builder.feed(chunk, sink)
        except openai.OpenAIError as exc:
            raise _AttemptFailed(self._classify(exc, streaming), builder.forwarded) from exc
        except ValueError as exc:  # an SSE event that is not JSON
            failure = _Failure(FailureKind.STREAM_CUT, "malformed response from the LLM endpoint")
            raise _AttemptFailed(failure, builder.forwarded) from exc
        builder.observe()
        return builder.build()

    def _classify(self, exc: openai.OpenAIError, streaming: bool) -> _Failure:
        """The one mapping from the SDK's exceptions to a :class:`FailureKind`."""
        if isinstance(exc, openai.APITimeoutError):
            return _Failure(FailureKind.TIMEOUT, "the request timed out")
        if isinstance(exc, openai.APIConnectionError):
            if streaming:
                return _Failure(FailureKind.STREAM_CUT, "the stream broke off")
            return _Failure(FailureKind.UNREACHABLE, "could not connect to the LLM endpoint")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = self._clean(_server_message(exc))
            code = exc.code if isinstance(exc.code, str) else None
            retry_after = _retry_after(exc.response.headers) if status == 429 else None
            kind = kind_for_status(status, message, code)
            return _Failure(kind, f"HTTP {status}: {message}", status, retry_after)
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            return _Failure(FailureKind.STREAM_CUT, f"stream error: {self._clean(exc.message)}")
        # any other SDK error means we used the SDK wrongly: our bug, not the endpoint's
        return _Failure(FailureKind.INTERNAL, f"{type(exc).__name__}: {self._clean(str(exc))}")

    def _clean(self, text: str) -> str:
        """A short, key-free version of a server message."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text if len(text) <= 200 else text[:199] + "…"

    async def probe(self) -> ProbeWarning | None:
        """Check the endpoint lists models; a warning when it does not, never raise."""
        base = self._settings.base_url
        try:
            page = await self._client.with_options(timeout=PROBE_TIMEOUT).models.list()
        except openai.AuthenticationError:
            return ProbeWarning(
                f"LLM endpoint {base} rejected the API key (401); check llm.api_key", retry=False
            )
        except openai.APIStatusError as exc:
            text = f"LLM endpoint {base} answered HTTP {exc.status_code} when listing models"
            return ProbeWarning(text, retry=exc.status_code >= 500)
        except openai.APIConnectionError:
            return ProbeWarning(f"LLM endpoint {base} is unreachable", retry=True)
        except Exception as exc:  # a probe must never stop the start-up
            reason = self._clean(str(exc)) or type(exc).__name__
            return ProbeWarning(f"LLM endpoint {base} probe failed: {reason}", retry=True)
        listed = {m.id for m in page.data}
        missing = [m for m in self.models if m not in listed]
        if listed and missing:
            return ProbeWarning(
                f"LLM endpoint {base} does not list model(s): {', '.join(missing)}", retry=False
            )
        return None

    async def aclose(self) -> None:
        await self._client.close()


@dataclass(slots=True)
class _RoundBuilder:
    """Accumulates one stream's deltas; tool-call fragments are joined by ``index``."""

    model: str
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [id, name, args...]
    usage: Usage = field(default_factory=Usage)
    forwarded: bool = False
    started: float = field(default_factory=time.monotonic)  # the request was sent
    first_token: float | None = None  # the first text, reasoning or tool call arrived

    async def feed(self, chunk: object, sink: StreamSink) -> None:
        """Take one chunk as sent; a field of the wrong type is read as absent, never raised on."""
        fields = _fields(chunk)
        usage = _fields(fields.get("usage"))
        if usage:
            self.usage = Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
        choices = fields.get("choices")
        if isinstance(choices, list) and choices:
            delta = _fields(_fields(choices[0]).get("delta"))
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                self.forwarded = True
                await sink(ReasoningDelta(thought))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                self.forwarded = True
                await sink(TextDelta(content))
            calls = delta.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict):
                    self._add_call(call)
        if self.first_token is None and (self.forwarded or self.calls):
            self.first_token = time.monotonic()

    def _add_call(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        if not isinstance(index, int):
            index = len(self.calls)
        entry = self.calls.setdefault(index, ["", ""])
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id:
            entry[0] = call_id
        function = _fields(call.get("function"))
        name = function.get("name")
        if isinstance(name, str):
            entry[1] += name
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            entry.append(arguments)

    def observe(self) -> None:
        """Count this completion's latencies and tokens (``agentgram_llm_*``)."""
        first = None if self.first_token is None else self.first_token - self.started
        observe_llm_round(
            self.model,
            seconds=time.monotonic() - self.started,
            first_token=first,
            prompt_tokens=self.usage.input_tokens,
            completion_tokens=self.usage.output_tokens,
        )

    def build(self) -> LLMRound:
        calls = [
            ToolCallRequest(id=entry[0] or f"call_{index}", name=entry[1], arguments="".join(entry[2:]))
            for index, entry in sorted(self.calls.items())
        ]
        return LLMRound(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            tool_calls=calls,
            usage=self.usage,
            model=self.model,
        )


# --- the wire edge ---------------------------------------------------------------


def _request(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> bytes:
    """The round's messages and tools as the JSON object sent, encoded once per round.

    The dicts of the API's shape live only while it is encoded: a round waiting on the model
    holds these bytes, not a dict per message (``bench/README.md``, session 22). The encoding is
    the SDK's own (UTF-8, no spaces, no NaN), so the bytes of an unchanged prefix stay the same
    from round to round, as a prompt cache needs.
    """
    request: dict[str, Any] = {"messages": [to_openai_message(m) for m in messages]}
    if tools:
        request["tools"] = [to_openai_tool(t) for t in tools]
    return _json(request)


def _body(model: str, request: bytes) -> bytes:
    """The request body for ``model``: its name and the streaming options, then ``request``'s fields."""
    head = _json({"model": model, "stream": True, "stream_options": _USAGE})
    return head[:-1] + b"," + request[1:]


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def to_openai_message(message: ChatMessage) -> dict[str, Any]:
    match message:
        case UserMessage(content=tuple() as parts):
            return {"role": "user", "content": [to_openai_part(p) for p in parts]}
        case SystemMessage(content=content) | UserMessage(content=content):
            return {"role": message.role, "content": content}
        case AssistantMessage(content=content, tool_calls=calls) if calls:
            return {
                "role": "assistant",
                "content": content or None,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in calls
                ],
            }
        case AssistantMessage(content=content):
            return {"role": "assistant", "content": content}
        case ToolMessage(tool_call_id=call_id, content=content):
            return {"role": "tool", "tool_call_id": call_id, "content": content}
    raise TypeError(f"not a chat message: {message!r}")


def to_openai_part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": part.url}}
    return {"type": "text", "text": part.text}


def to_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _fields(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else no fields."""
    return value if isinstance(value, dict) else _NO_FIELDS


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


_NO_FIELDS: dict[str, Any] = {}


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own words (``error.message``), without the SDK's ``Error code: …`` wrapping;
    a proxy's HTML error page is summed up by its status line."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body.strip() and not body.lstrip().startswith("<"):
        return body.strip()
    return exc.response.reason_phrase or "no details"


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (HTTP dates are ignored)."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(seconds):
            return seconds
    return None
