"""Every string the *model* reads, in one place (user-facing text lives in locales/).

These are fixed English so that prompts stay byte-stable and behave the same
for every user language.
"""

from __future__ import annotations

import json

CANCELLED_BY_USER = "Cancelled by user."
DENIED_BY_POLICY = "Tool call denied by approval policy."
AUTO_DENIED = "Tool call auto-denied: this session does not support approval requests."
INTERRUPTED = (
    "Error: tool call was interrupted (connection lost before user approval). Please retry the operation."
)
APPROVAL_TIMED_OUT = "Approval timed out."
UNKNOWN_TOOL = "unknown tool {name!r}. Available tools: {names}."  # stored bare; read via failed_result


def expiry_message(reason: str | None) -> str:
    """An approval that ended without a decision: timed out, or never shown (``reason``)."""
    return f"Approval could not be asked: {reason}." if reason else APPROVAL_TIMED_OUT


def exhausted(rounds: int) -> str:
    return f"Exceeded {rounds} tool-call rounds without a final answer."


def rejection_message(reason: str | None) -> str:
    """The one rejection text the model reads, with the user's reason verbatim."""
    reason = (reason or "").strip()
    return f"User rejected this tool call. Reason: {reason}" if reason else "User rejected this tool call."


def hidden_result(name: str, length: int, limit: int) -> str:
    return (
        f"[Tool response for `{name}` hidden: response was {length} chars, exceeding the "
        f"{limit}-char limit. Call the tool again if you need this information.]"
    )


ERROR_PREFIX = "Error: "


def failed_result(error: str) -> str:
    """A failed call's result as the model reads it: one ``Error:`` prefix, never two.

    The one place that adds it: results are stored bare, but rows stored before that rule
    (``Error: unknown tool …``) already carry it.
    """
    return error if error.startswith(ERROR_PREFIX) else ERROR_PREFIX + error


EXECUTE_TASK_DESCRIPTION = (
    "Hand a self-contained task to a sub-agent and get its final answer back as this call's result. "
    "The sub-agent starts with no memory of this conversation: put everything it needs into `task`. "
    "Several execute_task calls in one response (and nothing else) run at the same time. Agents:\n{agents}"
)
SUBAGENT_INTERRUPTED = (
    "Error: the sub-agent was interrupted by a restart before it finished. Retry if still needed."
)


def unknown_agent(name: str, names: list[str]) -> str:
    return f"unknown agent {name!r}. Available agents: {', '.join(names)}."


def subagent_failed(agent: str, why: str) -> str:
    return f"the {agent} sub-agent did not finish: {why}"


def too_deep(limit: int) -> str:
    return f"sub-agents may not nest deeper than {limit} levels"


# --- tracked calls (runtime.turn.background) ------------------------------------------------------

DETACHED_MESSAGE = "Its result will arrive as mail. Use wait, get_tool_call_status or cancel_tool_call."


DETACHED_TASK_MESSAGE = (
    "A sub-agent works on it in session {session}: write to it with send_message (session "
    "{session}) while it works. Its answer will arrive as mail. Use wait, get_tool_call_status or "
    "cancel_tool_call."
)


def detached_placeholder(call_id: str, seconds: float, *, session: int | None = None) -> str:
    """The one result a detached call's model reads in its place (docs/architecture/tools.md);
    ``session``: the session doing its work (a sub-agent's task), which it names."""
    placeholder: dict[str, object] = {
        "status": "running",
        "tool_call_id": call_id,
        "detached": f"still running after {seconds:g}s",
    }
    if session is not None:
        placeholder["session_id"] = session
    placeholder["message"] = (
        DETACHED_TASK_MESSAGE.format(session=session) if session is not None else DETACHED_MESSAGE
    )
    return json.dumps(placeholder)


def call_cancelled(reason: str | None) -> str:
    return f"Cancelled: {reason}." if reason else "Cancelled."


ORPHANED = (
    "The process running this call ended (agentgram restarted) before the call finished; its output "
    "is lost and its processes were killed. Run it again if it is still needed."
)


def finished_mail(envelope_id: str, call_id: str, name: str, status: str, result: str, *, read: bool) -> str:
    """How a ``tool_call_finished`` mail reads in the conversation (a header the model can quote: docs/architecture/mailbox.md)."""
    header = f"[mail {envelope_id}: tool call {call_id} ({name or 'tool'}) {status}"
    if read:
        return f"{header}; its result was already read with get_tool_call_status]"
    return f"{header}]\n{result}"
