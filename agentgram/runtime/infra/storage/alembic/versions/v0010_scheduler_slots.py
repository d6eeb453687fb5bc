"""Scheduler slots: a cron job's fire time and a tic's slot are each one row.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05

Several instances on one database (issue 27) must run each fire once: the scheduler inserts a
fire's row with ``INSERT … ON CONFLICT DO NOTHING`` and runs it only if its row went in
(:func:`runtime.infra.storage.scheduler_rows.insert_slot`). The keys that decide it:

* ``ux_job_runs_slot``: unique on ``job_runs (job_id, scheduled_for) WHERE scheduled_for IS NOT
  NULL`` (a manual "Run now" has no fire time and stays free);
* ``tic_runs.slot``, new and nullable (the tic's scheduled fire time, UTC), and ``ux_tic_runs_slot``
  unique on it where it is set. Older rows have none: they stand for no slot.

An older database may hold two rows of one fire time (a restart racing its own catch-up, two
processes of an older release): the first keeps the fire time, the later ones lose it (their
``scheduled_for`` becomes ``NULL``, as a manual run's), so no run's history is deleted. Every
statement tolerates what is already there (a database rebuilt by hand from the models). Frozen:
plain SQLAlchemy types, as the models map them, never the models themselves.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

JOB_SLOT = "ux_job_runs_slot"
TIC_SLOT = "ux_tic_runs_slot"

_JOB_RUNS = sa.table(
    "job_runs",
    sa.column("id", sa.Integer()),
    sa.column("job_id", sa.Integer()),
    sa.column("scheduled_for", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    _keep_first_run_of_each_slot()
    op.create_index(
        JOB_SLOT,
        "job_runs",
        ["job_id", "scheduled_for"],
        unique=True,
        sqlite_where=sa.text("scheduled_for IS NOT NULL"),
        postgresql_where=sa.text("scheduled_for IS NOT NULL"),
        if_not_exists=True,
    )
    columns = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("tic_runs")}
    if "slot" not in columns:
        op.add_column("tic_runs", sa.Column("slot", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        TIC_SLOT,
        "tic_runs",
        ["slot"],
        unique=True,
        sqlite_where=sa.text("slot IS NOT NULL"),
        postgresql_where=sa.text("slot IS NOT NULL"),
        if_not_exists=True,
    )


def _keep_first_run_of_each_slot() -> None:
    """A fire time with several rows keeps it on the first (the lowest id); the others become
    manual-like runs (``scheduled_for`` ``NULL``)."""
    slotted = _JOB_RUNS.c.scheduled_for.is_not(None)
    first = (
        sa.select(sa.func.min(_JOB_RUNS.c.id))
        .where(slotted)
        .group_by(_JOB_RUNS.c.job_id, _JOB_RUNS.c.scheduled_for)
    )
    op.execute(sa.update(_JOB_RUNS).where(slotted, _JOB_RUNS.c.id.not_in(first)).values(scheduled_for=None))


def downgrade() -> None:
    op.drop_index(TIC_SLOT, table_name="tic_runs")
    with op.batch_alter_table("tic_runs") as batch:  # SQLite rebuilds the table to drop a column
        batch.drop_column("slot")
    op.drop_index(JOB_SLOT, table_name="job_runs")
