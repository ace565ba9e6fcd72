"""Stored text that is not valid UTF-8 (a corrupted byte, a foreign tool's raw write).

Mindfile only ever writes valid UTF-8 (Python strings), but a damaged file or another
program can leave invalid bytes in a TEXT column, and the SQLite driver refuses to
decode them: every read touching the row would fail, the repair tools included.

:func:`find_damaged` lists such cells in every text column of Mindfile's tables;
:func:`repair_damaged` rewrites each with its bytes decoded with replacement (U+FFFD
for each invalid sequence), in one transaction, so reads work again and the damage is
visible as replacement characters. :class:`~mindfile.storage.db.Database` runs the
repair and retries once when a read hits such a row (logging what it fixed), and
``reconcile()`` reports the damaged cells (docs/jobs and docs/privacy.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mindfile.storage.db import Database

__all__ = ["DamagedCell", "find_damaged", "invalid_utf8", "repair_damaged"]

logger = logging.getLogger("mindfile.storage")

#: Registered on every connection: 1 when a value's bytes are not valid UTF-8.
FUNCTION = "mindfile_invalid_utf8"


@dataclass(frozen=True, slots=True)
class DamagedCell:
    """One text cell that is not valid UTF-8."""

    table: str
    column: str
    rowid: int

    @property
    def label(self) -> str:
        """``table.column#rowid``."""
        return f"{self.table}.{self.column}#{self.rowid}"


def invalid_utf8(value: Any) -> int:
    """The SQL function: 1 if ``value`` (read as a blob) is not valid UTF-8."""
    if not isinstance(value, bytes):
        return 0
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return 1
    return 0


def _text_columns(db: Database) -> list[tuple[str, str]]:
    """TEXT columns of rowid tables (the one WITHOUT ROWID table, ``event_chunks``,
    holds ids only)."""
    tables = db.raw_query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE '%VIRTUAL%' "
        "AND sql NOT LIKE '%WITHOUT ROWID%' "
        "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%_fts_%' ORDER BY name"
    )
    out = []
    for (table,) in tables:
        for row in db.raw_query(f'PRAGMA table_info("{table}")'):
            if str(row[2]).upper() == "TEXT":
                out.append((str(table), str(row[1])))
    return out


def find_damaged(db: Database) -> list[DamagedCell]:
    """Every text cell of Mindfile's tables that is not valid UTF-8 (a full scan)."""
    found: list[DamagedCell] = []
    for table, column in _text_columns(db):
        rows = db.raw_query(
            f'SELECT rowid FROM "{table}" WHERE typeof("{column}") = \'text\' '
            f'AND {FUNCTION}(CAST("{column}" AS BLOB))'
        )
        found.extend(DamagedCell(table, column, int(r[0])) for r in rows)
    return found


def repair_damaged(db: Database) -> list[DamagedCell]:
    """Rewrite every damaged cell decoded with replacement; returns what was fixed."""
    with db.atomic():
        cells = find_damaged(db)
        for cell in cells:
            (blob,) = db.raw_query(
                f'SELECT CAST("{cell.column}" AS BLOB) FROM "{cell.table}" WHERE rowid = ?',
                (cell.rowid,),
            )[0]
            text = bytes(blob).decode("utf-8", errors="replace")
            db.raw_query(
                f'UPDATE "{cell.table}" SET "{cell.column}" = ? WHERE rowid = ?',
                (text, cell.rowid),
            )
    if cells:
        db.repaired_text.extend(c.label for c in cells)
        logger.warning(
            "repaired %d stored text value(s) that were not valid UTF-8: %s",
            len(cells),
            ", ".join(f"{c.table}.{c.column}#{c.rowid}" for c in cells[:10]),
        )
    return cells
