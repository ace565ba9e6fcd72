"""Storage: the SQLite file is the source of truth (schema in ``migrations/``)."""

from mindfile.storage.db import Database, utcnow
from mindfile.storage.migrations import apply_migrations, schema_version

__all__ = ["Database", "apply_migrations", "schema_version", "utcnow"]
