"""Prometheus metrics of one agentgram process, served at ``/metrics`` by the web view.

Every metric lives in :data:`REGISTRY`, not prometheus-client's global one, so a
test (or a second runtime in one process) reads exactly agentgram's own.
:func:`render` is what an HTTP handler returns.

This module only declares the runtime's metrics; it sits in a low layer so any
runtime part may count into it. Most figures are counted from the event bus by
:mod:`runtime.metrics_bus` (turns, rounds, tool calls, active sessions) and from the
mailbox's accept listener (mail accepted). Where no event carries the figure, the one
place it happens counts it: an approval decision in
:func:`runtime.approvals.manager.log_decision` (rule-made decisions included, which
no event reports), a granted trust in the approval manager, LLM latency and tokens
in the OpenAI client's attempt (:func:`observe_llm_round`). A chat adapter's
metrics (API calls, outbox, polling lag) are its own, in the adapter's package,
registered here too.

Labels are bounded sets: outcomes, statuses and kinds are enums; tool and model
names come from the configuration and the tool registry, never from user input
nor from the model (a tool name the runtime does not know is ``unknown``).

A cluster's instance (:mod:`runtime.infra.lead`) shows itself with
:func:`show_instance` once registered: ``agentgram_instance_info{instance, host} 1``,
the series other metrics are joined with to learn which instance they came from,
and ``agentgram_leader{instance}``, 1 while it leads and 0 otherwise (a standby or a member). Both are
read from the instance at each scrape (a collector, not gauges someone must keep
in step), and only while it lives (a weak reference).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)

TURNS = Counter("agentgram_turns", "Turns ended, by outcome.", ["outcome"], registry=REGISTRY)
TURN_ROUNDS = Histogram(
    "agentgram_turn_rounds",
    "LLM rounds per turn run (a paused turn's run counts apart from its resumed one).",
    buckets=(1, 2, 3, 5, 8, 13, 21, 34, 55),
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "agentgram_tool_calls", "Tool calls ended, by tool and status.", ["tool", "status"], registry=REGISTRY
)
BACKGROUND_CALLS = Counter(
    "agentgram_background_calls",
    "Detached (background) calls ended, by tool and status.",
    ["tool", "status"],
    registry=REGISTRY,
)
SESSIONS_ACTIVE = Gauge(
    "agentgram_sessions_active", "Sessions with a turn running right now.", registry=REGISTRY
)
MAIL_ACCEPTED = Counter(
    "agentgram_mail_accepted", "Mail stored in a session's mailbox, by kind.", ["kind"], registry=REGISTRY
)
APPROVAL_DECISIONS = Counter(
    "agentgram_approval_decisions",
    "Approval decisions, by decision (approved, rejected, expired, cancelled) and how they were made.",
    ["decision", "how"],
    registry=REGISTRY,
)
APPROVAL_TRUST = Counter(
    "agentgram_approval_trust",
    "Trust granted from an approval prompt: session (⏱ a while) or always (a saved rule).",
    ["kind"],
    registry=REGISTRY,
)
LLM_FIRST_TOKEN = Histogram(
    "agentgram_llm_time_to_first_token_seconds",
    "Seconds from sending a completion request to its first streamed token, by model.",
    ["model"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
    registry=REGISTRY,
)
LLM_DURATION = Histogram(
    "agentgram_llm_request_duration_seconds",
    "Seconds a completion took from request to its last chunk, by model.",
    ["model"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320),
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "agentgram_llm_tokens",
    "Tokens the endpoint reported, by model and kind (prompt, completion).",
    ["model", "kind"],
    registry=REGISTRY,
)


def observe_llm_round(
    model: str, *, seconds: float, first_token: float | None, prompt_tokens: int, completion_tokens: int
) -> None:
    """One completed completion: its latencies and the tokens the endpoint reported.

    ``first_token`` is ``None`` when the stream carried no text, reasoning or tool call.
    """
    LLM_DURATION.labels(model=model).observe(seconds)
    if first_token is not None:
        LLM_FIRST_TOKEN.labels(model=model).observe(first_token)
    LLM_TOKENS.labels(model=model, kind="prompt").inc(prompt_tokens)
    LLM_TOKENS.labels(model=model, kind="completion").inc(completion_tokens)


class ShownInstance(Protocol):
    """What the cluster's series read of an instance (:class:`runtime.infra.lead.Lead` is one)."""

    @property
    def instance_name(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def leading(self) -> bool: ...


class _Instances(Collector):
    """``agentgram_instance_info`` and ``agentgram_leader`` of the instances shown (one in a
    process; a test may run several)."""

    def __init__(self) -> None:
        self.shown: weakref.WeakSet[ShownInstance] = weakref.WeakSet()

    def describe(self) -> Iterator[Metric]:
        return self._families([])

    def collect(self) -> Iterator[Metric]:
        return self._families(list(self.shown))

    @staticmethod
    def _families(instances: list[ShownInstance]) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "agentgram_instance_info",
            "This process's cluster instance: its name and host.",
            labels=["instance", "host"],
        )
        leader = GaugeMetricFamily(
            "agentgram_leader", "1 while the instance leads its cluster, else 0.", labels=["instance"]
        )
        for instance in sorted(instances, key=lambda shown: shown.instance_name):
            info.add_metric([instance.instance_name, instance.host], 1)
            leader.add_metric([instance.instance_name], 1 if instance.leading else 0)
        yield info
        yield leader


_INSTANCES = _Instances()
REGISTRY.register(_INSTANCES)


def show_instance(instance: ShownInstance) -> None:
    """Report ``instance`` in the cluster's series from now on, for as long as it lives."""
    _INSTANCES.shown.add(instance)


def render() -> tuple[bytes, str]:
    """The exposition text of every metric, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
