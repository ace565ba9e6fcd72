"""Token match (mindfile/retrieve/token_match.py): the best fused candidates reranked by
how closely each query word piece matches some word piece of the chunk, through the
bundled model's neighbour table; token sets stored off the write path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from backends import raw

import mindfile
from mindfile.embed import StaticEmbedder
from mindfile.errors import InvalidInputError
from mindfile.retrieve import retriever, token_match
from mindfile.retrieve.token_match import (
    TokenMatchConfig,
    apply_token_match,
    backfill,
    matcher_for,
    neighbour_table,
)
from mindfile.storage.backend import search_store

from ._support import count_side_thread_legs, in_threads

MEMORIES = [
    ("park", 1, "I love going to this park near my house, it's a peaceful spot for yoga."),
    ("park", 2, "The bench by the pond holds special meaning to me."),
    ("work", 1, "The quarterly report is due on Friday, the numbers look fine."),
    ("work", 2, "Our team moved the standup meeting to ten in the morning."),
    ("food", 1, "We tried a new ramen place downtown, the broth was rich."),
    ("food", 2, "Grocery list: eggs, rice, tomatoes, basil and olive oil."),
    ("trip", 1, "Booked the train tickets to Porto for the long weekend."),
    ("trip", 2, "The hotel in Porto overlooks the river."),
]


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder(worker=False)


def _reference(matcher, query: np.ndarray, pieces: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    """The score by its definition, one query piece at a time."""
    have = set(int(p) for p in pieces)
    total = weighted = 0.0
    for q in query.tolist():
        weight = float(matcher.weights[q])
        best = 0.0
        for near, sim in zip(matcher.ids[q].tolist(), matcher.sims[q].tolist(), strict=True):
            if near in have:
                best = max(best, sim / 255.0)
        total += weight
        weighted += weight * best
    return weighted / total if total else 0.0


def test_scores_equal_their_definition(embedder: StaticEmbedder) -> None:
    matcher = matcher_for(embedder)
    assert matcher is not None
    rng = np.random.default_rng(7)
    texts = [text for _, _, text in MEMORIES] + ["", "!!!", "naïve café über straße"]
    sets = matcher.token_sets(texts)
    # Sets from the neighbours of the query's pieces too, so that near matches count.
    query = matcher.query_ids("a peaceful place to relax near home")
    near = [np.unique(matcher.ids[q][rng.integers(1, 64, 5)]).astype(np.uint16) for q in query]
    sets += [*near, np.array([], dtype=np.uint16)]
    got = matcher.scores(query, sets)
    want = [_reference(matcher, query, s) for s in sets]
    assert got == pytest.approx(want, abs=1e-9)
    assert got[len(texts) - 3] == 0.0  # the empty text
    assert got[-1] == 0.0  # an empty set
    assert all(0.0 <= v <= 1.0 for v in got)
    # A text holding every query piece matches fully.
    assert matcher.scores(query, [np.unique(query).astype(np.uint16)])[0] == pytest.approx(1.0)


def test_a_query_without_pieces_scores_nothing(embedder: StaticEmbedder) -> None:
    matcher = matcher_for(embedder)
    assert matcher is not None
    empty = np.array([], dtype=np.int64)
    assert matcher.scores(empty, matcher.token_sets(["hello world"])).tolist() == [0.0]


def test_the_neighbour_table_is_the_bundled_models(embedder: StaticEmbedder) -> None:
    table = neighbour_table(embedder.token_model_dir())
    assert table is not None
    ids, sims = table
    matrix = embedder.token_vectors()
    assert ids.shape == sims.shape == (len(matrix), 64)
    assert (ids[:, 0] == np.arange(len(matrix))).all()  # each piece is its own nearest
    assert (np.diff(sims.astype(np.int16), axis=1) <= 0).all()  # by descending cosine
    unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    for piece in (1000, 2054, 7592, 15000, 29000):
        cosines = np.clip(unit[ids[piece]] @ unit[piece], 0.0, 1.0)
        cosines[0] = 1.0
        assert np.abs(cosines * 255.0 - sims[piece]).max() <= 0.51 + 1e-3
        # and nothing outside the row is nearer than its last neighbour
        everything = unit @ unit[piece]
        everything[ids[piece]] = -1.0
        assert everything.max() <= cosines[-1] + 1.0 / 255.0


def test_a_stale_or_missing_table_turns_token_match_off(tmp_path: Path) -> None:
    assert neighbour_table(tmp_path) is None
    (tmp_path / "neighbours.json").write_text('{"k": 64, "model_sha256": "other"}')
    (tmp_path / "build.json").write_text('{"sha256": "this"}')
    assert neighbour_table(tmp_path) is None


def test_only_the_bundled_model_recommends_it(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "h.db", embedder="hash") as mem:
        assert matcher_for(mem.embedder) is None
        mem.store_many(MEMORIES)
        hits = mem.search("a peaceful place")
        assert hits and all(hit.breakdown.token_match is None for hit in hits)


def test_the_memory_whose_words_come_closest_rises(store_location: str) -> None:
    with mindfile.open(store_location) as mem:
        mem.store_many(MEMORIES)
        query = "Where does she find peace?"
        on = mem.search(query, top_k=8)
        off = mem.search(query, top_k=8, token_match=False)
    by_text = {hit.text: hit for hit in on}
    park = by_text[MEMORIES[0][2]]
    lifts = [hit.breakdown.token_match for hit in on]
    assert all(lift is not None and 0.0 <= lift <= 0.4 + 1e-9 for lift in lifts)
    assert park.breakdown.token_match == max(lifts)  # "peaceful" is nearest to "peace"
    assert on[0].text == park.text
    assert all(hit.breakdown.token_match is None for hit in off)
    before = {hit.text: hit.score for hit in off}
    for hit in on:  # the lift is all that differs
        assert hit.score == pytest.approx(before[hit.text] + hit.breakdown.token_match)


def test_single_leg_modes_and_rrf_do_without(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "m.db") as mem:
        mem.store_many(MEMORIES)
        for kwargs in ({"mode": "vector"}, {"mode": "fts"}, {"fusion": "rrf"}):
            hits = mem.search("train to Porto", **kwargs)  # type: ignore[arg-type]
            assert hits and all(hit.breakdown.token_match is None for hit in hits)


def test_token_match_must_be_a_bool(tmp_path: Path) -> None:
    with (
        mindfile.open(tmp_path / "m.db", embedder="hash") as mem,
        pytest.raises(InvalidInputError, match="token_match"),
    ):
        mem.search("x", token_match="yes")  # type: ignore[arg-type]


def test_the_backfill_stores_what_a_search_computes_inline(store_location: str) -> None:
    with mindfile.open(store_location) as mem:
        mem.store_many(MEMORIES)
        matcher = matcher_for(mem.embedder)
        assert matcher is not None
        store = search_store(mem.db)
        sql = raw(mem)
        rows = sql.query("SELECT id, chunk_text, token_set FROM chunks ORDER BY id")
        assert all(blob is None for _, _, blob in rows)  # written without, off the path
        queries = ["peaceful park", "train tickets to Porto", "what did we eat downtown"]
        # Inline: the search tokenises its candidates itself (no backfill yet).
        cfg = TokenMatchConfig()
        inline = [[(h.chunk_id, h.score) for h in mem.search(q, top_k=8)] for q in queries]
        assert backfill(mem.db, matcher, pause=0.0) >= 0  # what the search's thread left
        assert store.untokenized_after(0, 100) == []
        for rowid, text, _ in rows:
            got = sql.scalar("SELECT token_set FROM chunks WHERE id = ?", (rowid,))
            want = matcher.token_sets([text])[0]
            assert np.frombuffer(bytes(got), dtype="<u2").tolist() == want.tolist()
        stored = [[(h.chunk_id, h.score) for h in mem.search(q, top_k=8)] for q in queries]
        # The same ranking (the first searches may rank BM25 with FTS5 while the index
        # builds: equal to float rounding).
        assert [[c for c, _ in row] for row in stored] == [[c for c, _ in row] for row in inline]
        for got, want in zip(stored, inline, strict=True):
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
        assert backfill(mem.db, matcher, pause=0.0) == 0  # idempotent
        assert cfg.depth == 100


def test_apply_scores_only_the_best_candidates(tmp_path: Path) -> None:
    from mindfile.retrieve.fusion import Fused

    with mindfile.open(tmp_path / "m.db") as mem:
        mem.store_many(MEMORIES)
        matcher = matcher_for(mem.embedder)
        assert matcher is not None
        rowids = [int(r[0]) for r in mem.db.query("SELECT id FROM chunks ORDER BY id")]
        fused = {r: Fused(r, score=1.0 - i / 10) for i, r in enumerate(rowids)}
        apply_token_match(mem.db, fused, matcher, "peaceful park", TokenMatchConfig(depth=3))
        lifted = [r for r in rowids if fused[r].token_match]
        assert set(lifted) <= set(rowids[:3])
        assert all(fused[r].token_match == 0.0 for r in rowids[3:])
        # min-max over the three, floored at width 0.2: lifts within [0, weight]
        lifts = [fused[r].token_match or 0.0 for r in rowids[:3]]
        assert min(lifts) == 0.0 and 0.0 < max(lifts) <= 0.4


def test_a_read_only_store_matches_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path) as mem:
        mem.store_many(MEMORIES)
        writable = [(h.chunk_id, h.score) for h in mem.search("peaceful park", token_match=True)]
    with mindfile.open(path, read_only=True) as ro:
        hits = ro.search("peaceful park")
        assert [(h.chunk_id, h.score) for h in hits] == writable
        assert all(h.breakdown.token_match is not None for h in hits)


def test_the_search_store_keeps_sets_on_both_backends(any_mem: mindfile.Mindfile) -> None:
    any_mem.store_many(MEMORIES)
    store = search_store(any_mem.db)
    page = store.untokenized_after(0, 3)
    assert [text for _, text in page] == [text for _, _, text in MEMORIES[:3]]
    rowids = [r for r, _ in store.untokenized_after(0, 100)]
    assert len(rowids) == len(MEMORIES)
    first, second = rowids[0], rowids[1]
    store.store_token_sets([(first, b"\x01\x00\x02\x00")])
    store.store_token_sets([(first, b"\x09\x00"), (second, b"\x03\x00")])  # first kept
    got = {r: (blob, text) for r, blob, text in store.token_sets([*rowids[:3], 10**9])}
    assert set(got) == set(rowids[:3])  # a rowid that does not exist is left out
    assert got[first] == (b"\x01\x00\x02\x00", None)  # a set, and no text to tokenise
    assert got[second] == (b"\x03\x00", None)
    assert got[rowids[2]] == (None, MEMORIES[2][2])  # none yet: its text instead
    assert [r for r, _ in store.untokenized_after(0, 100)] == rowids[2:]
    assert store.token_sets([]) == []
    store.store_token_sets([])


@pytest.fixture
def overlapping(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every search runs its BM25 leg (and the token-match prescoring) on the side
    thread; counts how often."""
    yield count_side_thread_legs(monkeypatch)


def test_results_equal_across_threads_while_the_backfill_runs(
    tmp_path: Path, overlapping: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    words = [
        "park",
        "river",
        "train",
        "concert",
        "garden",
        "piano",
        "coffee",
        "book",
        "sister",
        "yoga",
        "ramen",
        "hotel",
    ]
    rows = [
        ("s1" if i % 3 else "s2", i, " ".join(words[(i * k) % len(words)] for k in (1, 3, 7)))
        for i in range(1, 400)
    ]
    queries = [f"{a} {b}" for a in words for b in words[::4]]
    with mindfile.open(tmp_path / "m.db") as mem:
        mem.store_many(rows)
        assert mem.lexical is not None
        mem.lexical.size()
        monkeypatch.setattr(retriever, "overlap_allowed", lambda: False)
        in_turn = [[(h.chunk_id, h.score) for h in mem.search(q, top_k=8)] for q in queries]
        assert overlapping[0] == 0
        monkeypatch.setattr(retriever, "overlap_allowed", lambda: True)
        mem.db.execute("UPDATE chunks SET token_set = NULL")  # the backfill runs again

        def worker() -> None:
            got = [[(h.chunk_id, h.score) for h in mem.search(q, top_k=8)] for q in queries]
            assert got == in_turn

        in_threads(worker, 4, timeout=180)
        assert overlapping[0] > 0


def test_a_bulk_ingest_goes_without_until_its_helper_reaches_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a bulk ingest's helper writes the sets, a search with more candidates
    without one than it tokenises itself goes without token match (None in the
    breakdown) rather than tokenise 100 chunks; otherwise it tokenises them all."""
    started: list[object] = []
    monkeypatch.setattr(token_match, "_start_backfill", lambda db, m: started.append(db))
    rows = [("s", i, f"note {i} about the garden shed and its tools") for i in range(1, 40)]
    with mindfile.open(tmp_path / "m.db") as mem:
        mem.store_many(rows)
        assert len(rows) > token_match.INLINE_MAX
        helper = [True]
        token_match.defer_to(mem.db, lambda: helper[0])
        hits = mem.search("garden tools", top_k=20)
        assert hits and all(h.breakdown.token_match is None for h in hits)
        assert not started  # the helper's job, not this process's
        helper[0] = False  # the helper is gone: this process tokenises and backfills
        inline = mem.search("garden tools", top_k=20)
        assert all(h.breakdown.token_match is not None for h in inline)
        assert started
        matcher = matcher_for(mem.embedder)
        assert matcher is not None
        assert backfill(mem.db, matcher, pause=0.0) == len(rows)
        stored = mem.search("garden tools", top_k=20)
        # the same answer (BM25 may have ranked with FTS5 before: equal to rounding)
        assert [h.chunk_id for h in stored] == [h.chunk_id for h in inline]
        assert [h.score for h in stored] == pytest.approx([h.score for h in inline], abs=1e-6)


def test_a_background_backfill_hands_over_to_a_helper_that_comes_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backfill thread stops between two pages once a bulk ingest's helper writes
    the sets (started before the helper came up, it went on tokenising beside it for
    the whole ingest); ``backfill()`` itself (what the helper runs) does not."""
    monkeypatch.setattr(token_match, "_PAGE", 5)
    rows = [("s", i, f"note {i} about the garden shed and its tools") for i in range(1, 31)]
    with mindfile.open(tmp_path / "m.db") as mem:
        mem.store_many(rows)
        matcher = matcher_for(mem.embedder)
        assert matcher is not None
        checks = [False, False]  # the helper is up from the third check on
        token_match.defer_to(mem.db, lambda: checks.pop(0) if checks else True)
        token_match._run_backfill(mem.db, matcher)

        def stored() -> int:
            return int(mem.db.scalar("SELECT count(*) FROM chunks WHERE token_set IS NOT NULL"))

        assert stored() == 10  # two pages, then handed over
        assert backfill(mem.db, matcher, pause=0.0) == len(rows) - 10
        assert stored() == len(rows)
