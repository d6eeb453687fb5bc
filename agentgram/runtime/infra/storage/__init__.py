"""Durable state: SQLModel tables, the engine with SQLite's write rules, migrations.

Rows stay inside the runtime; their statuses are ``StrEnum`` columns and their
datetimes UTC-aware, one column type each (:mod:`runtime.storage.types`).
"""
