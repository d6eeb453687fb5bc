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
* ``cluster.enabled`` has a PostgreSQL ``storage.url`` (several processes cannot share SQLite);
* each ``agent.skills_dirs`` entry is an existing folder;
* an API key written empty is a warning (a local server needs none; api.openai.com refuses);
* a SQLite database that does not exist yet, while agentgram databases exist elsewhere under
  the config's folder, is a warning naming them (the history the user expects is there).

A check is a function from :class:`Settings` to the :class:`CheckProblem`\\ s it
finds (a problem, or a warning when ``warning`` is set). None of these knows a chat platform: adapters add their own checks on
their own settings model (``bot/config_check.py``) and call
:func:`validate_config` with the union and that model. Writability is proven
by creating and removing an empty temporary folder, because ``os.access``
says yes to root on ``/proc`` and other places where nothing can be created.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Generic, TypeAlias, TypeVar, overload

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import create_async_engine

from agentgram.runtime.infra.config import (
    ConfigInvalid,
    ConfigWarning,
    Prepare,
    Settings,
    is_openai,
    key_loc,
    read_config,
    sort_problems,
    sqlite_path,
)
from agentgram.runtime.infra.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CheckProblem:
    key: str
    problem: str
    warning: bool = False


SettingsT = TypeVar("SettingsT", bound=Settings)
Check: TypeAlias = Callable[[SettingsT], Iterable[CheckProblem]]


@dataclass(slots=True)
class Inspection(Generic[SettingsT]):
    """Everything one pass over a config found: the settings (``None`` when anything is wrong),
    every problem in the file's key order, and the warnings."""

    settings: SettingsT | None
    problems: list[ConfigError]
    warnings: list[ConfigWarning]
    parsed: bool
    """Every value was valid (the problems, if any, are the semantic checks')."""
    usable: SettingsT | None = None
    """The settings even when a check failed (``None`` unless every value parsed)."""


def inspect_config(
    path: Path,
    checks: Iterable[Check[Any]],
    environ: Mapping[str, str] | None = None,
    *,
    model: type[SettingsT],
    prepare: Prepare | None = None,
) -> Inspection[SettingsT]:
    """Parse against ``model`` and run every check, in one pass: missing variables, type errors
    and the checks' problems come together. The checks run on the values that are valid (an
    invalid one is left at its default for them); a check's problem on a key already reported is
    dropped. Never raises."""
    parsed = read_config(path, environ, model=model, prepare=prepare)
    problems = list(parsed.problems)
    warnings = list(parsed.warnings)
    if parsed.usable is not None:
        reported = [key_loc(problem.key) for problem in problems]
        for check in checks:
            for found in check(parsed.usable):
                line = parsed.origins.problem(found.key, found.problem)
                if found.warning:
                    if all(warning.key != line.key for warning in warnings):  # one line per key
                        warnings.append(ConfigWarning(line.key, line.problem))
                elif not any(_related(key_loc(line.key), loc) for loc in reported):
                    problems.append(line)
    problems = sort_problems(problems, model)
    settings = parsed.settings if not problems else None
    return Inspection(settings, problems, warnings, parsed.settings is not None, parsed.settings)


def _related(one: tuple[str, ...], other: tuple[str, ...]) -> bool:
    shorter = min(len(one), len(other))
    return one[:shorter] == other[:shorter]


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
    """:func:`inspect_config`, raising :class:`ConfigInvalid` listing every problem."""
    found = inspect_config(path, checks, environ, model=model)
    if found.settings is None:
        raise ConfigInvalid(found.problems, found.warnings)
    return found.settings


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


def check_cluster(settings: Settings) -> Iterator[CheckProblem]:
    """Several instances share one database server: SQLite is one process's (its file lock and
    its one writer), so ``cluster.enabled`` needs PostgreSQL."""
    if not settings.cluster.enabled:
        return
    try:
        backend = make_url(settings.storage.url).get_backend_name()
    except ArgumentError:
        return  # check_storage_url says so
    if backend != "postgresql":
        yield CheckProblem(
            "cluster.enabled", "needs a PostgreSQL storage.url (SQLite serves one process only)"
        )


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


def check_api_keys(settings: Settings) -> Iterator[CheckProblem]:
    """An API key written empty is a warning: a local server needs none, api.openai.com refuses
    every request (left out, it is not judged; an unset variable is judged as it is read)."""
    llm = settings.llm
    keyed = [("llm.api_key", llm.base_url, llm.api_key, "api_key" in llm.model_fields_set)]
    for index, entry in enumerate(llm.models):
        if entry.api_key is not None:
            keyed.append((f"llm.models.{index}.api_key", entry.base_url or llm.base_url, entry.api_key, True))
    for key, base_url, secret, given in keyed:
        if given and not secret.get_secret_value().strip():
            if is_openai(base_url):
                yield CheckProblem(
                    key, f"is empty: {base_url} refuses requests without an API key", warning=True
                )
            else:
                yield CheckProblem(key, f"is empty: no API key is sent to {base_url}", warning=True)


AGENTGRAM_TABLES = frozenset({"sessions", "session_mail"})
"""Tables that make a SQLite file one of agentgram's databases."""
STRAY_SEARCH_DEPTH = 3
"""Folders below the config's that are searched for other databases."""
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def check_stray_databases(settings: Settings) -> Iterator[CheckProblem]:
    """A warning when the database would be created while other agentgram databases lie under
    the config's folder: a changed path (or, before, another working directory) looks like lost
    history to the user."""
    database = sqlite_path(settings.storage.url)
    if database is None or settings.config_file is None or database.exists():
        return
    base = settings.config_file.parent
    found = [path for path in _database_files(base) if _is_agentgram_database(path)]
    if found:
        names = ", ".join(str(path.relative_to(base)) for path in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        yield CheckProblem(
            "storage.url",
            f"{database} does not exist yet (it will be created), but {base} holds agentgram"
            f" databases: {names}{more}; point storage.url at one to keep its history",
            warning=True,
        )


def _database_files(base: Path) -> Iterator[Path]:
    for folder, subfolders, files in os.walk(base):
        depth = len(Path(folder).relative_to(base).parts)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and depth < STRAY_SEARCH_DEPTH)
        for name in sorted(files):
            if name.endswith(DATABASE_SUFFIXES):
                yield Path(folder) / name


def _is_agentgram_database(path: Path) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return AGENTGRAM_TABLES <= tables


RUNTIME_CHECKS: tuple[Check[Settings], ...] = (
    check_tic_cron,
    check_locale,
    check_system_prompt_file,
    check_workdir,
    check_storage_url,
    check_cluster,
    check_agents,
    check_skills_dirs,
    check_api_keys,
    check_stray_databases,
)
