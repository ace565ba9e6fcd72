"""Numbered, append-only SQL migrations.

Files live in ``mindfile/storage/migrations/NNNN_name.sql``. Each is applied once, in
order, in its own transaction, and recorded in ``memory_migrations`` with its SHA-256.
Opening a database whose recorded hash differs from the shipped file (an applied
migration was edited) or that has versions this Mindfile does not know (a newer Mindfile
wrote it) raises :class:`~mindfile.errors.SchemaError` before anything is touched.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from mindfile.errors import SchemaError
from mindfile.storage.db import Database, utcnow

__all__ = [
    "Migration",
    "apply_migrations",
    "check_migrations",
    "load_migrations",
    "schema_version",
    "verify_applied",
]

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

#: Digests of migrations as first shipped, before the rename to Mindfile (0.1.0). Only
#: their comments changed since; stores that recorded these digests are accepted.
_EARLIER_SHA256: dict[int, frozenset[str]] = {
    1: frozenset({"1b09c0caec849a874e1fee33dcd35ce6f367a5e1f95fa8fa70b282a8ec3d0a56"}),
    6: frozenset({"a33f0450d0a6bf3ccb9f53275faf4e798054bacd13f2342f8c4a0bdc9d1a8bd7"}),
    # 0014's earlier comments (same SQL): chunks classified at write time, then all
    # written unclassified.
    14: frozenset(
        {
            "50864aae836fde7aa568c89479909269fa5f7bcab5f44a59da96ae5e78716563",
            "aeb3297c4a6cd7af8332e2ec4366e7b12e66c834412b22c080d0f021b44b38f4",
        }
    ),
}

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS memory_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    sql: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(package: str = "mindfile.storage") -> list[Migration]:
    """The shipped migrations, ordered by version (versions must be 1..N without gaps).

    ``package`` holds them in its ``migrations`` folder: SQLite's by default, the
    Postgres backend's (``mindfile.storage.postgres``) for that backend.
    """
    folder = resources.files(package).joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise SchemaError(f"migration numbering has a gap or duplicate at {migration.name}")
    return found


def schema_version(db: Database) -> int:
    """The highest applied migration version (0 for a new database)."""
    exists = db.scalar(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='memory_migrations'"
    )
    if not exists:
        return 0
    return int(db.scalar("SELECT coalesce(max(version), 0) FROM memory_migrations"))


def apply_migrations(db: Database, migrations: list[Migration] | None = None) -> int:
    """Verify applied migrations and apply pending ones; returns the schema version."""
    migrations = load_migrations() if migrations is None else migrations
    with db.atomic():
        db.execute(_BOOTSTRAP)
        applied = _applied(db)
    verify_applied(applied, migrations)
    for migration in migrations:
        if migration.version in applied:
            continue
        with db.atomic():
            # Another process may have applied it while we waited for the write lock.
            if db.scalar("SELECT 1 FROM memory_migrations WHERE version = ?", (migration.version,)):
                continue
            db.execute(migration.sql)
            db.execute(
                "INSERT INTO memory_migrations (version, name, sha256, applied_at) "
                "VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.sha256, utcnow()),
            )
    return schema_version(db)


def check_migrations(db: Database, migrations: list[Migration] | None = None) -> int:
    """Verify a store opened read-only: every shipped migration applied, none edited.

    Writes nothing. A store that needs migrating (written by an older Mindfile), or a
    file that is not a Mindfile store at all, is a :class:`SchemaError`.
    """
    migrations = load_migrations() if migrations is None else migrations
    if schema_version(db) == 0:
        raise SchemaError(f"{db.path!r} is not a Mindfile store (no schema)", path=db.path)
    applied = _applied(db)
    verify_applied(applied, migrations)
    missing = [m for m in migrations if m.version not in applied]
    if missing:
        raise SchemaError(
            f"this store is at schema version {max(applied)} and needs migration "
            f"{missing[0].version:04d}_{missing[0].name}; open it once without "
            "read_only=True to upgrade it",
            version=max(applied),
        )
    return schema_version(db)


def _applied(db: Database) -> dict[int, tuple[str, str]]:
    return {
        int(v): (str(name), str(digest))
        for v, name, digest in db.query("SELECT version, name, sha256 FROM memory_migrations")
    }


def verify_applied(applied: dict[int, tuple[str, str]], migrations: list[Migration]) -> None:
    """Refuse a database whose applied migrations (version -> name, digest) were edited
    or are newer than ``migrations`` (:class:`SchemaError`). Shared by both backends."""
    known = {m.version: m for m in migrations}
    for version, (name, digest) in sorted(applied.items()):
        if version not in known:
            raise SchemaError(
                f"database has schema version {max(applied)} but this Mindfile knows only up to "
                f"{max(known, default=0)}: upgrade mindfile",
                version=max(applied),
            )
        if digest != known[version].sha256 and digest not in _EARLIER_SHA256.get(version, ()):
            raise SchemaError(
                f"applied migration {version:04d}_{name} was edited after it was applied; "
                "migrations are append-only",
                version=version,
            )
