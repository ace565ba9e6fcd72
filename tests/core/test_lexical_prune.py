"""Block-max pruning of the BM25 leg over a published generation (``top_pruned``): it
must answer exactly what the exhaustive scan answers (same chunks, same float scores,
same tie order) with tombstones and filters, and it must actually skip work."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindfile.retrieve import lexical_published as lp
from mindfile.retrieve import lexical_state as ls
from mindfile.retrieve.lexical_disk import Cancelled, Flat, Segment, merge
from mindfile.vector.base import VectorFilter


def _generation(
    folder: Path,
    rng: np.random.Generator,
    n_docs: int,
    df: list[int],
    tfs: list[float],
    stored: bool = False,
) -> tuple[Segment, list[str]]:
    """A published generation of ``n_docs`` documents and one term per ``df`` entry
    (held by that many random documents, frequencies and lengths from few values, so
    scores often tie); ``stored``: with window bounds written at publish time."""
    terms = [f"t{i}" for i in range(len(df))]
    docs = [np.sort(rng.choice(n_docs, size=min(d, n_docs), replace=False)) for d in df]
    flat = Flat(
        terms=terms,
        counts=np.array([len(d) for d in docs], dtype=np.int64),
        doc=np.concatenate(docs).astype(np.int32),
        tf=rng.choice(np.array(tfs, dtype=np.float32), size=sum(len(d) for d in docs)),
        rowid=np.arange(1, n_docs + 1, dtype=np.int64) * 3,
        length=rng.choice(np.array([3, 5, 8, 40], dtype=np.float32), size=n_docs),
        session=[f"s{i % 4}" for i in range(n_docs)],
        alive=np.ones(n_docs, dtype=bool),
    )
    extra = lp.published_bounds if stored else None
    gen, n, p, total = merge(folder, None, None, flat, extra=extra)
    return Segment(folder, gen, n, p, total), terms


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(1, 700),
    df=st.lists(st.integers(1, 700), min_size=1, max_size=6),
    tfs=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 7.0]), min_size=1, max_size=3),
    k=st.integers(1, 40),
    dead=st.floats(0.0, 0.9),
    sessions=st.none() | st.lists(st.sampled_from(["s0", "s1", "s2", "s3", "nope"])),
    rowid_share=st.none() | st.floats(0.0, 1.0),
    shift=st.integers(0, 4),
    cache_from=st.sampled_from([1, 50, 10**9]),
    first=st.sampled_from([1, 2, 64]),
    store_from=st.none() | st.sampled_from([1, 50]),
)
def test_pruned_top_k_is_exactly_the_exhaustive_one(
    seed: int,
    n_docs: int,
    df: list[int],
    tfs: list[float],
    k: int,
    dead: float,
    sessions: list[str] | None,
    rowid_share: float | None,
    shift: int,
    cache_from: int,
    first: int,
    store_from: int | None,
) -> None:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(lp, "WINDOW_SHIFT", shift)
        mp.setattr(lp, "_CACHE_FROM", cache_from)
        mp.setattr(lp, "_FIRST_WINDOWS", first)  # small: many batches, windows skipped
        if store_from is not None:  # bounds written at publish time, for these terms
            mp.setattr(lp, "_STORE_FROM", store_from)
        seg, terms = _generation(Path(tmp), rng, n_docs, df, tfs, stored=store_from is not None)
        most = max(min(d, n_docs) for d in df)
        assert (seg.bounds is not None) == (store_from is not None and most >= store_from)
        state = ls.State(None, [seg])
        pub = state.published[0]
        for at in np.flatnonzero(rng.random(n_docs) < dead).tolist():
            pub.kill(at)
        rowids = None
        if rowid_share is not None:
            rowids = np.sort(rng.choice(np.asarray(seg.doc_rowid), int(rowid_share * n_docs)))
        where = None if sessions is None and rowids is None else VectorFilter(sessions, rowids)
        # idf as State.score gives it, query terms in random order, repeats allowed
        query = list(rng.choice(terms, size=int(rng.integers(1, 2 * len(terms) + 1))))
        wanted = []
        for term in query:
            ti = seg.term_index(term)
            assert ti is not None
            wanted.append((float(rng.choice([1e-6, 0.3, 1.7])), ti))
        # the cached and stored bounds must stay bounds when the average length moves
        # (above the stored cap: computed per process instead)
        # (no live document: State.score answers [] before scoring, never with avgdl 0)
        avgdl = pub.total / pub.n_alive if pub.n_alive else 1.0
        for factor in (1.0, 0.5, 3.0, 1.0, 1.04):
            exhaustive = lp.published_top(pub, wanted, avgdl * factor, where, k, prune=False)
            pruned = lp.published_top(pub, wanted, avgdl * factor, where, k, prune=True)
            assert pruned == exhaustive


def test_score_prunes_a_large_query_and_answers_like_the_exhaustive_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A common term in every document, a rarer one in a few: the documents holding both
    # sit in few windows, so most windows are skipped.
    rng = np.random.default_rng(7)
    seg, terms = _generation(tmp_path, rng, 20_000, [20_000, 30, 5_000], [1.0, 2.0])
    state = ls.State(None, [seg])
    monkeypatch.setattr(lp, "PRUNE_FROM", 10**12)
    exhaustive = [state.score(terms, k, None) for k in (1, 10, 150)]
    monkeypatch.setattr(lp, "PRUNE_FROM", 1_000)
    monkeypatch.setattr(lp, "STATS", [])
    pruned = [state.score(terms, k, None) for k in (1, 10, 150)]
    assert pruned == exhaustive
    assert lp.STATS is not None and len(lp.STATS) == 3  # the pruned path answered each
    for windows, _batches, scored, _found in lp.STATS:
        assert scored < windows // 2


def test_a_query_that_prunes_little_gives_up_for_the_exhaustive_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Terms of similar, high document frequency: after the first batch most windows
    # can still hold a top-k document, so the automatic choice scores exhaustively
    # (the same answer), while a query that prunes well keeps pruning.
    rng = np.random.default_rng(11)
    seg, terms = _generation(tmp_path, rng, 20_000, [9_000, 9_500, 8_000, 30], [1.0, 2.0])
    state = ls.State(None, [seg])
    pub = state.published[0]
    monkeypatch.setattr(lp, "PRUNE_FROM", 1_000)
    wide = [(1.0, seg.term_index(t)) for t in terms[:3]]
    narrow = [(0.05, seg.term_index(terms[0])), (3.0, seg.term_index(terms[3]))]
    avgdl = pub.total / pub.n_alive
    for wanted, k, gives_up in ((wide, 150, True), (narrow, 10, False)):
        exhaustive = lp.published_top(pub, wanted, avgdl, None, k, prune=False)
        monkeypatch.setattr(lp, "STATS", [])
        assert lp.published_top(pub, wanted, avgdl, None, k) == exhaustive
        assert lp.STATS is not None and len(lp.STATS) == 1
        windows, batches, scored, found = lp.STATS[0]
        assert (found == -1) is gives_up  # -1: given up after the first batch
        assert (batches == 1) if gives_up else (scored < windows * lp.GIVE_UP)
        # Forced pruning never gives up (the property test compares it with the scan).
        monkeypatch.setattr(lp, "STATS", [])
        assert lp.published_top(pub, wanted, avgdl, None, k, prune=True) == exhaustive
        assert lp.STATS[0][3] != -1


@pytest.mark.parametrize("shift", [0, 4, 12])
def test_packed_window_offsets_read_back(shift: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lp, "WINDOW_SHIFT", shift)
    rng = np.random.default_rng(shift)
    n_win = 5_000
    off = np.zeros(n_win + 1, dtype=np.int64)
    np.cumsum(rng.integers(0, (1 << shift) + 1, size=n_win), out=off[1:])
    packed = lp.Offsets.pack(off)
    assert np.array_equal(packed[np.arange(n_win + 1, dtype=np.int64)], off)
    assert packed.low.dtype == np.uint16


def test_stored_bounds_are_the_per_process_ones_and_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lp, "_STORE_FROM", 1_000)
    rng = np.random.default_rng(3)
    seg, terms = _generation(tmp_path, rng, 5_000, [4_000, 30, 1_500], [1.0, 2.0], stored=True)
    stored = seg.bounds
    assert stored is not None
    assert stored.terms.tolist() == [seg.term_index(terms[0]), seg.term_index(terms[2])]
    pub = ls.State(None, [seg]).published[0]
    for term in (terms[0], terms[2]):
        ti = seg.term_index(term)
        assert ti is not None
        top, off = pub.bounds(ti, stored.cap)  # from the generation's files
        assert not pub._bounds  # nothing computed by this process
        row = stored.row(ti)
        assert row is not None and np.shares_memory(top, stored.top)
        # the same bytes the per-process path computes for that average length
        s, e = int(seg.post_off[ti]), int(seg.post_off[ti + 1])
        want_top, want_off = lp.term_bounds(
            seg.post_doc[s:e], seg.post_tf[s:e], seg.doc_len, stored.cap
        )
        assert np.array_equal(top, want_top)
        windows = np.arange(pub.windows + 1, dtype=np.int64)
        assert np.array_equal(off[windows], want_off[windows])
    # above the stored cap the process computes (and caches) its own
    ti = seg.term_index(terms[0])
    assert ti is not None
    pub.bounds(ti, stored.cap * 1.5)
    assert ti in pub._bounds


def test_damaged_or_foreign_stored_bounds_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lp, "_STORE_FROM", 100)
    rng = np.random.default_rng(5)
    seg, _terms = _generation(tmp_path, rng, 2_000, [1_000, 500], [1.0, 3.0], stored=True)
    where = tmp_path / seg.generation
    assert seg.bounds is not None
    # bounds of another window size: ignored by a process using this one
    monkeypatch.setattr(lp, "WINDOW_SHIFT", 3)
    pub = ls.State(
        None, [Segment(tmp_path, seg.generation, *seg.expected, seg.total_len)]
    ).published[0]
    pub.bounds(0, 1e9)
    assert pub._bounds  # computed here, not read from the files
    monkeypatch.undo()
    # a truncated array: the generation still opens, without stored bounds
    np.save(where / "bound_top.npy", np.zeros((1, 3), dtype=np.uint8))
    again = Segment(tmp_path, seg.generation, *seg.expected, seg.total_len)
    assert again.bounds is None
    (where / "bounds.json").write_text("{not json")
    assert Segment(tmp_path, seg.generation, *seg.expected, seg.total_len).bounds is None


def test_live_document_counts_follow_tombstones_between_searches(tmp_path: Path) -> None:
    # IDF counts a generation's live documents only. With tombstones that count is
    # cached per term: a tombstone added after a search must change the next answer as
    # it changes a fresh state's.
    rng = np.random.default_rng(11)
    seg, terms = _generation(tmp_path, rng, 2_000, [1_500, 40, 300], [1.0, 2.0, 3.0])
    state = ls.State(None, [seg])
    pub = state.published[0]
    pub.kill(0)
    state.score(terms, 50, None)  # caches the counts with one tombstone
    t0 = seg.term_index("t0") or 0
    holders = np.asarray(seg.post_doc[int(seg.post_off[t0]) : int(seg.post_off[t0 + 1])])
    for at in holders[:1_200].tolist():  # most holders of t0: its IDF rises
        pub.kill(at)
    fresh = ls.State(None, [seg])
    fresh_pub = fresh.published[0]
    for at in np.flatnonzero(~pub.alive).tolist():
        fresh_pub.kill(at)
    for k in (1, 10, 150):
        assert state.score(terms, k, None) == fresh.score(terms, k, None)
    assert [pub.df(seg.term_index(t) or 0) for t in terms] == [
        int(np.count_nonzero(pub.alive[seg.post_doc[s:e]]))
        for s, e in zip(seg.post_off[:-1], seg.post_off[1:], strict=True)
    ]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    picks=st.lists(st.integers(0, 650), max_size=120),
    before=st.lists(st.integers(0, 199), max_size=30),
)
def test_removing_many_rowids_at_once_is_removing_them_one_by_one(
    seed: int, picks: list[int], before: list[int]
) -> None:
    # An L0's tombstones of the base are applied at once when a state opens: the same
    # documents, counts and total length (to the last bit) as one remove() each, for
    # rowids named twice, absent from the generation, or already dead.
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        seg, _terms = _generation(Path(tmp), rng, 200, [150, 20], [1.0, 2.0])
        one, many = lp.Published(seg), lp.Published(seg)
        for pub in (one, many):
            for at in before:
                pub.kill(at)
        rowids = np.array(picks, dtype=np.int64)  # generation rowids are 3, 6, ... 600
        for rowid in rowids.tolist():
            one.remove(rowid)
        many.remove_many(rowids)
        assert np.array_equal(one.alive, many.alive)
        assert (one.n_alive, one.dead, one.total) == (many.n_alive, many.dead, many.total)


@pytest.mark.parametrize("after", [0, 1, 2, 3, 4, 5, 6, 8])
def test_a_cancelled_merge_leaves_nothing_behind(tmp_path: Path, after: int) -> None:
    # A merge asks ``cancelled`` between its steps and its files: answered True at any
    # of them, it raises Cancelled and no generation (finished or not) is left.
    rng = np.random.default_rng(after)
    seg, _terms = _generation(tmp_path / "base", rng, 300, [200, 40], [1.0, 2.0])
    asked: list[int] = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > after

    rng2 = np.random.default_rng(99)
    other, _ = _generation(tmp_path / "other", rng2, 50, [30], [1.0])
    flat = other.flat(np.ones(len(other), dtype=bool))
    flat.rowid = flat.rowid + 10_000  # chunks the base does not hold
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(Cancelled):
        merge(
            out,
            seg,
            np.ones(len(seg), dtype=bool),
            flat,
            extra=lp.published_bounds,
            cancelled=cancelled,
        )
    assert list(out.iterdir()) == []
