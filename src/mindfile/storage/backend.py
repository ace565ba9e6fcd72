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

from typing import TYPE_CHECKING, TypeAlias, Union

from mindfile.storage.db import POSTGRES_SCHEMES, Database

if TYPE_CHECKING:
    from mindfile.scheduler.protocol import SchedulerStore
    from mindfile.storage.events import EventStore
    from mindfile.storage.files import FilesStore
    from mindfile.storage.lifecycle import LifecycleStore
    from mindfile.storage.meta import MetaStore
    from mindfile.storage.postgres.db import PgDatabase
    from mindfile.storage.recall import RecallStore
    from mindfile.storage.search import SearchStore

__all__ = [
    "AnyDatabase",
    "event_store",
    "files_store",
    "is_postgres",
    "is_postgres_url",
    "lifecycle_store",
    "meta_store",
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
