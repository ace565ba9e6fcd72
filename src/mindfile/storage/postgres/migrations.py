"""The Postgres backend's numbered, append-only, hash-checked migrations.

Files live in ``mindfile/storage/postgres/migrations/NNNN_name.sql``; the rules are
SQLite's (:mod:`mindfile.storage.migrations`, whose loader and checks this module
shares): each file applied once, in order, in its own transaction, recorded in
``memory_migrations`` with its SHA-256; an edited applied migration or a schema newer
than this Mindfile is a :class:`~mindfile.errors.SchemaError` before anything changes.

Several processes (on several hosts) may open a new database at once: every step holds
a transaction-scoped advisory lock, so exactly one of them applies each migration and
the others see it recorded.
"""

from __future__ import annotations

from mindfile.errors import SchemaError
from mindfile.storage.db import utcnow
from mindfile.storage.migrations import Migration, load_migrations, verify_applied
from mindfile.storage.postgres.db import PgDatabase

__all__ = ["apply_pg_migrations", "check_pg_migrations", "load_pg_migrations", "pg_schema_version"]

PACKAGE = "mindfile.storage.postgres"

# Any fixed 64-bit key: "mindfile" in ASCII.
_LOCK = "SELECT pg_advisory_xact_lock(7595444394858048869)"

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS memory_migrations (
    version    integer PRIMARY KEY,
    name       text COLLATE "C" NOT NULL,
    sha256     text COLLATE "C" NOT NULL,
    applied_at text COLLATE "C" NOT NULL
)
"""

_EXISTS = "SELECT to_regclass('memory_migrations') IS NOT NULL"


def load_pg_migrations() -> list[Migration]:
    """The shipped Postgres migrations, ordered by version."""
    return load_migrations(PACKAGE)


def pg_schema_version(db: PgDatabase) -> int:
    """The highest applied migration version (0 for a new database)."""
    if not db.scalar(_EXISTS):
        return 0
    return int(db.scalar("SELECT coalesce(max(version), 0) FROM memory_migrations"))


def _applied(db: PgDatabase) -> dict[int, tuple[str, str]]:
    rows = db.query("SELECT version, name, sha256 FROM memory_migrations")
    return {int(v): (str(name), str(digest)) for v, name, digest in rows}


def apply_pg_migrations(db: PgDatabase, migrations: list[Migration] | None = None) -> int:
    """Verify applied migrations and apply pending ones; returns the schema version."""
    migrations = load_pg_migrations() if migrations is None else migrations
    with db.atomic():
        db.execute(_LOCK)
        db.execute(_BOOTSTRAP)
        applied = _applied(db)
    verify_applied(applied, migrations)
    pending = [m for m in migrations if m.version not in applied]
    for migration in pending:
        with db.atomic():
            db.execute(_LOCK)
            # Another process may have applied it while we waited for the lock.
            if db.scalar(
                "SELECT 1 FROM memory_migrations WHERE version = %s", (migration.version,)
            ):
                continue
            db.execute(migration.sql)
            db.execute(
                "INSERT INTO memory_migrations (version, name, sha256, applied_at) "
                "VALUES (%s, %s, %s, %s)",
                (migration.version, migration.name, migration.sha256, utcnow()),
            )
    if pending:
        db.refresh_connections()  # pooled connections learn the types just created
    return pg_schema_version(db)


def check_pg_migrations(db: PgDatabase, migrations: list[Migration] | None = None) -> int:
    """Verify without writing: every shipped migration applied, none edited."""
    migrations = load_pg_migrations() if migrations is None else migrations
    if pg_schema_version(db) == 0:
        raise SchemaError(f"{db.display} holds no Mindfile schema", url=db.display)
    applied = _applied(db)
    verify_applied(applied, migrations)
    missing = [m for m in migrations if m.version not in applied]
    if missing:
        raise SchemaError(
            f"{db.display} is at schema version {max(applied)} and needs migration "
            f"{missing[0].version:04d}_{missing[0].name}",
            version=max(applied),
        )
    return pg_schema_version(db)
