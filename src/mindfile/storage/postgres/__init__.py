"""The Postgres backend of the storage seam (extra ``[postgres]``; docs/postgres.md).

Imported only when a Postgres URL is used: nothing else in Mindfile imports psycopg.
"""

from __future__ import annotations

from mindfile.storage.postgres.db import PgDatabase, redact
from mindfile.storage.postgres.migrations import apply_pg_migrations, pg_schema_version

__all__ = ["PgDatabase", "apply_pg_migrations", "pg_schema_version", "redact"]
