"""Explicit long-term notes: store, update, delete, get, list and search.

A note lives in a namespace session (``memory:{user_id}`` by convention, see
:func:`notes_session`) as one ``conversation_event`` whose payload is::

    {"kind": "note", "note_id": ..., "content": ..., "source": ..., "tags": [...],
     "created_at": ..., "updated_at": ..., "schema_version": 1}

plus the chunks indexed from its content, each carrying the same fields (minus the
content) in its metadata, so hybrid search and SQL tag filters work on notes as on any
chunk. The ``notes`` table maps ``(session_id, note_id)`` to the event.

Storing an existing ``note_id`` replaces the note (delete-then-store in one
transaction, keeping ``created_at``); embedding happens before the transaction, so a
failure anywhere leaves the old note exactly as it was. Chunk hashes include the note
id: two notes with the same text never share a chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from mindfile.errors import ConflictError, InvalidInputError, LimitExceededError, NotFoundError
from mindfile.index.chunking import chunk_text
from mindfile.index.pipeline import PreparedEvent, check_id, dump_json, normalize_tags
from mindfile.manage.importance import DEFAULT_IMPORTANCE, check_importance, expires_at
from mindfile.manage.marks import event_state, restore_state
from mindfile.manage.quota import enforce_quotas
from mindfile.memory._write import check_text, embed_texts, scoped_chunks
from mindfile.memory.facts import facts_session
from mindfile.memory.types import MemoryHit, Note
from mindfile.retrieve.search import MAX_TOP_K
from mindfile.storage.db import utcnow
from mindfile.storage.notes import StoredNote

if TYPE_CHECKING:
    from mindfile._deps import SearchDeps, StoreDeps, WriteDeps

__all__ = [
    "MAX_NOTE_CHARS",
    "MAX_SOURCE_CHARS",
    "NOTE_SCHEMA_VERSION",
    "delete_note",
    "get_note",
    "list_notes",
    "notes_session",
    "search_notes",
    "store_note",
    "update_note",
]

MAX_NOTE_CHARS = 100_000
MAX_SOURCE_CHARS = 128
NOTE_SCHEMA_VERSION = 1
MAX_LIST_LIMIT = 1000


def notes_session(user_id: str) -> str:
    """The namespace session holding ``user_id``'s notes: ``memory:{user_id}``."""
    return check_id(f"memory:{check_id(user_id, 'user_id')}", "notes session id")


def store_note(
    engine: WriteDeps,
    session_id: str,
    note_id: str,
    content: str,
    *,
    source: str | None = None,
    tags: Sequence[str] | None = None,
    importance: float | None = None,
    ttl: float | timedelta | None = None,
) -> Note:
    """Create the note, or replace it if ``note_id`` exists (keeping ``created_at``).

    ``importance`` (in [0, 1]) defaults to 0.5, or to the replaced note's; ``ttl``
    (seconds or a timedelta) makes it expire, else it keeps the replaced note's expiry.
    A replaced note keeps its pin (see docs/memory-management.md).
    """
    check_id(session_id, "session_id")
    check_id(note_id, "note_id")
    weight = None if importance is None else check_importance(importance)
    return _put(
        engine,
        session_id,
        note_id,
        _content(content),
        _source(source),
        _tags(tags),
        importance=weight,
        expires=expires_at(ttl),
    )


def update_note(
    engine: WriteDeps,
    session_id: str,
    note_id: str,
    *,
    content: str | None = None,
    source: str | None = None,
    tags: Sequence[str] | None = None,
) -> Note:
    """Change an existing note; arguments left ``None`` keep their current value.

    Raises :class:`NotFoundError` if the note does not exist, and
    :class:`ConflictError` if it changed between reading it and writing the update.
    """
    check_id(session_id, "session_id")
    check_id(note_id, "note_id")
    if content is None and source is None and tags is None:
        raise InvalidInputError("nothing to update: give content, source and/or tags")
    new_content = None if content is None else _content(content)
    new_source = None if source is None else _source(source)
    new_tags = None if tags is None else _tags(tags)
    old = get_note(engine, session_id, note_id)
    if old is None:
        raise NotFoundError(f"no note {note_id!r} in {session_id!r}", note_id=note_id)
    return _put(
        engine,
        session_id,
        note_id,
        old.content if new_content is None else new_content,
        old.source if new_source is None else new_source,
        list(old.tags) if new_tags is None else new_tags,
        expect_sequence=old.sequence,
    )


def delete_note(engine: StoreDeps, session_id: str, note_id: str) -> bool:
    """Delete the note's event, chunks, vectors and FTS rows; True if it existed."""
    check_id(session_id, "session_id")
    check_id(note_id, "note_id")
    notes = engine.stores.notes
    with engine.db.atomic():
        found = notes.find(session_id, note_id)
        sequence = None if found is None else found.sequence
        removed_chunks = notes.remove(session_id, note_id, sequence)
    return found is not None or removed_chunks > 0


def get_note(engine: StoreDeps, session_id: str, note_id: str) -> Note | None:
    """The note, or None."""
    check_id(session_id, "session_id")
    check_id(note_id, "note_id")
    found = engine.stores.notes.find(session_id, note_id)
    return None if found is None else _note(session_id, found)


def list_notes(
    engine: StoreDeps,
    session_id: str,
    *,
    tags: Sequence[str] | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[Note]:
    """Notes, most recently written first; with ``tags``, only notes having all of them."""
    check_id(session_id, "session_id")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInputError(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError("offset must be a non-negative integer")
    wanted = normalize_tags(tags, strict=False)
    found = engine.stores.notes.list_notes(session_id, wanted, limit, offset)
    return [_note(session_id, note) for note in found]


def search_notes(
    engine: SearchDeps,
    session_id: str,
    query: str,
    *,
    tags: Sequence[str] | None = None,
    top_k: int = 10,
    facts_scope: str | None = None,
) -> list[MemoryHit]:
    """Hybrid search over a notes session (and, with ``facts_scope``, those facts).

    One hit per note or fact (its best chunk), best first. ``tags`` filter in SQL;
    facts have no tags, so a tag filter leaves them out.
    """
    check_id(session_id, "session_id")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidInputError(f"top_k must be an integer from 1 to {MAX_TOP_K}")
    sessions = [session_id]
    fact_sid = None if facts_scope is None else facts_session(facts_scope)
    if fact_sid is not None:
        sessions.append(fact_sid)
    # Over-fetch: several chunks of one long note collapse into one hit.
    results = engine.search(query, session_id=sessions, tags=tags, top_k=min(top_k * 3, MAX_TOP_K))
    hits: dict[tuple[str, ...], MemoryHit] = {}
    for hit in results:
        meta = hit.metadata
        if meta.get("kind") == "note" and hit.session_id == session_id:
            ident: tuple[str, ...] = ("note", str(meta.get("note_id")))
            item = MemoryHit(
                "note", hit.text, hit.score, note_id=ident[1], tags=tuple(meta.get("tags", ()))
            )
        elif meta.get("kind") == "fact" and hit.session_id == fact_sid:
            category, key = str(meta.get("category")), str(meta.get("key"))
            ident = ("fact", category, key)
            item = MemoryHit("fact", hit.text, hit.score, category=category, key=key)
        else:
            continue  # plain conversation events stored in the namespace
        hits.setdefault(ident, item)
        if len(hits) >= top_k:
            break
    return list(hits.values())


# -- internals ---------------------------------------------------------------------------


def _content(content: Any) -> str:
    if not isinstance(content, str):
        raise InvalidInputError(f"content must be a string, not {type(content).__name__}")
    if not content.strip():
        raise InvalidInputError("content must not be empty")
    if len(content) > MAX_NOTE_CHARS:
        raise LimitExceededError(f"a note is at most {MAX_NOTE_CHARS} characters")
    return check_text(content, "content")


def _source(source: Any) -> str | None:
    if source is None:
        return None
    if not isinstance(source, str) or not source.strip():
        raise InvalidInputError("source must be a non-empty string or None")
    if len(source) > MAX_SOURCE_CHARS:
        raise LimitExceededError(f"source is at most {MAX_SOURCE_CHARS} characters")
    return check_text(source.strip(), "source")


def _tags(tags: Sequence[str] | None) -> list[str]:
    # Strict: more than 16 tags or a tag over 64 characters is an error, never a
    # silent truncation, and it is raised before anything is written.
    return normalize_tags(tags, strict=True)


def _put(
    engine: WriteDeps,
    session_id: str,
    note_id: str,
    content: str,
    source: str | None,
    tags: list[str],
    *,
    expect_sequence: int | None = None,
    importance: float | None = None,
    expires: str | None = None,
) -> Note:
    texts = chunk_text(content, engine.chunk_spec)
    if not texts:
        raise InvalidInputError("content has no indexable text")
    vectors = embed_texts(engine, texts)  # before the transaction: a failure changes nothing
    now = utcnow()
    db, notes = engine.db, engine.stores.notes
    with db.atomic():
        old = notes.find(session_id, note_id)
        if expect_sequence is not None and (old is None or old.sequence != expect_sequence):
            raise ConflictError(
                f"note {note_id!r} changed while it was being updated; retry",
                note_id=note_id,
            )
        created_at = now
        kept = None
        if old is not None:
            created_at = str(old.payload.get("created_at") or now)
            kept = event_state(engine, session_id, old.sequence)
            notes.remove(session_id, note_id, old.sequence)
        if importance is None:
            importance = DEFAULT_IMPORTANCE if kept is None else kept.importance
        if expires is None and kept is not None:
            expires = kept.expires_at
        sequence = engine.stores.sessions.next_sequence(session_id)
        fields: dict[str, Any] = {
            "kind": "note",
            "note_id": note_id,
            "source": source,
            "tags": tags,
            "created_at": created_at,
            "updated_at": now,
            "schema_version": NOTE_SCHEMA_VERSION,
        }
        payload = dump_json({**fields, "content": content}, "note")
        chunks = scoped_chunks(texts, f"note\x00{note_id}", dump_json(fields, "note metadata"))
        event = PreparedEvent(session_id, sequence, payload, chunks, importance, expires)
        # No neighbour context: a note's chunks must hold only its own text, so that
        # deleting one note leaves none of it in another note's FTS row.
        engine.stores.sessions.write_event(
            event, vectors, engine.embedder.model_id, now, neighbor_context=False
        )
        notes.link(session_id, note_id, sequence)
        if kept is not None:
            restore_state(engine, session_id, sequence, kept)
        enforce_quotas(engine, [session_id], [(session_id, sequence)], now)
    return Note(session_id, note_id, content, source, tuple(tags), created_at, now, sequence)


def _note(session_id: str, stored: StoredNote) -> Note:
    data = stored.payload
    return Note(
        session_id=session_id,
        note_id=str(data["note_id"]),
        content=str(data.get("content", "")),
        source=data.get("source"),
        tags=tuple(data.get("tags") or ()),
        created_at=str(data.get("created_at", "")),
        updated_at=str(data.get("updated_at", "")),
        sequence=stored.sequence,
    )
