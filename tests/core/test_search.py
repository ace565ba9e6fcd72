"""The read path: modes, filters, fusion arithmetic, tie-breaks and the static model."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.embed import fusion_calibration
from mindfile.errors import InvalidInputError
from mindfile.retrieve.fusion import (
    DEFAULT_CALIBRATION,
    RRF_K,
    Calibration,
    floored_min_max,
    min_max,
    scaled_to_best,
    weighted_fusion,
)

from ._support import TableEmbedder


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


# Hand-made vectors (query embedding is [1, 0, 0]) so every score can be worked out here.
A, B, C, D = "alpha alpha alpha", "alpha beta gamma delta epsilon", "zeta eta", "theta iota"
VECTORS = {A: [0, 1, 0], B: [1, 0, 0], C: [0.8, 0.6, 0], D: [-1, 0, 0]}
COS = {A: 0.0, B: 1.0, C: 0.8, D: -1.0}
Q = [1.0, 0.0, 0.0]
SESSION_OF = {A: "a", B: "b", C: "c", D: "d"}


class CalibratedTable(TableEmbedder):
    """The table embedder recommending the bundled model's calibration."""

    fusion_calibration = (0.2, 8.0)


@pytest.fixture
def table(store_location: str) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(store_location, embedder=TableEmbedder(VECTORS)) as mem:
        # One session each: neighbouring turns would add FTS context to each other.
        for seq, text in enumerate((A, B, C, D), start=1):
            mem.store(SESSION_OF[text], seq, text)
        yield mem


@pytest.fixture
def calibrated(tmp_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(tmp_path / "c.db", embedder=CalibratedTable(VECTORS)) as mem:
        # One session each: neighbouring turns would add FTS context to each other.
        for seq, text in enumerate((A, B, C, D), start=1):
            mem.store(SESSION_OF[text], seq, text)
        yield mem


def by_text(results: mindfile.SearchResults) -> dict[str, mindfile.SearchHit]:
    return {h.text: h for h in results}


# -- fusion arithmetic ---------------------------------------------------------------------


def test_raw_leg_scores(table: mindfile.Mindfile) -> None:
    hits = by_text(table.search("alpha", query_embedding=Q))
    for text, cos in COS.items():
        assert hits[text].breakdown.vector == pytest.approx(cos, abs=1e-6)
    assert hits[A].breakdown.fts > hits[B].breakdown.fts > 0  # more "alpha", shorter
    assert hits[C].breakdown.fts is None and hits[D].breakdown.fts is None
    assert [hits[t].breakdown.vector_rank for t in (B, C, A, D)] == [1, 2, 3, 4]
    assert [hits[t].breakdown.fts_rank for t in (A, B)] == [1, 2]


def test_weighted_fusion_by_hand(table: mindfile.Mindfile) -> None:
    results = table.search("alpha", query_embedding=Q, fusion="weighted")  # weights 0.7 / 0.3
    # vector min-max over [0, 1, .8, -1] -> A .5, B 1, C .9, D 0; fts over 2 hits -> A 1, B 0
    expected = {B: 0.7 * 1.0 + 0.3 * 0, A: 0.7 * 0.5 + 0.3 * 1, C: 0.7 * 0.9, D: 0.0}
    assert [h.text for h in results] == [B, A, C, D]
    for hit in results:
        assert hit.score == pytest.approx(expected[hit.text], abs=1e-6)
        assert hit.breakdown.fused == hit.score
    hits = by_text(results)
    assert hits[C].breakdown.vector_norm == pytest.approx(0.9, abs=1e-6)
    assert (hits[A].breakdown.fts_norm, hits[B].breakdown.fts_norm) == (1.0, 0.0)

    flipped = table.search(
        "alpha", query_embedding=Q, vector_weight=0.2, fts_weight=0.8, fusion="weighted"
    )
    assert [h.text for h in flipped] == [A, B, C, D]
    assert flipped[0].score == pytest.approx(0.2 * 0.5 + 0.8 * 1, abs=1e-6)


def test_calibrated_fusion_by_hand(calibrated: mindfile.Mindfile) -> None:
    results = calibrated.search("alpha", query_embedding=Q)  # the default, 0.7 / 0.3
    assert (DEFAULT_CALIBRATION.vector_width, DEFAULT_CALIBRATION.fts_scale) == (0.2, 8.0)
    hits = by_text(results)
    # The cosines spread over 2 (> 0.2): min-max, as above. "alpha" is in half of the
    # four chunks, so its BM25 idf is floored at 1e-6: next to no lexical evidence, and
    # divided by 8 (not by the best of two) it stays next to 0 instead of 1.0 / 0.0.
    for text, v in {A: 0.5, B: 1.0, C: 0.9, D: 0.0}.items():
        assert hits[text].breakdown.vector_norm == pytest.approx(v, abs=1e-6)
    for text in (A, B):
        raw = hits[text].breakdown.fts
        assert raw is not None and 0 < raw < 1e-5
        assert hits[text].breakdown.fts_norm == pytest.approx(raw / 8.0)
    assert [h.text for h in results] == [B, C, A, D]
    for hit in results:
        b = hit.breakdown
        assert b.fused == hit.score
        assert hit.score == pytest.approx(0.7 * b.vector_norm + 0.3 * b.fts_norm, abs=1e-9)
    assert [h.text for h in calibrated.search("alpha", query_embedding=Q, top_k=2)] == [B, C]
    floor = calibrated.search("alpha", query_embedding=Q, min_score=0.6)
    assert [h.text for h in floor] == [B, C]


def test_calibrated_needs_the_embedders_scales(table: mindfile.Mindfile) -> None:
    """An embedder that recommends no calibration (the table here, the hash embedder,
    unmeasured models) is fused with min-max: absolute cosines are a model's own."""
    assert fusion_calibration(table.embedder) is None
    default = table.search("alpha", query_embedding=Q)
    seed = table.search("alpha", query_embedding=Q, fusion="weighted")
    assert [(h.text, h.score) for h in default] == [(h.text, h.score) for h in seed]
    with mindfile.open(":memory:") as bundled:
        assert fusion_calibration(bundled.embedder) == (0.2, 8.0)


def test_calibrated_normalisations_by_hand() -> None:
    assert floored_min_max([], 0.4) == []
    assert floored_min_max([0.46, 0.43], 0.4) == pytest.approx([0.075, 0.0])  # close stays close
    assert floored_min_max([0.9, 0.1, 0.5], 0.4) == pytest.approx([1.0, 0.0, 0.5])  # wide: min-max
    assert floored_min_max([0.5], 0.4) == [0.0]
    assert floored_min_max([2.0, 4.0, 3.0], 0.0) == min_max([2.0, 4.0, 3.0])
    assert scaled_to_best([], 16.0) == []
    assert scaled_to_best([8.0, 2.0], 16.0) == [0.5, 0.125]  # weak lexical evidence
    assert scaled_to_best([32.0, 8.0], 16.0) == [1.0, 0.25]  # absolute zero kept
    assert scaled_to_best([0.0], 0.0) == [1.0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1.0, 1.0), min_size=0, max_size=30),
    st.lists(st.floats(0.0, 40.0), min_size=0, max_size=30),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_calibrated_fusion_properties(
    cosines: list[float], bm25: list[float], width: float, scale: float
) -> None:
    """Order-preserving, in [0, 1], the worst cosine 0, BM25's zero kept, and the fused
    score is the weighted sum of the parts (what ``breakdown`` shows)."""
    scale *= 20.0
    v = floored_min_max(cosines, width)
    f = scaled_to_best(bm25, scale)
    for raw, norm in ((cosines, v), (bm25, f)):
        assert all(0.0 <= x <= 1.0 + 1e-12 for x in norm)
        pairs = sorted(zip(raw, norm, strict=True))
        assert all(a[1] <= b[1] + 1e-12 for a, b in itertools.pairwise(pairs))
    if (cosines and max(cosines) - min(cosines) > 1e-12) or (width > 1e-12 and cosines):
        assert min(v) == 0.0
    assert all(x == 0.0 for r, x in zip(bm25, f, strict=True) if r == 0.0 and max(bm25) > 0)
    vector = [(i, c) for i, c in enumerate(sorted(cosines, reverse=True))]
    fts = [(i + 5, b) for i, b in enumerate(sorted(bm25, reverse=True))]
    fused = weighted_fusion(vector, fts, 0.3, 0.7, norms=Calibration(width, scale).normalizers())
    for item in fused.values():
        assert item.score == pytest.approx(0.3 * item.vector_norm + 0.7 * item.fts_norm)
        assert 0.0 <= item.score <= 1.0 + 1e-9


def test_two_memories_are_not_ranked_one_and_zero(tmp_path: Path) -> None:
    """Issue 14: with min-max, the better of two barely different hits gets 1.0 and the
    other 0.0; calibrated fusion keeps them close (and low: neither is much evidence)."""
    with mindfile.open(tmp_path / "two.db") as mem:
        mem.store("s1", 1, "I moved to Lisbon in May")
        mem.store("s1", 2, "My sister Ines lives in Porto")
        # Neighbour smoothing off: the two turns are neighbours and would lift each other.
        # Token match off too: it reranks after fusion (tested in test_token_match.py).
        seed = mem.search("where do I live?", fusion="weighted", neighbors=False, token_match=False)
        assert [h.score for h in seed] == [1.0, 0.0]
        calibrated = mem.search("where do I live?", token_match=False)
        assert len(calibrated) == 2
        assert calibrated[0].score - calibrated[1].score < 0.05
        assert calibrated[0].score < 0.1


def test_rrf_by_hand(table: mindfile.Mindfile) -> None:
    results = table.search(
        "alpha", query_embedding=Q, fusion="rrf", vector_weight=1.0, fts_weight=1.0
    )
    k = RRF_K
    assert k == 60
    expected = {
        B: 1 / (k + 1) + 1 / (k + 2),
        A: 1 / (k + 3) + 1 / (k + 1),
        C: 1 / (k + 2),
        D: 1 / (k + 4),
    }
    assert [h.text for h in results] == [B, A, C, D]
    for hit in results:
        assert hit.score == pytest.approx(expected[hit.text], rel=1e-9)
    weighted = by_text(table.search("alpha", query_embedding=Q, fusion="rrf"))
    assert weighted[B].score == pytest.approx(0.7 / (k + 1) + 0.3 / (k + 2), rel=1e-9)


def test_single_leg_modes_use_their_own_normalised_score(
    table: mindfile.Mindfile, calibrated: mindfile.Mindfile
) -> None:
    for mem, fusion in ((table, "weighted"), (calibrated, "calibrated")):
        vector = mem.search("alpha", query_embedding=Q, mode="vector", fusion=fusion)
        assert vector.mode == "vector"
        assert [h.text for h in vector] == [B, C, A, D]
        assert [round(h.score, 6) for h in vector] == [1.0, 0.9, 0.5, 0.0]
        assert all(h.breakdown.fts is None for h in vector)
    fts = table.search("alpha", mode="fts", fusion="weighted")
    assert [h.text for h in fts] == [A, B]
    assert [h.score for h in fts] == [1.0, 0.0]
    assert all(h.breakdown.vector is None for h in fts)
    scaled = calibrated.search("alpha", mode="fts")
    assert [h.text for h in scaled] == [A, B]
    assert [h.score for h in scaled] == [h.breakdown.fts / 8.0 for h in scaled]


def test_min_max_edge_cases() -> None:
    assert min_max([]) == []
    assert min_max([3.0, 3.0]) == [1.0, 1.0]
    assert min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]


def test_min_score(table: mindfile.Mindfile) -> None:
    results = table.search("alpha", query_embedding=Q, min_score=0.6)
    assert [h.text for h in results] == [B, A, C]
    assert all(h.score >= 0.6 for h in results)
    assert table.search("alpha", query_embedding=Q, min_score=2.0) == []


def test_top_k(table: mindfile.Mindfile) -> None:
    assert [h.text for h in table.search("alpha", query_embedding=Q, top_k=2)] == [B, A]


def test_query_embedding_must_match_the_store(table: mindfile.Mindfile) -> None:
    for bad in ([1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [float("nan"), 0, 0], "abc", [[1, 0, 0]]):
        with pytest.raises(InvalidInputError):
            table.search("alpha", query_embedding=bad)  # type: ignore[arg-type]


def test_hybrid_query_request(table: mindfile.Mindfile) -> None:
    sessions = ["a", "b", "c", "d"]
    request = mindfile.MemoryHybridQueryRequest(
        session_id=sessions, query="alpha", query_embedding=Q, top_k=3
    )
    results = table.hybrid_query(request)
    assert [h.text for h in results] == [B, A, C]
    assert [h.score for h in results] == [
        h.score for h in table.search("alpha", session_id=sessions, query_embedding=Q, top_k=3)
    ]
    one = table.hybrid_query(mindfile.MemoryHybridQueryRequest(session_id="c", query="zeta"))
    assert [h.text for h in one] == [C]
    assert isinstance(results[0], mindfile.MemoryHybridQueryResult)
    with pytest.raises(InvalidInputError):
        table.hybrid_query({"query": "alpha"})  # type: ignore[arg-type]


def test_hits_carry_a_full_breakdown(table: mindfile.Mindfile) -> None:
    results = table.search("alpha", query_embedding=Q)
    data = json.loads(json.dumps(results.to_dict()))
    assert data["mode"] == "hybrid" and data["degraded"] is None
    hit = data["hits"][0]
    assert set(hit) == {
        "chunk_id",
        "session_id",
        "text",
        "sequence_start",
        "sequence_end",
        "metadata",
        "score",
        "breakdown",
        "occurred_at",
    }
    assert set(hit["breakdown"]) == {
        "vector",
        "fts",
        "vector_norm",
        "fts_norm",
        "fused",
        "vector_rank",
        "fts_rank",
        "time",
        "preference",
        "neighbors",
        "token_match",
        "feedback",
        "rerank",
        "author",
    }
    assert hit["chunk_id"].startswith("ch_")


# -- filters -------------------------------------------------------------------------------


def test_session_filter_forms(mem: mindfile.Mindfile) -> None:
    for sid in ("a", "b", "c"):
        mem.store(sid, 1, f"shared words about lighthouses from {sid}")
    for mode in ("vector", "fts", "hybrid"):
        every = mem.search("lighthouses", mode=mode)
        assert {h.session_id for h in every} == {"a", "b", "c"}
        one = mem.search("lighthouses", session_id="b", mode=mode)
        assert [h.session_id for h in one] == ["b"]
        two = mem.search("lighthouses", session_id=["a", "c"], mode=mode)
        assert {h.session_id for h in two} == {"a", "c"}
        assert mem.search("lighthouses", session_id=["nobody"], mode=mode) == []
        assert mem.search("lighthouses", session_id=[], mode=mode) == []


def test_every_tag_is_required(mem: mindfile.Mindfile) -> None:
    query = "orange cat on the sofa"
    mem.store("s", 1, query)  # exact match for both legs, but no tags
    mem.store("s", 2, "the orange cat sleeps", tags=["pets"])
    mem.store("s", 3, "a cat on a sofa", tags=["pets", "home"])
    mem.store("s", 4, "sofa shopping", tags=["home"])
    for mode in ("vector", "fts", "hybrid"):
        assert mem.search(query, mode=mode)[0].sequence_start == 1
        both = mem.search(query, tags=["pets", "HOME "], mode=mode)
        assert [h.sequence_start for h in both] == [3]
        pets = mem.search(query, tags=["pets"], mode=mode)
        assert {h.sequence_start for h in pets} == {2, 3}
        assert mem.search(query, tags=["nope"], mode=mode) == []
        assert mem.search(query, tags=["pets"], session_id="other", mode=mode) == []
    assert mem.search(query, tags=["pets"], mode="fts")[0].metadata["tags"] == ["pets"]


# -- ordering ------------------------------------------------------------------------------


def test_equal_scores_go_to_the_most_recent_chunk(mem: mindfile.Mindfile) -> None:
    # Stored first (lower rowid) but later in its conversation: must still win the tie.
    mem.store("recent", 9, "the same words exactly")
    mem.store("older", 1, "the same words exactly")
    for mode in ("vector", "fts", "hybrid"):
        hits = mem.search("same words", mode=mode)
        assert hits[0].score == hits[1].score
        assert [h.session_id for h in hits] == ["recent", "older"]


def test_dedup_extension_counts_as_recent(mem: mindfile.Mindfile) -> None:
    mem.store("a", 5, "weekly standup notes")
    mem.store("b", 1, "weekly standup notes")
    mem.store("b", 2, "filler")
    mem.store("b", 8, "weekly standup notes")  # extends b's chunk to sequence_end 8
    hits = [h for h in mem.search("weekly standup notes", mode="vector") if h.text != "filler"]
    assert [(h.session_id, h.sequence_start, h.sequence_end) for h in hits] == [
        ("b", 1, 8),
        ("a", 5, 5),
    ]


def test_empty_and_wordless_queries(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "something")
    assert mem.search("", mode="fts") == []
    assert mem.search("!!! ??? ***", mode="fts") == []
    assert len(mem.search("", mode="vector")) == 1
    assert mem_search_empty_store() == []


def mem_search_empty_store() -> list[mindfile.SearchHit]:
    with mindfile.open(":memory:", embedder="hash") as mem:
        return list(mem.search("anything"))


# -- meaning, with the bundled model -------------------------------------------------------

PARAPHRASES = {
    "The feline slept on the warm windowsill all afternoon.": "cat napping in the sun",
    "I bought a new car last week, a red sedan.": "automobile purchase",
    "My flight to Tokyo departs on Monday morning.": "airplane trip to Japan",
    "The recipe needs two cups of flour and three eggs.": "baking ingredients",
    "Our quarterly revenue grew by twelve percent.": "company earnings increase",
    "The doctor told me to take the medicine twice a day.": "physician prescription",
}


def test_static_model_finds_paraphrases_that_fts_cannot(mem_static: mindfile.Mindfile) -> None:
    for seq, text in enumerate(PARAPHRASES, start=1):
        mem_static.store(f"s{seq}", 1, text)
    for text, query in PARAPHRASES.items():
        assert mem_static.search(query, mode="fts") == [], query
        vector = mem_static.search(query, mode="vector", top_k=3)
        assert vector[0].text == text, query
        assert vector[0].breakdown.vector > vector[1].breakdown.vector + 0.1
        hybrid = mem_static.search(query, top_k=1)
        assert hybrid[0].text == text


def test_lone_surrogate_query_with_the_static_model(mem_static: mindfile.Mindfile) -> None:
    mem_static.store("s", 1, "The feline slept on the warm windowsill.")
    for mode in ("vector", "hybrid", "fts"):
        results = mem_static.search("feline \ud800 windowsill", mode=mode)  # type: ignore[arg-type]
        assert results.degraded is None, mode
        assert results[0].sequence_start == 1
