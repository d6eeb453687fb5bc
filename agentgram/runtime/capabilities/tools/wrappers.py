"""Tool wrappers: the decorators of ``tools.wrappers`` as middleware around a tool call.

An :data:`Exec` runs a call (a :class:`CallSite`) and returns the text the
model reads, or raises :class:`~runtime.errors.ToolError`. Each decorator is
a layer that takes the inner :data:`Exec` and runs around it; the
:class:`Chain` for a tool stacks the layers of every ``tools.wrappers`` entry
whose glob matches the tool's name, in file order, first listed outermost
(``[d1, d2]`` around ``run`` is ``d1(d2(run))``: docs/architecture/tools.md). The chain's
:attr:`Chain.labels` are what the loop records with each call.

* ``timeout`` cancels the inner call (which is how ``execute_cmd`` kills its
  process group) and fails it with a :class:`ToolError`;
* ``retries`` repeats a failed call, only for tools marked
  :attr:`~runtime.tools.base.Tool.idempotent` (elsewhere it is skipped, and its
  label says so); a :class:`HookDenied` is a decision, never retried;
* ``truncate`` cuts the result, or a failure's message, to ``max_bytes``;
* ``before`` and ``after`` hand the call to a hook (:mod:`runtime.tools.hooks`):
  a before hook allows, denies, rewrites the arguments or answers in the
  call's place, and fails closed; an after hook only watches.

Hooks see only what the model sent (or an outer hook rewrote): there are no
bindings yet, so no bound value or secret reaches a hook, and a rewrite cannot
override one.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal, Protocol

from agentgram.runtime.capabilities.tools.base import Tool, ToolContext
from agentgram.runtime.capabilities.tools.hooks import (
    Allow,
    Answer,
    Deny,
    Hook,
    HookPayload,
    Rewrite,
    ToolLookup,
    call_tool,
    make_hook,
)
from agentgram.runtime.infra.backoff import Backoff, retrying
from agentgram.runtime.infra.config import DecoratorSettings, HookSettings, WrapperSettings
from agentgram.runtime.infra.errors import ConfigError, ToolError
from agentgram.runtime.infra.log import get_logger

log = get_logger("tools.wrappers")


@dataclass(slots=True, frozen=True)
class CallSite:
    """One call as the wrappers see it."""

    tool: Tool[Any]
    arguments: dict[str, Any]
    """What the model sent, parsed JSON (a before hook's rewrite replaces it)."""
    ctx: ToolContext
    agent: str
    """The calling agent's name (``main`` at the root)."""

    def payload(
        self, status: Literal["done", "failed"] | None = None, result: str | None = None
    ) -> HookPayload:
        return HookPayload(
            tool=self.tool.name,
            arguments=self.arguments,
            session=self.ctx.session_id,
            source=self.ctx.source,
            agent=self.agent,
            status=status,
            result=result,
        )


Exec = Callable[[CallSite], Awaitable[str]]
"""Runs a call: its result text, or raises ToolError (a failed result the model reads)."""


async def execute_tool(site: CallSite) -> str:
    """The base :data:`Exec`: the tool itself, its arguments parsed and guarded here (again after a
    rewrite)."""
    return await call_tool(site.tool, site.arguments, site.ctx)


class HookDenied(ToolError):
    """A before hook denied the call, or failed and so denied it (fail closed); the message is what the
    model reads."""


class Layer(Protocol):
    """One decorator, ready to run around an inner :data:`Exec`."""

    @property
    def label(self) -> str: ...

    async def run(self, inner: Exec, site: CallSite) -> str: ...


@dataclass(slots=True, frozen=True)
class Chain:
    """What wraps a tool's calls, outermost first."""

    labels: tuple[str, ...]
    """Recorded with each call, e.g. ``("truncate(65536 B)", "timeout(30 s)")``; a skipped decorator
    shows why (``retries(skipped: not idempotent)``)."""
    layers: tuple[Layer, ...] = ()

    def wrap(self, base: Exec) -> Exec:
        for layer in reversed(self.layers):
            base = partial(layer.run, base)
        return base


class Wrappers:
    """The ``tools.wrappers`` config, turned into one cached :class:`Chain` per tool name."""

    def __init__(self, settings: Sequence[WrapperSettings], tools: ToolLookup) -> None:
        self._settings = tuple(settings)
        self._tools = tools
        self._chains: dict[str, Chain] = {}  # bounded by the registry's names

    def chain(self, tool: Tool[Any]) -> Chain:
        chain = self._chains.get(tool.name)
        if chain is None:
            chain = self._chains[tool.name] = self._build(tool)
        return chain

    def unknown_hook_tools(self) -> list[tuple[str, str]]:
        """``(config key, tool name)`` of every hook tool the registry does not know."""
        unknown = []
        for i, entry in enumerate(self._settings):
            for j, decorator in enumerate(entry.decorators):
                hook = _hook_settings(decorator)
                if hook is not None and hook.tool is not None and self._tools(hook.tool) is None:
                    unknown.append((f"tools.wrappers.{i}.decorators.{j}.{decorator.name}.tool", hook.tool))
        return unknown

    def hook_problems(self, known: Callable[[str], bool] = lambda _: False) -> list[ConfigError]:
        """The one check of the hooks' tools, worded once for ``check-config`` and ``run``: each
        hook tool the registry does not know, and ``known`` does not either, as one config error."""
        return [
            ConfigError(key, f"no tool named {name!r} (hooks may name any registered tool)")
            for key, name in self.unknown_hook_tools()
            if not known(name)
        ]

    def _build(self, tool: Tool[Any]) -> Chain:
        labels: list[str] = []
        layers: list[Layer] = []
        for entry in self._settings:
            if not fnmatch.fnmatchcase(tool.name, entry.match.tool):
                continue
            for decorator in entry.decorators:
                layer = self._layer(decorator, tool)
                if isinstance(layer, str):
                    labels.append(layer)
                else:
                    labels.append(layer.label)
                    layers.append(layer)
        return Chain(tuple(labels), tuple(layers))

    def _layer(self, decorator: DecoratorSettings, tool: Tool[Any]) -> Layer | str:
        """The decorator's layer, or the label of one skipped for this tool."""
        if decorator.timeout is not None:
            return TimeoutLayer(decorator.timeout.seconds)
        if decorator.retries is not None:
            if not tool.idempotent:
                return "retries(skipped: not idempotent)"
            return RetriesLayer(decorator.retries.count, decorator.retries.backoff_ms)
        if decorator.truncate is not None:
            return TruncateLayer(decorator.truncate.max_bytes)
        if decorator.before is not None:
            return BeforeLayer(make_hook(decorator.before, self._tools))
        assert decorator.after is not None  # DecoratorSettings is exactly one of them
        return AfterLayer(make_hook(decorator.after, self._tools))


def _hook_settings(decorator: DecoratorSettings) -> HookSettings | None:
    return decorator.before or decorator.after


@dataclass(slots=True, frozen=True)
class TimeoutLayer:
    seconds: float

    @property
    def label(self) -> str:
        return f"timeout({self.seconds:g} s)"

    async def run(self, inner: Exec, site: CallSite) -> str:
        limit = asyncio.timeout(self.seconds)
        try:
            async with limit:
                return await inner(site)
        except TimeoutError:
            if not limit.expired():
                raise  # the call's own TimeoutError, not ours
            raise ToolError(
                f"timed out after {self.seconds:g} s (tools.wrappers timeout); the call was stopped"
            ) from None


@dataclass(slots=True, frozen=True)
class RetriesLayer:
    count: int
    backoff_ms: int

    @property
    def label(self) -> str:
        return f"retries({self.count}, backoff {self.backoff_ms} ms)"

    async def run(self, inner: Exec, site: CallSite) -> str:
        def failed(attempt: int, exc: BaseException, delay: float) -> None:
            log.info(
                "%s failed (attempt %d of %d), retrying in %g s: %s",
                site.tool.name,
                attempt,
                self.count + 1,
                delay,
                exc,
                extra={"session": site.ctx.session_id, "tool": site.tool.name, "attempt": attempt},
            )

        # every Exception but a hook's denial; never CancelledError: /stop and timeouts stop a call for good
        return await retrying(
            partial(inner, site),
            Backoff(self.backoff_ms / 1000),
            attempts=self.count + 1,
            retry_if=lambda exc: not isinstance(exc, HookDenied),
            on_retry=failed,
        )


@dataclass(slots=True, frozen=True)
class TruncateLayer:
    max_bytes: int

    @property
    def label(self) -> str:
        return f"truncate({self.max_bytes} B)"

    async def run(self, inner: Exec, site: CallSite) -> str:
        try:
            return truncate(await inner(site), self.max_bytes)
        except ToolError as exc:
            message = str(exc)
            cut = truncate(message, self.max_bytes)
            if cut != message:
                exc.args = (cut,)  # the same exception, so a HookDenied stays one
            raise


def truncate(text: str, max_bytes: int) -> str:
    """``text`` in at most ``max_bytes`` UTF-8 bytes, marker line included, never splitting a character."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    widest = _cut_marker(len(data), len(data))  # N ≤ M, so no marker is wider than this one
    kept = data[: max(0, max_bytes - len(widest.encode()))].decode("utf-8", errors="ignore")
    return kept + _cut_marker(len(kept.encode()), len(data))


def _cut_marker(shown: int, total: int) -> str:
    return f"\n[... truncated: {shown} of {total} bytes shown (tools.wrappers truncate)]"


@dataclass(slots=True, frozen=True)
class BeforeLayer:
    hook: Hook

    @property
    def label(self) -> str:
        return f"before({self.hook.label})"

    async def run(self, inner: Exec, site: CallSite) -> str:
        verdict = await self.hook.before(site.payload(), site.ctx)
        if isinstance(verdict, Allow):
            return await inner(site)
        if isinstance(verdict, Rewrite):
            return await inner(replace(site, arguments=verdict.arguments))
        if isinstance(verdict, Answer):
            return verdict.result
        assert isinstance(verdict, Deny)
        raise HookDenied(f"denied by the before hook ({self.hook.label}): {verdict.reason}")


@dataclass(slots=True, frozen=True)
class AfterLayer:
    hook: Hook

    @property
    def label(self) -> str:
        return f"after({self.hook.label})"

    async def run(self, inner: Exec, site: CallSite) -> str:
        try:
            result = await inner(site)
        except ToolError as exc:
            await self.hook.after(site.payload("failed", str(exc)), site.ctx)
            raise
        await self.hook.after(site.payload("done", result), site.ctx)
        return result
