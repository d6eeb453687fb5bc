"""Agent Skills read from disk once, at start: ``<dir>/<name>/SKILL.md`` in the public format.

A skill is a folder holding ``SKILL.md`` — YAML front matter with ``name`` and
``description``, then the instructions (the body) — and whatever other files
those instructions mention. The folders come from ``skills/`` under the
workdir, then each ``agent.skills_dirs`` entry in order; when two folders
share a name the first one wins.

Like the agent catalog (:mod:`runtime.agents.catalog`), skills are read once
per process, so the listing in the static system message is byte-identical
from turn to turn and an edited skill takes effect on the next start. Unlike
an agent, a skill is something the user drops in: a malformed one is skipped
with one warning naming its file rather than stopping the bot. Malformed
means: no front matter, front matter that is not a YAML mapping, a missing or
empty ``name`` or ``description``, a ``name`` that is not lowercase letters,
digits and single hyphens (at most 64, as the format says), or a ``name``
that differs from its folder's (the format requires them equal, and the
folder is what the user sees). Other front-matter keys of the format
(``license``, ``allowed-tools``, ``metadata``…) are accepted and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from agentgram.runtime.capabilities.agents.catalog import _yaml_problem, split_front_matter
from agentgram.runtime.infra.log import get_logger

SKILLS_DIR = "skills"
"""Where skills live under the workdir (``agent.skills_dirs`` adds more folders)."""
SKILL_FILE = "SKILL.md"
LISTING_HEADER = "Skills you can load with load_skill (load one when a task matches its description):"
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NAME_MAX = 64

log = get_logger("skills")


class SkillProblem(ValueError):
    """Why a ``SKILL.md`` is skipped: the text of its warning."""


@dataclass(slots=True, frozen=True)
class Skill:
    """One skill; ``folder`` is resolved, so approval rules and ``read_file`` agree on it."""

    name: str
    description: str
    folder: Path
    body: str


@dataclass(slots=True, frozen=True)
class SkillCatalog:
    """The skills by name, sorted."""

    skills: tuple[Skill, ...] = ()

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def listing(self) -> str:
        """The block for the static system message; empty without skills."""
        if not self.skills:
            return ""
        return "\n".join([LISTING_HEADER, *(f"- {s.name}: {s.description}" for s in self.skills)])


def skill_dirs(workdir: Path, extra: Iterable[Path]) -> list[Path]:
    """Where skills are looked for, in order of precedence, resolved."""
    return [(workdir / SKILLS_DIR).resolve(), *(path.expanduser().resolve() for path in extra)]


def load_skills(directories: Iterable[Path]) -> SkillCatalog:
    """Every well-formed ``<name>/SKILL.md`` under ``directories`` (missing folders hold none)."""
    found: dict[str, Skill] = {}
    for directory in directories:
        for skill_file in _skill_files(directory):
            skill = _read_or_warn(skill_file)
            if skill is None:
                continue
            if skill.name in found:
                log.warning("skill %s skipped: %s already defines it", skill_file, found[skill.name].folder)
                continue
            found[skill.name] = skill
    return SkillCatalog(tuple(sorted(found.values(), key=lambda s: s.name)))


def _skill_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(e / SKILL_FILE for e in directory.iterdir() if e.is_dir() and (e / SKILL_FILE).is_file())


def _read_or_warn(skill_file: Path) -> Skill | None:
    try:
        return read_skill(skill_file)
    except (SkillProblem, OSError, UnicodeDecodeError) as exc:
        log.warning("skill %s skipped: %s", skill_file, exc)
        return None


def read_skill(skill_file: Path) -> Skill:
    """One ``SKILL.md``, or a :class:`SkillProblem` saying what is wrong with it."""
    raw, body = split_front_matter(skill_file.read_text(encoding="utf-8"))
    if raw is None:
        raise SkillProblem("no front matter (a '---' block with name and description at the top)")
    meta = _front_matter(raw)
    folder = skill_file.parent.resolve()
    name = _text_field(meta, "name")
    description = " ".join(_text_field(meta, "description").split())
    if len(name) > _NAME_MAX or not _NAME.match(name):
        raise SkillProblem(f"name {name!r} is not lowercase letters, digits and single hyphens (at most 64)")
    if name != skill_file.parent.name:
        raise SkillProblem(f"name {name!r} differs from its folder's, {skill_file.parent.name!r}")
    return Skill(name=name, description=description, folder=folder, body=body.strip())


def _front_matter(raw: str) -> dict[object, object]:
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise SkillProblem(f"the front matter is not valid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise SkillProblem("the front matter is not a mapping with name and description")
    return data


def _text_field(meta: dict[object, object], key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SkillProblem(f"the front matter has no {key}")
    return value.strip()
