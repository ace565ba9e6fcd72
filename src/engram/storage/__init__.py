"""Storage: the SQLite file is the source of truth (schema in ``migrations/``)."""

from engram.storage.db import Database, utcnow
from engram.storage.migrations import apply_migrations, schema_version

__all__ = ["Database", "apply_migrations", "schema_version", "utcnow"]
