"""Copy a whole store between backends: SQLite <-> Postgres (issue 13, ``migrate-store``).

:func:`migrate_store` copies every table of a source store into an **empty**
destination store of the other backend (or the same one), preserving every id, and
verifies the copy before it commits. A store is named by a SQLite path or a
``postgresql://`` / ``postgres://`` URL. docs/postgres.md, "Moving a store:
migrate-store", is the user's view.

**What is copied**, in foreign-key order (:data:`TABLES`): ``sessions``,
``conversation_events``, ``session_state``, ``files``, ``chunks``, ``chunks_vec``,
``event_chunks``, ``notes``, ``facts``, ``fact_history``, ``quotas``,
``consolidations``, ``memory_jobs``, ``schedules``, ``schedule_runs``,
``llm_failures``, ``embedding_cache``, and the settings in ``store_meta``.

* Ids are kept: explicit values into ``AUTOINCREMENT`` / identity columns (Postgres
  loads batches with ``COPY``, which keeps given values even for ``GENERATED ALWAYS``
  columns, like ``INSERT ... OVERRIDING SYSTEM VALUE``). SQLite's implicit ``rowid`` of
  ``sessions`` and ``schedule_runs`` (the tie-break of listings) is Postgres's explicit
  ``rowid`` column and back. Afterwards every id counter
  (``sqlite_sequence``, Postgres sequences) is raised to the highest id the source ever
  handed out (deleted ones too, so ids are never reused), or the highest copied.
* Vectors: SQLite's little-endian float32 ``embedding_blob`` <-> pgvector's
  ``embedding``, dimensions kept, values bit for bit (both are float32).
* ``event_chunks``: inserting a chunk fires the destination's linking trigger
  (``event_chunks_ai`` / ``mindfile_link_chunk``), which links it to the event at its
  ``sequence_start``; the source's links also hold what consolidation and dedup added
  (and lack what they removed). So the trigger's rows are deleted once the chunks are
  in, and the source's links copied exactly.
* ``store_meta``: the settings (the model, ``embedding_model`` / ``embedding_dims``, so
  the copy reopens with the same embedder; the decay policy; any other key), **not**
  the keys of the source's derived state (:data:`DERIVED_META`): ``ann_store_id`` (the
  destination gets a fresh one, so no index folder built for another store is ever
  served for it), ``purge_pending``, the sqlite-vec table's bookkeeping, and a running
  re-embedding's claim (its owner is a process of the source; run ``reembed`` again on
  the copy, its staged vectors are in the copied embedding cache).

**What is not copied**, all derived and rebuilt by the destination: the change logs
``chunks_changes`` and ``chunks_vec_changes`` (emptied on the destination once the copy
is in, so its derived indexes start from scratch), SQLite's FTS5 table ``chunks_fts``
and its shadow tables (filled by the destination's triggers as chunks arrive), the
sqlite-vec table ``chunks_vec_index`` and its shadow tables, Postgres's generated
``chunks.search_tsv`` (computed on insert), ``sqlite_sequence`` (see ids above), and
the migration bookkeeping ``memory_migrations`` (each side has its own schema).
Derived index folders next to a SQLite file are not copied either.

**Transactions.** The source is read in one consistent snapshot (``snapshot()``) and
the whole copy is **one** destination transaction: the emptiness check, every batch,
the counters and the verification commit together or not at all, so a failure leaves
the destination as empty as it was. Rows move in batches (``batch_size``) so memory
stays bounded. The destination is locked against other writers for the whole copy
(SQLite's ``BEGIN IMMEDIATE``; on Postgres the chunk writers' lock, then ``LOCK TABLE
... IN EXCLUSIVE MODE`` on the copied tables; readers are not blocked), so "empty"
stays true until the commit: the price of one transaction, and what a one-off move
wants. Both schemas are made current first (``apply_migrations`` /
``apply_pg_migrations``): the source is upgraded in place as ``mindfile.open`` would.

**Verification**, before commit: per table, the destination's row count equals the
source's, and an order-independent checksum of the primary keys read back from the
destination equals the source's; otherwise :class:`TransferVerifyError` and the copy
is rolled back.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from mindfile.errors import (
    BackendUnavailableError,
    ConfigError,
    ConflictError,
    InvalidInputError,
    MindfileError,
    NotFoundError,
    StorageError,
)
from mindfile.storage.backend import AnyDatabase, is_postgres_url
from mindfile.storage.db import Database, Row
from mindfile.storage.index_source import STORE_ID_KEY
from mindfile.storage.migrations import apply_migrations, schema_version

if TYPE_CHECKING:
    from mindfile.storage.postgres.db import PgDatabase

from mindfile.storage.transfer_tables import (
    CHANGE_LOGS,
    DERIVED_COLUMNS,
    DERIVED_META,
    SKIPPED,
    TABLES,
    VECTOR,
    Table,
)

__all__ = [
    "CHANGE_LOGS",
    "DERIVED_COLUMNS",
    "DERIVED_META",
    "SKIPPED",
    "TABLES",
    "Table",
    "TableCount",
    "TransferReport",
    "TransferVerifyError",
    "is_postgres_url",
    "migrate_store",
]

#: Rows per batch unless told otherwise.
DEFAULT_BATCH_SIZE = 1000

#: ``progress(table, rows_done, rows_total)``, called before a table's first batch and
#: after each batch.
Progress = Callable[[str, int, int], None]


class TransferVerifyError(StorageError):
    """The copy's row counts or key checksums differ from the source's; nothing was
    committed. ``details``: ``table``, ``source_rows``, ``destination_rows``."""

    code = "transfer_verify"


# -- the report ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableCount:
    """One table's rows in the source and, after the copy, in the destination."""

    table: str
    source_rows: int
    destination_rows: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "source_rows": self.source_rows,
            "destination_rows": self.destination_rows,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class TransferReport:
    """What :func:`migrate_store` copied: per-table counts (verified equal), the time."""

    source: str
    destination: str
    source_backend: str
    destination_backend: str
    tables: tuple[TableCount, ...]
    seconds: float
    skipped: dict[str, str] = field(default_factory=lambda: dict(SKIPPED))

    @property
    def rows(self) -> int:
        """Rows copied, over every table."""
        return sum(t.destination_rows for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "source_backend": self.source_backend,
            "destination_backend": self.destination_backend,
            "tables": [t.to_dict() for t in self.tables],
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "skipped": dict(self.skipped),
        }


# -- the two backends ------------------------------------------------------------------


class _Side(Protocol):
    """One store, as the copy reads and writes it. SQL is written with ``?``."""

    backend: str
    display: str

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def write_batch(self, table: Table, rows: list[Row]) -> None: ...

    def counter_high(self, table: Table) -> int: ...

    def raise_counter(self, table: Table, value: int) -> None: ...

    def column(self, name: str) -> str: ...

    def read_vector(self, value: Any) -> bytes: ...

    def lock_for_copy(self) -> None: ...

    def snapshot(self) -> contextlib.AbstractContextManager[Any]: ...

    def atomic(self) -> contextlib.AbstractContextManager[Any]: ...

    def close(self) -> None: ...


def _insert_sql(side: _Side, table: Table) -> str:
    names = ", ".join(side.column(c) for c in table.columns)
    values = ", ".join("?" for _ in table.columns)
    return f"INSERT INTO {table.name} ({names}) VALUES ({values})"


def _vector_position(table: Table) -> int | None:
    return table.columns.index(VECTOR) if VECTOR in table.columns else None


class _DbSide:
    """What both sides do through their database alone."""

    db: AnyDatabase

    def snapshot(self) -> contextlib.AbstractContextManager[Any]:
        return self.db.snapshot()

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        return self.db.atomic()

    def close(self) -> None:
        self.db.close()


class _SqliteSide(_DbSide):
    backend = "sqlite"
    db: Database

    def __init__(self, path: str, *, source: bool) -> None:
        self.display = path
        self.db = Database(path)
        try:
            if source and schema_version(self.db) == 0:
                raise NotFoundError(f"{path!r} holds no memory store (no schema)", path=path)
            apply_migrations(self.db)
        except BaseException:
            self.db.close()
            raise

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self.db.query(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.db.execute(sql, params)

    def column(self, name: str) -> str:
        return "embedding_blob" if name == VECTOR else name

    def read_vector(self, value: Any) -> bytes:
        return bytes(value)

    def write_batch(self, table: Table, rows: list[Row]) -> None:
        self.db.executemany(_insert_sql(self, table), rows)

    def counter_high(self, table: Table) -> int:
        if table.rowid:  # a plain rowid: no counter beyond the rows themselves
            return 0
        seq = self.db.scalar("SELECT seq FROM sqlite_sequence WHERE name = ?", (table.name,))
        return int(seq or 0)

    def raise_counter(self, table: Table, value: int) -> None:
        if table.rowid or value <= 0:
            return  # SQLite hands out max(rowid) + 1 by itself
        # Explicit ids already moved the table's row in sqlite_sequence to the highest
        # inserted; a source that handed out higher ids (since deleted) raises it further.
        self.db.execute(
            "UPDATE sqlite_sequence SET seq = ?1 WHERE name = ?2 AND seq < ?1", (value, table.name)
        )
        if self.db.scalar("SELECT 1 FROM sqlite_sequence WHERE name = ?", (table.name,)) is None:
            self.db.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table.name, value)
            )

    def lock_for_copy(self) -> None:
        pass  # atomic() began with BEGIN IMMEDIATE: no other writer until it ends


class _PgSide(_DbSide):
    backend = "postgres"
    db: PgDatabase

    def __init__(self, url: str, *, source: bool) -> None:
        try:
            from mindfile.storage.postgres import (
                PgDatabase,
                apply_pg_migrations,
                pg_schema_version,
            )
        except ImportError as exc:
            raise BackendUnavailableError(
                "a postgresql:// store needs the Postgres extra: pip install 'mindfile[postgres]'"
            ) from exc
        self.db = PgDatabase(url, min_size=1, max_size=2)
        self.display = self.db.display
        try:
            if source and pg_schema_version(self.db) == 0:
                raise NotFoundError(
                    f"{self.display} holds no memory store (no schema)", url=self.display
                )
            apply_pg_migrations(self.db)
        except BaseException:
            self.db.close()
            raise

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("?", "%s")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        # Binary results: vectors arrive as float32 arrays, not text to parse.
        return self.db.query(self._sql(sql), tuple(params), binary=True)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.db.execute(self._sql(sql), tuple(params))

    def column(self, name: str) -> str:
        return name

    def read_vector(self, value: Any) -> bytes:
        # pgvector's loader gives its Vector type (numpy inside), older ones an ndarray.
        to_numpy = getattr(value, "to_numpy", None)
        raw = to_numpy() if callable(to_numpy) else value
        return np.asarray(raw, dtype="<f4").tobytes()

    def write_batch(self, table: Table, rows: list[Row]) -> None:
        # COPY: values for identity columns are kept (OVERRIDING SYSTEM VALUE's effect),
        # triggers fire and search_tsv is generated, as for INSERT.
        at = _vector_position(table)
        if at is not None:
            rows = [(*r[:at], _vector_value(r[at], r), *r[at + 1 :]) for r in rows]
        self.db.copy_rows(table.name, [self.column(c) for c in table.columns], rows)

    def counter_high(self, table: Table) -> int:
        if table.counter is None:
            return 0
        value = self.db.scalar(
            "SELECT pg_sequence_last_value(pg_get_serial_sequence(%s, %s)::regclass)",
            (table.name, table.counter),
        )
        return int(value or 0)

    def raise_counter(self, table: Table, value: int) -> None:
        if table.counter is None or value <= 0:
            return
        self.db.execute(
            "SELECT setval(pg_get_serial_sequence(%s, %s)::regclass, %s, true)",
            (table.name, table.counter, value),
        )

    def lock_for_copy(self) -> None:
        from mindfile.storage.postgres.writer_lock import lock_chunk_writes

        # The chunk writers' lock first, as every writer takes it (writer_lock.py: no
        # deadlock with a writer holding it), then SQLite's BEGIN IMMEDIATE for the
        # tables copied into: nobody else writes them (so "empty" stays true) until the
        # copy commits; readers are not blocked.
        lock_chunk_writes(self.db)
        names = ", ".join([*(t.name for t in TABLES), "store_meta", *CHANGE_LOGS])
        self.db.execute(f"LOCK TABLE {names} IN EXCLUSIVE MODE")


def _vector_value(blob: bytes, row: Row) -> Any:
    if len(blob) == 0 or len(blob) % 4:
        raise InvalidInputError(
            f"chunk {row[0]} has a vector of {len(blob)} bytes, not float32 components",
            chunk_rowid=row[0],
        )
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def _open(locator: str, role: str) -> _Side:
    if not isinstance(locator, str) or not locator.strip():
        raise InvalidInputError(f"the {role} store must be a SQLite path or a postgresql:// URL")
    if is_postgres_url(locator):
        return _PgSide(locator, source=role == "source")
    if "://" in locator:
        scheme = locator.split("://", 1)[0]
        raise ConfigError(
            f"the {role} store {scheme}:// is not a backend; give a SQLite path or a "
            "postgresql:// URL",
            scheme=scheme,
        )
    if locator in (":memory:", "") or locator.startswith("file:"):
        raise InvalidInputError(
            f"the {role} store must be a SQLite file path, not {locator!r}", path=locator
        )
    if role == "source" and not Path(locator).expanduser().is_file():
        raise NotFoundError(f"no memory store at {locator!r}", path=locator)
    return _SqliteSide(str(Path(locator).expanduser()), source=role == "source")


def _same_store(source: str, destination: str) -> bool:
    if is_postgres_url(source) or is_postgres_url(destination):
        return source == destination
    return Path(source).expanduser().resolve() == Path(destination).expanduser().resolve()


# -- reading, writing, verifying -------------------------------------------------------


def _pages(side: _Side, table: Table, columns: Sequence[str], batch: int) -> Iterator[list[Row]]:
    """The table's rows (``columns``, starting with its key) in key order, by pages."""
    names = ", ".join(side.column(c) for c in columns)
    order = ", ".join(table.key)
    first = f"SELECT {names} FROM {table.name} ORDER BY {order} LIMIT ?"
    marks = ", ".join("?" for _ in table.key)
    after = f"SELECT {names} FROM {table.name} WHERE ({order}) > ({marks}) ORDER BY {order} LIMIT ?"
    width = len(table.key)
    rows = side.query(first, (batch,))
    while rows:
        yield rows
        if len(rows) < batch:
            return
        rows = side.query(after, (*rows[-1][:width], batch))


def _copy_order(table: Table) -> tuple[str, ...]:
    """The table's columns with its key first (for paging), the rest in order."""
    return (*table.key, *(c for c in table.columns if c not in table.key))


def _key_sum(keys: Sequence[Any]) -> int:
    """One key's contribution to the table's order-independent checksum (a sum mod
    2**64). Python's tuple hash mixes its items (so ``{1, 4}`` and ``{2, 3}`` differ);
    both sides are hashed in this process, so string hash randomisation is harmless."""
    return hash(tuple(keys)) & _MASK


_MASK = 2**64 - 1


def _count(side: _Side, name: str) -> int:
    return int(side.query(f"SELECT count(*) FROM {name}")[0][0])


def _check_empty(dst: _Side, meta_to_copy: dict[str, str]) -> None:
    """:class:`ConflictError` if the destination holds data (settings equal to the
    source's, and derived keys, do not count)."""
    held = [t.name for t in TABLES if dst.query(f"SELECT 1 FROM {t.name} LIMIT 1")]
    meta = {str(k): str(v) for k, v in dst.query("SELECT key, value FROM store_meta")}
    other = sorted(k for k, v in meta.items() if k not in DERIVED_META and meta_to_copy.get(k) != v)
    if held or other:
        what = ", ".join((held + [f"store_meta[{k}]" for k in other])[:8])
        raise ConflictError(
            f"the destination {dst.display} is not empty ({what}); migrate-store copies "
            "into an empty store only, nothing was written",
            destination=dst.display,
            tables=held,
        )


def _copy_table(
    src: _Side, dst: _Side, table: Table, batch: int, progress: Progress | None
) -> TableCount:
    started = time.perf_counter()
    total = _count(src, table.name)
    if progress is not None:
        progress(table.name, 0, total)
    order = _copy_order(table)
    positions = [order.index(c) for c in table.columns]
    vector = order.index(VECTOR) if VECTOR in order else None
    width = len(table.key)
    done = 0
    checksum = 0
    highest = 0
    for page in _pages(src, table, order, batch):
        rows: list[Row] = []
        for row in page:
            if vector is not None:
                row = (*row[:vector], src.read_vector(row[vector]), *row[vector + 1 :])
            rows.append(tuple(row[i] for i in positions))
            checksum = (checksum + _key_sum(row[:width])) & _MASK
        if table.counter is not None:
            at = order.index(table.counter)
            highest = max(highest, max(int(r[at]) for r in page))
        dst.write_batch(table, rows)
        done += len(rows)
        if progress is not None:
            progress(table.name, done, total)
    if done != total:  # the snapshot makes this impossible; never commit a partial copy
        raise TransferVerifyError(
            f"{table.name}: read {done} rows of the source's {total}",
            table=table.name,
            source_rows=total,
            destination_rows=done,
        )
    if table.counter is not None:
        dst.raise_counter(table, max(highest, src.counter_high(table), dst.counter_high(table)))
    _verify(dst, table, total, checksum, batch)
    return TableCount(table.name, total, total, time.perf_counter() - started)


def _verify(dst: _Side, table: Table, rows: int, checksum: int, batch: int) -> None:
    """The destination's rows of ``table``: as many as the source's, the same keys."""
    found = _count(dst, table.name)
    theirs = 0
    for page in _pages(dst, table, table.key, batch):
        for row in page:
            theirs = (theirs + _key_sum(row)) & _MASK
    if found != rows or theirs != checksum:
        what = "row count" if found != rows else "key checksum"
        raise TransferVerifyError(
            f"{table.name}: the destination's {what} differs from the source's "
            f"({found} rows, {rows} in the source); nothing was committed",
            table=table.name,
            source_rows=rows,
            destination_rows=found,
        )


def _in_table(name: str, step: Callable[..., TableCount], *args: Any) -> TableCount:
    """``step(*args)``; an error of the backend (a value the destination cannot hold, a
    constraint) names the table it happened in, keeping its type and details."""
    try:
        return step(*args)
    except TransferVerifyError:
        raise
    except MindfileError as exc:
        if exc.message.startswith(f"{name}: "):
            raise
        again = type(exc)(f"{name}: {exc.message}", **{"table": name, **exc.details})
        raise again from exc


def _copy_meta(dst: _Side, meta: dict[str, str]) -> TableCount:
    started = time.perf_counter()
    dst.execute("DELETE FROM store_meta")
    rows = [*sorted(meta.items()), (STORE_ID_KEY, uuid.uuid4().hex)]
    for key, value in rows:
        dst.execute("INSERT INTO store_meta (key, value) VALUES (?, ?)", (key, value))
    stored = {str(k): str(v) for k, v in dst.query("SELECT key, value FROM store_meta")}
    expected = dict(rows)
    if stored != expected:
        raise TransferVerifyError(
            "store_meta: the destination's settings differ from the source's",
            table="store_meta",
            source_rows=len(expected),
            destination_rows=len(stored),
        )
    return TableCount("store_meta", len(meta), len(meta), time.perf_counter() - started)


# -- the entry point -------------------------------------------------------------------


def migrate_store(
    source: str | Path,
    destination: str | Path,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> TransferReport:
    """Copy every table of ``source`` into the empty store ``destination``, verified.

    Each is a SQLite path or a ``postgresql://`` / ``postgres://`` URL; either backend
    to either. The destination is created (its schema migrated) if needed and must hold
    no data (:class:`ConflictError`, nothing written); a missing SQLite source is a
    :class:`NotFoundError` (nothing created). The copy is one destination transaction,
    verified (row counts and key checksums per table, :class:`TransferVerifyError`)
    before it commits: on any error the destination is left as it was. ``progress``
    is called as ``progress(table, rows_done, rows_total)``. See the module docstring
    for what is and is not copied.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be a positive integer, not {batch_size!r}")
    src_name, dst_name = str(source), str(destination)
    if _same_store(src_name, dst_name):
        raise InvalidInputError("the source and the destination are the same store")
    started = time.perf_counter()
    src = _open(src_name, "source")
    try:
        dst = _open(dst_name, "destination")
        try:
            counts = _transfer(src, dst, batch_size, progress)
        finally:
            dst.close()
    finally:
        src.close()
    return TransferReport(
        source=src.display,
        destination=dst.display,
        source_backend=src.backend,
        destination_backend=dst.backend,
        tables=tuple(counts),
        seconds=time.perf_counter() - started,
    )


def _transfer(src: _Side, dst: _Side, batch: int, progress: Progress | None) -> list[TableCount]:
    counts: list[TableCount] = []
    with src.snapshot(), dst.atomic():
        meta = {
            str(k): str(v)
            for k, v in src.query("SELECT key, value FROM store_meta")
            if str(k) not in DERIVED_META
        }
        dst.lock_for_copy()
        _check_empty(dst, meta)
        for table in TABLES:
            if table.name == "event_chunks":
                # The linking trigger's rows for the chunks just copied: replaced by the
                # source's links, exactly (module docstring).
                dst.execute("DELETE FROM event_chunks")
            counts.append(_in_table(table.name, _copy_table, src, dst, table, batch, progress))
        for log in CHANGE_LOGS:
            dst.execute(f"DELETE FROM {log}")
        counts.append(_copy_meta(dst, meta))
        if progress is not None:
            progress("store_meta", len(meta), len(meta))
    return counts
