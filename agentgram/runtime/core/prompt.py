"""The static system prompt: built-in text, optional user file, skills, adapter format rules, the
group and instructions of a session's place, memory.

It is assembled once at start and never changes during the process, so the
first message of every request is byte-identical and provider prefix caches
hit. The one part that may differ is the memory (:class:`MemoryPrompt`): the
``agent.inject_memory`` files are read when a session first builds its
context in this process and kept for the session, so within a session the
message stays byte-identical however the files change (``remember`` writes
them), and a change reaches the prompt with the next session (``/new``) or
after a restart. It comes last, after the format rules, so what precedes it
stays a cacheable prefix even across sessions whose memory differs. Before it
come what a session's place adds, fixed for the session: the line naming its
group (:func:`in_group`) and its instructions (:func:`with_instructions`, a
forum topic's configured prompt).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

BUILTIN_PROMPT = """\
You are agentgram, a personal assistant agent running on the user's own machine.
You can read and write files and run shell commands in your working directory using the tools provided.

How you work:
- Use tools when they help; do not ask for permission in text. Risky tools (shell commands, file changes) are
  shown to the user for approval automatically; if a call is rejected, read the reason and adapt.
- Prefer small, verifiable steps. Read before you edit. Keep command output short (use head, tail, grep).
- When a tool fails, read the error and try a different approach instead of repeating the same call.
- Messages the user sends while you are working are added to the conversation at your next step: take them
  into account.
- Be concise. Answer in the language the user writes in.
"""


def build_static_prompt(
    system_prompt_file: Path | None,
    format_rules: str,
    *,
    agent_prompt: str | None = None,
    skills: str = "",
) -> str:
    """``agent_prompt``: the text of the answering agent's ``AGENT.md`` (:mod:`runtime.agents`),
    which takes the place of the built-in prompt and of ``system_prompt_file``. ``skills``: the
    listing of the Agent Skills it may load (:meth:`runtime.agents.skills.SkillCatalog.listing`),
    read once at start like the rest, so it keeps the message byte-stable."""
    base = BUILTIN_PROMPT
    if system_prompt_file is not None:
        base = system_prompt_file.read_text(encoding="utf-8").strip() + "\n"
    if agent_prompt is not None:
        base = agent_prompt
    parts = [base.strip()]
    if skills.strip():
        parts.append(skills.strip())
    if format_rules.strip():
        parts.append(format_rules.strip())
    return "\n\n".join(parts)


MEMORY_HEADER = """\
# Memory
Notes kept across conversations: the files in memory/ of the working directory, as they read when \
this conversation started. Add to them with remember (or the file tools; writes there need no \
approval); recall searches them."""

SESSIONS_KEPT = 1024
"""Sessions whose memory snapshot :class:`MemoryPrompt` keeps (the least recently used leaves first;
a session asked again after that reads the files again)."""


def memory_block(memory_dir: Path, files: Sequence[str], max_chars: int) -> str:
    """The injected files as they read now, each under its name; missing or empty ones are left
    out, and the whole is cut at ``max_chars`` with a note (recall reaches the rest)."""
    sections = []
    for name in files:
        path = memory_dir / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        if text:
            sections.append(f"## {name}\n{text}")
    if not sections or max_chars <= 0:
        return ""
    body = "\n\n".join(sections)
    if len(body) > max_chars:
        body = body[:max_chars].rstrip() + "\n[… memory cut here; use recall to search the rest]"
    return f"{MEMORY_HEADER}\n\n{body}"


def in_group(static_prompt: str, title: str | None) -> str:
    """The static system message of a session that belongs to a named group chat: the model is
    told where it is and that several people write (each message names its sender). Unchanged
    for a chat without a title (a private one)."""
    if title is None:
        return static_prompt
    return (
        f"{static_prompt}\n\nThis conversation is the group chat “{title}”. Several people write here; "
        "each of their messages starts with the sender's name in brackets. Answer the person who "
        "addressed you, and remember that the others read along."
    )


INSTRUCTIONS_HEADER = "Instructions for this conversation:"


def with_instructions(static_prompt: str, instructions: str | None) -> str:
    """The static system message with what a session's place adds (a forum topic's configured
    prompt) under :data:`INSTRUCTIONS_HEADER`; unchanged without any. It follows the line that
    names the group and precedes the memory, so it is as stable as the session."""
    text = (instructions or "").strip()
    return f"{static_prompt}\n\n{INSTRUCTIONS_HEADER}\n{text}" if text else static_prompt


def with_memory(static_prompt: str, memory: str) -> str:
    """The static system message with a session's memory appended (unchanged without memory)."""
    return f"{static_prompt}\n\n{memory}" if memory else static_prompt


class MemoryPrompt:
    """Each session's memory block, read once per session (see the module docstring)."""

    def __init__(
        self, memory_dir: Path, files: Sequence[str], max_chars: int, *, kept: int = SESSIONS_KEPT
    ) -> None:
        self.memory_dir = memory_dir
        self.files = tuple(files)
        self.max_chars = max_chars
        self._kept = kept
        self._snapshots: OrderedDict[int, str] = OrderedDict()

    def for_session(self, session_id: int) -> str:
        """The session's memory block: the files as they read the first time it asked."""
        snapshot = self._snapshots.get(session_id)
        if snapshot is None:
            snapshot = memory_block(self.memory_dir, self.files, self.max_chars) if self.files else ""
            self._snapshots[session_id] = snapshot
            while len(self._snapshots) > self._kept:
                self._snapshots.popitem(last=False)
        self._snapshots.move_to_end(session_id)
        return snapshot
