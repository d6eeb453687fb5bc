"""``load_skill``: the instructions of one Agent Skill (:mod:`runtime.agents.skills`).

The static system message lists each skill's name and description; the model
calls this tool when a task matches one, and gets the body of its
``SKILL.md`` plus the folder it lives in, so it can ``read_file`` the other
files the instructions mention (reads there need no approval: the runtime
adds an allow rule for each skills folder outside the workdir).
"""

from __future__ import annotations

from pydantic import Field

from agentgram.runtime.capabilities.agents.skills import SkillCatalog
from agentgram.runtime.capabilities.tools.base import Tool, ToolArgs, ToolContext, ToolGroup
from agentgram.runtime.infra.errors import ToolError

LOAD_SKILL = "load_skill"


class LoadSkillArgs(ToolArgs):
    name: str = Field(min_length=1, description="The skill's name, as the list of skills gives it.")


class LoadSkill(Tool[LoadSkillArgs]):
    name = LOAD_SKILL
    description = (
        "Load the instructions of one of the skills listed in your system message, to follow them. "
        "The result names the skill's folder: read its other files there with read_file."
    )
    group = ToolGroup.OTHER
    idempotent = True
    Args = LoadSkillArgs

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    async def execute(self, args: LoadSkillArgs, ctx: ToolContext) -> str:
        skill = self.catalog.get(args.name.strip())
        if skill is None:
            known = ", ".join(self.catalog.names()) or "none are installed"
            raise ToolError(f"no skill named {args.name!r}; the skills are: {known}")
        return f"{skill.body}\n\n[Skill folder: {skill.folder} — its other files are readable with read_file]"
