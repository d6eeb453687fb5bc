"""Baseline: the schema of version 5, the last of the steps before Alembic.

Revision ID: 0005
Revises:
Create Date: 2026-12-02

On an empty database it creates every table, index and (SQLite) the FTS5 index over
``chat_history``. A database made before Alembic reaches here after its old steps
(:mod:`runtime.infra.storage.legacy_migrations`) brought its tables to version 5; only the
tables the old ``create_all`` used to add are still missing, so each table is created only
if it is missing. Frozen: plain SQLAlchemy types (``String``, ``DateTime(timezone=True)``,
``JSON``) exactly as the models map them, never the models themselves.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

SEARCH_INDEX = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS chat_history_fts USING fts5("
    "content, content='chat_history', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS chat_history_fts_insert AFTER INSERT ON chat_history BEGIN "
    "INSERT INTO chat_history_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS chat_history_fts_delete AFTER DELETE ON chat_history BEGIN "
    "INSERT INTO chat_history_fts(chat_history_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER IF NOT EXISTS chat_history_fts_update AFTER UPDATE OF content ON chat_history BEGIN "
    "INSERT INTO chat_history_fts(chat_history_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO chat_history_fts(rowid, content) VALUES (new.id, new.content); END",
)
"""SQLite's full-text index over ``chat_history`` (as schema step 4 made it), kept in step by triggers."""


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    _tables(existing)
    if op.get_bind().dialect.name == "sqlite" and "chat_history_fts" not in existing:
        for statement in SEARCH_INDEX:
            op.execute(statement)
        op.execute("INSERT INTO chat_history_fts(chat_history_fts) VALUES ('rebuild')")


def _tables(existing: set[str]) -> None:
    if "approval_rules" not in existing:
        op.create_table(
            "approval_rules",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("tool", sa.String(), nullable=False),
            sa.Column("path", sa.String(), nullable=True),
            sa.Column("action", sa.String(), nullable=False),
            sa.Column("priority", sa.Integer(), nullable=False),
            sa.Column("source", sa.String(), nullable=True),
            sa.Column("note", sa.String(), nullable=True),
            sa.Column("origin", sa.String(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
    if "dead_letters" not in existing:
        op.create_table(
            "dead_letters",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("source", sa.String(), nullable=False),
            sa.Column("ref", sa.String(), nullable=False),
            sa.Column("error", sa.String(), nullable=False),
            sa.Column("payload", sa.String(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
    if "kv_state" not in existing:
        op.create_table(
            "kv_state",
            sa.Column("key", sa.String(), nullable=False),
            sa.Column("value", sa.String(), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("key"),
        )
    if "mcp_grants" not in existing:
        op.create_table(
            "mcp_grants",
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("frame", sa.Integer(), nullable=False),
            sa.Column("server", sa.String(), nullable=False),
            sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("session_id", "frame", "server"),
        )
    if "outbox" not in existing:
        op.create_table(
            "outbox",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("source", sa.String(), nullable=False),
            sa.Column("chat_id", sa.Integer(), nullable=False),
            sa.Column("language", sa.String(), nullable=True),
            sa.Column("kind", sa.String(), nullable=False),
            sa.Column("payload", sa.JSON(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_outbox_undelivered", "outbox", ["delivered_at", "id"], unique=False)
    if "scheduled_jobs" not in existing:
        op.create_table(
            "scheduled_jobs",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("title", sa.String(), nullable=False),
            sa.Column("schedule", sa.String(), nullable=False),
            sa.Column("kind", sa.String(), nullable=False),
            sa.Column("timezone", sa.String(), nullable=False),
            sa.Column("prompt", sa.String(), nullable=False),
            sa.Column("chat_id", sa.Integer(), nullable=False),
            sa.Column("enabled", sa.Boolean(), nullable=False),
            sa.Column("approvals", sa.String(), nullable=False),
            sa.Column("anchor_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("last_fire_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("running_session_id", sa.Integer(), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_scheduled_jobs_due", "scheduled_jobs", ["enabled", "next_run_at"], unique=False)
    if "session_models" not in existing:
        op.create_table(
            "session_models",
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("name", sa.String(), nullable=False),
            sa.Column("chosen_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("session_id"),
        )
    if "sessions" not in existing:
        op.create_table(
            "sessions",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("source", sa.String(), nullable=False),
            sa.Column("chat_id", sa.Integer(), nullable=True),
            sa.Column("user_id", sa.Integer(), nullable=True),
            sa.Column("agent_id", sa.String(), nullable=False),
            sa.Column("is_interactive", sa.Boolean(), nullable=False),
            sa.Column("is_ephemeral", sa.Boolean(), nullable=False),
            sa.Column("auto_deny_approvals", sa.Boolean(), nullable=False),
            sa.Column("language_code", sa.String(), nullable=True),
            sa.Column("active", sa.Boolean(), nullable=False),
            sa.Column("mail_cursor", sa.Integer(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_sessions_chat_active", "sessions", ["source", "chat_id", "active"], unique=False)
    if "tic_runs" not in existing:
        op.create_table(
            "tic_runs",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("reason", sa.String(), nullable=True),
            sa.Column("delivered", sa.Boolean(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=True),
            sa.PrimaryKeyConstraint("id"),
        )
    if "tic_state" not in existing:
        op.create_table(
            "tic_state",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("enabled", sa.Boolean(), nullable=True),
            sa.Column("interval_seconds", sa.Float(), nullable=True),
            sa.Column("cron", sa.String(), nullable=True),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
    if "chat_history" not in existing:
        op.create_table(
            "chat_history",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("stack_id", sa.Integer(), nullable=True),
            sa.Column("turn_id", sa.Integer(), nullable=True),
            sa.Column("role", sa.String(), nullable=False),
            sa.Column("content", sa.String(), nullable=False),
            sa.Column("reasoning", sa.String(), nullable=True),
            sa.Column("is_synthetic", sa.Boolean(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("metadata", sa.JSON(), nullable=False),
            sa.Column("mail_seq", sa.Integer(), nullable=True),
            sa.Column("model", sa.String(), nullable=True),
            sa.Column("input_tokens", sa.Integer(), nullable=False),
            sa.Column("output_tokens", sa.Integer(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_history_session_id", "chat_history", ["session_id", "id"], unique=False)
    if "history_summaries" not in existing:
        op.create_table(
            "history_summaries",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("covers_through", sa.Integer(), nullable=False),
            sa.Column("made_after", sa.Integer(), nullable=False),
            sa.Column("covered_rows", sa.Integer(), nullable=False),
            sa.Column("covers_until", sa.DateTime(timezone=True), nullable=False),
            sa.Column("content", sa.String(), nullable=False),
            sa.Column("model", sa.String(), nullable=True),
            sa.Column("input_tokens", sa.Integer(), nullable=False),
            sa.Column("output_tokens", sa.Integer(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index(
            "ix_history_summaries_session", "history_summaries", ["session_id", "id"], unique=False
        )
    if "job_runs" not in existing:
        op.create_table(
            "job_runs",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("job_id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=True),
            sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=True),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("duration_ms", sa.Integer(), nullable=True),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("final_response", sa.String(), nullable=True),
            sa.Column("error", sa.String(), nullable=True),
            sa.ForeignKeyConstraint(
                ["job_id"],
                ["scheduled_jobs.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_job_runs_job", "job_runs", ["job_id", "id"], unique=False)
        op.create_index("ix_job_runs_status", "job_runs", ["status"], unique=False)
    if "prepared_mail" not in existing:
        op.create_table(
            "prepared_mail",
            sa.Column("envelope_id", sa.String(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("attachments", sa.JSON(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("envelope_id"),
        )
        op.create_index("ix_prepared_mail_session_id", "prepared_mail", ["session_id"], unique=False)
    if "questions" not in existing:
        op.create_table(
            "questions",
            sa.Column("id", sa.String(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("tool_call_id", sa.Integer(), nullable=False),
            sa.Column("question", sa.String(), nullable=False),
            sa.Column("options", sa.JSON(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("answer", sa.String(), nullable=True),
            sa.Column("chat_id", sa.Integer(), nullable=True),
            sa.Column("message_id", sa.Integer(), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_questions_session_id", "questions", ["session_id"], unique=False)
        op.create_index("ix_questions_status", "questions", ["status"], unique=False)
        op.create_index("ix_questions_tool_call_id", "questions", ["tool_call_id"], unique=False)
    if "session_mail" not in existing:
        op.create_table(
            "session_mail",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("envelope_id", sa.String(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("seq", sa.Integer(), nullable=False),
            sa.Column("sender_kind", sa.String(), nullable=False),
            sa.Column("sender_ref", sa.String(), nullable=True),
            sa.Column("priority", sa.String(), nullable=False),
            sa.Column("hops", sa.Integer(), nullable=False),
            sa.Column("kind", sa.String(), nullable=False),
            sa.Column("body", sa.JSON(), nullable=False),
            sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("envelope_id"),
            sa.UniqueConstraint("session_id", "seq"),
        )
    if "session_scratchpad" not in existing:
        op.create_table(
            "session_scratchpad",
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("key", sa.String(), nullable=False),
            sa.Column("value", sa.String(), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("session_id", "key"),
        )
    if "session_todos" not in existing:
        op.create_table(
            "session_todos",
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("items", sa.JSON(), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("session_id"),
        )
    if "stack_frames" not in existing:
        op.create_table(
            "stack_frames",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("parent_tool_call_id", sa.Integer(), nullable=True),
            sa.Column("depth", sa.Integer(), nullable=False),
            sa.Column("agent_id", sa.String(), nullable=False),
            sa.Column("active", sa.Boolean(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_stack_frames_session_id", "stack_frames", ["session_id"], unique=False)
    if "turns" not in existing:
        op.create_table(
            "turns",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("rounds", sa.Integer(), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("error", sa.String(), nullable=True),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_turns_session_id", "turns", ["session_id"], unique=False)
        op.create_index("ix_turns_status", "turns", ["status"], unique=False)
    if "tool_calls" not in existing:
        op.create_table(
            "tool_calls",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("history_id", sa.Integer(), nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("call_id", sa.String(), nullable=False),
            sa.Column("name", sa.String(), nullable=False),
            sa.Column("arguments", sa.String(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("result", sa.String(), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("wrappers", sa.String(), nullable=True),
            sa.ForeignKeyConstraint(
                ["history_id"],
                ["chat_history.id"],
            ),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_tool_calls_history", "tool_calls", ["history_id", "position"], unique=False)
        op.create_index("ix_tool_calls_session_id", "tool_calls", ["session_id"], unique=False)
        op.create_index("ix_tool_calls_status", "tool_calls", ["status"], unique=False)
    if "approval_requests" not in existing:
        op.create_table(
            "approval_requests",
            sa.Column("id", sa.String(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("tool_call_id", sa.Integer(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("reason", sa.String(), nullable=True),
            sa.Column("chat_id", sa.Integer(), nullable=True),
            sa.Column("message_id", sa.Integer(), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.ForeignKeyConstraint(
                ["tool_call_id"],
                ["tool_calls.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_approval_requests_session_id", "approval_requests", ["session_id"], unique=False)
        op.create_index("ix_approval_requests_status", "approval_requests", ["status"], unique=False)
        op.create_index(
            "ix_approval_requests_tool_call_id", "approval_requests", ["tool_call_id"], unique=False
        )
    if "background_calls" not in existing:
        op.create_table(
            "background_calls",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("tool_call_id", sa.Integer(), nullable=False),
            sa.Column("session_id", sa.Integer(), nullable=False),
            sa.Column("call_id", sa.String(), nullable=False),
            sa.Column("name", sa.String(), nullable=False),
            sa.Column("summary", sa.String(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("detached", sa.Boolean(), nullable=False),
            sa.Column("read_by_tool", sa.Boolean(), nullable=False),
            sa.Column("result", sa.String(), nullable=True),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("detached_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
            ),
            sa.ForeignKeyConstraint(
                ["tool_call_id"],
                ["tool_calls.id"],
            ),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_background_calls_session_id", "background_calls", ["session_id"], unique=False)
        op.create_index("ix_background_calls_status", "background_calls", ["status"], unique=False)
        op.create_index(
            "ix_background_calls_tool_call_id", "background_calls", ["tool_call_id"], unique=False
        )


def downgrade() -> None:
    raise NotImplementedError("the baseline is not undone: restore a backup instead")
