"""Named agents: who answers, with which prompt, model and tools.

An agent is a folder ``agents/<name>/`` holding ``AGENT.md`` (its system
prompt) and, optionally, its settings — front matter at the top of
``AGENT.md`` or a ``meta.yml`` beside it: ``model``, ``tools`` (an allowlist
of tool names) and ``description`` (what the parent agent reads when it picks
a sub-agent). ``main`` answers the chat; the others are started by
``execute_task`` (:mod:`runtime.turn.subagents`).
"""

from agentgram.runtime.capabilities.agents.catalog import (
    AGENT_NAME,
    AGENTS_DIR,
    MAIN,
    AgentCatalog,
    AgentSpec,
    load_agents,
    unknown_models,
)

__all__ = ["AGENTS_DIR", "AGENT_NAME", "MAIN", "AgentCatalog", "AgentSpec", "load_agents", "unknown_models"]
