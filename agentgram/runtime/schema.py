"""The database's schema as ``agentgram db`` shows it: upgrade, the current revision, the history.

The adapters never import storage (their import contract); this module is the command line's door
to it, and only strings and numbers cross it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.infra.storage import migrations
from agentgram.runtime.infra.storage.db import Database

EXIT_FAILED = 1
EXIT_CONFIG = 2


async def run_schema_command(url: str, name: str) -> tuple[int, str]:
    """``upgrade`` or ``current`` on the database at ``url``: the exit code and the line to print
    (on standard output when the code is 0, else on standard error)."""
    command: Callable[[Database], Awaitable[str]] = upgrade if name == "upgrade" else current
    db = Database(url)
    try:
        return 0, await command(db)
    except ConfigError as error:
        return EXIT_CONFIG, str(error)
    except Exception as error:  # whatever the driver says is the diagnosis
        return EXIT_FAILED, f"database: {type(error).__name__}: {error}"
    finally:
        await db.close()


async def upgrade(db: Database) -> str:
    done = await migrations.upgrade(db)
    if done.before == done.after:
        return f"schema at {done.after} (head): nothing to do"
    return f"schema upgraded from {done.before or 'an empty database'} to {done.after} (head)"


async def current(db: Database) -> str:
    revision = await migrations.revision_of(db)
    head = migrations.head()
    if revision == head:
        return f"{revision} (head)"
    if revision is None:
        return f"empty (head is {head}: run agentgram db upgrade)"
    if not revision.startswith("legacy-") and not migrations.is_known(revision):
        return f"{revision} (newer than this release, whose head is {head})"
    return f"{revision} (head is {head}: run agentgram db upgrade)"


def history() -> str:
    """Every revision this release carries, newest first: ``<id>  <first line of its docstring>``."""
    head = migrations.head()
    lines = []
    for script in migrations.scripts().walk_revisions():
        mark = " (head)" if script.revision == head else ""
        lines.append(f"{script.revision}{mark}  {script.doc}")
    return "\n".join(lines)
