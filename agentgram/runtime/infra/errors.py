"""The one root of agentgram's exceptions, split two ways.

* configuration / developer mistakes: :class:`ConfigError` — shown as one line;
* runtime failures: :class:`LLMError`, :class:`ToolError`, :class:`MailboxFull`,
  :class:`StorageError`.

Stopping a turn is control flow without an exception of its own: /stop sets the
turn's ``CancelToken`` and cancels its task, so the bare ``asyncio.CancelledError``
unwinds it and the loop tells its own cancellation from a shutdown by the token
(:mod:`runtime.turn.loop`).

It also owns the one classification of failures a user is told about:
:class:`FailureKind` (what went wrong, in terms the user can act on) and
:class:`Failure`, the platform-neutral value that crosses into adapters in
place of exception text — the text of an exception goes to the log only.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class AgentgramError(Exception):
    """Root of every exception agentgram raises on purpose."""


# --- configuration ----------------------------------------------------------


class ConfigError(AgentgramError):
    """Invalid configuration; ``str(err)`` is the single line shown to the user."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"config error: {key}: {problem}" if key else f"config error: {problem}")


# --- runtime failures -------------------------------------------------------


class FailureKind(enum.StrEnum):
    """Why a turn failed, as the user is told; each kind has a locale text (:attr:`Failure.locale_key`)."""

    UNAVAILABLE = "unavailable"  # 5xx, 409: the endpoint answers but fails
    TIMEOUT = "timeout"  # no answer within llm.request_timeout (or HTTP 408)
    RATE_LIMITED = "rate-limited"  # 429
    AUTH_FAILED = "auth-failed"  # 401, 403: the API key was refused
    MODEL_NOT_FOUND = "model-not-found"  # 404
    CONTEXT_TOO_LONG = "context-too-long"  # 413, or a 400 that names the context window
    BAD_REQUEST = "bad-request"  # any other 4xx: the endpoint refused what we sent
    UNREACHABLE = "unreachable"  # connection refused, DNS, TLS: no endpoint to talk to
    STREAM_CUT = "stream-cut"  # the answer broke off mid-stream or could not be read
    INTERNAL = "internal"  # a bug on our side; the details are in the log only

    @property
    def retriable(self) -> bool:
        """Whether asking again (the same model later, or a fallback model) may help."""
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        FailureKind.UNAVAILABLE,
        FailureKind.TIMEOUT,
        FailureKind.RATE_LIMITED,
        FailureKind.UNREACHABLE,
        FailureKind.STREAM_CUT,
    }
)
_CONTEXT_TOO_LONG = re.compile(
    r"context[ _-]?(length|size|window)|maximum context|too many tokens|prompt is too long", re.IGNORECASE
)


def kind_for_status(status: int, message: str = "", code: str | None = None) -> FailureKind:
    """The one rule from an HTTP error (its status, the server's message and code) to its kind."""
    if status == 413 or (
        status == 400 and (code == "context_length_exceeded" or _CONTEXT_TOO_LONG.search(message))
    ):
        return FailureKind.CONTEXT_TOO_LONG
    if status in (401, 403):
        return FailureKind.AUTH_FAILED
    if status == 404:
        return FailureKind.MODEL_NOT_FOUND
    if status == 408:
        return FailureKind.TIMEOUT
    if status == 429:
        return FailureKind.RATE_LIMITED
    if 400 <= status < 500 and status != 409:
        return FailureKind.BAD_REQUEST
    return FailureKind.UNAVAILABLE


@dataclass(slots=True, frozen=True)
class Failure:
    """What the user is told about a failed turn: a kind and the facts its text names, never
    exception text (that goes to the log)."""

    kind: FailureKind = FailureKind.INTERNAL
    status: int | None = None
    model: str | None = None

    @property
    def locale_key(self) -> str:
        """The locale message for this kind: ``llm-<kind>``, or ``turn-failed`` for our own bugs."""
        return "turn-failed" if self.kind is FailureKind.INTERNAL else f"llm-{self.kind}"

    @property
    def params(self) -> dict[str, str | int]:
        """The locale message's parameters (``status`` 0 when there was no HTTP status)."""
        return {"status": self.status or 0, "model": self.model or ""}


class RuntimeFailure(AgentgramError):
    """Something outside agentgram's control failed."""


class LLMError(RuntimeFailure):
    """The LLM endpoint failed; ``str(err)`` is for the log, :attr:`failure` for the user."""

    def __init__(
        self,
        message: str,
        *,
        kind: FailureKind = FailureKind.UNAVAILABLE,
        status: int | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.model = model

    @property
    def retriable(self) -> bool:
        """Whether a fallback model may help."""
        return self.kind.retriable

    @property
    def failure(self) -> Failure:
        return Failure(self.kind, self.status, self.model)


class ToolError(RuntimeFailure):
    """A tool could not do what was asked; the message is what the model reads."""


class FetchFailed(RuntimeFailure):
    """An attachment could not be fetched from the chat platform; the message says why, in words
    the user and the model read (``runtime.attachments``)."""


class TranscriptionFailed(RuntimeFailure):
    """A voice note could not be transcribed (HTTP error, timeout, empty text); the message says why."""


class MailboxFull(RuntimeFailure):
    """The session has too many unread envelopes; the sender must back off."""


class StorageError(RuntimeFailure):
    """The database refused or lost a write."""
