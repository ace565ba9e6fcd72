"""LLM tools over agent memory: notes, scratchpad and facts.

Handlers take ``(engine, args, ctx)`` after :func:`mindfile.tools.dispatch` has validated
``args`` against the schema. Notes live in ``memory:{ctx.user_id}``, facts in scope
``ctx.user_id``, the scratchpad in ``ctx.session_id``; the model never chooses whose
memory it touches. Limits (16 tags of 64 characters, 32 scratchpad items of 240
characters) are stated in the descriptions and enforced by the engine, whose errors
(``limit_exceeded`` ...) say exactly what to fix.
"""

from __future__ import annotations

import uuid
from typing import Any

from mindfile.errors import InvalidInputError
from mindfile.memory import (
    MAX_FACT_NAME_CHARS,
    MAX_FACT_VALUE_CHARS,
    MAX_NOTE_CHARS,
    Fact,
    Note,
    clear_scratchpad,
    delete_fact,
    delete_note,
    fact_history,
    get_fact,
    list_facts,
    notes_session,
    read_scratchpad,
    search_notes,
    set_fact,
    store_note,
    update_note,
    write_scratchpad,
)
from mindfile.tools._registry import ToolContext, ToolSpec, object_schema

__all__ = ["MEMORY_TOOLS"]

MAX_SEARCH_RESULTS = 50
MAX_FACTS_LISTED = 200

_NOTE_ID = {"type": "string", "minLength": 1, "description": "The note's id (note-...)."}
_CONTENT = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_NOTE_CHARS,
    "description": "The note text: one self-contained piece of knowledge.",
}
_TAGS = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Labels for filtering (at most 16, each at most 64 characters).",
}
_CATEGORY = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_FACT_NAME_CHARS,
    "description": "Fact group, e.g. 'preferences', 'profile', 'project'.",
}
_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_FACT_NAME_CHARS,
    "description": "Fact name, unique within its category, e.g. 'favorite_language'.",
}


def _note(note: Note) -> dict[str, Any]:
    return {
        "note_id": note.note_id,
        "content": note.content,
        "tags": list(note.tags),
        "created_at": note.created_at,
        "updated_at": note.updated_at,
    }


def _fact(fact: Fact) -> dict[str, Any]:
    return {
        "category": fact.category,
        "key": fact.key,
        "value": fact.value,
        "source": fact.source,
        "updated_at": fact.updated_at,
    }


def memory_save(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Store a new note under a fresh ``note-{uuid}`` id."""
    note = store_note(
        engine,
        notes_session(ctx.user_id),
        f"note-{uuid.uuid4()}",
        args["content"],
        source="memory_save",
        tags=args.get("tags"),
    )
    return {"note_id": note.note_id, "tags": list(note.tags), "created_at": note.created_at}


def memory_search(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Hybrid search over the user's notes and facts."""
    hits = search_notes(
        engine,
        notes_session(ctx.user_id),
        args["query"],
        tags=args.get("tags"),
        top_k=int(args.get("top_k", 5)),
        facts_scope=ctx.user_id,
    )
    return {"results": [h.to_dict() for h in hits]}


def memory_update(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Replace a note's content and/or tags, keeping its id and creation time."""
    if "content" not in args and "tags" not in args:
        raise InvalidInputError("give 'content' and/or 'tags' to update")
    note = update_note(
        engine,
        notes_session(ctx.user_id),
        args["note_id"],
        content=args.get("content"),
        tags=args.get("tags"),
    )
    return _note(note)


def memory_delete(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Delete a note; ``deleted`` is False if there was no such note."""
    deleted = delete_note(engine, notes_session(ctx.user_id), args["note_id"])
    return {"note_id": args["note_id"], "deleted": deleted}


def scratchpad_read(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The session's scratchpad (empty if never written)."""
    pad = read_scratchpad(engine, ctx.session_id)
    return {"items": [] if pad is None else list(pad.items)}


def scratchpad_write(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Replace the whole scratchpad."""
    pad = write_scratchpad(engine, ctx.session_id, args["items"])
    return {"items": list(pad.items), "updated_at": pad.updated_at}


def scratchpad_clear(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Empty the scratchpad."""
    return {"cleared": clear_scratchpad(engine, ctx.session_id)}


def fact_set(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Set a fact; a previous value is kept in its history."""
    fact = set_fact(
        engine,
        ctx.user_id,
        args["category"],
        args["key"],
        args["value"],
        source=args.get("source", "agent"),
    )
    return _fact(fact)


def fact_get(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """One fact (``fact`` is null if unknown), with earlier values on request."""
    fact = get_fact(engine, ctx.user_id, args["category"], args["key"])
    out: dict[str, Any] = {"fact": None if fact is None else _fact(fact)}
    if args.get("include_history"):
        versions = fact_history(engine, ctx.user_id, args["category"], args["key"])
        out["history"] = [
            {
                "value": v.value,
                "source": v.source,
                "set_at": v.updated_at,
                "superseded_at": v.superseded_at,
                "reason": v.reason,
            }
            for v in versions
        ]
    return out


def fact_list(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The user's facts, optionally of one category."""
    facts = list_facts(engine, ctx.user_id, category=args.get("category"))
    return {
        "facts": [_fact(f) for f in facts[:MAX_FACTS_LISTED]],
        "truncated": len(facts) > MAX_FACTS_LISTED,
    }


def fact_delete(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Delete a fact (its value stays in the history)."""
    return {"deleted": delete_fact(engine, ctx.user_id, args["category"], args["key"])}


#: How many of the best file hits a ``path`` glob filters (then ``top_k`` are kept).
FILES_SEARCH_POOL = 100


def files_search(engine: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Hybrid search over the store's synced files (docs/files.md)."""
    import pathspec

    top_k = int(args.get("top_k", 5))
    glob = args.get("path")
    pool = FILES_SEARCH_POOL if glob else top_k
    hits = engine.search(args["query"], source="files", top_k=pool)
    match = pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None
    out = []
    for hit in hits:
        path = str(hit.metadata.get("path", ""))
        if match is not None and not match.match_file(path):
            continue
        out.append(
            {
                "path": path,
                "start_line": hit.metadata.get("start_line"),
                "end_line": hit.metadata.get("end_line"),
                "text": hit.text,
                "score": round(hit.score, 4),
            }
        )
        if len(out) >= top_k:
            break
    return {"results": out}


MEMORY_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="memory_save",
        description=(
            "Save a durable note to the user's long-term memory (facts about them, "
            "decisions, things to remember across sessions). Returns the new note_id."
        ),
        parameters=object_schema({"content": _CONTENT, "tags": _TAGS}, ["content"]),
        handler=memory_save,
    ),
    ToolSpec(
        name="memory_search",
        description=(
            "Search the user's long-term notes and facts by meaning and keywords. "
            "With tags, only notes having all of them are returned."
        ),
        parameters=object_schema(
            {
                "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                "tags": _TAGS,
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SEARCH_RESULTS,
                    "description": "How many results (default 5).",
                },
            },
            ["query"],
        ),
        handler=memory_search,
    ),
    ToolSpec(
        name="memory_update",
        description=(
            "Replace the content and/or tags of an existing note, keeping its note_id. "
            "Omitted fields stay as they are."
        ),
        parameters=object_schema(
            {"note_id": _NOTE_ID, "content": _CONTENT, "tags": _TAGS}, ["note_id"]
        ),
        handler=memory_update,
    ),
    ToolSpec(
        name="memory_delete",
        description="Delete a note from long-term memory for good.",
        parameters=object_schema({"note_id": _NOTE_ID}, ["note_id"]),
        handler=memory_delete,
    ),
    ToolSpec(
        name="scratchpad_read",
        description="Read this session's scratchpad (your working notes for the current task).",
        parameters=object_schema({}, []),
        handler=scratchpad_read,
    ),
    ToolSpec(
        name="scratchpad_write",
        description=(
            "Replace this session's scratchpad with a list of short items: current goal, "
            "done steps, next steps. At most 32 items of at most 240 characters each."
        ),
        parameters=object_schema(
            {"items": {"type": "array", "items": {"type": "string"}}}, ["items"]
        ),
        handler=scratchpad_write,
    ),
    ToolSpec(
        name="scratchpad_clear",
        description="Clear this session's scratchpad when the task is done.",
        parameters=object_schema({}, []),
        handler=scratchpad_clear,
    ),
    ToolSpec(
        name="fact_set",
        description=(
            "Record a key/value fact about the user (category + key -> value). Setting an "
            "existing key replaces its value; the old value is kept in the history."
        ),
        parameters=object_schema(
            {
                "category": _CATEGORY,
                "key": _KEY,
                "value": {"type": "string", "minLength": 1, "maxLength": MAX_FACT_VALUE_CHARS},
                "source": {
                    "type": "string",
                    "enum": ["agent", "user"],
                    "description": "'user' if the user stated it explicitly, else 'agent'.",
                },
            },
            ["category", "key", "value"],
        ),
        handler=fact_set,
    ),
    ToolSpec(
        name="fact_get",
        description=(
            "Look up one fact. With include_history, also its earlier values (what was "
            "believed before)."
        ),
        parameters=object_schema(
            {"category": _CATEGORY, "key": _KEY, "include_history": {"type": "boolean"}},
            ["category", "key"],
        ),
        handler=fact_get,
    ),
    ToolSpec(
        name="fact_list",
        description="List the user's facts, optionally only one category.",
        parameters=object_schema({"category": _CATEGORY}, []),
        handler=fact_list,
    ),
    ToolSpec(
        name="fact_delete",
        description="Delete a fact about the user, with its earlier values.",
        parameters=object_schema({"category": _CATEGORY, "key": _KEY}, ["category", "key"]),
        handler=fact_delete,
    ),
    ToolSpec(
        name="files_search",
        description=(
            "Search the files synced into this memory (documents, notes, source code) "
            "by meaning and keywords. Returns each match's path and line range."
        ),
        parameters=object_schema(
            {
                "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 512,
                    "description": "Only files matching this glob, e.g. '*.md' or 'docs/**'.",
                },
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SEARCH_RESULTS,
                    "description": "How many results (default 5).",
                },
            },
            ["query"],
        ),
        handler=files_search,
    ),
]
