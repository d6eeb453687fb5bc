"""Wrapper hooks: what a ``before`` or ``after`` hook is sent, how it runs, and what its answer means.

A hook target is a ``command`` or a registered ``tool`` (``tools.wrappers``
in the config; the middleware around them is :mod:`runtime.tools.wrappers`).
Both get the same JSON (:class:`HookPayload`): the command on stdin, the tool
as its arguments. A ``before`` hook answers one JSON object, a
:data:`Verdict`; anything else — a crash, a non-zero exit, a timeout, no
output, bad JSON, an unknown action, a missing field — is a deny (fail
closed), because a guard that broke must not wave calls through. An ``after``
hook's output is ignored and its failure only logged.

A command hook runs like ``execute_cmd`` (:mod:`runtime.tools.shell`):
``/bin/sh -c`` in the workdir (so a relative path is found there), in its own
process group, with the secret-free environment; on timeout or cancellation
the whole group is stopped (SIGTERM, a short grace, SIGKILL) before the hook
call returns.

Hooks see only what the model sent: there are no bindings (values merged into
a call below the wrappers) yet, so nothing secret reaches a hook through its
payload.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentgram.runtime.capabilities.tools.base import Tool, ToolContext
from agentgram.runtime.capabilities.tools.shell import (
    KILL_SETTLE_SECONDS,
    command_env,
    finish_even_if_cancelled,
    group_gone,
    signal_group,
    start_guarded,
)
from agentgram.runtime.infra.config import HookSettings
from agentgram.runtime.infra.errors import AgentgramError, ToolError
from agentgram.runtime.infra.log import get_logger

log = get_logger("tools.hooks")

HOOK_OUTPUT_LIMIT_BYTES = 1024 * 1024
"""A before hook's answer is one small JSON object; more than this is a failure (deny)."""
STDERR_LOG_CHARS = 500
"""How much of a failing command hook's stderr the log line keeps (its end, where errors are)."""
HOOK_TERM_GRACE_SECONDS = 1.0
_READ_CHUNK = 64 * 1024

ToolLookup = Callable[[str], Tool[Any] | None]
"""Finds a hook's ``tool`` target in the full registry, visible to the model or not."""


async def call_tool(tool: Tool[Any], arguments: dict[str, Any], ctx: ToolContext) -> str:
    """Parse, guard, execute: how every call runs, the model's own and a hook tool's alike."""
    args = tool.parse(arguments)
    tool.guard(args, ctx)
    return await tool.execute(args, ctx)


class HookPayload(BaseModel):
    """The JSON a hook receives; ``status`` and ``result`` only for an ``after`` hook."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    session: int
    source: str
    agent: str
    status: Literal["done", "failed"] | None = None
    result: str | None = None

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Allow(_Answer):
    action: Literal["allow"] = "allow"


class Deny(_Answer):
    action: Literal["deny"] = "deny"
    reason: str


class Rewrite(_Answer):
    action: Literal["rewrite"] = "rewrite"
    arguments: dict[str, Any]


class Answer(_Answer):
    """The call is not run; ``result`` is what the model reads instead."""

    action: Literal["answer"] = "answer"
    result: str


Verdict = Annotated[Allow | Deny | Rewrite | Answer, Field(discriminator="action")]
_VERDICT: TypeAdapter[Allow | Deny | Rewrite | Answer] = TypeAdapter(Verdict)


class HookFailed(AgentgramError):
    """A hook did not give a usable answer: the message says what went wrong (the model reads it);
    ``detail`` is for the log only (a command's stderr)."""

    def __init__(self, problem: str, detail: str = "") -> None:
        super().__init__(problem)
        self.detail = detail


class Hook(ABC):
    """One configured hook target and its time limit; subclasses say how the target is reached."""

    def __init__(self, settings: HookSettings) -> None:
        self.timeout = settings.timeout

    @property
    @abstractmethod
    def label(self) -> str:
        """How the chain label and log lines name it: ``command hooks/check.py``, ``tool audit_log``."""

    @abstractmethod
    async def _output(self, payload: HookPayload, ctx: ToolContext) -> str: ...

    async def output(self, payload: HookPayload, ctx: ToolContext) -> str:
        """The hook's text, or :class:`HookFailed`; cancelled (and cleaned up) at its timeout."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self._output(payload, ctx)
        except TimeoutError:
            raise HookFailed(f"it did not answer within {self.timeout:g} s and was stopped") from None

    async def before(self, payload: HookPayload, ctx: ToolContext) -> Allow | Deny | Rewrite | Answer:
        """The hook's verdict; every failure is a :class:`Deny` (fail closed)."""
        try:
            verdict = parse_verdict(await self.output(payload, ctx))
        except HookFailed as exc:
            self._log_failure("before", payload, _described(exc))
            return Deny(reason=f"{exc} (a failing before hook denies the call)")
        except Exception as exc:  # a hook tool's bug must not let the call through either
            self._log_failure("before", payload, f"it raised {exc!r}", exc)
            return Deny(reason="it failed (a failing before hook denies the call)")
        self._log_verdict(payload, verdict)
        return verdict

    async def after(self, payload: HookPayload, ctx: ToolContext) -> None:
        """Tell the hook how the call went; a failure is logged and otherwise ignored."""
        try:
            await self.output(payload, ctx)
        except HookFailed as exc:
            self._log_failure("after", payload, _described(exc))
        except Exception as exc:
            self._log_failure("after", payload, f"it raised {exc!r}", exc)
        else:
            log.debug("after hook %s ran for %s", self.label, payload.tool, extra=_fields(payload, self))

    def _log_verdict(self, payload: HookPayload, verdict: Allow | Deny | Rewrite | Answer) -> None:
        fields = {**_fields(payload, self), "action": verdict.action}
        if isinstance(verdict, Allow):
            log.debug("before hook %s allowed %s", self.label, payload.tool, extra=fields)
        elif isinstance(verdict, Deny):
            log.info("before hook %s denied %s: %s", self.label, payload.tool, verdict.reason, extra=fields)
        else:
            log.info("before hook %s chose %s for %s", self.label, verdict.action, payload.tool, extra=fields)

    def _log_failure(
        self, stage: str, payload: HookPayload, problem: str, exc: BaseException | None = None
    ) -> None:
        verb = "the call is denied" if stage == "before" else "ignored"
        log.warning(
            "%s hook %s failed for %s (%s): %s",
            stage,
            self.label,
            payload.tool,
            verb,
            problem,
            exc_info=exc,
            extra={**_fields(payload, self), "stage": stage},
        )


def _described(exc: HookFailed) -> str:
    return f"{exc}; stderr: {exc.detail}" if exc.detail else str(exc)


def _fields(payload: HookPayload, hook: Hook) -> dict[str, object]:
    return {"session": payload.session, "tool": payload.tool, "agent": payload.agent, "hook": hook.label}


def parse_verdict(text: str) -> Allow | Deny | Rewrite | Answer:
    """A before hook's answer, or :class:`HookFailed` naming what is wrong with it."""
    if not text.strip():
        raise HookFailed("it printed nothing")
    try:
        return _VERDICT.validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise HookFailed(f"its answer is not a valid verdict ({where}: {first['msg']})") from None


def make_hook(settings: HookSettings, tools: ToolLookup) -> Hook:
    if settings.command is not None:
        return CommandHook(settings, settings.command)
    assert settings.tool is not None  # HookSettings names exactly one target
    return ToolHook(settings, settings.tool, tools)


class ToolHook(Hook):
    """A registered tool, called with the payload as its arguments in the call's own context."""

    def __init__(self, settings: HookSettings, name: str, tools: ToolLookup) -> None:
        super().__init__(settings)
        self.name = name
        self._tools = tools

    @property
    def label(self) -> str:
        return f"tool {self.name}"

    async def _output(self, payload: HookPayload, ctx: ToolContext) -> str:
        tool = self._tools(self.name)
        if tool is None:
            raise HookFailed(f"there is no tool called {self.name!r}")
        try:
            return await call_tool(tool, payload.as_json(), ctx)
        except ToolError as exc:
            raise HookFailed(f"the tool failed: {exc}") from None


class CommandHook(Hook):
    """A shell command: the payload on stdin, the answer on stdout, stderr for the log only."""

    def __init__(self, settings: HookSettings, command: str) -> None:
        super().__init__(settings)
        self.command = command

    @property
    def label(self) -> str:
        return f"command {self.command}"

    async def _output(self, payload: HookPayload, ctx: ToolContext) -> str:
        try:
            proc = await _spawn(self.command, ctx.workdir)
        except OSError as exc:
            raise HookFailed(f"it could not be started: {exc.strerror or exc}") from None
        try:
            out, err, code = await _exchange(proc, payload.model_dump_json(exclude_none=True).encode())
        except BaseException:  # its timeout, /stop, or a bug here: nothing of the hook outlives the call
            await finish_even_if_cancelled(asyncio.ensure_future(_stop(proc)))
            raise
        if code != 0:
            tail = err.decode("utf-8", errors="replace")[-STDERR_LOG_CHARS:].strip()
            raise HookFailed(f"it exited with code {code}", detail=tail)
        if len(out) > HOOK_OUTPUT_LIMIT_BYTES:
            raise HookFailed(f"it printed more than {HOOK_OUTPUT_LIMIT_BYTES} bytes")
        return out.decode("utf-8", errors="replace")


async def _spawn(command: str, cwd: Path) -> asyncio.subprocess.Process:
    """Start the hook in its own session; if cancelled while it starts, stop what started."""
    start = asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=command_env(),
        start_new_session=True,
    )
    return await start_guarded(start, _stop)


async def _exchange(proc: asyncio.subprocess.Process, stdin: bytes) -> tuple[bytes, bytes, int]:
    """Send the payload, read both streams to their end, wait for the exit code."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    async with asyncio.TaskGroup() as group:
        group.create_task(_feed(proc.stdin, stdin))
        out = group.create_task(_read_capped(proc.stdout, HOOK_OUTPUT_LIMIT_BYTES))
        err = group.create_task(_read_capped(proc.stderr, HOOK_OUTPUT_LIMIT_BYTES))
    return out.result(), err.result(), await proc.wait()


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    try:
        stdin.write(data)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # a hook may decide without reading its stdin
    finally:
        stdin.close()


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> bytes:
    """At most ``limit + 1`` bytes (one more tells "too much"); the rest is read and dropped, so a
    chatty hook never blocks on a full pipe."""
    kept = bytearray()
    while chunk := await stream.read(_READ_CHUNK):
        kept += chunk[: limit + 1 - len(kept)]
    return bytes(kept)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the hook's group, a short grace, SIGKILL, and wait (bounded) until it is gone."""
    pgid = proc.pid  # session leader: its pid is the group id
    signal_group(pgid, signal.SIGTERM)
    try:
        async with asyncio.timeout(HOOK_TERM_GRACE_SECONDS):
            await proc.wait()
            await group_gone(pgid)
    except TimeoutError:
        pass
    signal_group(pgid, signal.SIGKILL)
    try:
        # bounded: wait() also waits for the pipes, which a process that left the group may hold
        async with asyncio.timeout(HOOK_TERM_GRACE_SECONDS + KILL_SETTLE_SECONDS):
            await proc.wait()
            await group_gone(pgid)
    except TimeoutError:
        log.warning("hook process group %s did not go away after SIGKILL", pgid)
