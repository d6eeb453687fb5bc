"""The one root of agentgram's exceptions, split three ways.

* control flow: :class:`TurnCancelled` — not failures, they steer the loop;
* configuration / developer mistakes: :class:`ConfigError` — shown as one line;
* runtime failures: :class:`LLMError`, :class:`ToolError`, :class:`MailboxFull`,
  :class:`StorageError`.
"""

from __future__ import annotations


class AgentgramError(Exception):
    """Root of every exception agentgram raises on purpose."""


# --- control flow -----------------------------------------------------------


class ControlFlow(AgentgramError):
    """Raised to steer the turn loop; never reported as a failure."""


class TurnCancelled(ControlFlow):
    """The turn's cancellation token fired (/stop, /new, cron kill)."""


# --- configuration ----------------------------------------------------------


class ConfigError(AgentgramError):
    """Invalid configuration; ``str(err)`` is the single line shown to the user."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"config error: {key}: {problem}" if key else f"config error: {problem}")


# --- runtime failures -------------------------------------------------------


class RuntimeFailure(AgentgramError):
    """Something outside agentgram's control failed."""


class LLMError(RuntimeFailure):
    """The LLM endpoint failed; ``retriable`` says whether a fallback model may help."""

    def __init__(self, message: str, *, retriable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.status = status


class ToolError(RuntimeFailure):
    """A tool could not do what was asked; the message is what the model reads."""


class MailboxFull(RuntimeFailure):
    """The session has too many unread envelopes; the sender must back off."""


class StorageError(RuntimeFailure):
    """The database refused or lost a write."""
