"""One apsw connection with the pragmas, locking and transactions Mindfile relies on.

apsw is used everywhere (not the stdlib ``sqlite3``) because it bundles a recent SQLite
with FTS5 and JSON and can load extensions such as sqlite-vec on every platform.

A :class:`Database` is safe to share between threads: every statement and every
transaction runs under one re-entrant lock, so a transaction opened by one thread never
sees statements from another. Between processes, SQLite's own locking applies (WAL mode,
``BEGIN IMMEDIATE`` for writes, a busy time-out).

Lock order (docs/architecture.md, "Concurrency"): this lock comes **before** any lock
of a derived index. Code holding an index's lock never calls the database; an index
that must read SQLite takes :attr:`Database.lock` first, or reads before taking its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from mindfile.errors import (
    ConfigError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ReadOnlyError,
    SchemaError,
    StorageError,
    UnsupportedBackendError,
)
from mindfile.storage import damaged

__all__ = ["Database", "Row", "utcnow"]

Row = tuple[Any, ...]

logger = logging.getLogger("mindfile")

BUSY_TIMEOUT_MS = 10_000


def utcnow() -> str:
    """The current UTC time as ISO-8601 with microseconds (sortable as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Database:
    """A thread-safe wrapper around one apsw connection."""

    def __init__(
        self, path: str | Path, *, readonly: bool = False, synchronous: str = "NORMAL"
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self.path = str(path)
        self.in_memory = self.path == ":memory:" or self.path == ""
        _check_path(self.path)
        self.immutable = False
        try:
            if readonly:
                self._conn = self._open_read_only()
            else:
                if not self.in_memory and not self.path.startswith("file:"):
                    # A plain path: make its folder. A SQLite URI names its own file;
                    # never turn it into directories.
                    Path(self.path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
                self._conn = apsw.Connection(
                    self.path,
                    flags=apsw.SQLITE_OPEN_READWRITE
                    | apsw.SQLITE_OPEN_CREATE
                    | apsw.SQLITE_OPEN_URI,
                )
            self._conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            if not self.in_memory:
                self._refuse_foreign_file()
            if not self.in_memory and not readonly:
                self._conn.execute("PRAGMA journal_mode=WAL")
            # Freed pages and cells are zeroed: deleted memories do not linger in free
            # space of the file (docs/privacy.md states what this covers, and what not).
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            self._conn.execute("PRAGMA temp_store=MEMORY")
            self._conn.create_scalar_function(
                damaged.FUNCTION,
                damaged.invalid_utf8,  # type: ignore[arg-type]
                1,
                deterministic=True,
            )
        except apsw.Error as exc:
            self._conn_close_quietly()
            raise StorageError(f"cannot open database {self.path!r}: {exc}") from exc
        self._lock = threading.RLock()
        self._depth = 0
        self._commits = 0
        self._rollbacks = 0
        self._writing = 0
        self._closed = False
        self.readonly = readonly
        #: Damaged text cells reads have repaired since open (``table.column#rowid``),
        #: until ``reconcile`` reports them (mindfile.storage.damaged).
        self.repaired_text: list[str] = []
        self.extensions: set[str] = set()

    def _open_read_only(self) -> apsw.Connection:
        """A read-only connection that never creates or changes a file.

        A plain path must exist (else :class:`NotFoundError`); it is opened as the URI
        ``file:PATH?mode=ro``. A WAL store on read-only media cannot be opened that way
        when its ``-shm`` file is missing and cannot be created; it is then opened
        ``immutable=1`` (nobody can write to read-only media, so nothing can change
        under the reader).
        """
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        if self.in_memory:
            raise ConfigError("read_only needs an existing store file, not ':memory:'")
        if self.path.startswith("file:"):
            return apsw.Connection(self.path, flags=flags)
        target = Path(self.path).expanduser().resolve()
        if not target.is_file():
            raise NotFoundError(f"no memory store at {self.path!r}", path=self.path)
        uri = "file:" + urllib.parse.quote(str(target))
        conn = apsw.Connection(uri + "?mode=ro", flags=flags)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            return conn
        except apsw.CantOpenError:
            conn.close()
            if os.access(target.parent, os.W_OK):
                raise
        logger.info("%s is on read-only media: opened immutable", self.path)
        self.immutable = True
        return apsw.Connection(uri + "?immutable=1", flags=flags)

    def _refuse_foreign_file(self) -> None:
        """Another application's SQLite file: refuse before changing anything in it."""
        tables = {
            str(name)
            for (name,) in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if tables and "memory_migrations" not in tables:
            self._conn.close()
            shown = ", ".join(sorted(tables)[:5])
            raise SchemaError(
                f"{self.path!r} is a SQLite database of another application (tables: "
                f"{shown}), not a Mindfile store; it was not modified",
                path=self.path,
            )

    def _conn_close_quietly(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with contextlib.suppress(apsw.Error):
                conn.close()

    # -- locking ------------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        """The connection's re-entrant lock, for reading several statements as one step.

        Take it before any index lock, never while holding one (see the module docstring).
        """
        return self._lock

    def held_by_me(self) -> bool:
        """Whether the calling thread holds :attr:`lock` (e.g. is inside a transaction)."""
        return bool(self._lock._is_owned())  # type: ignore[attr-defined]

    # -- statements ---------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> None:
        """Run one or more statements, discarding rows."""
        with self._lock, _translate():
            for _ in self._conn.execute(sql, params):
                pass

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        if not rows:
            return
        with self._lock, _translate():
            self._conn.executemany(sql, rows)

    def executemany_returning(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[Row]:
        """:meth:`executemany` for a statement with ``RETURNING``: its rows, in order."""
        if not rows:
            return []
        with self._lock, _translate():
            return list(self._conn.executemany(sql, rows))

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        """Run a statement and return all rows as tuples.

        A row whose stored text is not valid UTF-8 is repaired (decoded with
        replacement, :mod:`mindfile.storage.damaged`) and the statement run again.
        """
        try:
            return self.raw_query(sql, params)
        except UnicodeDecodeError as exc:
            self._repair_text(exc)
            return self.raw_query(sql, params)

    def raw_query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        """:meth:`query` without the damaged-text repair (the repair itself uses it)."""
        with self._lock, _translate():
            return list(self._conn.execute(sql, params))

    def query_one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        """Run a statement and return its first row, or None."""
        try:
            with self._lock, _translate():
                for row in self._conn.execute(sql, params):
                    return tuple(row)
            return None
        except UnicodeDecodeError as exc:
            self._repair_text(exc)
            rows = self.raw_query(sql, params)
            return tuple(rows[0]) if rows else None

    def _repair_text(self, exc: UnicodeDecodeError) -> None:
        if self.readonly:
            raise StorageError(
                "the store holds text that is not valid UTF-8 (a damaged row) and is open "
                "read-only; open it writable and run reconcile(repair=True)"
            ) from exc
        try:
            damaged.repair_damaged(self)
        except UnicodeDecodeError as again:  # pragma: no cover - a column we do not scan
            raise StorageError(f"damaged text the repair cannot reach: {again}") from again

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        """The first column of the first row, or None."""
        row = self.query_one(sql, params)
        return None if row is None else row[0]

    def changes(self) -> int:
        """Rows changed by the last statement on this connection."""
        return int(self._conn.changes())

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes when another connection commits."""
        return int(self.scalar("PRAGMA data_version"))

    @property
    def commit_count(self) -> int:
        """Transactions this connection has committed."""
        return self._commits

    def change_token(self) -> tuple[int, int]:
        """Changes whenever anything was written: by another connection or this one.

        ``data_version`` alone misses this connection's own writes, so the token adds
        SQLite's count of rows this connection changed (transactions and autocommit
        statements alike). Derived indexes compare it to know when to catch up, whoever
        wrote; nobody has to remember to tell them. Rollbacks count too. Derived indexes
        do not catch up inside a write transaction (see ``in_write_transaction``): rows
        they would load could still be rolled back, and their ids reused.
        """
        with self._lock, _translate():
            return self.data_version(), int(self._conn.total_changes()) + self._rollbacks

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Database]:
        """A write transaction; nested calls become savepoints.

        The outermost level takes SQLite's write lock at once (``BEGIN IMMEDIATE``) so a
        read-then-write inside it cannot be invalidated by another process.
        """
        if self.readonly:
            raise ReadOnlyError(
                f"{self.path!r} is open read-only; open it without read_only=True to write"
            )
        with self._lock:
            depth = self._depth
            name = f"mindfile_sp{depth}"
            with _translate():
                self._conn.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {name}")
            self._depth += 1
            self._writing += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                self._writing -= 1
                self._rollbacks += 1
                with contextlib.suppress(apsw.Error):
                    if depth == 0:
                        self._conn.execute("ROLLBACK")
                    else:
                        self._conn.execute(f"ROLLBACK TO {name}; RELEASE {name}")
                raise
            self._depth -= 1
            self._writing -= 1
            with _translate():
                self._conn.execute("COMMIT" if depth == 0 else f"RELEASE {name}")
            if depth == 0:
                self._commits += 1

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Database]:
        """A read transaction: every query inside sees one consistent state.

        Inside :meth:`atomic` (or another snapshot) it adds nothing.
        """
        with self._lock:
            if self._depth > 0:
                yield self
                return
            with _translate():
                self._conn.execute("BEGIN")
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
                with contextlib.suppress(apsw.Error):
                    self._conn.execute("COMMIT")

    @property
    def in_transaction(self) -> bool:
        """Inside :meth:`atomic` or :meth:`snapshot`."""
        return self._depth > 0

    @property
    def in_write_transaction(self) -> bool:
        """Inside :meth:`atomic`: what this connection reads may still be rolled back."""
        return self._writing > 0

    # -- extensions and lifecycle -------------------------------------------------------

    def load_extension(self, name: str, path: str) -> None:
        """Load a SQLite extension (e.g. sqlite-vec) into this connection once."""
        if name in self.extensions:
            return
        with self._lock, _translate():
            self._conn.enable_load_extension(True)
            try:
                self._conn.load_extension(path)
            finally:
                self._conn.enable_load_extension(False)
        self.extensions.add(name)

    def fts5_tokenizer(self, name: str, args: list[str]) -> Any:
        """An FTS5 tokenizer of this connection, callable from Python (apsw)."""
        with self._lock, _translate():
            return self._conn.fts5_tokenizer(name, args)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    @property
    def closed(self) -> bool:
        return self._closed


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


#: URL schemes of the Postgres backend (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql", "postgres")


def _check_path(path: str) -> None:
    """Refuse URLs this backend cannot open (e.g. ``postgresql://``) before touching disk."""
    if _URL.match(path) and not path.startswith("file:"):
        scheme = path.split(":", 1)[0]
        if scheme.lower() in POSTGRES_SCHEMES:
            # The URL may hold a password: it is never part of the message.
            raise UnsupportedBackendError(
                f"Database is the SQLite backend and cannot open a {scheme}:// store; open "
                "it with mindfile.open(url) (or mindfile.storage.postgres.PgDatabase), "
                "see docs/postgres.md",
                scheme=scheme,
            )
        raise ConfigError(
            f"{scheme}:// stores are not supported yet; give a file path, ':memory:', "
            "or a SQLite URI (file:path?mode=ro)",
            scheme=scheme,
        )


@contextlib.contextmanager
def _translate() -> Iterator[None]:
    """Turn apsw's exceptions into Mindfile's error tree."""
    try:
        yield
    except OverflowError as exc:  # an integer beyond SQLite's 64-bit range
        raise InvalidInputError(f"a number is out of range (64-bit integers only): {exc}") from exc
    except UnicodeEncodeError as exc:  # a lone surrogate: not storable as UTF-8
        raise InvalidInputError("text contains invalid unicode (lone surrogates)") from exc
    except TypeError as exc:  # a value SQLite cannot bind (list, dict, object...)
        if "binding" not in str(exc).lower():
            raise
        raise InvalidInputError(f"a value has a type the store cannot hold: {exc}") from exc
    except apsw.ReadOnlyError as exc:
        raise ReadOnlyError(f"the store is read-only: {exc}") from exc
    except apsw.ConstraintError as exc:
        raise ConflictError(f"constraint violated: {exc}") from exc
    except apsw.BusyError as exc:
        raise StorageError(f"database is locked (busy for {BUSY_TIMEOUT_MS} ms): {exc}") from exc
    except apsw.Error as exc:
        raise StorageError(f"database error: {exc}") from exc
