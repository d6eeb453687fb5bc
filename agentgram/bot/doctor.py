"""``agentgram doctor``: is everything the bot needs there? One line per check, ✓ or ✗ with the fix.

The checks, in order: the config (:func:`bot.config_check.inspect`, the
same validation ``run`` makes; its warnings are shown too, as ``⚠`` lines that
fail nothing); the bot token (``getMe``) and that no webhook
is set, which would make polling fail; the LLM endpoint lists the configured
models (``/models``) and streams a short answer with a tool defined, as every
turn does; transcription — which endpoint it uses (the LLM endpoint unless
``transcription.base_url`` names another), not tried, since that needs audio;
the database opens and is migrated to this release's schema — a SQLite file that
does not exist yet is created, as ``run`` would create it; the workdir is
writable. Exit code 0 when every check passes, 1 otherwise.

A config that does not parse stops there: nothing else can be checked. A
config that parses but fails a check still gets the other checks; its
``agent.workdir`` and ``storage.url`` problems are shown on the workdir and
database lines rather than twice.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from agentgram.bot import probes
from agentgram.bot.config_check import inspect
from agentgram.bot.probes import ProbeFailed
from agentgram.bot.settings import BotSettings, with_telegram
from agentgram.runtime.app import migrate_database
from agentgram.runtime.config_check import writable_dir_problem
from agentgram.runtime.infra.config import ConfigWarning
from agentgram.runtime.infra.errors import ConfigError

OWN_LINES = {"agent.workdir": "workdir", "storage.url": "database"}
"""Config keys whose problems are shown on their own check's line."""


class Status(enum.StrEnum):
    PASS = "✓"
    FAIL = "✗"
    SKIP = "–"
    WARN = "⚠"


@dataclass(frozen=True, slots=True)
class Result:
    name: str
    status: Status
    detail: str
    fix: str | None = None

    @property
    def line(self) -> str:
        fix = f" — fix: {self.fix}" if self.fix and self.status == Status.FAIL else ""
        return f"{self.status} {self.name}: {self.detail}{fix}"


def passed(name: str, detail: str) -> Result:
    return Result(name, Status.PASS, detail)


def failed(name: str, problem: ProbeFailed) -> Result:
    return Result(name, Status.FAIL, problem.problem, problem.fix)


def add_parser(sub: Any) -> None:  # argparse's _SubParsersAction is private
    cmd = sub.add_parser("doctor", help="check the config, Telegram, the LLM endpoint, the database")
    cmd.add_argument("--config", "-c", type=Path, default=Path("config.yml"), help="YAML config file")
    cmd.set_defaults(entry=main)


def main(args: argparse.Namespace) -> int:
    return asyncio.run(report(args.config))


async def report(path: Path) -> int:
    """Print every check as it finishes; the exit code."""
    ok = True
    async for result in diagnose(path):
        print(result.line, flush=True)
        ok = ok and result.status != Status.FAIL
    print("all checks passed" if ok else "some checks failed", flush=True)
    return 0 if ok else 1


async def diagnose(path: Path, environ: Mapping[str, str] | None = None) -> AsyncIterator[Result]:
    """Every check's result, in order, as each finishes."""
    settings, problems, warnings = _config(path, environ)
    for problem in problems.get("config", []):
        detail = f"{problem.key}: {problem.problem}" if problem.key else problem.problem
        yield Result("config", Status.FAIL, detail, f"edit {path} (config.example.yml explains every key)")
    for warning in warnings:
        yield Result(
            "config", Status.WARN, f"{warning.key}: {warning.problem}" if warning.key else warning.problem
        )
    if settings is None:
        return
    if not problems.get("config"):
        yield passed("config", f"{path} is valid")
    for result in await _telegram(settings):
        yield result
    for result in await _llm(settings):
        yield result
    yield _transcription(settings)
    yield await _database(settings, problems.get("database", []))
    yield _workdir(settings, problems.get("workdir", []))


def _config(
    path: Path, environ: Mapping[str, str] | None
) -> tuple[BotSettings | None, dict[str, list[ConfigError]], list[ConfigWarning]]:
    """The settings (``None`` unless every value parsed and ``telegram`` is there), the one
    validation's problems by the line that shows them, and its warnings."""
    found = inspect(path, environ)
    by_line: dict[str, list[ConfigError]] = {}
    usable = found.usable if found.usable is not None and found.usable.telegram is not None else None
    for problem in found.problems:
        line = OWN_LINES.get(problem.key, "config") if usable is not None else "config"
        by_line.setdefault(line, []).append(problem)
    return (with_telegram(usable) if usable is not None else None), by_line, found.warnings


async def _telegram(settings: BotSettings) -> list[Result]:
    tg = settings.telegram
    try:
        async with probes.telegram(tg.token.get_secret_value(), tg.api_base_url) as (bot, me):
            results = [passed("telegram", f"the token works: @{me.username} (id {me.id})")]
            webhook = (await bot.get_webhook_info()).url
    except ProbeFailed as problem:
        return [
            failed("telegram", problem),
            Result("webhook", Status.SKIP, "not checked without a working token"),
        ]
    if tg.mode == "webhook":
        return [*results, _webhook_mode(tg.webhook.url, webhook)]
    if webhook:
        fix = "make sure no other program serves this bot; agentgram deletes the webhook when it starts"
        return [
            *results,
            Result("webhook", Status.FAIL, f"a webhook is set ({webhook}): polling cannot get updates", fix),
        ]
    return [*results, passed("webhook", "none set (agentgram polls for updates)")]


def _webhook_mode(ours: str, webhook: str) -> Result:
    """In webhook mode the webhook set is agentgram's own, or none yet (the bot sets it at start)."""
    if webhook in ("", ours):
        return passed("webhook", f"{'set to' if webhook else 'set at start to'} {ours}")
    fix = "make sure no other program serves this bot; agentgram sets its webhook when it starts"
    return Result("webhook", Status.FAIL, f"another webhook is set ({webhook})", fix)


async def _llm(settings: BotSettings) -> list[Result]:
    llm = settings.llm
    try:
        listed = await probes.listed_models(llm.base_url, llm.api_key.get_secret_value())
    except ProbeFailed as problem:
        models = failed("llm models", problem)
    else:
        missing = next(
            (
                p
                for m in dict.fromkeys([llm.model, *llm.fallback_models])
                if (p := probes.unlisted(m, listed))
            ),
            None,
        )
        if missing is not None:
            models = failed("llm models", missing)
        elif listed:
            models = passed("llm models", f"{llm.base_url} lists {llm.model}")
        else:
            models = passed("llm models", f"{llm.base_url} lists no models; the completion below is the test")
    try:
        model = await probes.completion_with_tool(llm)
    except ProbeFailed as problem:
        return [models, failed("llm completion", problem)]
    return [models, passed("llm completion", f"{model} streamed an answer with a tool defined")]


def _transcription(settings: BotSettings) -> Result:
    """Not tried (it needs audio), but said where it goes: by default the LLM endpoint."""
    section = settings.transcription
    if not section.enabled:
        return Result("transcription", Status.SKIP, "off (transcription.enabled is false)")
    if section.base_url is None:
        where = f"uses the LLM endpoint ({settings.llm.base_url})"
    else:
        where = f"uses {section.base_url}"
    return Result("transcription", Status.SKIP, f"{where} with {section.model}; not tried (it needs audio)")


async def _database(settings: BotSettings, problems: list[ConfigError]) -> Result:
    url = settings.storage.url
    shown = make_url(url).render_as_string(hide_password=True)
    fix = "point storage.url at a folder this user can write (the default is ./data/agentgram.db)"
    if problems:
        return Result("database", Status.FAIL, "; ".join(p.problem for p in problems), fix)
    file = _sqlite_file(url)
    existed = file is None or file.exists()
    try:
        version = await migrate_database(url)
    except Exception as error:  # whatever the driver says is the diagnosis
        return Result("database", Status.FAIL, f"{shown}: {type(error).__name__}: {error}", fix)
    created = "" if existed else " (created)"
    return passed("database", f"{shown} opens, schema version {version}{created}")


def _sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser().resolve()


def _workdir(settings: BotSettings, problems: list[ConfigError]) -> Result:
    workdir = settings.agent.workdir.resolve()
    problem = "; ".join(p.problem for p in problems) or writable_dir_problem(workdir)
    if problem:
        return Result("workdir", Status.FAIL, problem, "set agent.workdir to a folder this user can write")
    return passed("workdir", f"{workdir} is writable" + ("" if workdir.exists() else " (created on start)"))
