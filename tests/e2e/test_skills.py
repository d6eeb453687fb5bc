"""``/skills`` in the chat (issue 16, requirement 6): the real bot against the fake Bot API.

The skills are real ``SKILL.md`` files in the workdir, written before the bot starts (the catalog
is read once, at start).
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import running_bot


def write_skill(workdir: Path, name: str, description: str) -> None:
    folder = workdir / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nSteps.\n")


async def test_skills_lists_each_skill_with_its_description_sorted(tmp_path: Path) -> None:
    write_skill(tmp_path / "workspace", "pdf-forms", "Fill in PDF forms <fast> & right.")
    write_skill(tmp_path / "workspace", "git-release", "Cut a release.")
    (tmp_path / "workspace" / "skills" / "broken").mkdir()
    (tmp_path / "workspace" / "skills" / "broken" / "SKILL.md").write_text("no front matter\n")
    async with running_bot(tmp_path) as rig:
        rig.say("/skills")
        shown = await rig.wait_text("Skills")
        assert shown.text == (
            "🧩 <b>Skills</b>\n"
            "• <code>git-release</code> — Cut a release.\n"
            "• <code>pdf-forms</code> — Fill in PDF forms &lt;fast&gt; &amp; right."
        )
        assert rig.llm.requests == []  # a command never reaches the model


async def test_skills_says_there_are_none(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as rig:
        rig.say("/skills")
        shown = await rig.wait_text("No skills yet")
        assert "<code>SKILL.md</code>" in (shown.text or "")
