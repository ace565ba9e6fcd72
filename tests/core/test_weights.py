"""Default fusion weights come from the embedder; explicit ones are used as given."""

from __future__ import annotations

import pytest

import mindfile
from mindfile.embed import SEED_FUSION_WEIGHTS, fusion_weights

from ._support import TableEmbedder


def test_bundled_model_recommends_bm25_leaning_weights(mem_static: mindfile.Mindfile) -> None:
    mem_static.store("s", 1, "The cat sat on the warm windowsill.")
    assert fusion_weights(mem_static.embedder) == (0.3, 0.7)
    assert mem_static.search("cat").weights == (0.3, 0.7)


def test_the_hash_embedder_leans_on_bm25(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "The cat sat on the warm windowsill.")
    assert fusion_weights(mem.embedder) == (0.1, 0.9)
    assert mem.search("cat").weights == (0.1, 0.9)


def test_other_embedders_get_the_seed_weights(store_location: str) -> None:
    embedder = TableEmbedder({})
    assert not hasattr(embedder, "fusion_weights")
    with mindfile.open(store_location, embedder=embedder) as mem:
        mem.store("s", 1, "The cat sat on the warm windowsill.")
        assert fusion_weights(mem.embedder) == SEED_FUSION_WEIGHTS == (0.7, 0.3)
        assert mem.search("cat").weights == (0.7, 0.3)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"vector_weight": 0.5, "fts_weight": 0.2}, (0.5, 0.2)),
        ({"vector_weight": 0.9}, (0.9, pytest.approx(0.1))),
        ({"fts_weight": 0.6}, (pytest.approx(0.4), 0.6)),
        ({"vector_weight": 2.0}, (2.0, 0.0)),
    ],
)
def test_explicit_weights(
    mem: mindfile.Mindfile, kwargs: dict[str, float], expected: tuple
) -> None:
    mem.store("s", 1, "The cat sat on the warm windowsill.")
    assert mem.search("cat", **kwargs).weights == expected  # type: ignore[arg-type]


def test_weights_change_the_fused_score(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "cats and dogs")
    mem.store("s", 2, "only dogs here")
    hits = mem.search("cats", vector_weight=0.0, fts_weight=1.0)
    assert hits[0].text == "cats and dogs"
    assert hits[0].score == pytest.approx(hits[0].breakdown.fts_norm)


def test_hybrid_query_request_defaults_follow_the_embedder(mem_static: mindfile.Mindfile) -> None:
    mem_static.store("s", 1, "The cat sat on the warm windowsill.")
    request = mindfile.MemoryHybridQueryRequest(session_id="s", query="cat")
    assert mem_static.hybrid_query(request).weights == (0.3, 0.7)
    explicit = mindfile.MemoryHybridQueryRequest(
        session_id="s", query="cat", vector_weight=0.7, fts_weight=0.3
    )
    assert mem_static.hybrid_query(explicit).weights == (0.7, 0.3)
