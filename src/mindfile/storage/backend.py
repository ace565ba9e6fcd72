"""Which backend a database is, and the read path's stores for it.

The engine holds one database: SQLite's :class:`~mindfile.storage.db.Database` or
Postgres's :class:`~mindfile.storage.postgres.db.PgDatabase` (``mindfile.open`` with a
``postgresql://`` URL). The write path reaches its tables through the
:class:`~mindfile.storage.stores.Stores` bundle built once for that backend; the read
path (``retrieve/``, ``context/``) and a few helpers build the stores they read
themselves, over the database they are given. They do it here, so the backend is
decided in one place: a ``Database`` gets the SQLite store, anything else the Postgres
twin. The Postgres modules are imported only for a Postgres database, so the SQLite
engine never imports psycopg (tests/postgres/test_pg_optional.py).

The derived indexes' source and the full-text store have their own dispatchers
(:func:`mindfile.storage.index_source.index_source`,
:func:`mindfile.storage.fulltext.full_text`); the vector index is chosen by
:func:`mindfile.vector.make_index`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, TypeAlias, Union

from mindfile.errors import ConfigError
from mindfile.storage.db import POSTGRES_SCHEMES, Database

if TYPE_CHECKING:
    from collections.abc import Callable

    from mindfile.scheduler.protocol import SchedulerStore
    from mindfile.storage.events import EventStore
    from mindfile.storage.files import FilesStore
    from mindfile.storage.lifecycle import LifecycleStore
    from mindfile.storage.meta import MetaStore
    from mindfile.storage.postgres.db import PgDatabase
    from mindfile.storage.recall import RecallStore
    from mindfile.storage.search import SearchStore
    from mindfile.storage.stores import Stores

__all__ = [
    "FILE_VECTOR_INDEXES",
    "AnyDatabase",
    "check_postgres_options",
    "event_store",
    "files_store",
    "is_postgres",
    "is_postgres_url",
    "lifecycle_store",
    "meta_store",
    "open_postgres",
    "recall_store",
    "scheduler_store",
    "search_store",
]

#: The engine's database: SQLite's or Postgres's.
AnyDatabase: TypeAlias = Union[Database, "PgDatabase"]


def is_postgres(db: object) -> bool:
    """Whether ``db`` is a Postgres database (without importing the Postgres modules)."""
    return not isinstance(db, Database) and type(db).__module__.startswith(
        "mindfile.storage.postgres"
    )


def is_postgres_url(locator: object) -> bool:
    """Whether ``locator`` names a Postgres store (``postgresql://`` / ``postgres://``)."""
    if not isinstance(locator, str):
        return False
    scheme, sep, _ = locator.partition("://")
    return bool(sep) and scheme.lower() in POSTGRES_SCHEMES


#: Vector indexes kept in (or next to) a store file: SQLite only.
FILE_VECTOR_INDEXES = ("sqlite-vec", "zvec", "lancedb")


def check_postgres_options(vector_index: str, durability: str) -> None:
    """Options that only make sense for a store file: a :class:`ConfigError` on Postgres."""
    if durability != "normal":
        raise ConfigError(
            "durability is the SQLite file's fsync setting; a Postgres store is as durable "
            "as its server makes commits (synchronous_commit, docs/postgres.md)"
        )
    if vector_index in FILE_VECTOR_INDEXES:
        raise ConfigError(
            f"vector_index={vector_index!r} keeps its index in or next to a SQLite store "
            "file; a Postgres store uses 'auto' (pgvector, docs/postgres.md)",
            vector_index=vector_index,
        )


def open_postgres(url: str, read_only: bool) -> tuple[PgDatabase, Stores, Callable[[], int]]:
    """A Postgres store: its database (a connection pool), stores and migration step
    (read-only: every transaction ``READ ONLY``, the schema checked, never changed)."""
    try:
        from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
        from mindfile.storage.postgres.migrations import check_pg_migrations
        from mindfile.storage.postgres.stores import pg_stores
    except ImportError as exc:
        raise ConfigError(
            'a Postgres store needs the postgres extra: pip install "mindfile[postgres]" '
            f"({exc.name} is missing)"
        ) from None
    db = PgDatabase(url, readonly=read_only)
    migrate = check_pg_migrations if read_only else apply_pg_migrations
    return db, pg_stores(db), functools.partial(migrate, db)


def search_store(db: AnyDatabase) -> SearchStore:
    """The search store (:mod:`mindfile.storage.search`) over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.search import SqliteSearchStore

        return SqliteSearchStore(db)
    from mindfile.storage.postgres.read_stores import PgSearchStore

    return PgSearchStore(db)


def recall_store(db: AnyDatabase) -> RecallStore:
    """The recall store (:mod:`mindfile.storage.recall`) over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.recall import SqliteRecallStore

        return SqliteRecallStore(db)
    from mindfile.storage.postgres.read_stores import PgRecallStore

    return PgRecallStore(db)


def lifecycle_store(db: AnyDatabase) -> LifecycleStore:
    """The lifecycle store (expired chunks) over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.lifecycle import SqliteLifecycleStore

        return SqliteLifecycleStore(db)
    from mindfile.storage.postgres.manage_stores import PgLifecycleStore

    return PgLifecycleStore(db)


def meta_store(db: AnyDatabase) -> MetaStore:
    """The ``store_meta`` store over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.meta import SqliteMetaStore

        return SqliteMetaStore(db)
    from mindfile.storage.postgres.admin_stores import PgMetaStore

    return PgMetaStore(db)


def event_store(db: AnyDatabase) -> EventStore:
    """The event store over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.events import SqliteEventStore

        return SqliteEventStore(db)
    from mindfile.storage.postgres.memory_stores import PgEventStore

    return PgEventStore(db)


def scheduler_store(db: AnyDatabase) -> SchedulerStore:
    """The scheduler store (:mod:`mindfile.scheduler`) over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.schedules import SqliteSchedulerStore

        return SqliteSchedulerStore(db)
    from mindfile.storage.postgres.scheduler import PgSchedulerStore

    return PgSchedulerStore(db)


def files_store(db: AnyDatabase) -> FilesStore:
    """The files store (synced folders, :mod:`mindfile.files`) over ``db``."""
    if isinstance(db, Database):
        from mindfile.storage.files import SqliteFilesStore

        return SqliteFilesStore(db)
    from mindfile.storage.postgres.files import PgFilesStore

    return PgFilesStore(db)
