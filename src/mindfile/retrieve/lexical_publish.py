"""Publishing a BM25 generation (:meth:`mindfile.retrieve.lexical.Bm25Index.merge`): when
one is due, and the file side of a merge, run with the folder's build lock held and no
lock of the index (docs/architecture.md, "Index lifecycle"; the format is
:mod:`.lexical_disk`'s)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from mindfile.retrieve.lexical_disk import Flat, LexManifest, Segment, collect, merge
from mindfile.retrieve.lexical_published import published_bounds
from mindfile.retrieve.lexical_state import Frozen, State
from mindfile.storage.backend import AnyDatabase
from mindfile.storage.index_source import IndexSourceStore
from mindfile.vector.ann_disk import MANIFEST

__all__ = ["fits", "merge_due", "open_generations", "write_generation"]


def fits(
    manifest: LexManifest | None,
    store: str,
    analyzer: str,
    db: AnyDatabase,
    source: IndexSourceStore,
) -> bool:
    """Whether a manifest fits ``store`` and ``analyzer`` and is not from the store's
    future (a store file restored from a backup, or replaced, makes its base stale)."""
    if manifest is None or (manifest.store, manifest.analyzer) != (store, analyzer):
        return False
    with db.lock, db.snapshot():
        high = source.chunk_id_high()
        oldest, newest = source.text_change_bounds()
    # A base older than the change log's oldest entry cannot catch up (pruned).
    return (
        manifest.max_id <= high
        and manifest.changes_seq <= newest
        and manifest.changes_seq >= oldest - 1
    )


def merge_due(state: State, least: int, fraction: float) -> bool:
    """Whether ``state`` holds enough beyond its published generations to publish: at
    least ``least`` changed documents and ``fraction`` of the L0's, or tombstones due
    for compaction in a published generation (the index's ``MERGE_MIN`` and
    ``MERGE_FRACTION``). The delta's own tombstones count among its documents: during
    an ingest it gathers them by itself (each new event changes its predecessor's
    context), and counting them again made a helper publish its L0 every ~2.5k chunks
    whatever the L0's size."""
    l0_docs = len(state.l0.seg) if state.l0 is not None else 0
    held = state.delta.n_alive + state.delta.dead
    return held >= max(least, int(fraction * l0_docs)) or state.published_compact_soon()


def open_generations(folder: Path, manifest: LexManifest, held: State) -> State:
    """A state on ``manifest``'s generations (raises OSError or ValueError when one is
    missing or damaged). A generation's files never change (each has a new name): one
    ``held`` maps already is reused, with the window bounds computed on it, so an L0
    publish does not make every searching process map and bound its base again."""
    mapped = {p.seg.generation: p for p in held.published}
    segs = []
    for gen, docs, postings, total in manifest.segments():
        pub = mapped.get(gen)
        if pub is not None and pub.seg.expected == (docs, postings):
            segs.append(pub.seg)
        else:
            segs.append(Segment(folder, gen, docs, postings, total))
    fresh = State(manifest, segs)
    for pub in fresh.published:
        before = mapped.get(pub.seg.generation)
        if before is not None and before.seg is pub.seg:
            pub.inherit_bounds(before)
    return fresh


def combine(flats: list[Flat]) -> Flat:
    """Several deltas' postings as one (their documents numbered one after another)."""
    if len(flats) == 1:
        return flats[0]
    offsets = np.cumsum([0] + [len(f.rowid) for f in flats])
    return Flat(
        terms=[t for f in flats for t in f.terms],
        counts=np.concatenate([f.counts for f in flats]),
        doc=np.concatenate([f.doc + np.int32(o) for f, o in zip(flats, offsets, strict=False)]),
        tf=np.concatenate([f.tf for f in flats]),
        rowid=np.concatenate([f.rowid for f in flats]),
        length=np.concatenate([f.length for f in flats]),
        session=[s for f in flats for s in f.session],
        alive=np.concatenate([f.alive for f in flats]),
    )


def write_generation(
    folder: Path,
    frozen: Frozen,
    *,
    full: bool,
    store: str,
    analyzer: str,
    cancelled: Callable[[], bool] | None = None,
) -> LexManifest:
    """Publish the ``frozen`` deltas with the published generations (their documents
    alive in this process): as a new base holding everything when ``full``, else as a
    new L0 generation that also tombstones the base's dead documents. Saves the
    manifest (the switch other processes see) and removes the generations it no longer
    names; returns it. ``cancelled``: see :func:`lexical_disk.merge` (raises
    :class:`~mindfile.retrieve.lexical_disk.Cancelled`, nothing published)."""
    built = datetime.now(UTC).isoformat(timespec="seconds")
    flats = frozen.flats()
    base, base_alive, l0, l0_alive = frozen.base, frozen.base_alive, frozen.l0, frozen.l0_alive
    old, max_id, changes_seq = frozen.manifest, frozen.max_id, frozen.changes_seq
    if full:
        if l0 is not None:
            assert l0_alive is not None
            flats = [l0.flat(l0_alive), *flats]
        gen, docs, postings, total = merge(
            folder, base, base_alive, combine(flats), extra=published_bounds, cancelled=cancelled
        )
        manifest = LexManifest(
            store=store,
            analyzer=analyzer,
            generation=gen,
            max_id=max_id,
            changes_seq=changes_seq,
            docs=docs,
            postings=postings,
            total_len=total,
            built_at=built,
        )
    else:
        assert base is not None and base_alive is not None and old is not None
        dead = np.asarray(base.doc_rowid)[~base_alive]
        gen, docs, postings, total = merge(
            folder, l0, l0_alive, combine(flats), dead=dead, cancelled=cancelled
        )
        manifest = dataclasses.replace(
            old,
            max_id=max_id,
            changes_seq=changes_seq,
            built_at=built,
            l0=gen,
            l0_docs=docs,
            l0_postings=postings,
            l0_total_len=total,
        )
    manifest.save(folder / MANIFEST)
    collect(folder, keep=[manifest.generation, manifest.l0])
    return manifest
