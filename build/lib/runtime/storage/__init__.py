"""Durable state: SQLModel tables, the engine with SQLite's write rules, migrations."""
