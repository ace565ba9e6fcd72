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

from typing import TYPE_CHECKING, Any, cast, get_args

from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.index.chunking import chunk_text
from mindfile.index.pipeline import check_id, dump_json
from mindfile.memory._write import check_text, embed_texts, scoped_chunks
from mindfile.memory.types import Fact, FactSource, FactVersion
from mindfile.storage.db import utcnow
from mindfile.storage.facts import FactRecord

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps, WriteDeps

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


def facts_session(scope: str) -> str:
    """The session holding ``scope``'s fact chunks: ``facts:{scope}``."""
    return check_id(f"facts:{check_id(scope, 'scope')}", "facts session id")


def fact_texts(engine: WriteDeps, category: str, key: str, value: str) -> list[str]:
    """The chunk texts a fact is indexed as (what :func:`set_fact` embeds)."""
    category, key = _name(category, "category"), _name(key, "key")
    return chunk_text(f"{category} / {key}: {_value(value)}", engine.chunk_spec)


def set_fact(
    engine: WriteDeps,
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
    facts = engine.stores.facts
    with engine.db.atomic():
        row = facts.get(scope, category, key)
        if row is not None and (row.value, row.source) == (value, source):
            return _fact(row)  # set by someone else meanwhile
        if row is not None:
            facts.archive(row.id, now, "updated")
            facts.update(row.id, value, source, now)
            created_at = row.created_at
        else:
            facts.insert(scope, category, key, value, source, now)
            created_at = now
        _reindex(engine, session_id, category, key, source, texts, vectors, now)
    return Fact(scope, category, key, value, source, created_at, now)


def get_fact(engine: StoreDeps, scope: str, category: str, key: str) -> Fact | None:
    """The current fact, or None."""
    check_id(scope, "scope")
    row = engine.stores.facts.get(scope, _name(category, "category"), _name(key, "key"))
    return None if row is None else _fact(row)


def list_facts(engine: StoreDeps, scope: str, *, category: str | None = None) -> list[Fact]:
    """The scope's facts (of one category when given), by category then key."""
    check_id(scope, "scope")
    wanted = None if category is None else _name(category, "category")
    return [_fact(r) for r in engine.stores.facts.list_facts(scope, wanted)]


def delete_fact(
    engine: StoreDeps, scope: str, category: str, key: str, *, keep_history: bool = False
) -> bool:
    """Delete a fact, its chunks and every earlier value of the key; True if there was
    anything to delete (a retired fact's history counts).

    ``keep_history=True`` retires the fact instead: the value moves to the history
    (reason ``deleted``) and earlier values stay.
    """
    session_id = facts_session(scope)
    category, key = _name(category, "category"), _name(key, "key")
    facts = engine.stores.facts
    with engine.db.atomic():
        row = facts.get(scope, category, key)
        if row is not None:
            if keep_history:
                facts.archive(row.id, utcnow(), "deleted")
            facts.delete(row.id)
        erased = 0 if keep_history else facts.erase_history(scope, category, key)
        facts.remove_chunks(session_id, category, key)
    return row is not None or erased > 0


def fact_history(engine: StoreDeps, scope: str, category: str, key: str) -> list[FactVersion]:
    """Earlier values of a fact, most recently superseded first."""
    check_id(scope, "scope")
    rows = engine.stores.facts.history(scope, _name(category, "category"), _name(key, "key"))
    return [
        FactVersion(
            scope=r.scope,
            category=r.category,
            key=r.key,
            value=r.value,
            source=r.source,
            created_at=r.created_at,
            updated_at=r.updated_at,
            superseded_at=r.superseded_at,
            reason="deleted" if r.reason == "deleted" else "updated",
        )
        for r in rows
    ]


# -- internals ---------------------------------------------------------------------------


def _reindex(
    engine: WriteDeps,
    session_id: str,
    category: str,
    key: str,
    source: str,
    texts: list[str],
    vectors: Any,
    now: str,
) -> None:
    sessions = engine.stores.sessions
    engine.stores.facts.remove_chunks(session_id, category, key)
    sessions.upsert(session_id, now)
    meta = {"kind": "fact", "category": category, "key": key, "source": source, "updated_at": now}
    chunks = scoped_chunks(texts, f"fact\x00{category}\x00{key}", dump_json(meta, "metadata"))
    sequence = sessions.next_sequence(session_id)
    sessions.add_chunks(session_id, chunks, vectors, engine.embedder.model_id, sequence, now)


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


def _fact(row: FactRecord) -> Fact:
    source = cast(FactSource, row.source)  # the schema checks it is 'agent' or 'user'
    return Fact(row.scope, row.category, row.key, row.value, source, row.created_at, row.updated_at)
