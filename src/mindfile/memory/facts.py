"""Key/value facts with history, searchable through the same hybrid index.

A fact is ``(scope, category, key) -> value``; ``scope`` is the user or agent id it
belongs to. Category and key are identifiers: trimmed, whitespace collapsed and
lowercased, so ``"Food "`` and ``"food"`` are the same category. Setting an existing key
moves the old value to ``fact_history`` (reason ``updated``) before replacing it;
deleting removes the value *and* the key's history (deleted means gone, docs/privacy.md);
``keep_history=True`` retires it instead: the value moves to the history with reason
``deleted``. Setting the value a fact already has is a no-op.

Each fact is also indexed as one chunk (more for very long values) in the session
``facts:{scope}`` with text ``"{category} / {key}: {value}"`` and metadata
``{"kind": "fact", "category", "key", "source", "updated_at"}``, replaced in the same
transaction as the row. That session is derived from the ``facts`` table;
``forget("facts:{scope}")`` deletes the scope's facts and their history with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, get_args

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.index.chunking import chunk_text
from mindfile.index.pipeline import check_id, dump_json
from mindfile.memory._write import (
    check_text,
    embed_texts,
    insert_chunks,
    next_sequence,
    scoped_chunks,
    touch_session,
)
from mindfile.memory.types import Fact, FactSource, FactVersion
from mindfile.storage.db import Database, Row, utcnow

if TYPE_CHECKING:
    from mindfile.engine import Mindfile

__all__ = [
    "MAX_FACT_NAME_CHARS",
    "MAX_FACT_VALUE_CHARS",
    "delete_fact",
    "fact_history",
    "fact_texts",
    "facts_session",
    "get_fact",
    "list_facts",
    "set_fact",
]

MAX_FACT_NAME_CHARS = 128
MAX_FACT_VALUE_CHARS = 4000

_COLUMNS = "scope, category, key, value, source, created_at, updated_at"

SELECT_FACT = f"SELECT id, {_COLUMNS} FROM facts WHERE scope = ? AND category = ? AND key = ?"

INSERT_FACT = f"INSERT INTO facts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"

UPDATE_FACT = "UPDATE facts SET value = ?, source = ?, updated_at = ? WHERE id = ?"

ARCHIVE_FACT = f"""
INSERT INTO fact_history ({_COLUMNS}, superseded_at, reason)
SELECT {_COLUMNS}, ?, ? FROM facts WHERE id = ?
"""

DELETE_FACT_CHUNKS = """
DELETE FROM chunks
WHERE session_id = ? AND json_extract(metadata_json, '$.kind') = 'fact'
  AND json_extract(metadata_json, '$.category') = ? AND json_extract(metadata_json, '$.key') = ?
"""

SELECT_HISTORY = f"""
SELECT {_COLUMNS}, superseded_at, reason FROM fact_history
WHERE scope = ? AND category = ? AND key = ?
ORDER BY id DESC
"""


def facts_session(scope: str) -> str:
    """The session holding ``scope``'s fact chunks: ``facts:{scope}``."""
    return check_id(f"facts:{check_id(scope, 'scope')}", "facts session id")


def fact_texts(engine: Mindfile, category: str, key: str, value: str) -> list[str]:
    """The chunk texts a fact is indexed as (what :func:`set_fact` embeds)."""
    category, key = _name(category, "category"), _name(key, "key")
    return chunk_text(f"{category} / {key}: {_value(value)}", engine.chunk_spec)


def set_fact(
    engine: Mindfile,
    scope: str,
    category: str,
    key: str,
    value: str,
    *,
    source: FactSource = "agent",
) -> Fact:
    """Set a fact; an existing different value is kept in the history."""
    session_id = facts_session(scope)
    category, key = _name(category, "category"), _name(key, "key")
    value, source = _value(value), _source(source)
    current = get_fact(engine, scope, category, key)
    if current is not None and (current.value, current.source) == (value, source):
        return current
    texts = fact_texts(engine, category, key, value)
    vectors = embed_texts(engine, texts)  # before the transaction: a failure changes nothing
    now = utcnow()
    db = engine.db
    with db.atomic():
        row = db.query_one(SELECT_FACT, (scope, category, key))
        if row is not None and (row[4], row[5]) == (value, source):
            return _fact(row[1:])  # set by someone else meanwhile
        if row is not None:
            db.execute(ARCHIVE_FACT, (now, "updated", row[0]))
            db.execute(UPDATE_FACT, (value, source, now, row[0]))
            created_at = str(row[6])
        else:
            db.execute(INSERT_FACT, (scope, category, key, value, source, now, now))
            created_at = now
        _reindex(engine, db, session_id, category, key, source, texts, vectors, now)
    return Fact(scope, category, key, value, source, created_at, now)


def get_fact(engine: Mindfile, scope: str, category: str, key: str) -> Fact | None:
    """The current fact, or None."""
    check_id(scope, "scope")
    row = engine.db.query_one(SELECT_FACT, (scope, _name(category, "category"), _name(key, "key")))
    return None if row is None else _fact(row[1:])


def list_facts(engine: Mindfile, scope: str, *, category: str | None = None) -> list[Fact]:
    """The scope's facts (of one category when given), by category then key."""
    check_id(scope, "scope")
    if category is None:
        rows = engine.db.query(
            f"SELECT {_COLUMNS} FROM facts WHERE scope = ? ORDER BY category, key", (scope,)
        )
    else:
        rows = engine.db.query(
            f"SELECT {_COLUMNS} FROM facts WHERE scope = ? AND category = ? ORDER BY key",
            (scope, _name(category, "category")),
        )
    return [_fact(r) for r in rows]


def delete_fact(
    engine: Mindfile, scope: str, category: str, key: str, *, keep_history: bool = False
) -> bool:
    """Delete a fact, its chunks and every earlier value of the key; True if there was
    anything to delete (a retired fact's history counts).

    ``keep_history=True`` retires the fact instead: the value moves to the history
    (reason ``deleted``) and earlier values stay.
    """
    session_id = facts_session(scope)
    category, key = _name(category, "category"), _name(key, "key")
    db = engine.db
    with db.atomic():
        row = db.query_one(SELECT_FACT, (scope, category, key))
        if row is not None:
            if keep_history:
                db.execute(ARCHIVE_FACT, (utcnow(), "deleted", row[0]))
            db.execute("DELETE FROM facts WHERE id = ?", (row[0],))
        erased = 0
        if not keep_history:
            db.execute(
                "DELETE FROM fact_history WHERE scope = ? AND category = ? AND key = ?",
                (scope, category, key),
            )
            erased = db.changes()
        db.execute(DELETE_FACT_CHUNKS, (session_id, category, key))
    return row is not None or erased > 0


def fact_history(engine: Mindfile, scope: str, category: str, key: str) -> list[FactVersion]:
    """Earlier values of a fact, most recently superseded first."""
    check_id(scope, "scope")
    rows = engine.db.query(SELECT_HISTORY, (scope, _name(category, "category"), _name(key, "key")))
    return [
        FactVersion(
            scope=str(r[0]),
            category=str(r[1]),
            key=str(r[2]),
            value=str(r[3]),
            source=str(r[4]),
            created_at=str(r[5]),
            updated_at=str(r[6]),
            superseded_at=str(r[7]),
            reason="deleted" if r[8] == "deleted" else "updated",
        )
        for r in rows
    ]


# -- internals ---------------------------------------------------------------------------


def _reindex(
    engine: Mindfile,
    db: Database,
    session_id: str,
    category: str,
    key: str,
    source: str,
    texts: list[str],
    vectors: Any,
    now: str,
) -> None:
    db.execute(DELETE_FACT_CHUNKS, (session_id, category, key))
    touch_session(db, session_id, now)
    meta = {"kind": "fact", "category": category, "key": key, "source": source, "updated_at": now}
    chunks = scoped_chunks(texts, f"fact\x00{category}\x00{key}", dump_json(meta, "metadata"))
    sequence = next_sequence(db, session_id)
    insert_chunks(db, session_id, chunks, vectors, engine.embedder.model_id, sequence, now)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, not {type(value).__name__}")
    norm = " ".join(value.replace("\x00", " ").split()).lower()
    if not norm:
        raise InvalidInputError(f"{what} must not be empty")
    if len(norm) > MAX_FACT_NAME_CHARS:
        raise LimitExceededError(f"{what} is at most {MAX_FACT_NAME_CHARS} characters")
    return check_text(norm, what)


def _value(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"value must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError("value must not be empty")
    if "\x00" in value:
        raise InvalidInputError("value must not contain NUL characters")
    if len(value) > MAX_FACT_VALUE_CHARS:
        raise LimitExceededError(f"a fact value is at most {MAX_FACT_VALUE_CHARS} characters")
    return check_text(value, "value")


def _source(source: Any) -> FactSource:
    if source not in get_args(FactSource):
        raise InvalidInputError(f"source must be 'agent' or 'user', not {source!r}")
    result: FactSource = source
    return result


def _fact(row: Row) -> Fact:
    scope, category, key, value, source, created_at, updated_at = row
    return Fact(
        str(scope), str(category), str(key), str(value), source, str(created_at), str(updated_at)
    )
