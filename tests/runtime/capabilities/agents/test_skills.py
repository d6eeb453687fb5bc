"""Agent Skills (issue 16): the catalog, ``load_skill``, the prompt listing and skill-folder reads.

Real SKILL.md files in tmp_path; the turns run the real runtime with the real openai SDK against
the fake endpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentgram.bot.cli import main
from agentgram.runtime.capabilities.agents.skills import LISTING_HEADER, load_skills, skill_dirs
from agentgram.runtime.capabilities.tools.base import ToolContext
from agentgram.runtime.capabilities.tools.skills import LoadSkill, LoadSkillArgs
from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import ApprovalRequested, TurnFinished
from tests.conftest import make_settings
from tests.fakes.openai_server import Call, FakeOpenAI, Text, ToolCalls
from tests.runtime.core.turn.harness import Recorder, started_runtime

PDF_BODY = "# Filling PDF forms\n\nRun `scripts/fill.py` with the form and a JSON of values."


def write_skill(root: Path, folder: str, front_matter: str | None, body: str = "Do it step by step.") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = body if front_matter is None else f"---\n{front_matter}\n---\n{body}\n"
    path.write_text(text, encoding="utf-8")
    return path


def pdf_skill(root: Path) -> Path:
    path = write_skill(root, "pdf-forms", "name: pdf-forms\ndescription: Fill in PDF forms.", PDF_BODY)
    (path.parent / "scripts").mkdir()
    (path.parent / "scripts" / "fill.py").write_text("print('filled')\n")
    return path


def system_message(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def finished(rec: Recorder) -> list[TurnFinished]:
    return [e for e in rec.events if isinstance(e, TurnFinished)]


async def chat(runtime: Any, text: str, envelope: str) -> None:
    session = await runtime.chat.chat_session(1001, user_id=1001, language="en")
    await runtime.chat.post_user_message(session, text, envelope_id=envelope)


# --- the catalog ------------------------------------------------------------------------


def test_skills_load_sorted_from_the_workdir_then_skills_dirs_and_the_first_name_wins(tmp_path: Path) -> None:
    workdir, extra = tmp_path / "ws", tmp_path / "more"
    write_skill(workdir / "skills", "zeta", "name: zeta\ndescription: Last   one,\n  folded.")
    write_skill(workdir / "skills", "alpha", "name: alpha\ndescription: First.\nlicense: MIT")
    write_skill(extra, "alpha", "name: alpha\ndescription: A shadowed copy.")
    write_skill(extra, "mid", "name: mid\ndescription: In between.")
    catalog = load_skills(skill_dirs(workdir, [extra, tmp_path / "missing"]))
    assert catalog.names() == ["alpha", "mid", "zeta"]
    alpha = catalog.get("alpha")
    assert alpha is not None and alpha.folder == (workdir / "skills" / "alpha").resolve()
    assert catalog.listing() == "\n".join(
        [LISTING_HEADER, "- alpha: First.", "- mid: In between.", "- zeta: Last one, folded."]
    )


def test_no_skills_means_no_listing(tmp_path: Path) -> None:
    catalog = load_skills(skill_dirs(tmp_path, []))
    assert catalog.skills == () and catalog.listing() == ""


MALFORMED = {
    "no-front-matter": None,
    "bad-yaml": "name: bad-yaml\ndescription: [unclosed",
    "not-a-mapping": "- just\n- a list",
    "no-description": "name: no-description",
    "empty-name": "name: ''\ndescription: Something.",
    "wrong-name": "name: other-name\ndescription: Its folder says otherwise.",
    "Upper": "name: Upper\ndescription: Capitals are not allowed.",
}


@pytest.mark.parametrize("folder", list(MALFORMED))
def test_a_malformed_skill_is_skipped_with_one_warning_naming_its_file_and_the_others_load(
    folder: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    pdf_skill(root)
    bad = write_skill(root, folder, MALFORMED[folder])
    with caplog.at_level(logging.WARNING, logger="agentgram.skills"):
        catalog = load_skills([root])
    assert catalog.names() == ["pdf-forms"]
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert str(bad) in record.getMessage() and "\n" not in record.getMessage()


# --- load_skill -------------------------------------------------------------------------


async def test_load_skill_returns_the_body_and_names_the_folder(tmp_path: Path) -> None:
    skill_file = pdf_skill(tmp_path / "skills")
    tool = LoadSkill(load_skills([tmp_path / "skills"]))
    result = await tool.execute(LoadSkillArgs(name="pdf-forms"), ToolContext(workdir=tmp_path))
    assert result.startswith(PDF_BODY)
    assert "---" not in result and "description:" not in result
    assert f"Skill folder: {skill_file.parent.resolve()}" in result


async def test_load_skill_of_an_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    pdf_skill(tmp_path / "skills")
    write_skill(tmp_path / "skills", "git-release", "name: git-release\ndescription: Cut a release.")
    tool = LoadSkill(load_skills([tmp_path / "skills"]))
    with pytest.raises(ToolError, match=r"no skill named 'pdf'; the skills are: git-release, pdf-forms"):
        await tool.execute(LoadSkillArgs(name="pdf"), ToolContext(workdir=tmp_path))


# --- in a turn --------------------------------------------------------------------------


async def test_the_system_message_lists_the_skills_sorted_and_byte_stable_across_turns_and_restarts(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, fake_llm.base_url)
    skills = tmp_path / "workspace" / "skills"
    write_skill(skills, "zeta-notes", "name: zeta-notes\ndescription: Keep notes in zeta style.")
    pdf_skill(skills)
    fake_llm.script(
        ToolCalls([Call("load_skill", {"name": "pdf-forms"})]),
        Text("Loaded."),
        Text("Second."),
        Text("Third."),
    )
    runtime, rec = await started_runtime(settings)
    try:
        await chat(runtime, "fill the form", "u1")
        await rec.wait_for(lambda: len(finished(rec)) >= 1, 15)
        await chat(runtime, "again", "u2")
        await rec.wait_for(lambda: len(finished(rec)) >= 2, 15)
    finally:
        await runtime.close()
    write_skill(skills, "zeta-notes", "name: zeta-notes\ndescription: Keep notes in zeta style.")  # rewritten
    runtime, rec = await started_runtime(settings)
    try:
        await chat(runtime, "after a restart", "u3")
        await rec.wait_for(lambda: len(finished(rec)) >= 1, 15)
    finally:
        await runtime.close()
    first, *others = [system_message(r) for r in fake_llm.requests]
    assert len(others) == 3 and all(other == first for other in others)
    listing = "\n".join(
        [LISTING_HEADER, "- pdf-forms: Fill in PDF forms.", "- zeta-notes: Keep notes in zeta style."]
    )
    assert f"\n\n{listing}\n\n" in first
    assert PDF_BODY in tool_results(fake_llm.requests[1])[0]


async def test_reads_inside_an_outside_skills_dir_need_no_approval_while_other_outside_reads_ask(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    outside = tmp_path / "shared-skills"
    script = pdf_skill(outside).parent / "scripts" / "fill.py"
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("private\n")
    settings = make_settings(tmp_path, fake_llm.base_url, agent={"skills_dirs": [str(outside)]})
    fake_llm.script(
        ToolCalls([Call("read_file", {"path": str(script)})]),
        Text("The script prints filled."),
        ToolCalls([Call("read_file", {"path": str(elsewhere)})]),
    )
    runtime, rec = await started_runtime(settings)
    try:
        await chat(runtime, "what does the skill's script do?", "u1")
        await rec.wait_for(lambda: len(finished(rec)) >= 1, 15)
        assert not [e for e in rec.events if isinstance(e, ApprovalRequested)]
        assert "print('filled')" in tool_results(fake_llm.requests[1])[0]
        await chat(runtime, "and that other file?", "u2")
        await rec.wait_kind("approval_requested", timeout=15)
        [asked] = [e for e in rec.events if isinstance(e, ApprovalRequested)]
        assert asked.details.tool_name == "read_file" and asked.details.arguments == {"path": str(elsewhere)}
    finally:
        await runtime.close()


# --- check-config -----------------------------------------------------------------------


@pytest.mark.parametrize("what", ["does not exist", "is not a directory"])
def test_check_config_names_a_skills_dir_that_is_not_a_folder(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-skills"
    if what == "is not a directory":
        missing.write_text("a file")
    raw = {
        "telegram": {"token": "1:abc", "allowed_user_ids": [1001]},
        "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1"},
        "storage": {"url": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"},
        "agent": {"workdir": str(tmp_path / "ws"), "skills_dirs": [str(tmp_path), str(missing)]},
        "tic": {"enabled": False},
    }
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    code = main(["check-config", "--config", str(config)])
    err = capsys.readouterr().err.splitlines()
    assert (code, err) == (2, [f"config error: agent.skills_dirs.1: {missing} {what}"])
