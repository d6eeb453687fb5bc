"""``agentgram init``: write a first ``config.yml``, by asking or from flags, checking as it goes.

What it decides, and why:

* **Secrets are written as they are**, into a file only its owner can read
  (``0600``). For a bot one person runs on their own machine that is the
  simplest thing that is safe; whoever keeps secrets in the environment can
  replace a value with ``${TELEGRAM_BOT_TOKEN}`` afterwards.
* **It never replaces a file** unless given ``--force``: this is checked
  before the first question, and again when writing (an exclusive create).
* **It checks as it goes**: the token with ``getMe``, the LLM endpoint with
  ``/models`` (which must list the model, when it lists any). ``--no-check``
  skips both, for writing a config offline.
* **The user id** is asked with an explanation; left empty, it is read from
  the first private message the bot gets (the user sends one), which is then
  confirmed to Telegram so ``run`` does not answer it.
* **The written file passes** :func:`bot.config_check.check_config`: it is
  written to a temporary file beside it, checked, and only then moved into
  place (a relative workdir is relative to the file's folder, as it will be read).

Interactive questions read ``stdin`` line by line (a terminal hides the
secrets as they are typed), so tests feed answers as text. Exit codes: 0
written, 2 a flag, an answer or a check refused it (nothing written), 1 the
input ended first.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from agentgram.bot import probes
from agentgram.bot.config_check import EXAMPLE_USER_ID, check_config
from agentgram.bot.probes import ProbeFailed
from agentgram.runtime.config_check import writable_dir_problem
from agentgram.runtime.infra.config import ConfigInvalid, http_url

DEFAULT_LLM_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_WORKDIR = "./workspace"
DEFAULT_TELEGRAM_ROOT = "https://api.telegram.org"
DETECT_WAIT = 120.0
"""Seconds to wait for the message that tells the user's id."""
EXIT_REFUSED = 2
EXIT_ABORTED = 1
HEADER = (
    "# Written by `agentgram init`. Every other key, its default and what it does: config.example.yml.\n"
    "# It holds the bot token and the API key: keep it private (only you can read it).\n"
)
USER_ID_HELP = (
    "Your Telegram user id: a number, not your @username; only this user may talk to the agent.\n"
    "Leave it empty to find it now: you then send @{bot} any message. (Later, too: the bot answers\n"
    "anyone it does not know with their user id.)"
)


class InitStopped(Exception):
    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class Answers:
    telegram_root: str
    token: str = ""
    user_ids: list[int] = field(default_factory=list)
    llm_base_url: str = DEFAULT_LLM_BASE_URL
    llm_api_key: str = ""
    model: str = DEFAULT_MODEL
    workdir: str = DEFAULT_WORKDIR


class Console:
    """Questions on ``stdin``, everything else on ``stdout``."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout

    def say(self, text: str) -> None:
        print(text, file=self.stdout, flush=True)

    def ask(self, question: str, default: str | None = None, *, secret: bool = False) -> str:
        prompt = f"{question} [{default}]: " if default else f"{question}: "
        if secret and self.stdin.isatty():
            answer = getpass.getpass(prompt, stream=self.stdout)
        else:
            self.stdout.write(prompt)
            self.stdout.flush()
            line = self.stdin.readline()
            if not line:
                raise InitStopped("the input ended; nothing was written", EXIT_ABORTED)
            answer = line
        return answer.strip() or (default or "")

    def confirm(self, question: str, *, default: bool) -> bool:
        answer = self.ask(f"{question} [{'Y/n' if default else 'y/N'}]").lower()
        return default if not answer else answer in ("y", "yes", "д", "да")


# --- the command ---------------------------------------------------------------------


def add_parser(sub: Any) -> None:  # argparse's _SubParsersAction is private
    cmd = sub.add_parser("init", help="write a config.yml: asks, or takes every value from flags")
    cmd.add_argument("--output", "-o", type=Path, default=Path("config.yml"), help="file to write")
    cmd.add_argument("--force", action="store_true", help="replace the file if it exists")
    cmd.add_argument(
        "--non-interactive", "--yes", "-y", dest="non_interactive", action="store_true",
        help="ask nothing: --token, --user-id and --model are required",
    )  # fmt: skip
    cmd.add_argument("--token", help="the bot token from @BotFather (the question hides it; a flag does not)")
    cmd.add_argument("--user-id", type=int, action="append", dest="user_ids", help="your Telegram user id")
    cmd.add_argument("--llm-base-url", help=f"OpenAI-compatible API root (default {DEFAULT_LLM_BASE_URL})")
    cmd.add_argument("--llm-api-key", help="the endpoint's API key (empty for a local server)")
    cmd.add_argument("--model", help="model name as the endpoint knows it")
    cmd.add_argument(
        "--workdir", help=f"where the agent's files and commands live (default {DEFAULT_WORKDIR})"
    )
    cmd.add_argument("--telegram-api-base-url", default=DEFAULT_TELEGRAM_ROOT, help="Bot API root")
    cmd.add_argument("--no-check", action="store_true", help="contact neither Telegram nor the LLM endpoint")
    cmd.set_defaults(entry=main)


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run_init(args, sys.stdin, sys.stdout))


async def run_init(
    args: argparse.Namespace, stdin: TextIO, stdout: TextIO, *, detect_wait: float = DETECT_WAIT
) -> int:
    console = Console(stdin, stdout)
    try:
        _refuse_existing(args.output, args.force)
        if args.non_interactive:
            answers = _from_flags(args)
            if not args.no_check:
                await _check(answers)
        else:
            answers = await _interview(args, console, detect_wait)
        write_config(args.output, answers, force=args.force)
    except InitStopped as stopped:
        print(f"init: {stopped}", file=sys.stderr)
        return stopped.code
    console.say(
        f"✓ wrote {args.output} (only you can read it). Next: agentgram doctor --config {args.output}"
        f", then agentgram run --config {args.output}"
    )
    return 0


def _refuse_existing(path: Path, force: bool) -> None:
    if path.is_dir():
        raise InitStopped(f"{path} is a directory")
    if path.exists() and not force:
        raise InitStopped(f"{path} exists; pass --force to replace it")


def _url(value: str, flag: str) -> str:
    try:
        return http_url(value)
    except ValueError as error:
        raise InitStopped(f"{flag}: {error}") from None


def _from_flags(args: argparse.Namespace) -> Answers:
    missing = [
        flag
        for flag, value in (("--token", args.token), ("--user-id", args.user_ids), ("--model", args.model))
        if not value
    ]
    if missing:
        raise InitStopped(f"{', '.join(missing)} required with --non-interactive")
    _refuse_placeholder(args.user_ids)
    return Answers(
        telegram_root=_url(args.telegram_api_base_url, "--telegram-api-base-url"),
        token=args.token,
        user_ids=list(args.user_ids),
        llm_base_url=_url(args.llm_base_url or DEFAULT_LLM_BASE_URL, "--llm-base-url"),
        llm_api_key=args.llm_api_key or "",
        model=args.model,
        workdir=args.workdir or DEFAULT_WORKDIR,
    )


def _refuse_placeholder(user_ids: list[int]) -> None:
    if EXAMPLE_USER_ID in user_ids or any(uid <= 0 for uid in user_ids):
        raise InitStopped("--user-id: put your own Telegram user id (a positive number)")


async def _check(answers: Answers) -> None:
    try:
        async with probes.telegram(answers.token, answers.telegram_root):
            pass
        listed = await probes.listed_models(answers.llm_base_url, answers.llm_api_key)
        unlisted = probes.unlisted(answers.model, listed)
        if unlisted is not None:
            raise unlisted
    except ProbeFailed as failed:
        fix = f" — fix: {failed.fix}" if failed.fix else ""
        raise InitStopped(f"✗ {failed.problem}{fix}; nothing was written") from None


# --- the questions ----------------------------------------------------------------------


async def _interview(args: argparse.Namespace, console: Console, detect_wait: float) -> Answers:
    console.say(f"agentgram init: a few questions, then {args.output} is written (nothing before that).")
    answers = Answers(telegram_root=_url(args.telegram_api_base_url, "--telegram-api-base-url"))
    bot_name = await _ask_token(args, console, answers)
    await _ask_llm(args, console, answers)
    if args.user_ids:
        _refuse_placeholder(args.user_ids)
        answers.user_ids = list(args.user_ids)
    else:
        answers.user_ids = [await _ask_user_id(console, answers, bot_name, detect_wait)]
    answers.workdir = _ask_workdir(args.workdir, console, args.output)
    return answers


def _ask_workdir(given: str | None, console: Console, output: Path) -> str:
    """A workdir this user can write; a relative one is relative to the config's folder, as the
    config reads it."""
    while True:
        workdir = given or console.ask("Workdir, where the agent's files and commands live", DEFAULT_WORKDIR)
        given = None
        problem = writable_dir_problem(
            (output.expanduser().resolve().parent / Path(workdir).expanduser()).resolve()
        )
        if problem is None:
            return workdir
        console.say(f"  ✗ {problem}")


async def _ask_token(args: argparse.Namespace, console: Console, answers: Answers) -> str:
    """Ask until Telegram takes the token (or the user keeps one it did not); the bot's @name."""
    token = args.token or ""
    while True:
        token = token or console.ask("Bot token (from @BotFather: /newbot)", secret=True)
        if not token:
            continue
        answers.token = token
        if args.no_check:
            return "your_bot"
        try:
            async with probes.telegram(token, answers.telegram_root) as (_, me):
                console.say(f"  ✓ the token works: @{me.username}")
                return me.username
        except ProbeFailed as failed:
            console.say(f"  ✗ {failed.problem}")
        if console.confirm("  Keep this token anyway?", default=False):
            return "your_bot"
        token = ""


async def _ask_llm(args: argparse.Namespace, console: Console, answers: Answers) -> None:
    given = args.llm_base_url
    while True:
        base = given or console.ask("LLM endpoint, an OpenAI-compatible API root", DEFAULT_LLM_BASE_URL)
        given = None  # asked again if it does not work
        try:
            answers.llm_base_url = http_url(base)
        except ValueError as error:
            console.say(f"  ✗ {error}")
            continue
        answers.llm_api_key = (
            args.llm_api_key
            if args.llm_api_key is not None
            else console.ask("LLM API key (empty for a local server)", secret=True)
        )
        listed = [] if args.no_check else await _list_models(console, answers)
        if listed is not None:
            break
    answers.model = _ask_model(args.model, console, listed)


async def _list_models(console: Console, answers: Answers) -> list[str] | None:
    """The endpoint's models; ``None`` when it failed and the user wants to enter another one."""
    try:
        listed = await probes.listed_models(answers.llm_base_url, answers.llm_api_key)
    except ProbeFailed as failed:
        console.say(f"  ✗ {failed.problem}")
        return [] if console.confirm("  Keep this endpoint anyway?", default=False) else None
    console.say(f"  ✓ the endpoint answers and lists {len(listed)} models")
    return listed


def _ask_model(given: str | None, console: Console, listed: list[str]) -> str:
    default = DEFAULT_MODEL if not listed or DEFAULT_MODEL in listed else listed[0]
    while True:
        model = given or console.ask("Model", default)
        given = None
        problem = probes.unlisted(model, listed)
        if problem is None:
            return model
        console.say(f"  ✗ {problem.problem}")


async def _ask_user_id(console: Console, answers: Answers, bot_name: str, wait: float) -> int:
    console.say(USER_ID_HELP.format(bot=bot_name))
    while True:
        answer = console.ask("Your user id")
        if not answer:
            found = await _detect_user(console, answers, bot_name, wait)
            if found is not None:
                return found
        elif answer.isdigit() and int(answer) > 0 and int(answer) != EXAMPLE_USER_ID:
            return int(answer)
        else:
            console.say("  ✗ that is not a user id: a positive number such as 421337 (not your @username)")


async def _detect_user(console: Console, answers: Answers, bot_name: str, wait: float) -> int | None:
    from telegram.error import TelegramError  # python-telegram-bot: only the probes use it here

    console.say(f"  Send @{bot_name} any message now (waiting up to {wait:.0f} s)…")
    try:
        async with probes.telegram(answers.token, answers.telegram_root) as (bot, _):
            user = await probes.first_private_sender(bot, wait)
    except ProbeFailed as failed:
        console.say(f"  ✗ {failed.problem}; type the id instead")
        return None
    except TelegramError as error:
        console.say(f"  ✗ cannot read the bot's messages ({error}); type the id instead")
        return None
    if user is None:
        console.say("  ✗ no message came; type the id instead, or leave it empty to wait again")
        return None
    who = user.full_name + (f" (@{user.username})" if user.username else "")
    if console.confirm(f"  ✓ a message from {who}: user id {user.id}. Is that you?", default=True):
        return user.id
    return None


# --- the file ------------------------------------------------------------------------------


def render(answers: Answers) -> str:
    telegram: dict[str, Any] = {"token": answers.token, "allowed_user_ids": answers.user_ids}
    if answers.telegram_root != DEFAULT_TELEGRAM_ROOT:
        telegram["api_base_url"] = answers.telegram_root
    data = {
        "telegram": telegram,
        "llm": {"base_url": answers.llm_base_url, "api_key": answers.llm_api_key, "model": answers.model},
        "agent": {"workdir": answers.workdir},
    }
    return HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None)


def write_config(path: Path, answers: Answers, *, force: bool) -> None:
    """Write ``path`` (mode 0600) once the text passes ``check_config``; never replace it without ``force``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=".agentgram-init-", suffix=".yml")  # 0600
    temp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(render(answers))
        try:
            check_config(temp)
        except ConfigInvalid as invalid:
            raise InitStopped(
                f"the config would not pass its checks; nothing was written:\n{invalid}"
            ) from None
        if not force:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # claim the name
            except FileExistsError:
                raise InitStopped(f"{path} exists; pass --force to replace it") from None
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
