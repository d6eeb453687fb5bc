"""``agentgram db upgrade | current | history | copy``: the database's schema, by hand, and a move.

``run`` upgrades the schema itself (``storage.migrate: auto``); with ``storage.migrate: never`` it
refuses a database that is behind, and ``agentgram db upgrade`` is how it gets there. The
database is ``storage.url`` of the config (``--config``), or ``--url`` when given (then no config
is read). ``agentgram db copy --from URL --to URL`` copies a whole database into an empty one (a
SQLite file into PostgreSQL: docs/operations/postgresql.md), printing each table's rows
(:func:`runtime.schema.copy_database`). Exit codes: 0 done, 1 the database failed (its error in
one line), 2 a configuration problem (including a database newer than this release, refused
credentials, and for ``copy`` a target that is not empty).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from agentgram.bot.config_check import check_chat_config
from agentgram.runtime.infra.errors import ConfigError
from agentgram.runtime.schema import EXIT_CONFIG, history, run_copy_command, run_schema_command


def add_parser(sub: Any) -> None:  # argparse's _SubParsersAction is private
    cmd = sub.add_parser("db", help="the database's schema: upgrade it, show its revision or the history")
    actions = cmd.add_subparsers(dest="db_command", required=True)
    for name, help_text in (
        ("upgrade", "bring the schema to this release's (what run does with storage.migrate: auto)"),
        ("current", "show the database's schema revision"),
        ("history", "list this release's schema revisions, newest first"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--config", "-c", type=Path, default=Path("config.yml"), help="YAML config file")
        action.add_argument(
            "--url", default=None, help="the database URL instead of the config's storage.url"
        )
    copy = actions.add_parser(
        "copy", help="copy every table into an empty database (SQLite to PostgreSQL, say)"
    )
    copy.add_argument("--from", dest="source", required=True, help="the database URL to copy from")
    copy.add_argument("--to", dest="target", required=True, help="the URL of the empty database to copy into")
    cmd.set_defaults(entry=main)


def main(args: argparse.Namespace) -> int:
    if args.db_command == "history":
        print(history())
        return 0
    if args.db_command == "copy":
        return _copy(args.source, args.target)
    try:
        url = args.url or check_chat_config(args.config).storage.url
        make_url(url)
    except ConfigError as error:
        print(str(error), file=sys.stderr)
        return EXIT_CONFIG
    except Exception as error:  # a --url that does not parse
        print(f"config error: --url: {error}", file=sys.stderr)
        return EXIT_CONFIG
    code, text = asyncio.run(run_schema_command(url, args.db_command))
    print(text, file=sys.stdout if code == 0 else sys.stderr)
    return code


def _copy(source: str, target: str) -> int:
    for flag, url in (("--from", source), ("--to", target)):
        try:
            make_url(url)
        except Exception as error:  # a URL that does not parse
            print(f"config error: {flag}: {error}", file=sys.stderr)
            return EXIT_CONFIG
    code, text = asyncio.run(run_copy_command(source, target, lambda line: print(line, flush=True)))
    print(text, file=sys.stdout if code == 0 else sys.stderr)
    return code
