"""What a parsed config must also satisfy before anything starts.

pydantic (:mod:`runtime.config`) checks each value on its own; the checks here
look at the world the values point to, so that ``check-config`` and ``run``
fail on the same problems, before the bot is built, with one line each:

* ``tic.cron`` parses as a crontab — by the scheduler's own rule
  (:func:`runtime.scheduler.plan.tic_plan`);
* ``locale.default`` has translations — asked of the :class:`~runtime.i18n.Translator`;
* ``agent.system_prompt_file`` is a readable UTF-8 file;
* ``agent.workdir`` and a SQLite database's folder exist and are writable, or
  can be created (``run`` creates both with their parents);
* ``storage.url`` names an async driver that is installed (the ``[postgres]``
  extra for asyncpg);
* each ``agent.skills_dirs`` entry is an existing folder.

A check is a function from :class:`Settings` to the :class:`CheckProblem`\\ s it
finds. None of these knows a chat platform: adapters add their own checks on
their own settings model (``bot/config_check.py``) and call
:func:`validate_config` with the union and that model. Writability is proven
by creating and removing an empty temporary folder, because ``os.access``
says yes to root on ``/proc`` and other places where nothing can be created.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeAlias, TypeVar, overload

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import create_async_engine

from agentgram.runtime.infra.config import ConfigInvalid, Settings, parse_config
from agentgram.runtime.infra.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CheckProblem:
    key: str
    problem: str


SettingsT = TypeVar("SettingsT", bound=Settings)
Check: TypeAlias = Callable[[SettingsT], Iterable[CheckProblem]]


@overload
def validate_config(
    path: Path, checks: Iterable[Check[Settings]], environ: Mapping[str, str] | None = None
) -> Settings: ...
@overload
def validate_config(
    path: Path,
    checks: Iterable[Check[SettingsT]],
    environ: Mapping[str, str] | None = None,
    *,
    model: type[SettingsT],
) -> SettingsT: ...
def validate_config(
    path: Path,
    checks: Iterable[Check[Any]],
    environ: Mapping[str, str] | None = None,
    *,
    model: type[Settings] = Settings,
) -> Settings:
    """The one validation ``check-config`` and ``run`` share: parse (against ``model``, the
    adapter's extension of :class:`Settings`), then every check.

    Raises :class:`ConfigInvalid` listing every problem; the checks run only
    on a config that parsed.
    """
    settings, origins = parse_config(path, environ, model=model)
    problems = [origins.problem(found.key, found.problem) for check in checks for found in check(settings)]
    if problems:
        raise ConfigInvalid(problems)
    return settings


# --- the runtime's checks ------------------------------------------------------------


def check_tic_cron(settings: Settings) -> Iterator[CheckProblem]:
    from agentgram.runtime.infra.storage.scheduler_rows import TicState
    from agentgram.runtime.scheduler.plan import tic_plan

    try:
        tic_plan(settings.tic, TicState(), UTC, datetime.now(UTC))
    except ConfigError as error:
        hint = "" if "crontab" in error.problem else f"; {error.key} takes a crontab such as '0 9 * * 1-5'"
        yield CheckProblem(error.key, error.problem + hint)


def check_locale(settings: Settings) -> Iterator[CheckProblem]:
    from agentgram.runtime.infra.i18n import Translator

    try:
        Translator(default=settings.locale.default)
    except ConfigError as error:
        yield CheckProblem(error.key, error.problem + _available_locales(error))


def _available_locales(error: ConfigError) -> str:
    from agentgram.runtime.infra.i18n import Translator

    if error.key != "locale.default":
        return ""  # a broken .ftl file: the translator cannot load at all
    try:
        return f" (available: {', '.join(Translator().languages())})"
    except ConfigError:
        return ""


def check_system_prompt_file(settings: Settings) -> Iterator[CheckProblem]:
    path = settings.agent.system_prompt_file
    if path is None:
        return
    key = "agent.system_prompt_file"
    try:
        path.read_text(encoding="utf-8")
    except FileNotFoundError:
        yield CheckProblem(key, f"{path} does not exist")
    except IsADirectoryError:
        yield CheckProblem(key, f"{path} is a directory, not a file")
    except UnicodeDecodeError:
        yield CheckProblem(key, f"{path} is not UTF-8 text")
    except OSError as exc:
        yield CheckProblem(key, f"cannot read {path}: {exc.strerror or exc}")


def check_workdir(settings: Settings) -> Iterator[CheckProblem]:
    problem = writable_dir_problem(settings.agent.workdir.resolve())
    if problem:
        yield CheckProblem("agent.workdir", problem)


def writable_dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot be used as a folder to write in (``mkdir -p`` allowed), or ``None``."""
    existing = path
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"{existing} is not a directory"
    except OSError as exc:
        return f"cannot look at {existing}: {exc.strerror or exc}"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".agentgram-check-", dir=existing))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if existing == path:
            return f"{path} is not writable: {reason}"
        return f"cannot create {path}: creating a folder in {existing} fails: {reason}"
    return None


ASYNC_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg"}
"""The async driver each supported database uses."""

EXTRAS = {"asyncpg": "postgres"}
"""Drivers installed by an extra of this package rather than by default."""


def check_storage_url(settings: Settings) -> Iterator[CheckProblem]:
    key = "storage.url"
    try:
        url = make_url(settings.storage.url)
    except ArgumentError:
        yield CheckProblem(key, "is not a database URL (e.g. sqlite+aiosqlite:///./data/agentgram.db)")
        return
    backend = url.get_backend_name()
    async_driver = ASYNC_DRIVERS.get(backend)
    if async_driver and "+" not in url.drivername:
        better = url.set(drivername=f"{backend}+{async_driver}").render_as_string(hide_password=True)
        yield CheckProblem(key, f"{backend}:// has no async driver: use {better}{_extra_hint(async_driver)}")
        return
    driver = url.get_driver_name()
    if driver in EXTRAS and find_spec(driver) is None:
        yield CheckProblem(key, f"the {driver} driver is not installed{_extra_hint(driver)}")
        return
    yield from _engine_problems(url)
    if backend == "sqlite" and url.database not in (None, "", ":memory:"):
        database = Path(url.database).expanduser().resolve()  # as the storage opens it
        problem = writable_dir_problem(database.parent)
        if problem is None and database.is_dir():
            problem = f"{database} is a directory, not a database file"
        if problem:
            yield CheckProblem(key, f"the database: {problem}")


def _extra_hint(driver: str) -> str:
    extra = EXTRAS.get(driver)
    if extra is None or find_spec(driver) is not None:
        return ""
    return f"; install the [{extra}] extra: pip install 'agentgram[{extra}]'"


def _engine_problems(url: URL) -> Iterator[CheckProblem]:
    """What SQLAlchemy itself says when ``run`` builds the engine (it connects to nothing)."""
    try:
        engine = create_async_engine(url)
    except NoSuchModuleError:
        yield CheckProblem("storage.url", f"{url.drivername}:// is not a database SQLAlchemy knows")
    except InvalidRequestError:
        yield CheckProblem("storage.url", f"{url.drivername}:// is not an async driver")
    except ImportError as exc:
        yield CheckProblem("storage.url", f"the Python package {exc.name or exc} is not installed")
    else:
        engine.sync_engine.dispose()


def check_agents(settings: Settings) -> Iterator[CheckProblem]:
    """The agent definitions ``run`` loads (``agents/<name>/AGENT.md``), and the models they name."""
    from agentgram.runtime.capabilities.agents import AGENTS_DIR, load_agents, unknown_models
    from agentgram.runtime.infra.config import DEFAULT_MODEL_NAME

    folder = settings.agent.agents_dir or settings.agent.workdir / AGENTS_DIR
    try:
        catalog = load_agents(folder.resolve())
    except ConfigError as error:
        yield CheckProblem(error.key, error.problem)
        return
    known = [DEFAULT_MODEL_NAME, *(model.name for model in settings.llm.models)]
    for unknown in unknown_models(catalog, known):
        yield CheckProblem(unknown.key, unknown.problem)


def check_skills_dirs(settings: Settings) -> Iterator[CheckProblem]:
    """Each ``agent.skills_dirs`` entry is a folder (``skills/`` in the workdir may be missing)."""
    for index, folder in enumerate(settings.agent.skills_dirs):
        if not folder.is_dir():
            what = "is not a directory" if folder.exists() else "does not exist"
            yield CheckProblem(f"agent.skills_dirs.{index}", f"{folder} {what}")


RUNTIME_CHECKS: tuple[Check[Settings], ...] = (
    check_tic_cron,
    check_locale,
    check_system_prompt_file,
    check_workdir,
    check_storage_url,
    check_agents,
    check_skills_dirs,
)
