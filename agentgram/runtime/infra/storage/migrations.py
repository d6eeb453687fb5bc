"""Schema migrations with Alembic, one history for SQLite and PostgreSQL, run on start.

The revisions live in the package (``storage/alembic/versions``), so a wheel carries them, and
run programmatically: no ``alembic.ini``, no URL in a file (:func:`alembic_config`). Each
revision's id is the schema version it produces, four digits (``0005``), so ``agentgram doctor``
and ``agentgram db current`` still say "schema version 5"; :data:`SCHEMA_VERSION` is the head's.

What :func:`migrate` does with a database, in one write transaction:

* **empty**: ``upgrade head`` builds every table from the revisions (never ``create_all``); an
  empty SQLite database gets what they build in one go, from a snapshot of it, and no Alembic
  (:mod:`.fresh_schema`: a fresh start is ≈0.27 s sooner; a test holds the two the same);
* **made before Alembic** (a ``schema_version`` table, or the first release's tables without
  one: version 1): the old steps (:mod:`legacy_migrations`) run once up to version 5, then the
  baseline revision ``0005`` adds the tables the old ``create_all`` used to add and stamps it;
* **Alembic's**: ``upgrade head`` from its revision;
* **newer than this release** (a revision this release does not know): refused with one line
  (:class:`SchemaTooNew`, a :class:`ConfigError`: exit 2), nothing touched.

``schema_version`` is kept in step with the head's number, so a release from before Alembic
refuses a newer database instead of taking it for version 1.

Alembic is imported only when it has work: a database already at the head (the usual start) is
recognised by reading ``alembic_version`` with plain SQL against :data:`HEAD_REVISION`, which the
revisions' file names give, and an empty SQLite database is built from the snapshot; nothing
that runs after start-up needs Alembic (issue 31).

Concurrency: on SQLite the transaction starts with ``BEGIN IMMEDIATE``, so two processes upgrade
one after the other; on PostgreSQL it first takes ``pg_advisory_xact_lock`` (:data:`MIGRATE_LOCK`):
concurrent starts wait, and the later ones find the schema at head. PostgreSQL's DDL is
transactional, so a failed upgrade leaves the database as it was.

``storage.migrate: never`` (:func:`migrate` with ``mode="never"``) upgrades nothing: a database
not at head refuses to start, and ``agentgram db upgrade`` is the way forward.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection, Integer, MetaData, String, inspect, text
from sqlalchemy.types import TypeDecorator, TypeEngine
from sqlmodel import SQLModel

import agentgram.runtime.infra.storage.background_rows  # registers the tables
import agentgram.runtime.infra.storage.budget_rows  # registers the table
import agentgram.runtime.infra.storage.cluster_rows  # registers the tables
import agentgram.runtime.infra.storage.grant_rows  # registers the tables
import agentgram.runtime.infra.storage.models
import agentgram.runtime.infra.storage.notes_rows  # registers the tables
import agentgram.runtime.infra.storage.prepared_rows  # registers the tables
import agentgram.runtime.infra.storage.question_rows  # registers the tables
import agentgram.runtime.infra.storage.scheduler_rows  # registers the tables
import agentgram.runtime.infra.storage.summary_rows  # registers the tables
import agentgram.runtime.infra.storage.usage_rows  # noqa: F401  (registers the tables)
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.log import get_logger
from agentgram.runtime.infra.storage import fresh_schema, legacy_migrations
from agentgram.runtime.infra.storage.db import Database
from agentgram.runtime.infra.storage.models import partial_indexes_for_postgresql
from agentgram.runtime.infra.storage.search import INDEX, PG_INDEX

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

log = get_logger("storage")

ALEMBIC_DIR = Path(__file__).with_name("alembic")
EXTRA_VERSION_LOCATIONS: list[Path] = []
"""Folders of revisions besides ``alembic/versions`` (the tests add a next revision this way)."""

MIGRATE_LOCK = int.from_bytes(b"agmigrat")
"""The PostgreSQL advisory lock key every migrating process takes first."""

MigrateMode = Literal["auto", "never"]
IGNORED_TABLES = frozenset({"schema_version"})
"""Tables of the database that no model describes on purpose (besides ``alembic_version``)."""


class SchemaTooNew(ConfigError):
    """The database was migrated by a newer release; this one must not touch it."""

    def __init__(self, revision: str, head: str) -> None:
        super().__init__(
            "storage.url",
            f"the database's schema (revision {revision}) is newer than this release"
            f" (up to {head}): run the newer agentgram, or restore a backup",
        )


class SchemaBehind(ConfigError):
    """``storage.migrate: never`` and the database is not at this release's head."""

    def __init__(self, revision: str | None, head: str) -> None:
        have = "empty" if revision is None else f"at revision {revision}"
        super().__init__(
            "storage.migrate",
            f"is never and the database is {have}, this release needs {head}: run agentgram db upgrade",
        )


def target_metadata() -> MetaData:
    """Every table the models describe (what the head revision must build), in both dialects' terms."""
    return partial_indexes_for_postgresql(SQLModel.metadata)


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """What Alembic compares: every table but :data:`IGNORED_TABLES` and the full-text indexes."""
    if type_ == "table" and name is not None:
        return name not in IGNORED_TABLES and not name.startswith(INDEX)
    if type_ == "index":
        return name != PG_INDEX  # an expression index no model can describe (revision 0006)
    return True


def compare_type(
    context: Any,
    inspected: Any,
    metadata: Any,
    inspected_type: TypeEngine[Any],
    metadata_type: TypeEngine[Any],
) -> bool | None:
    """Alembic's type comparison, except that an unbounded ``TEXT`` and ``VARCHAR`` are the same,
    and on SQLite ``INTEGER`` and ``BIGINT`` too.

    Schema step 5 added ``tool_calls.wrappers`` as ``TEXT`` where the model says ``VARCHAR``: on
    SQLite (one affinity) and on PostgreSQL (one storage) the two are the same column, and
    rebuilding a big table once to rename its type would risk more than it fixes. Revision 0007
    made the chat ids ``BIGINT`` on PostgreSQL only: SQLite's ``INTEGER`` holds 64 bits already.
    """
    inspected_type, metadata_type = _plain(inspected_type), _plain(metadata_type)
    if isinstance(inspected_type, String) and isinstance(metadata_type, String):
        if inspected_type.length is None and metadata_type.length is None:
            return False
    if context.dialect.name == "sqlite" and isinstance(inspected_type, Integer):
        if isinstance(metadata_type, Integer):
            return False
    return None  # Alembic's own comparison


def _plain(kind: TypeEngine[Any]) -> TypeEngine[Any]:
    """A decorated type's database type (``AutoString`` is a ``VARCHAR``)."""
    return kind.impl_instance if isinstance(kind, TypeDecorator) else kind


def alembic_config(conn: Connection | None = None) -> Config:
    """Alembic's configuration for the package's revisions, on ``conn`` when given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    config.set_main_option("path_separator", "os")
    if EXTRA_VERSION_LOCATIONS:
        locations = [ALEMBIC_DIR / "versions", *EXTRA_VERSION_LOCATIONS]
        config.set_main_option("version_locations", os.pathsep.join(str(p) for p in locations))
    if conn is not None:
        config.attributes["connection"] = conn
    return config


def scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    revision = scripts().get_current_head()
    assert revision is not None, "the package carries its revisions"
    return revision


REVISION_FILE = re.compile(r"v(\d{4})_\w+\.py")
"""A revision's file name in ``alembic/versions``: ``v``, its id, a few words (``v0016_task_sessions.py``)."""


def _shipped_head() -> str:
    """The newest revision the package carries, from the file names alone: the history is one line
    of numbered ids, so the highest is Alembic's head (a test holds the two equal)."""
    found = (REVISION_FILE.fullmatch(path.name) for path in (ALEMBIC_DIR / "versions").iterdir())
    return max(match.group(1) for match in found if match is not None)


HEAD_REVISION = _shipped_head()
"""This release's head revision, known without importing Alembic: a database already there
starts with no Alembic loaded (:func:`_at_head`); only an upgrade imports it."""

SCHEMA_VERSION = int(HEAD_REVISION)
"""This release's schema version: the head revision's number."""


@dataclass(frozen=True, slots=True)
class Upgrade:
    """What :func:`migrate` did: the revision before (``None``: an empty database; ``legacy-N``:
    a database from before Alembic at version N) and after."""

    before: str | None
    after: str


def current_revision(conn: Connection) -> str | None:
    """The database's Alembic revision; ``None`` for a database Alembic never touched."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def _legacy_version(conn: Connection) -> int | None:
    """A database made before Alembic: its ``schema_version`` (1 without one); else ``None``."""
    version = legacy_migrations.stamped_version(conn)
    if version is None and inspect(conn).has_table("sessions"):
        return 1
    return version


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATE_LOCK})


def is_known(revision: str) -> bool:
    """Whether this release carries ``revision`` (a database at an unknown one is newer)."""
    from alembic.util import CommandError

    try:
        return scripts().get_revision(revision) is not None
    except CommandError:
        return False


def _at_head(conn: Connection) -> bool:
    """Whether the database is at :data:`HEAD_REVISION`, read with plain SQL (no Alembic).
    Never with extra revision folders (the tests' next revision): :func:`head` is then Alembic's."""
    if EXTRA_VERSION_LOCATIONS or not inspect(conn).has_table("alembic_version"):
        return False
    stored = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return stored == [HEAD_REVISION]


def _upgrade(conn: Connection, mode: MigrateMode, *, from_revisions: bool = False) -> Upgrade:
    _lock(conn)
    if _at_head(conn):  # the usual start: nothing to upgrade, so Alembic stays unimported
        legacy_migrations.stamp(conn, SCHEMA_VERSION)
        return Upgrade(HEAD_REVISION, HEAD_REVISION)
    fresh = mode == "auto" and not from_revisions and fresh_schema.applies(conn)
    if fresh:
        fresh_schema.build(conn)  # at the snapshot's revision; Alembic goes on if that is not the head
        if _at_head(conn):
            legacy_migrations.stamp(conn, SCHEMA_VERSION)
            return Upgrade(None, HEAD_REVISION)
    from alembic import command

    target = head()
    revision = current_revision(conn)
    if revision is not None and not is_known(revision):
        raise SchemaTooNew(revision, target)
    before = revision
    legacy = _legacy_version(conn) if revision is None else None
    if legacy is not None:
        if legacy > legacy_migrations.LEGACY_VERSION:
            raise SchemaTooNew(f"{legacy:04d}", target)
        before = f"legacy-{legacy}"
    if revision != target and mode == "never":
        raise SchemaBehind(revision if legacy is None else before, target)
    if legacy is not None:
        legacy_migrations.upgrade_legacy(conn, legacy)
    if revision != target:
        command.upgrade(alembic_config(conn), "head")
    legacy_migrations.stamp(conn, int(target))
    return Upgrade(None if fresh else before, target)


async def upgrade(db: Database, mode: MigrateMode = "auto", *, from_revisions: bool = False) -> Upgrade:
    """Bring the schema to the head revision (or, ``never``, check that it is there).
    ``from_revisions``: an empty database too is built by running every revision, never from
    :mod:`.fresh_schema`'s snapshot (what the snapshot is made from and compared with)."""
    async with db.write() as session:
        conn = await session.connection()
        done = await conn.run_sync(lambda sync: _upgrade(sync, mode, from_revisions=from_revisions))
    if done.before != done.after:
        log.info("database schema %s -> %s", done.before or "new", done.after)
    return done


async def migrate(db: Database, mode: MigrateMode = "auto") -> int:
    """:func:`upgrade`; the resulting schema version (the head revision's number)."""
    return int((await upgrade(db, mode)).after)


async def revision_of(db: Database) -> str | None:
    """The database's revision without changing anything (``legacy-N`` before Alembic)."""

    def read(conn: Connection) -> str | None:
        revision = current_revision(conn)
        if revision is None and (legacy := _legacy_version(conn)) is not None:
            return f"legacy-{legacy}"
        return revision

    async with db.engine.connect() as conn:
        return await conn.run_sync(read)


__all__ = [
    "HEAD_REVISION",
    "SCHEMA_VERSION",
    "MigrateMode",
    "SchemaBehind",
    "SchemaTooNew",
    "Upgrade",
    "alembic_config",
    "compare_type",
    "head",
    "include_name",
    "is_known",
    "migrate",
    "revision_of",
    "target_metadata",
    "upgrade",
]
