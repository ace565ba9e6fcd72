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
from mindfile.index.statements import is_user_statement
from mindfile.manage.importance import iso, parse_time
from mindfile.manage.quota import check_scope
from mindfile.manage.types import ConsolidationRecord, ConsolidationReport
from mindfile.memory._write import embed_texts
from mindfile.memory.summarizer import Condenser, extractive_condenser
from mindfile.storage.chunks import ChunkRow
from mindfile.storage.consolidation import ConsolidationRow, SurvivorUpdate
from mindfile.types import MemoryRecord

if TYPE_CHECKING:
    from mindfile._deps import StoreDeps, WriteDeps
    from mindfile.storage.consolidation import ConsolidationStore

__all__ = ["DEFAULT_OLDER_THAN", "DEFAULT_SIMILARITY", "consolidate", "provenance"]

DEFAULT_SIMILARITY = 0.92
DEFAULT_OLDER_THAN = timedelta(days=7)


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
    store = engine.stores.consolidation
    sessions = _sessions(store, session_id, scope)
    totals = dict.fromkeys(
        ("groups", "merged", "summaries", "chunks", "events", "dropped", "skipped"), 0
    )
    condense = condenser or extractive_condenser
    for sid in sessions:
        # Plan outside the write lock (vectors, condenser, embedder), then apply both
        # steps in one transaction: a failure leaves this session untouched.
        groups = [] if threshold is None else _plan_merge(store, sid, threshold, stamp)
        spans = (
            []
            if age is None
            else _plan_spans(engine, sid, iso(moment - age), min_span, max_span, condense)
        )
        if not groups and not spans:
            continue
        with engine.db.atomic():
            counts = _apply_merge(store, sid, groups, stamp)
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


def provenance(engine: StoreDeps, chunk_id: str) -> list[ConsolidationRecord]:
    """Consolidation records of a surviving or summary chunk, oldest first."""
    check_id(chunk_id, "chunk_id")
    return [
        ConsolidationRecord(
            kind="merge" if r.kind == "merge" else "summary",
            session_id=r.session_id,
            chunk_id=r.chunk_id,
            sequence_start=r.sequence_start,
            sequence_end=r.sequence_end,
            sources=tuple(json.loads(r.sources_json)),
            created_at=r.created_at,
        )
        for r in engine.stores.consolidation.records(chunk_id)
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


def _sessions(store: ConsolidationStore, session_id: str | None, scope: str | None) -> list[str]:
    if session_id is not None:
        return store.sessions(session_id=check_id(session_id, "session_id"))
    if scope is not None:
        return store.sessions(scope=check_scope(scope))
    return store.sessions()


# -- step 1: near-duplicate merge ------------------------------------------------------------


def _plan_merge(
    store: ConsolidationStore, session_id: str, threshold: float, now: str
) -> list[tuple[int, list[int]]]:
    rows = [(c.rowid, c.pinned, c.vector) for c in store.merge_candidates(session_id, now)]
    return plan_groups(rows, threshold)


def _apply_merge(
    store: ConsolidationStore, session_id: str, groups: list[tuple[int, list[int]]], now: str
) -> dict[str, int]:
    out = {"groups": 0, "merged": 0, "merge_skipped": 0}
    for survivor, losers in groups:
        merged = _apply_group(store, session_id, survivor, losers, now)
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


def _apply_group(
    store: ConsolidationStore, session_id: str, survivor: int, losers: list[int], now: str
) -> int:
    rows = store.group_chunks(session_id, [survivor, *losers])
    present = [i for i in losers if i in rows and not rows[i].pinned]
    if survivor not in rows or not present:
        return 0
    group = [rows[survivor], *(rows[i] for i in present)]
    keep = rows[survivor]
    expiries = [r.expires_at for r in group]
    meta = json.loads(keep.metadata_json)
    tags: list[str] = list(meta.get("tags") or [])
    for r in group[1:]:
        for tag in json.loads(r.metadata_json).get("tags") or []:
            if tag not in tags and len(tags) < MAX_TAGS:
                tags.append(tag)
    if tags:
        meta["tags"] = tags
    used = [r.last_accessed_at for r in group if r.last_accessed_at is not None]
    metadata_json = dump_json(meta, "metadata")
    update = SurvivorUpdate(
        rowid=survivor,
        sequence_start=min(r.sequence_start for r in group),
        sequence_end=max(r.sequence_end for r in group),
        importance=max(r.importance for r in group),
        pinned=keep.pinned,
        expires_at=None if any(e is None for e in expiries) else max(str(e) for e in expiries),
        access_count=sum(r.access_count for r in group),
        last_accessed_at=max(used) if used else None,
        metadata_json=metadata_json,
        user_statement=is_user_statement(keep.text, metadata_json),
    )
    sources = [
        {
            "chunk_id": r.chunk_id,
            "text": r.text,
            "sequence_start": r.sequence_start,
            "sequence_end": r.sequence_end,
            "importance": r.importance,
        }
        for r in group[1:]
    ]
    record = ConsolidationRow(
        "merge",
        session_id,
        keep.chunk_id,
        keep.sequence_start,
        keep.sequence_end,
        json.dumps(sources),
        now,
    )
    store.merge(update, present, record)
    return len(present)


# -- step 2: condensing old spans --------------------------------------------------------------


def _eligible_spans(
    store: ConsolidationStore, session_id: str, cutoff: str, min_span: int, max_span: int
) -> list[list[MemoryRecord]]:
    spans: list[list[MemoryRecord]] = []
    run: list[MemoryRecord] = []
    for event in [*store.span_events(session_id), None]:
        if event is None or event.blocked or event.is_note or event.created_at > cutoff:
            spans.extend(run[i : i + max_span] for i in range(0, len(run), max_span))
            run = []
            continue
        run.append(
            MemoryRecord(
                session_id, event.sequence, json.loads(event.payload_json), event.created_at
            )
        )
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
    store = engine.stores.consolidation
    for span in _eligible_spans(store, session_id, cutoff, min_span, max_span):
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
        recheck = engine.stores.consolidation.span_events(session_id, first, last)
        if [e.sequence for e in recheck] != [r.sequence for r in span] or any(
            e.blocked or e.is_note for e in recheck
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
    store = engine.stores.consolidation
    session_id, first, last = span[0].session_id, span[0].sequence, span[-1].sequence
    originals = store.span_chunks(session_id, first, last)
    importance = max((c.importance for c in originals), default=0.5)
    expiries = [c.expires_at for c in originals]
    expires = None if not expiries or None in expiries else max(str(e) for e in expiries)
    sequences = [r.sequence for r in span]
    meta = dump_json(
        {"kind": "summary", "sequence_start": first, "sequence_end": last, "events": len(span)},
        "summary metadata",
    )
    sources = json.dumps([{"sequence": r.sequence} for r in span])
    record = ConsolidationRow("summary", session_id, "", first, last, sources, now)
    made = 0
    rows = [None] * len(texts) if vectors is None else list(vectors)
    for text, vector in zip(texts, rows, strict=True):
        digest = content_hash(f"summary\x00{first}\x00{last}\x00{text}")
        if store.has_chunk(session_id, digest):
            continue
        row = ChunkRow(
            session_id, text, digest, meta, first, last, importance, expires, consolidated_at=now
        )
        store.add_summary_chunk(row, vector, engine.embedder.model_id, sequences, record)
        made += 1
    store.mark_consolidated([c.rowid for c in originals], now)
    dropped = 0
    if drop_originals and made:
        dropped = engine.stores.lifecycle.delete_chunks(
            [c.rowid for c in originals if c.own]
        ).chunks
    return made, dropped
