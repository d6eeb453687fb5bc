"""Alembic's environment: run on the connection :mod:`runtime.infra.storage.migrations` hands over.

There is no ``alembic.ini`` and no URL here: the runner opens the database (with its pragmas, its
write transaction and, on PostgreSQL, its advisory lock), puts the connection in
``config.attributes["connection"]`` and calls Alembic's commands, which load this file. Offline
(``--sql``) mode is not offered. ``render_as_batch`` makes ``alembic revision --autogenerate``
write SQLite-safe batch operations; a revision written by hand uses ``op.batch_alter_table`` for
any ALTER SQLite cannot do in place.
"""

from __future__ import annotations

from alembic import context

from agentgram.runtime.infra.storage.migrations import compare_type, include_name, target_metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through agentgram (agentgram db upgrade), not the alembic CLI")
context.configure(
    connection=connection,
    target_metadata=target_metadata(),
    render_as_batch=True,
    include_name=include_name,
    compare_type=compare_type,
)
with context.begin_transaction():
    context.run_migrations()
