"""SQL lives behind the storage seam (issue 13): the list of files outside it only shrinks.

Feature code reaches its tables through the per-aggregate stores in
``mindfile/storage/`` (docs/architecture.md, "Storage seam"); a second backend
implements the stores instead of a second copy of every query. This test finds what is
still outside the seam, with :mod:`ast` (no imports, no side effects):

* a string literal that starts with a SQL keyword (``SELECT``, ``INSERT``, ...;
  upper case, so a docstring starting "Update the ..." is not SQL), and
* a call of a statement method (``execute``, ``query``, ``scalar``, ...) on a database
  or connection (a receiver named ``db``, ``conn``, ``cursor``, ``self._db``...).

Each file's count is compared with :data:`ALLOWED`: more than listed, or any in a file
not listed, fails (move it into a store); fewer than listed fails too (lower the number,
or drop the file), so the list stays the truth about what is left.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mindfile

SRC = Path(mindfile.__file__).resolve().parent
SEAM = "storage/"

_SQL = re.compile(
    r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|WITH|PRAGMA|BEGIN|REPLACE|DROP|ALTER|VACUUM)\b"
)
_METHODS = frozenset(
    {"execute", "executemany", "executemany_returning", "query", "raw_query", "query_one"}
    | {"scalar", "cursor"}
)
_RECEIVER = re.compile(r"(^|_)(db|conn|connection|cursor|cur)$")

#: SQL still outside ``storage/``, per file (path under ``src/mindfile/``). May only
#: shrink. The derived indexes read through ``storage/index_source.py``.
ALLOWED: dict[str, int] = {
    # The sqlite-vec index *is* a SQLite table (a vec0 virtual table in the store file,
    # filled from chunks_vec by INSERT ... SELECT): SQLite-only by nature, like the
    # extension it loads. Another backend has its own vector search instead of it.
    "vector/sqlite_vec.py": 30,
}


def _receiver(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _receiver(node.func)
    return ""


def sql_sites(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each SQL literal and statement call in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _SQL.match(node.value):
                found.append((node.lineno, node.value.strip().splitlines()[0]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            call = node.func
            if call.attr in _METHODS and _RECEIVER.search(_receiver(call.value)):
                found.append((node.lineno, ast.unparse(call)))
    return sorted(found)


def _counts() -> dict[str, list[tuple[int, str]]]:
    sites = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(SEAM):
            continue
        found = sql_sites(path.read_text(encoding="utf-8"))
        if found:
            sites[rel] = found
    return sites


def test_the_scan_sees_sql_and_statement_calls() -> None:
    source = (
        "Q = '''\n    SELECT a FROM t'''\n"
        "def f(db, engine, self):\n"
        "    '''Update the rows (prose, not SQL).'''\n"
        "    db.execute(f'DELETE FROM t WHERE id = {1}')\n"
        "    engine.db.scalar(Q)\n"
        "    self._db.query_one(Q)\n"
        "    conn.cursor()\n"
        "    search.query('select', 'Selected')\n"
        "    db.atomic()\n"
    )
    lines = [line for line, _ in sql_sites(source)]
    # the literal, execute, scalar, query_one, cursor; the f-string's text is a
    # Constant inside the JoinedStr, so it counts too
    assert lines == [1, 5, 5, 6, 7, 8]


def test_sql_outside_the_storage_seam_only_shrinks() -> None:
    sites = _counts()
    actual = {rel: len(found) for rel, found in sites.items()}
    grown = {
        rel: [f"{line}: {what}" for line, what in sites[rel]]
        for rel, n in actual.items()
        if n > ALLOWED.get(rel, 0)
    }
    assert grown == {}, (
        "SQL outside src/mindfile/storage/ (move it into a store, docs/architecture.md "
        f"'Storage seam'): {grown}"
    )
    stale = {rel: (n, actual.get(rel, 0)) for rel, n in ALLOWED.items() if n > actual.get(rel, 0)}
    assert stale == {}, f"(allowed, actual): lower ALLOWED to what is left: {stale}"
