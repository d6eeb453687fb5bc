"""Agent definitions read from disk once, at start.

The catalog is read once per process, so each agent's static system message
is byte-identical from turn to turn (provider prefix caches hit); an edited
``AGENT.md`` takes effect on the next start. A malformed definition is a
:class:`~runtime.errors.ConfigError` naming its file: better to refuse to
start than to run an agent with settings it was not given.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from agentgram.runtime.infra.errors import ConfigError

MAIN = "main"
"""The agent that answers the chat, unless a definition says otherwise."""

AGENTS_DIR = "agents"
"""Where agents live under the workdir unless ``agent.agents_dir`` says otherwise."""
PROMPT_FILE = "AGENT.md"
META_FILE = "meta.yml"
AGENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
"""What an agent's name (its folder's) may be; the config holds the agents it names to it too."""
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)


Waker = Literal["user", "tool", "parent", "child", "peer"]
"""Who a piece of mail is from, as a session sees it: what ``wake_on`` names."""
MailScope = Literal["family", "tree", "all"]
"""Which sessions an agent may write to beyond its parent and children, which it always may:
``family`` its siblings, ``tree`` those under the same root chat session, ``all`` any."""
InterruptScope = Literal["children", "family", "tree", "all"]
"""Which sessions an agent may interrupt (mail that reaches a working turn at once)."""
WAKE_ON: tuple[Waker, ...] = ("user", "tool", "parent", "child")
"""What starts a turn in an idle session unless its agent says otherwise (a peer's mail waits)."""


class AgentMeta(BaseModel):
    """An agent's settings as written (front matter or ``meta.yml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    tools: list[str] | None = None
    description: str = ""
    wake_on: tuple[Waker, ...] = WAKE_ON
    mail_scope: MailScope = "tree"
    interrupt_scope: InterruptScope = "children"


@dataclass(slots=True, frozen=True)
class AgentSpec:
    """One agent: ``prompt`` ``None`` means the built-in prompt (a ``main`` nobody defined)."""

    name: str
    prompt: str | None = None
    model: str | None = None
    tools: frozenset[str] | None = None  # None: every tool its level offers
    description: str = ""
    wake_on: frozenset[Waker] = frozenset(WAKE_ON)
    """Whose mail starts a turn when the session is idle (other mail waits for the next turn)."""
    mail_scope: MailScope = "tree"
    interrupt_scope: InterruptScope = "children"


@dataclass(slots=True, frozen=True)
class AgentCatalog:
    """The agents by name; ``main`` is always there."""

    agents: tuple[AgentSpec, ...] = (AgentSpec(MAIN),)

    def get(self, name: str) -> AgentSpec | None:
        return next((a for a in self.agents if a.name == name), None)

    @property
    def main(self) -> AgentSpec:
        main = self.get(MAIN)
        assert main is not None
        return main

    def names(self) -> list[str]:
        return [a.name for a in self.agents]

    def menu(self) -> str:
        """One line per agent, as the model reads it in ``execute_task``'s description."""
        return "\n".join(f"- {a.name}: {a.description or '(no description)'}" for a in self.agents)


def load_agents(directory: Path | None) -> AgentCatalog:
    """Every ``<name>/AGENT.md`` under ``directory`` (none, or a missing folder: just ``main``)."""
    found: list[AgentSpec] = []
    if directory is not None and directory.is_dir():
        found = [read_agent(folder) for folder in _agent_folders(directory.iterdir())]
    if not any(a.name == MAIN for a in found):
        found.insert(0, AgentSpec(MAIN))
    return AgentCatalog(tuple(sorted(found, key=lambda a: (a.name != MAIN, a.name))))


def unknown_models(catalog: AgentCatalog, known: Collection[str]) -> list[ConfigError]:
    """An agent naming a model ``llm.models`` does not list: one problem each, naming the agent."""
    listed = ", ".join(known)
    return [
        ConfigError(f"{AGENTS_DIR}/{agent.name}", f"model {agent.model!r} is not one of: {listed}")
        for agent in catalog.agents
        if agent.model is not None and agent.model not in known
    ]


def _agent_folders(entries: Iterable[Path]) -> list[Path]:
    return sorted(e for e in entries if e.is_dir() and (e / PROMPT_FILE).is_file())


def read_agent(folder: Path) -> AgentSpec:
    name = folder.name
    prompt_file = folder / PROMPT_FILE
    if not AGENT_NAME.match(name):
        raise ConfigError(str(folder), "an agent's name is lowercase letters, digits, '-' and '_'")
    text = prompt_file.read_text(encoding="utf-8")
    raw, prompt = split_front_matter(text)
    meta_file = folder / META_FILE
    if meta_file.is_file():
        if raw is not None:
            raise ConfigError(
                str(folder), f"settings both in {PROMPT_FILE}'s front matter and in {META_FILE}"
            )
        raw = meta_file.read_text(encoding="utf-8")
    meta = _parse_meta(raw, meta_file if meta_file.is_file() else prompt_file)
    if not prompt.strip():
        raise ConfigError(str(prompt_file), "the agent's prompt is empty")
    return AgentSpec(
        name=name,
        prompt=prompt.strip(),
        model=meta.model,
        tools=frozenset(meta.tools) if meta.tools is not None else None,
        description=meta.description.strip(),
        wake_on=frozenset(meta.wake_on),
        mail_scope=meta.mail_scope,
        interrupt_scope=meta.interrupt_scope,
    )


def split_front_matter(text: str) -> tuple[str | None, str]:
    """``(front matter or None, the rest)`` of a Markdown file."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None, text
    return match.group(1), text[match.end() :]


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message on one line: what it found, and where (its own text spans several)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


def _parse_meta(raw: str | None, source: Path) -> AgentMeta:
    if raw is None:
        return AgentMeta()
    try:
        data = yaml.safe_load(raw) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(
            str(source), f"the agent's settings are not valid YAML: {_yaml_problem(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(str(source), "the agent's settings must be a mapping (model, tools, description)")
    try:
        return AgentMeta.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(str(source), problems) from None
