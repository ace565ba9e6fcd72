"""Consolidation: fold near-duplicate chunks together and condense old spans.

Two steps, each idempotent (running :func:`consolidate` again with the same arguments
changes nothing):

1. **Merge near-duplicates** within each session: conversation chunks (not notes,
   facts or summaries) whose vectors have cosine similarity ≥ ``similarity`` are
   grouped greedily — each chunk, in order (pinned first, then oldest), absorbs every
   later unabsorbed, unpinned chunk similar to it. The survivor keeps its text and
   vector and takes the group's highest importance, the union of tags, the whole
   sequence range, the summed access count, the latest use, and the most lenient
   expiry; the others' events are re-linked to it, a ``consolidations`` row records
   what was folded in (ids, texts, ranges, importances), and they are deleted. The
   survivors of a run are pairwise below the threshold, so a second run finds nothing.
2. **Condense old spans**: runs of consecutive events older than ``older_than`` that are
   not pinned, not notes and not already summarized are cut into spans of at most
   ``max_span`` events (spans shorter than ``min_span`` wait), condensed by
   ``condenser`` (default: the summarizer's extractive condenser; any
   ``Callable[[Sequence[MemoryRecord]], str]``, e.g. an LLM, can replace it), and
   indexed as ``kind: "summary"`` chunks linked to every event of the span. An event
   linked to a summary chunk is never summarized again. The span's original chunks get
   ``consolidated_at`` and are kept unless ``drop_originals=True`` (then those not also
   holding text of events outside the span are deleted; the events stay in the log,
   held by the summary).

Each session is planned outside the write lock (vectors read, spans condensed and
embedded) and then changed in one transaction, so a failing condenser or embedder leaves
it untouched, and a concurrent writer can only cause a group or span to be skipped
(counted in ``skipped``), never a half-applied one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from mindfile.errors import InvalidInputError
from mindfile.index.chunking import chunk_text, content_hash
from mindfile.index.pipeline import MAX_TAGS, check_id, dump_json
from mindfile.manage._delete import delete_chunks, ids_json
from mindfile.manage.expiry import alive_clause
from mindfile.manage.importance import iso, parse_time
from mindfile.manage.quota import SCOPE_SESSIONS, check_scope
from mindfile.manage.types import ConsolidationRecord, ConsolidationReport
from mindfile.memory._write import embed_texts
from mindfile.memory.summarizer import Condenser, extractive_condenser
from mindfile.storage.chunks import ChunkRow, chunk_id_for, find_chunk, insert_chunk
from mindfile.storage.db import Database
from mindfile.types import MemoryRecord

if TYPE_CHECKING:
    from mindfile._deps import WriteDeps

__all__ = ["DEFAULT_OLDER_THAN", "DEFAULT_SIMILARITY", "consolidate", "provenance"]

DEFAULT_SIMILARITY = 0.92
DEFAULT_OLDER_THAN = timedelta(days=7)

_PLAIN = "coalesce(json_extract(c.metadata_json, '$.kind'), '') NOT IN ('note', 'fact', 'summary')"
_LINKED = "EXISTS (SELECT 1 FROM event_chunks AS l WHERE l.chunk_rowid = c.id)"

MERGE_CANDIDATES = f"""
SELECT c.id, c.pinned, v.embedding_blob
FROM chunks AS c JOIN chunks_vec AS v ON v.chunk_rowid = c.id
WHERE c.session_id = ? AND {_PLAIN} AND {_LINKED}{{alive}}
ORDER BY c.pinned DESC, c.id
"""

GROUP_ROWS = """
SELECT id, chunk_id, chunk_text, sequence_start, sequence_end, importance, pinned,
       expires_at, access_count, last_accessed_at, metadata_json
FROM chunks WHERE session_id = ? AND id IN (SELECT value FROM json_each(?))
"""

UPDATE_SURVIVOR = """
UPDATE chunks SET sequence_start = ?, sequence_end = ?, importance = ?, pinned = ?,
    expires_at = ?, access_count = ?, last_accessed_at = ?, metadata_json = ?,
    consolidated_at = ?
WHERE id = ?
"""

RELINK = """
INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT session_id, sequence, ? FROM event_chunks
WHERE chunk_rowid IN (SELECT value FROM json_each(?))
"""

INSERT_RECORD = """
INSERT INTO consolidations (kind, session_id, chunk_id, sequence_start, sequence_end,
                            sources_json, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""

SPAN_EVENTS = """
SELECT e.sequence, e.payload_json, e.created_at,
       EXISTS (SELECT 1 FROM event_chunks AS l JOIN chunks AS c ON c.id = l.chunk_rowid
               WHERE l.session_id = e.session_id AND l.sequence = e.sequence
                 AND (c.pinned = 1 OR json_extract(c.metadata_json, '$.kind') = 'summary')),
       EXISTS (SELECT 1 FROM notes AS n
               WHERE n.session_id = e.session_id AND n.sequence = e.sequence)
FROM conversation_events AS e
WHERE e.session_id = ?{range}
ORDER BY e.sequence
"""

# The span's own chunks (not summaries), and whether each holds text of events outside it.
SPAN_CHUNKS = """
SELECT c.id, c.importance, c.expires_at,
       NOT EXISTS (SELECT 1 FROM event_chunks AS o
                   WHERE o.chunk_rowid = c.id
                     AND (o.session_id <> ?1 OR o.sequence < ?2 OR o.sequence > ?3))
FROM chunks AS c
WHERE c.id IN (SELECT chunk_rowid FROM event_chunks
               WHERE session_id = ?1 AND sequence BETWEEN ?2 AND ?3)
  AND coalesce(json_extract(c.metadata_json, '$.kind'), '') <> 'summary'
ORDER BY c.id
"""

LINK_SPAN = """
INSERT OR IGNORE INTO event_chunks (session_id, sequence, chunk_rowid)
SELECT session_id, sequence, ?3 FROM conversation_events
WHERE session_id = ?1 AND sequence IN (SELECT value FROM json_each(?2))
"""

SET_CONSOLIDATED = (
    "UPDATE chunks SET consolidated_at = ? WHERE id IN (SELECT value FROM json_each(?))"
)

PROVENANCE = """
SELECT kind, session_id, chunk_id, sequence_start, sequence_end, sources_json, created_at
FROM consolidations WHERE chunk_id = ? ORDER BY id
"""


def consolidate(
    engine: WriteDeps,
    *,
    session_id: str | None = None,
    scope: str | None = None,
    similarity: float | None = DEFAULT_SIMILARITY,
    older_than: float | timedelta | None = DEFAULT_OLDER_THAN,
    min_span: int = 2,
    max_span: int = 20,
    condenser: Condenser | None = None,
    drop_originals: bool = False,
    now: datetime | str | None = None,
) -> ConsolidationReport:
    """Merge near-duplicates and condense old spans (see the module docstring).

    ``session_id`` or ``scope`` (``agent:…``, ``user:…``, ``session:…``) limit the work;
    neither means every session. ``similarity=None`` skips merging; ``older_than=None``
    skips condensing.
    """
    if session_id is not None and scope is not None:
        raise InvalidInputError("give session_id or scope, not both")
    threshold = _similarity(similarity)
    age = _older_than(older_than)
    if isinstance(min_span, bool) or not isinstance(min_span, int) or min_span < 1:
        raise InvalidInputError("min_span must be a positive integer")
    if isinstance(max_span, bool) or not isinstance(max_span, int) or max_span < min_span:
        raise InvalidInputError("max_span must be an integer >= min_span")
    if condenser is not None and not callable(condenser):
        raise InvalidInputError("condenser must be a callable (records) -> str")
    moment = parse_time(now)
    stamp = iso(moment)
    sessions = _sessions(engine.db, session_id, scope)
    totals = dict.fromkeys(
        ("groups", "merged", "summaries", "chunks", "events", "dropped", "skipped"), 0
    )
    condense = condenser or extractive_condenser
    for sid in sessions:
        # Plan outside the write lock (vectors, condenser, embedder), then apply both
        # steps in one transaction: a failure leaves this session untouched.
        groups = [] if threshold is None else _plan_merge(engine.db, sid, threshold, stamp)
        spans = (
            []
            if age is None
            else _plan_spans(engine, sid, iso(moment - age), min_span, max_span, condense)
        )
        if not groups and not spans:
            continue
        with engine.db.atomic():
            counts = _apply_merge(engine.db, sid, groups, stamp)
            counts.update(_apply_spans(engine, sid, spans, stamp, drop_originals))
        counts["skipped"] = counts.pop("merge_skipped") + counts.pop("span_skipped")
        for key, value in counts.items():
            totals[key] += value
    return ConsolidationReport(
        sessions=len(sessions),
        merged_groups=totals["groups"],
        merged_chunks=totals["merged"],
        summaries=totals["summaries"],
        summary_chunks=totals["chunks"],
        summarized_events=totals["events"],
        dropped_chunks=totals["dropped"],
        now=stamp,
        skipped=totals["skipped"],
    )


def provenance(db: Database, chunk_id: str) -> list[ConsolidationRecord]:
    """Consolidation records of a surviving or summary chunk, oldest first."""
    check_id(chunk_id, "chunk_id")
    return [
        ConsolidationRecord(
            kind=kind,
            session_id=str(sid),
            chunk_id=str(cid),
            sequence_start=int(start),
            sequence_end=int(end),
            sources=tuple(json.loads(sources)),
            created_at=str(created),
        )
        for kind, sid, cid, start, end, sources, created in db.query(PROVENANCE, (chunk_id,))
    ]


# -- validation ----------------------------------------------------------------------------


def _similarity(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise InvalidInputError("similarity must be a number in (0, 1] or None")
    return float(value)


def _older_than(value: Any) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError("older_than must be seconds, a timedelta, or None")
    else:
        seconds = float(value)
    if not np.isfinite(seconds) or seconds < 0:
        raise InvalidInputError("older_than must not be negative")
    return timedelta(seconds=seconds)


def _sessions(db: Database, session_id: str | None, scope: str | None) -> list[str]:
    if session_id is not None:
        check_id(session_id, "session_id")
        return [
            str(r[0])
            for r in db.query("SELECT session_id FROM sessions WHERE session_id = ?", (session_id,))
        ]
    if scope is not None:
        return [
            str(r[0])
            for r in db.query(SCOPE_SESSIONS + " ORDER BY session_id", (check_scope(scope),))
        ]
    return [str(r[0]) for r in db.query("SELECT session_id FROM sessions ORDER BY session_id")]


# -- step 1: near-duplicate merge ------------------------------------------------------------


def _plan_merge(
    db: Database, session_id: str, threshold: float, now: str
) -> list[tuple[int, list[int]]]:
    alive, params = alive_clause(now)
    rows = db.query(MERGE_CANDIDATES.format(alive=alive), [session_id, *params])
    return plan_groups(rows, threshold)


def _apply_merge(
    db: Database, session_id: str, groups: list[tuple[int, list[int]]], now: str
) -> dict[str, int]:
    out = {"groups": 0, "merged": 0, "merge_skipped": 0}
    for survivor, losers in groups:
        merged = _apply_group(db, session_id, survivor, losers, now)
        if merged:
            out["groups"] += 1
            out["merged"] += merged
        else:
            out["merge_skipped"] += 1
    return out


def plan_groups(rows: Sequence[tuple[Any, ...]], threshold: float) -> list[tuple[int, list[int]]]:
    """Greedy groups ``(survivor, absorbed)`` from ``(rowid, pinned, blob)`` rows in order."""
    if len(rows) < 2:
        return []
    ids = [int(r[0]) for r in rows]
    pinned = np.array([bool(r[1]) for r in rows])
    matrix = np.stack([np.frombuffer(r[2], dtype="<f4") for r in rows]).astype(np.float32)
    absorbed = np.zeros(len(ids), dtype=bool)
    groups = []
    for i in range(len(ids) - 1):
        if absorbed[i]:
            continue
        sims = matrix[i + 1 :] @ matrix[i]
        near = np.flatnonzero(sims >= threshold) + i + 1
        near = near[~absorbed[near] & ~pinned[near]]
        if len(near):
            absorbed[near] = True
            groups.append((ids[i], [ids[j] for j in near]))
    return groups


def _apply_group(db: Database, session_id: str, survivor: int, losers: list[int], now: str) -> int:
    rows = {int(r[0]): r for r in db.query(GROUP_ROWS, (session_id, ids_json([survivor, *losers])))}
    present = [i for i in losers if i in rows and not rows[i][6]]
    if survivor not in rows or not present:
        return 0
    group = [rows[survivor], *(rows[i] for i in present)]
    keep = rows[survivor]
    expiries = [r[7] for r in group]
    meta = json.loads(keep[10])
    tags: list[str] = list(meta.get("tags") or [])
    for r in group[1:]:
        for tag in json.loads(r[10]).get("tags") or []:
            if tag not in tags and len(tags) < MAX_TAGS:
                tags.append(tag)
    if tags:
        meta["tags"] = tags
    used = [str(r[9]) for r in group if r[9] is not None]
    db.execute(
        UPDATE_SURVIVOR,
        (
            min(int(r[3]) for r in group),
            max(int(r[4]) for r in group),
            max(float(r[5]) for r in group),
            int(keep[6]),
            None if any(e is None for e in expiries) else max(str(e) for e in expiries),
            sum(int(r[8]) for r in group),
            max(used) if used else None,
            dump_json(meta, "metadata"),
            now,
            survivor,
        ),
    )
    db.execute(RELINK, (survivor, ids_json(present)))
    sources = [
        {
            "chunk_id": r[1],
            "text": r[2],
            "sequence_start": int(r[3]),
            "sequence_end": int(r[4]),
            "importance": float(r[5]),
        }
        for r in group[1:]
    ]
    db.execute(
        INSERT_RECORD,
        ("merge", session_id, keep[1], int(keep[3]), int(keep[4]), json.dumps(sources), now),
    )
    db.execute(
        "DELETE FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (ids_json(present),)
    )
    return len(present)


# -- step 2: condensing old spans --------------------------------------------------------------


def _eligible_spans(
    db: Database, session_id: str, cutoff: str, min_span: int, max_span: int
) -> list[list[MemoryRecord]]:
    spans: list[list[MemoryRecord]] = []
    run: list[MemoryRecord] = []
    rows = db.query(SPAN_EVENTS.format(range=""), (session_id,))
    for sequence, payload, created, blocked, is_note in [*rows, (None, None, None, 1, 0)]:
        if blocked or is_note or sequence is None or str(created) > cutoff:
            spans.extend(run[i : i + max_span] for i in range(0, len(run), max_span))
            run = []
            continue
        run.append(MemoryRecord(session_id, int(sequence), json.loads(payload), str(created)))
    return [s for s in spans if len(s) >= min_span]


#: A planned span: its events, the summary's chunk texts and their vectors.
_Span = tuple[list[MemoryRecord], list[str], Any]


def _plan_spans(
    engine: WriteDeps,
    session_id: str,
    cutoff: str,
    min_span: int,
    max_span: int,
    condense: Condenser,
) -> list[_Span]:
    planned = []
    for span in _eligible_spans(engine.db, session_id, cutoff, min_span, max_span):
        summary = condense(span)
        if not isinstance(summary, str):
            raise InvalidInputError("the condenser must return a string")
        texts = chunk_text(summary, engine.chunk_spec)
        if texts:
            planned.append((span, texts, embed_texts(engine, texts)))
    return planned


def _apply_spans(
    engine: WriteDeps, session_id: str, spans: list[_Span], now: str, drop_originals: bool
) -> dict[str, int]:
    out = {"summaries": 0, "chunks": 0, "events": 0, "dropped": 0, "span_skipped": 0}
    for span, texts, vectors in spans:
        first, last = span[0].sequence, span[-1].sequence
        recheck = engine.db.query(
            SPAN_EVENTS.format(range=" AND e.sequence BETWEEN ? AND ?"),
            (session_id, first, last),
        )
        if [int(r[0]) for r in recheck] != [r.sequence for r in span] or any(
            r[3] or r[4] for r in recheck
        ):
            out["span_skipped"] += 1
            continue
        made, dropped = _write_summary(engine, span, texts, vectors, now, drop_originals)
        out["summaries"] += 1
        out["chunks"] += made
        out["events"] += len(span)
        out["dropped"] += dropped
    return out


def _write_summary(
    engine: WriteDeps,
    span: Sequence[MemoryRecord],
    texts: Sequence[str],
    vectors: Any,
    now: str,
    drop_originals: bool,
) -> tuple[int, int]:
    db = engine.db
    session_id, first, last = span[0].session_id, span[0].sequence, span[-1].sequence
    originals = db.query(SPAN_CHUNKS, (session_id, first, last))
    importance = max((float(r[1]) for r in originals), default=0.5)
    expiries = [r[2] for r in originals]
    expires = None if not expiries or None in expiries else max(str(e) for e in expiries)
    sequences = json.dumps([r.sequence for r in span])
    meta = dump_json(
        {"kind": "summary", "sequence_start": first, "sequence_end": last, "events": len(span)},
        "summary metadata",
    )
    sources = json.dumps([{"sequence": r.sequence} for r in span])
    made = 0
    rows = [None] * len(texts) if vectors is None else list(vectors)
    for text, vector in zip(texts, rows, strict=True):
        digest = content_hash(f"summary\x00{first}\x00{last}\x00{text}")
        if find_chunk(db, session_id, digest) is not None:
            continue
        row = ChunkRow(
            session_id, text, digest, meta, first, last, importance, expires, consolidated_at=now
        )
        rowid = insert_chunk(db, row, vector, engine.embedder.model_id, now)
        db.execute(LINK_SPAN, (session_id, sequences, rowid))
        chunk_id = chunk_id_for(session_id, digest)
        db.execute(INSERT_RECORD, ("summary", session_id, chunk_id, first, last, sources, now))
        made += 1
    ids = [int(r[0]) for r in originals]
    db.execute(SET_CONSOLIDATED, (now, ids_json(ids)))
    dropped = 0
    if drop_originals and made:
        dropped = delete_chunks(db, [int(r[0]) for r in originals if r[3]]).chunks
    return made, dropped
