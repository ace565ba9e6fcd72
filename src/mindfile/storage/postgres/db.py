"""A pool of Postgres connections with the transaction contract of the SQLite ``Database``.

:class:`PgDatabase` offers what the stores use of :class:`mindfile.storage.db.Database`
(``execute``, ``query``, ``query_one``, ``scalar``, ``changes``, ``atomic``,
``snapshot``) over a psycopg 3 connection pool:

* ``atomic()`` is one transaction; nested calls are savepoints (psycopg's
  ``Connection.transaction()`` nests that way). A thread inside ``atomic()`` keeps one
  connection until the outermost level ends; every statement it runs meanwhile is part
  of that transaction.
* Threads do not share a connection: each thread's transaction is a real, concurrent
  Postgres transaction, like another process's. Read-modify-write steps therefore take
  row locks (``SELECT ... FOR UPDATE``, conditional ``UPDATE``) instead of relying on a
  process-wide write lock as SQLite's ``BEGIN IMMEDIATE`` does.
* A statement outside ``atomic()`` runs on a pooled connection in autocommit mode.

Statements use psycopg's placeholders (``%s``, ``%(name)s``). The URL (``postgresql://``
or ``postgres://``) goes to libpq as is, so everything it leaves out comes from the
standard ``PG*`` environment variables (``PGPASSWORD``, ``PGHOST``, ...). The password
never appears in a message or a log line: errors and ``repr`` show :func:`redact`'s form.
"""

from __future__ import annotations

import contextlib
import logging
import re
import struct
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
import psycopg.errors
import psycopg.sql
from pgvector.psycopg import register_vector
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolTimeout

from mindfile.errors import (
    ConfigError,
    ConflictError,
    DatabaseConnectionError,
    InvalidInputError,
    ReadOnlyError,
    StorageError,
)

__all__ = ["ConnectionLock", "PgDatabase", "Row", "redact"]

Row = tuple[Any, ...]
Params = Sequence[Any] | dict[str, Any] | None

logger = logging.getLogger("mindfile")

#: Seconds to wait for a connection (opening one, or a free one from the pool).
CONNECT_TIMEOUT = 10.0


_PASSWORD_IN_USERINFO = re.compile(r"^(?P<head>[^:/?#]+://[^:@/?#]*):[^@/?#]*@")
_PASSWORD_IN_QUERY = re.compile(r"(?P<head>[?&]password=)[^&#]*", re.IGNORECASE)


def redact(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``), for messages.

    Only the password changes: in the user information and in a ``password=`` query
    parameter; everything else is shown as given.
    """
    url = _PASSWORD_IN_USERINFO.sub(r"\g<head>:***@", url)
    return _PASSWORD_IN_QUERY.sub(r"\g<head>***", url)


class _Local(threading.local):
    """One thread's view: its transaction's connection, the connection it holds with
    :attr:`PgDatabase.lock`, and the last row count."""

    conn: psycopg.Connection[Any] | None = None
    depth: int = 0
    writing: int = 0
    rowcount: int = -1
    pinned: psycopg.Connection[Any] | None = None
    pinned_cm: contextlib.AbstractContextManager[psycopg.Connection[Any]] | None = None
    lock_depth: int = 0


class ConnectionLock:
    """:attr:`PgDatabase.lock`: a re-entrant lock whose holder also holds a connection.

    A thread outside a transaction takes a pooled connection *before* it waits for the
    lock, and keeps it (every statement it runs while holding the lock uses it) until it
    releases the lock. So the holder never waits for the pool: threads inside
    transactions (each holding a connection) may wait for the lock, and with a plain
    lock its holder could then wait for a free connection forever (the pool exhausted
    by its waiters), which a thread stress test hit at once.
    """

    def __init__(self, db: PgDatabase) -> None:
        self._db = db
        self._rlock = threading.RLock()

    def acquire(self) -> bool:
        local = self._db._local
        if local.lock_depth == 0 and local.conn is None and local.pinned is None:
            cm = self._db._pooled()
            local.pinned = cm.__enter__()
            local.pinned_cm = cm
        try:
            self._rlock.acquire()
        except BaseException:
            self._unpin()
            raise
        local.lock_depth += 1
        return True

    def release(self) -> None:
        local = self._db._local
        local.lock_depth -= 1
        self._rlock.release()
        if local.lock_depth == 0:
            self._unpin()

    def _unpin(self) -> None:
        local = self._db._local
        cm, local.pinned, local.pinned_cm = local.pinned_cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)

    def owned(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._db._local.lock_depth > 0

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class PgDatabase:
    """A thread-safe pool of connections to one Postgres database."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = CONNECT_TIMEOUT,
        readonly: bool = False,
    ) -> None:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in ("postgresql", "postgres"):
            # Not echoed: a key=value connection string may hold a password in any form.
            shown = f"a {scheme}:// URL" if scheme else "something that is not a URL"
            raise ConfigError(
                f"a Postgres store is given by a postgresql:// or postgres:// URL, not {shown}"
            )
        # Private: the URL may hold a password; everything shown uses `display`.
        self._url = url
        #: The URL as it may be shown (no password).
        self.display = redact(url)
        #: What messages and ``Mindfile.path`` show for this store (no password).
        self.path = self.display
        #: Read-only: every connection's transactions are ``READ ONLY``
        #: (``default_transaction_read_only``), :meth:`atomic` raises
        #: :class:`~mindfile.errors.ReadOnlyError`, and so does any write statement.
        self.readonly = readonly
        #: There is no store file: derived indexes live in the heap and publish nothing
        #: next to it (what SQLite's ``Database.in_memory`` means to them).
        self.in_memory = True
        #: Damaged text repaired by reads (SQLite's problem: Postgres refuses invalid
        #: UTF-8 on the way in, so it stays empty; reconcile reads it on both backends).
        self.repaired_text: list[str] = []
        self._tokenizer_db: Any = None
        self._local = _Local()
        self._lock = ConnectionLock(self)
        self._state_lock = threading.Lock()  # this object's own fields
        self._closed = False
        self._commits = 0
        # One direct connection first: a wrong host or password is a typed error at
        # once, with the server's reason, instead of a pool timing out in the background.
        self._probe(timeout)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self._url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
            timeout=timeout,
            name="mindfile",
            configure=_configure_read_only if readonly else _configure,
            open=True,
        )

    def _probe(self, timeout: float) -> None:
        try:
            with psycopg.connect(self._url, connect_timeout=max(1, int(timeout))) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            raise DatabaseConnectionError(
                f"cannot connect to {self.display}: {_reason(exc, self._url)}",
                url=self.display,
            ) from None

    def __repr__(self) -> str:
        return f"PgDatabase({self.display!r})"

    # -- statements ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's transaction connection, the one it holds with :attr:`lock`, or a
        pooled one for one statement."""
        conn = self._local.conn or self._local.pinned
        if conn is not None:
            yield conn
            return
        with self._pooled() as pooled:
            yield pooled

    @contextlib.contextmanager
    def _pooled(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection from the pool (typed errors when there is none)."""
        if self._closed:  # as SQLite's closed connection: a StorageError, not the pool's
            raise StorageError(f"the store {self.display} is closed")
        try:
            with self._pool.connection() as pooled:
                yield pooled
        except PoolTimeout as exc:
            raise DatabaseConnectionError(
                f"no connection to {self.display} within the pool's time-out: "
                f"{_reason(exc, self._url)}",
                url=self.display,
            ) from None

    def _run(self, sql: str, params: Params, fetch: bool, binary: bool = False) -> list[Row]:
        with (
            self._connection() as conn,
            _translate(self._url),
            conn.cursor(binary=binary) as cur,
        ):
            cur.execute(sql, params)
            self._local.rowcount = cur.rowcount
            if not fetch or cur.description is None:
                return []
            return [tuple(row) for row in cur.fetchall()]

    def execute(self, sql: str, params: Params = None) -> None:
        """Run a statement, discarding rows (several statements when ``params`` is None)."""
        self._run(sql, params, fetch=False)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        if not rows:
            return
        with self._connection() as conn, _translate(self._url), conn.cursor() as cur:
            cur.executemany(sql, rows)
            self._local.rowcount = cur.rowcount

    def executemany_returning(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[Row]:
        """:meth:`executemany` for a statement with ``RETURNING``: its rows, in order."""
        if not rows:
            return []
        out: list[Row] = []
        with self._connection() as conn, _translate(self._url), conn.cursor() as cur:
            cur.executemany(sql, rows, returning=True)
            while True:
                out.extend(tuple(r) for r in cur.fetchall())
                if not cur.nextset():
                    break
        return out

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        """Load ``rows`` into ``table`` (``columns`` in that order) with ``COPY FROM
        STDIN``, Postgres's bulk path: several times faster than :meth:`executemany`.
        Triggers fire and generated columns are computed as for ``INSERT``; values given
        for identity columns are kept (even ``GENERATED ALWAYS``). Part of this
        thread's transaction inside :meth:`atomic`. Returns the rows loaded."""
        statement = psycopg.sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            psycopg.sql.Identifier(table),
            psycopg.sql.SQL(", ").join(psycopg.sql.Identifier(c) for c in columns),
        )
        count = 0
        with self._connection() as conn, _translate(self._url), conn.cursor() as cur:
            # Binary COPY needs each column's type: from the catalog, in column order.
            cur.execute(_COLUMN_TYPES, (table,))
            types = {str(name): str(kind) for name, kind in cur.fetchall()}
            unknown = [c for c in columns if c not in types]
            if unknown:
                raise InvalidInputError(f"{table} has no column {', '.join(unknown)}")
            with cur.copy(statement) as copy:
                copy.set_types([types[c] for c in columns])
                for row in rows:
                    try:
                        copy.write_row(row)
                    except (TypeError, ValueError, OverflowError, struct.error) as exc:
                        # A value of the wrong type or size for its column: psycopg
                        # refuses it before sending; the COPY and the transaction fail.
                        raise InvalidInputError(
                            f"a value the store cannot hold (row {count + 1} of the batch, "
                            f"columns {', '.join(columns)}): {exc}"
                        ) from exc
                    count += 1
            self._local.rowcount = count
        return count

    def query(self, sql: str, params: Params = None, *, binary: bool = False) -> list[Row]:
        """Run a statement and return all rows as tuples. ``binary``: results in
        Postgres's binary format (no text parsing: much faster for vectors; a pgvector
        ``Vector``, ``bytes``, ``int``... as in text format)."""
        return self._run(sql, params, fetch=True, binary=binary)

    def query_one(self, sql: str, params: Params = None) -> Row | None:
        """The first row, or None."""
        rows = self._run(sql, params, fetch=True)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = None) -> Any:
        """The first column of the first row, or None."""
        row = self.query_one(sql, params)
        return None if row is None else row[0]

    def changes(self) -> int:
        """Rows changed by this thread's last statement."""
        return max(0, self._local.rowcount)

    def data_version(self) -> int:
        """Changes whenever anything was committed, by this process or another: the WAL
        insert position (``pg_current_wal_insert_lsn()``; docs/postgres.md, "Change
        stamp"). Postgres has no per-database ``PRAGMA data_version``; this one also
        moves for writes elsewhere on the server, which costs the caller a re-read."""
        return int(self.scalar("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"))

    def size_bytes(self) -> int:
        """Disk used by this store's tables with their indexes and TOAST: the relations
        of the schema its tables resolve to (``search_path``), so one schema's store is
        measured, not the server's other databases or schemas."""
        return int(
            self.scalar(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
                "WHERE c.relkind IN ('r', 'm') AND c.relnamespace = "
                "(SELECT relnamespace FROM pg_class WHERE oid = 'chunks'::regclass)"
            )
        )

    def change_token(self) -> tuple[int, int]:
        """What derived indexes compare to know when to catch up (SQLite's
        ``Database.change_token``): :meth:`data_version` (every commit anywhere moves
        it, this process's own too) and this database's commit count."""
        return self.data_version(), self._commits

    def held_by_me(self) -> bool:
        """Whether the calling thread is inside :meth:`atomic` or :meth:`snapshot` (or
        holds :attr:`lock`): what SQLite's ``Database.held_by_me`` tells the derived
        indexes (do not wait for a catch-up, do not start one, from here)."""
        return self._local.depth > 0 or self._lock.owned()

    def fts5_tokenizer(self, name: str, args: list[str]) -> Any:
        """SQLite's FTS5 tokenizer (apsw, a core dependency, on a private in-memory
        connection): the in-process BM25 index tokenises Postgres text exactly as it
        does SQLite's, so both backends score alike (docs/postgres.md)."""
        import apsw

        with self._state_lock:
            if self._tokenizer_db is None:
                self._tokenizer_db = apsw.Connection(":memory:")
            return self._tokenizer_db.fts5_tokenizer(name, args)

    @property
    def lock(self) -> ConnectionLock:
        """A re-entrant lock for callers that group statements as one step (the derived
        indexes' catch-up); its holder also holds one connection (:class:`ConnectionLock`).

        Unlike SQLite's, it does not serialise the database: threads have their own
        connections, and :meth:`changes` is per thread already.
        """
        return self._lock

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PgDatabase]:
        """A transaction; nested calls become savepoints. All or nothing."""
        if self.readonly:
            raise ReadOnlyError(
                f"{self.display} is open read-only; open it without read_only=True to write"
            )
        local = self._local
        if local.conn is not None:
            with _translate(self._url), local.conn.transaction():
                local.depth += 1
                local.writing += 1
                try:
                    yield self
                finally:
                    local.depth -= 1
                    local.writing -= 1
            return
        with self._connection() as conn:
            local.conn, local.depth, local.writing = conn, 1, 1
            try:
                with _translate(self._url), conn.transaction():
                    yield self
            finally:
                local.conn, local.depth, local.writing = None, 0, 0
            with self._state_lock:
                self._commits += 1

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[PgDatabase]:
        """A read-only transaction that sees one consistent state (REPEATABLE READ).

        Inside :meth:`atomic` (or another snapshot) it adds nothing.
        """
        local = self._local
        if local.conn is not None:
            yield self
            return
        with self._connection() as conn:
            local.conn, local.depth = conn, 1
            try:
                with _translate(self._url), conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    yield self
            finally:
                local.conn, local.depth = None, 0

    @property
    def commit_count(self) -> int:
        """Transactions (outermost :meth:`atomic`) this database has committed."""
        return self._commits

    @property
    def in_transaction(self) -> bool:
        """This thread is inside :meth:`atomic` or :meth:`snapshot`."""
        return self._local.depth > 0

    @property
    def in_write_transaction(self) -> bool:
        """This thread is inside :meth:`atomic`."""
        return self._local.writing > 0

    # -- lifecycle ----------------------------------------------------------------------

    def refresh_connections(self) -> None:
        """Replace the pooled connections (after a migration created types they should
        know, such as pgvector's ``vector``)."""
        self._pool.drain()

    def close(self) -> None:
        """Close every pooled connection."""
        with self._state_lock:
            if not self._closed:
                self._closed = True
                self._pool.close()
                if self._tokenizer_db is not None:
                    self._tokenizer_db.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> PgDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_COLUMN_TYPES = """
SELECT attname, format_type(atttypid, NULL) FROM pg_attribute
WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped
"""


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Per new connection: pgvector's types (numpy arrays in and out) once they exist."""
    if TypeInfo.fetch(conn, "vector") is not None:
        register_vector(conn)


def _configure_read_only(conn: psycopg.Connection[Any]) -> None:
    """:func:`_configure`, and every transaction of the connection ``READ ONLY`` (the
    server then refuses any write, whatever the statement)."""
    _configure(conn)
    conn.execute("SET default_transaction_read_only = on")


def _reason(exc: BaseException, url: str) -> str:
    """The server's or libpq's reason (first line), with any trace of the password removed."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for secret in _passwords(url):
        text = text.replace(secret, "***").replace(urllib.parse.quote(secret, safe=""), "***")
    return text


def _passwords(url: str) -> list[str]:
    """The passwords a URL holds: in its user information and in ``password=``."""
    try:
        parts = urllib.parse.urlsplit(url)
        found = [parts.password or "", urllib.parse.unquote(parts.password or "")]
        found += [v for k, v in urllib.parse.parse_qsl(parts.query) if k.lower() == "password"]
    except ValueError:
        return []
    return [p for p in found if p]


def _connection_lost(exc: psycopg.Error) -> bool:
    """Whether the error means the connection is gone (no SQLSTATE from the server,
    class 08 "connection exception", or the server shutting the session down)."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


@contextlib.contextmanager
def _translate(url: str) -> Iterator[None]:
    """Turn psycopg's exceptions into Mindfile's error tree."""
    try:
        yield
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        raise ReadOnlyError(f"the store is read-only: {_reason(exc, url)}") from exc
    except psycopg.errors.IntegrityError as exc:
        raise ConflictError(f"constraint violated: {_reason(exc, url)}") from exc
    except (psycopg.errors.DataError, psycopg.errors.NumericValueOutOfRange) as exc:
        raise InvalidInputError(f"a value the store cannot hold: {_reason(exc, url)}") from exc
    except psycopg.OperationalError as exc:
        if not _connection_lost(exc):  # a lock time-out, a deadlock, a cancelled query
            raise StorageError(f"database error: {_reason(exc, url)}") from exc
        raise DatabaseConnectionError(
            f"lost the connection to {redact(url)}: {_reason(exc, url)}", url=redact(url)
        ) from None
    except psycopg.Error as exc:
        raise StorageError(f"database error: {_reason(exc, url)}") from exc
    except UnicodeEncodeError as exc:  # a lone surrogate: not storable as UTF-8
        raise InvalidInputError("text contains invalid unicode (lone surrogates)") from exc
    except ValueError as exc:
        # psycopg refuses NUL characters before sending: Postgres text cannot hold them.
        if "NUL" not in str(exc):
            raise
        raise InvalidInputError("text contains NUL (U+0000), which Postgres cannot store") from exc
