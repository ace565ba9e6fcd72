"""The in-memory BM25 index must rank exactly like FTS5's bm25() on the same store."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.retrieve.fts import COLUMN_WEIGHTS, fts_search
from mindfile.vector.base import VectorFilter

WORDS = [
    *("garden", "tomato", "rain", "sunny", "hike", "dog", "cat", "peanut", "allergy"),
    *("lisbon", "porto", "train", "battery", "solar", "budget", "meeting", "sister"),
    *("visit", "painting", "pottery", "running", "camping", "lake", "sunrise", "music"),
    *("guitar", "book", "library", "coffee", "bread", "market", "river", "mountain"),
]

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


def _fts5(mem: mindfile.Mindfile, query: str, k: int, **kw: object) -> list[tuple[int, float]]:
    return fts_search(mem.db, query, k, **kw)  # type: ignore[arg-type]


def _close(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> None:
    """Same rows, same scores (to float precision), best first (ties in any order)."""
    assert dict(a) == pytest.approx(dict(b), rel=1e-5, abs=1e-12)
    scores = [s for _, s in a]
    assert all(x >= y - 1e-9 * max(1.0, abs(x)) for x, y in itertools.pairwise(scores))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(st.tuples(st.sampled_from(["s1", "s2"]), sentences), min_size=1, max_size=30),
    queries=st.lists(sentences, min_size=1, max_size=4),
)
def test_scores_equal_fts5_bm25(tmp_path_factory: pytest.TempPathFactory, docs, queries) -> None:
    path = tmp_path_factory.mktemp("lex") / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        seq: dict[str, int] = {}
        for session, text in docs:
            seq[session] = seq.get(session, 0) + 1
            mem.store(session, seq[session], text)
        assert mem.lexical is not None
        for query in queries:
            got = mem.lexical.search(query, 1000)
            want = _fts5(mem, query, 1000)
            _close(got, want)


def test_updates_and_deletes_are_seen(mem: mindfile.Mindfile) -> None:
    """Neighbour context updates (context_after) and forget() reach the index."""
    assert mem.lexical is not None
    mem.store("a", 1, "what did you plant in the garden")
    assert [r for r, _ in mem.lexical.search("tomato", 10)] == []
    mem.store("a", 2, "tomatoes and basil")  # becomes context_after of turn 1
    hits = mem.lexical.search("tomatoes", 10)
    assert len(hits) == 2
    _close(hits, _fts5(mem, "tomatoes", 10))
    mem.store("b", 1, "tomatoes again in another session")
    mem.forget("a")
    hits = mem.lexical.search("tomatoes", 10)
    assert len(hits) == 1
    _close(hits, _fts5(mem, "tomatoes", 10))


def test_filters(mem: mindfile.Mindfile) -> None:
    assert mem.lexical is not None
    mem.store("a", 1, "river walk")
    mem.store("b", 1, "river swim")
    only_b = mem.lexical.search("river", 10, where=VectorFilter(session_ids=["b"]))
    texts = {mem.db.scalar("SELECT chunk_text FROM chunks WHERE id = ?", (r,)) for r, _ in only_b}
    assert texts == {"river swim"}


def test_other_process_writes_are_seen(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        mem.store("a", 1, "first note about lakes")
        assert mem.lexical is not None
        assert len(mem.lexical.search("lakes", 10)) == 1
        code = (
            "import mindfile, sys\n"
            "m = mindfile.open(sys.argv[1])\n"
            "m.store('a', 2, 'second note about lakes')\n"
            "m.store('z', 1, 'lakes elsewhere')\n"
            "m.forget('z')\n"
            "m.close()\n"
        )
        subprocess.run([sys.executable, "-c", code, str(db_path)], check=True)
        hits = mem.lexical.search("lakes", 10)
        assert len(hits) == 2
        _close(hits, _fts5(mem, "lakes", 10))


def test_rebuild_gives_same_results(mem: mindfile.Mindfile) -> None:
    assert mem.lexical is not None
    for i, text in enumerate(["coffee market", "bread market", "coffee coffee river"], 1):
        mem.store("s", i, text)
    before = mem.lexical.search("coffee market", 10)
    mem.rebuild_index()
    assert mem.lexical.search("coffee market", 10) == before


def test_fts5_mode_still_works(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash", lexical_index="fts5") as mem:
        assert mem.lexical is None
        mem.store("s", 1, "sunrise over the lake")
        assert [h.text for h in mem.search("lake", mode="fts")] == ["sunrise over the lake"]


def test_column_weights_are_fts5s() -> None:
    assert COLUMN_WEIGHTS == (1.0, 0.5, 0.3)


_columns = st.lists(st.sampled_from([*WORDS[:6], "x"]), max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_columns, _columns, _columns), max_size=12))
def test_batch_analysis_counts_like_one_dict_per_document(docs) -> None:
    """The vectorised batch path gives each document's column-weighted term frequencies
    and token count, exactly as counting each document on its own does."""
    from collections import Counter

    from mindfile.retrieve.lexical_state import analyse_batch

    weights = (1.0, 0.5, 0.3)
    rowids = list(range(100, 100 + len(docs)))
    batch = analyse_batch(rowids, ["s"] * len(docs), [list(d) for d in docs], weights)
    got: dict[tuple[int, str], float] = {}
    for term, doc, tf in zip(batch.pair_term, batch.pair_doc, batch.pair_tf, strict=True):
        got[(int(doc), batch.terms[term])] = float(tf)
    want: dict[tuple[int, str], float] = {}
    for d, columns in enumerate(docs):
        for w, toks in zip(weights, columns, strict=True):
            for tok, n in Counter(toks).items():
                want[(d, tok)] = want.get((d, tok), 0.0) + w * n
    assert got == pytest.approx(want, rel=1e-6)
    assert batch.lengths.tolist() == [sum(len(c) for c in d) for d in docs]
    pairs = list(zip(batch.pair_term.tolist(), batch.pair_doc.tolist(), strict=True))
    assert pairs == sorted(pairs) and len(set(pairs)) == len(pairs)  # (term, doc) order


def test_a_backlog_read_in_small_pages_scores_like_fts5(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up reads new chunks a page at a time (the database lock is held per
    page): with pages of 3 chunks, a store of 40 plus updates and deletes still ranks
    exactly as FTS5, in the foreground and in a background build."""
    from mindfile.retrieve import lexical

    monkeypatch.setattr(lexical, "READ_PAGE", 3)
    monkeypatch.setattr(lexical, "APPLY_BATCH", 2)
    with mindfile.open(db_path, embedder="hash") as mem:
        assert mem.lexical is not None
        for i in range(40):
            mem.store(
                f"s{i % 3}", i // 3 + 1, f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}"
            )
        for query in ("garden tomato", "river mountain coffee", "lisbon"):
            _close(mem.lexical.search(query, 100), _fts5(mem, query, 100))
        mem.forget("s1")
        mem.store("s0", 99, "garden garden lisbon")
        _close(mem.lexical.search("garden lisbon", 100), _fts5(mem, "garden lisbon", 100))
        assert mem.lexical.size() == int(mem.db.scalar("SELECT count(*) FROM chunks"))

    with mindfile.open(db_path, embedder="hash") as other:  # builds in the background
        assert other.lexical is not None
        other.lexical.rebuild()
        other.lexical.warm()
        deadline = time.monotonic() + 20
        while other.lexical.state() != "ready" and time.monotonic() < deadline:
            time.sleep(0.02)
        _close(other.lexical.search("garden lisbon", 100), _fts5(other, "garden lisbon", 100))
