"""The schema's Alembic environment and revisions (run by :mod:`runtime.infra.storage.migrations`)."""
