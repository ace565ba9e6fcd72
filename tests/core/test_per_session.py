"""search(per_session=N): at most N results from one session ahead of the others."""

from __future__ import annotations

import pytest

import mindfile
from mindfile.errors import InvalidInputError


def _store(mem: mindfile.Mindfile) -> None:
    """Twelve concerts in one session, one in each of four others, 20 unrelated turns."""
    events = [
        ("festival", i, f"the concert number {i} at the festival was loud") for i in range(12)
    ]
    events += [(f"trip{i}", 1, f"a concert in town {i}") for i in range(4)]
    events += [("work", i, f"budget meeting {i} about hiring") for i in range(20)]
    mem.store_many(events, user_id="alice")
    mem.rebuild_index()


def _sessions(results: mindfile.SearchResults) -> list[str]:
    return [h.session_id for h in results]


def test_one_session_does_not_crowd_out_the_others(mem_static: mindfile.Mindfile) -> None:
    mem = mem_static
    _store(mem)
    plain = _sessions(mem.search("how many concerts did I go to?", top_k=6))
    assert plain.count("festival") == 6  # the festival's turns say "concert" more
    spread = _sessions(mem.search("how many concerts did I go to?", top_k=6, per_session=2))
    assert spread[:2] == ["festival", "festival"]
    assert sorted(spread[2:]) == ["trip0", "trip1", "trip2", "trip3"]


def test_a_session_s_further_results_follow_once_the_others_run_out(
    mem_static: mindfile.Mindfile,
) -> None:
    mem = mem_static
    _store(mem)
    hits = mem.search("how many concerts did I go to?", top_k=14, per_session=2)
    sessions = _sessions(hits)
    assert sessions[:6].count("festival") == 2 and len(set(sessions[:6])) == 5
    # Every session's first two come first (the unrelated "work" too, ranked last of
    # them), then the rest of the ranking in its order: the festival's other concerts.
    assert sessions[6:8] == ["work", "work"]
    assert sessions[8:] == ["festival"] * 6
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)  # shown never increasing


@pytest.mark.parametrize("mode", ["hybrid", "fts", "vector"])
def test_a_shorter_search_is_a_prefix_of_a_longer_one(
    mem_static: mindfile.Mindfile, mode: str
) -> None:
    mem = mem_static
    _store(mem)
    query = "which concerts were loud?"
    long = mem.search(query, top_k=30, per_session=1, mode=mode)  # type: ignore[arg-type]
    for k in (1, 3, 5, 10, 12):
        short = mem.search(query, top_k=k, per_session=1, mode=mode)  # type: ignore[arg-type]
        assert [(h.chunk_id, h.score) for h in short] == [(h.chunk_id, h.score) for h in long[:k]]


@pytest.mark.parametrize("bad", [0, -1, True, "2", 1.5])
def test_per_session_must_be_a_positive_integer(mem: mindfile.Mindfile, bad: object) -> None:
    with pytest.raises(InvalidInputError, match="per_session"):
        mem.search("x", per_session=bad)  # type: ignore[arg-type]
