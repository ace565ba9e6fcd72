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
    StorageError,
)

__all__ = ["PgDatabase", "Row", "redact"]

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
    """One thread's view: its transaction's connection and the last row count."""

    conn: psycopg.Connection[Any] | None = None
    depth: int = 0
    writing: int = 0
    rowcount: int = -1


class PgDatabase:
    """A thread-safe pool of connections to one Postgres database."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = CONNECT_TIMEOUT,
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
        self.readonly = False
        self._local = _Local()
        self._lock = threading.RLock()
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
            configure=_configure,
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
        """The thread's transaction connection, or a pooled one for one statement."""
        conn = self._local.conn
        if conn is not None:
            yield conn
            return
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

    @property
    def lock(self) -> threading.RLock:
        """A re-entrant lock for callers that group statements as one step.

        Unlike SQLite's, it does not serialise the database: threads have their own
        connections, and :meth:`changes` is per thread already.
        """
        return self._lock

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PgDatabase]:
        """A transaction; nested calls become savepoints. All or nothing."""
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
            with self._lock:
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
        with self._lock:
            if not self._closed:
                self._closed = True
                self._pool.close()

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
