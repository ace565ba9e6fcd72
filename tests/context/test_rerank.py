"""The pure reranker: known scores give a known order; near-duplicates go."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from mindfile.context import Candidate, RerankWeights, recency_score, rerank
from mindfile.errors import ConfigError, InvalidInputError

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def cand(
    chunk_id: str,
    similarity: float,
    age_days: float,
    *,
    importance: float = 0.5,
    pinned: bool = False,
    content_hash: str | None = None,
    vector: list[float] | None = None,
) -> Candidate:
    return Candidate(
        chunk_id=chunk_id,
        session_id="s1",
        text=f"text of {chunk_id}",
        similarity=similarity,
        created_at=NOW - timedelta(days=age_days),
        importance=importance,
        pinned=pinned,
        content_hash=content_hash or f"hash-{chunk_id}",
        vector=None if vector is None else np.asarray(vector, dtype=np.float32),
    )


def test_order_and_scores_from_known_terms() -> None:
    # final = 0.70*sim + 0.20*0.5**(age/7d) + 0.10*importance
    candidates = [
        cand("a", 0.90, 7),  # .63 + .10 + .05 = .78
        cand("b", 0.80, 0),  # .56 + .20 + .05 = .81
        cand("c", 0.60, 0, pinned=True, importance=0.2),  # .42 + .20 + .10 = .72
        cand("d", 0.95, 70, importance=0.0),  # .665 + .2*2**-10 + 0 = .6652
    ]
    out = rerank(candidates, now=NOW)
    assert [r.candidate.chunk_id for r in out.kept] == ["b", "a", "c", "d"]
    assert [round(r.score, 4) for r in out.kept] == [0.81, 0.78, 0.72, 0.6652]
    assert out.duplicates == ()


def test_explain_has_every_term_and_the_formula_adds_up() -> None:
    (r,) = rerank([cand("a", 0.71, 7 * 1.3219, importance=0.5)], now=NOW).kept
    e = r.explain
    assert e["similarity"] == pytest.approx(0.71)
    assert e["recency"] == pytest.approx(0.4, abs=1e-4)
    assert e["importance"] == 0.5
    assert e["weights"] == {"similarity": 0.7, "recency": 0.2, "importance": 0.1}
    assert sum(e["terms"].values()) == pytest.approx(e["final"]) == pytest.approx(r.score)
    assert e["age_days"] == pytest.approx(7 * 1.3219)
    assert r.formula == "final 0.63 = 0.70×0.71 + 0.20×0.40 + 0.10×0.50"  # .497+.08+.05
    json.dumps(r.to_dict())


def test_recency_is_an_exponential_half_life() -> None:
    week = timedelta(days=7)
    assert recency_score(NOW, NOW, week) == 1.0
    assert recency_score(NOW - week, NOW, week) == pytest.approx(0.5)
    assert recency_score(NOW - 3 * week, NOW, week) == pytest.approx(0.125)
    assert recency_score(NOW + week, NOW, week) == 1.0  # clock skew: not above 1
    with pytest.raises(InvalidInputError):
        recency_score(NOW, NOW, timedelta(0))


def test_half_life_is_configurable() -> None:
    old_similar, new_vague = cand("old", 0.9, 2), cand("new", 0.7, 0)
    # A long half-life barely ages a 2-day-old chunk; a short one makes age decisive.
    long = rerank([old_similar, new_vague], now=NOW, half_life=timedelta(days=365)).kept
    short = rerank([old_similar, new_vague], now=NOW, half_life=timedelta(hours=1)).kept
    assert long[0].candidate.chunk_id == "old"
    assert short[0].candidate.chunk_id == "new"


def test_weights_are_configurable() -> None:
    candidates = [
        cand("similar", 0.9, 30),
        cand("recent", 0.1, 0),
        cand("vital", 0.1, 30, importance=1),
    ]
    by = {
        "similar": RerankWeights(1, 0, 0),
        "recent": RerankWeights(0, 1, 0),
        "vital": RerankWeights(0, 0, 1),
    }
    for winner, weights in by.items():
        assert rerank(candidates, now=NOW, weights=weights).kept[0].candidate.chunk_id == winner


def test_pinned_counts_as_importance_one_and_importance_is_clipped() -> None:
    pinned, loud = rerank(
        [cand("p", 0.5, 0, importance=0.0, pinned=True), cand("x", 0.5, 0, importance=7.0)],
        now=NOW,
    ).kept
    assert pinned.importance == 1.0 and loud.importance == 1.0


def test_negative_similarity_counts_as_zero() -> None:
    (r,) = rerank([cand("a", -0.4, 0)], now=NOW).kept
    assert r.similarity == 0.0
    assert r.score == pytest.approx(0.2 + 0.05)


def test_same_content_hash_keeps_the_higher_ranked() -> None:
    out = rerank(
        [cand("low", 0.5, 0, content_hash="h"), cand("high", 0.9, 0, content_hash="h")], now=NOW
    )
    assert [r.candidate.chunk_id for r in out.kept] == ["high"]
    ((removed, of, why),) = out.duplicates
    assert removed.candidate.chunk_id == "low" and of == "high"
    assert "same content" in why


def test_vector_near_duplicates_at_the_threshold_go() -> None:
    base = [1.0, 0.0, 0.0]
    near = [0.96, float(np.sqrt(1 - 0.96**2)), 0.0]  # cosine 0.96 with base
    far = [0.94, float(np.sqrt(1 - 0.94**2)), 0.0]  # cosine 0.94
    out = rerank(
        [
            cand("a", 0.9, 0, vector=base),
            cand("b", 0.8, 0, vector=near),
            cand("c", 0.7, 0, vector=far),
        ],
        now=NOW,
    )
    assert [r.candidate.chunk_id for r in out.kept] == ["a", "c"]
    ((removed, of, why),) = out.duplicates
    assert (removed.candidate.chunk_id, of) == ("b", "a")
    assert "cosine 0.960 ≥ 0.95" in why
    # Configurable, and off with None (content hashes still count).
    assert (
        len(
            rerank(
                [cand("a", 0.9, 0, vector=base), cand("b", 0.8, 0, vector=far)],
                now=NOW,
                near_duplicate=0.9,
            ).kept
        )
        == 1
    )
    assert (
        len(
            rerank(
                [cand("a", 0.9, 0, vector=base), cand("b", 0.8, 0, vector=near)],
                now=NOW,
                near_duplicate=None,
            ).kept
        )
        == 2
    )


def test_ties_are_broken_deterministically() -> None:
    same = [cand(c, 0.5, 1) for c in "dbca"]
    order = [r.candidate.chunk_id for r in rerank(same, now=NOW).kept]
    assert order == ["a", "b", "c", "d"]
    newer = rerank(
        [cand("old", 0.5, 1, importance=0.6), cand("new", 0.5, 0, importance=0.5)], now=NOW
    )
    # old: .35 + .2*.5**(1/7) + .06 ; new: .35 + .2 + .05 -> new wins on score
    assert newer.kept[0].candidate.chunk_id == "new"


def test_the_same_chunk_offered_twice_is_kept_once() -> None:
    out = rerank([cand("a", 0.9, 0), cand("a", 0.5, 0, content_hash="other")], now=NOW)
    assert [r.score for r in out.kept] == [pytest.approx(0.88)]


def test_bad_weights_and_clocks_are_typed_errors() -> None:
    with pytest.raises(ConfigError):
        RerankWeights(0, 0, 0)
    with pytest.raises(ConfigError):
        RerankWeights(-0.1, 1, 0)
    with pytest.raises(ConfigError):
        RerankWeights(float("nan"), 1, 0)
    naive = Candidate("a", "s", "t", 0.5, datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError):
        rerank([naive], now=NOW)
