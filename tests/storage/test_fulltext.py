"""The full-text store (storage/fulltext.py): ranking by the database within a read
filter, on SQLite (FTS5's bm25) and on Postgres (ts_rank_cd over search_tsv).

Rows are written through each backend's write path; the store is asked with analysed
words (as the read path asks it). The contract tests run on both backends (``seam``);
the scores' values differ, what matches, the order's rules and the filters do not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.retrieve.fts import COLUMN_WEIGHTS, fts_search, query_words
from mindfile.retrieve.retriever import ReadFilter
from mindfile.storage.fulltext import SqliteFullTextStore, full_text, match_expression
from mindfile.storage.index_source import index_source
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.fulltext import PgFullTextStore, rank_weights, tsquery_sql
from mindfile.storage.postgres.read_stores import scope_where
from mindfile.storage.recall import Scope

from ._seam import PgSeam, Seam

HOSTILE = 'NEAR(rivers lakes) OR "quoted" -minus *star'


@pytest.fixture
def filled(seam: Seam) -> Seam:
    seam.store("a", 1, "rivers and lakes of the north", tags=["geo"])
    seam.store("a", 2, "a recipe for bread", tags=["food"])
    seam.store("b", 1, "lakes are cold in winter", tags=["geo", "cold"])
    seam.store("c", 1, HOSTILE, tags=["odd"])
    return seam


def _search(seam: Seam, text: str, **flt: Any) -> list[tuple[int, float]]:
    store = full_text(seam.db)
    return store.search(query_words(text), 10, weights=COLUMN_WEIGHTS, **flt)


def _text(seam: Seam, hits: list[tuple[int, float]]) -> list[str]:
    rows = {r[0]: r[2] for r in index_source(seam.db).chunks_by_ids([r for r, _ in hits])}
    return [rows[rowid] for rowid, _ in hits]


def _best_first(hits: list[tuple[int, float]]) -> bool:
    """Scores descending, equal scores to the higher id."""
    keys = [(-score, -rowid) for rowid, score in hits]
    return keys == sorted(keys)


def test_the_store_is_the_backend_s_own(seam: Seam) -> None:
    expected = PgFullTextStore if isinstance(seam, PgSeam) else SqliteFullTextStore
    assert type(full_text(seam.db)) is expected


def test_words_are_text_never_query_syntax(filled: Seam) -> None:
    hits = _search(filled, 'NEAR( "quoted" -minus *star')
    assert len(hits) == 1 and _text(filled, hits) == [HOSTILE]
    for syntax in ("a:b | c & !d", "lakes:* <-> (rivers)", "' OR 1=1 --", "%s %(x)s"):
        assert _search(filled, syntax) == _search(filled, " ".join(query_words(syntax)))
    assert _search(filled, "!!! ...") == []  # no words
    assert full_text(filled.db).search(["lakes"], 0, weights=COLUMN_WEIGHTS) == []
    assert full_text(filled.db).search([], 10, weights=COLUMN_WEIGHTS) == []


def test_ranked_best_first_within_the_filter(filled: Seam) -> None:
    every = _search(filled, "lakes rivers")
    # four: the bread recipe matches through its neighbour's text (a context column)
    assert len(every) == 4 and _best_first(every)
    assert all(score > 0 for _, score in every)
    # the two with both words in their own text first (in either order: bm25 and
    # ts_rank_cd weigh length and closeness differently)
    assert set(_text(filled, every[:2])) == {"rivers and lakes of the north", HOSTILE}
    assert _text(filled, _search(filled, "lakes", session_ids=["b"])) == [
        "lakes are cold in winter"
    ]
    assert _search(filled, "lakes", session_ids=[]) == []
    assert len(_search(filled, "lakes", session_ids=["a", "b"])) == 3
    assert _text(filled, _search(filled, "lakes", tags=["geo", "cold"])) == [
        "lakes are cold in winter"
    ]
    assert _search(filled, "winter", tags=["food"]) == []
    assert _search(filled, "lakes", tags=["geo", "food"]) == []
    only_a = _search(filled, "lakes", condition=f"c.session_id = {filled.mark}", params=["a"])
    # the chunk's own text ranks above a neighbour's (context) match
    assert _text(filled, only_a) == ["rivers and lakes of the north", "a recipe for bread"]


def test_equal_scores_go_to_the_higher_id(seam: Seam) -> None:
    for i, session in enumerate(("s1", "s2", "s3"), start=1):
        seam.store(session, 1, f"harbour lights number {i}")
    hits = _search(seam, "harbour")
    assert len(hits) == 3 and len({score for _, score in hits}) == 1
    assert [rowid for rowid, _ in hits] == sorted((rowid for rowid, _ in hits), reverse=True)
    assert full_text(seam.db).search(["harbour"], 2, weights=COLUMN_WEIGHTS) == hits[:2]


def test_the_text_weighs_more_than_the_context(seam: Seam) -> None:
    seam.store("w", 1, "a quiet morning at the pier")
    seam.store("w", 2, "bread and butter for breakfast")
    store = full_text(seam.db)
    text_only = store.search(["pier"], 10, weights=(1.0, 0.0, 0.0))
    assert [s > 0 for _, s in text_only] == [True, False]  # the neighbour's match scores 0
    even = store.search(["pier"], 10, weights=(1.0, 1.0, 1.0))
    assert len(even) == 2 and even[1][1] > 0


def test_the_scope_condition_in_the_backend_s_terms(filled: Seam) -> None:
    """The context builder's scope as a condition: ``Scope.where`` on SQLite,
    ``scope_where`` on Postgres (the condition is the backend's SQL)."""
    scope = Scope(
        session_id="b", user_id=None, agent_identity=None, cross_session=False,
        namespaces=("c",), channel=None, cutoff=None, now="2000-01-01T00:00:00+00:00",
        recent_from=None,
    )  # fmt: skip
    where, params = scope_where(scope) if isinstance(filled, PgSeam) else scope.where()
    hits = _search(filled, "lakes rivers", condition=where, params=params)
    assert sorted(_text(filled, hits)) == [HOSTILE, "lakes are cold in winter"]
    hits = _search(filled, "lakes", condition=where, params=params, session_ids=["b"])
    assert _text(filled, hits) == ["lakes are cold in winter"]


@settings(
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=st.text(max_size=80))
def test_any_user_text_is_a_valid_query(filled: Seam, text: str) -> None:
    hits = full_text(filled.db).search(query_words(text), 10, weights=COLUMN_WEIGHTS)
    assert _best_first(hits) and len(hits) <= 4


# -- SQLite: the store against the SQL form the read path used before ----------------------


@pytest.fixture
def filled_mem(mem: mindfile.Mindfile) -> mindfile.Mindfile:
    mem.store("a", 1, "rivers and lakes of the north", tags=["geo"])
    mem.store("a", 2, "a recipe for bread", tags=["food"])
    mem.store("b", 1, "lakes are cold in winter", tags=["geo", "cold"])
    mem.store("c", 1, HOSTILE, tags=["odd"])
    return mem


def test_match_expression_quotes_every_word() -> None:
    assert match_expression(["near", "or"]) == '"near" OR "or"'
    assert match_expression([]) is None


def test_the_store_and_the_sql_filter_form_agree(filled_mem: mindfile.Mindfile) -> None:
    for flt in (
        ReadFilter(),
        ReadFilter(session_ids=("a", "c")),
        ReadFilter(tags=("geo",)),
        ReadFilter(session_ids=("b",), tags=("cold",), condition="c.id > ?", params=(0,)),
        ReadFilter(session_ids=()),
    ):
        where, params = flt.clause()
        old = fts_search(filled_mem.db, "lakes rivers quoted", 10, where, params)
        new = full_text(filled_mem.db).search(
            query_words("lakes rivers quoted"),
            10,
            weights=COLUMN_WEIGHTS,
            session_ids=flt.session_ids,
            tags=flt.tags,
            condition=flt.condition,
            params=flt.params,
        )
        assert new == old


def test_unfiltered_searches_skip_the_chunks_and_rank_the_same(tmp_path: Path) -> None:
    """Without a filter the query reads FTS5 alone (its rows are the chunks'); it
    ranks, scores and breaks ties exactly as the joined query (a filter allowing
    everything), after a forgotten session, with and without ``after``."""
    with mindfile.open(tmp_path / "b.db", embedder="hash", lexical_index="fts5") as mem:
        for i in range(60):
            mem.store(f"s{i % 4}", i + 1, f"lakes rivers {'cold ' * (i % 5)}note {i}")
        assert mem.forget("s1")
        store = SqliteFullTextStore(mem.db)
        words = query_words("cold lakes notes")
        for after in (0, 20, 55):
            bare = store.search(words, 25, weights=COLUMN_WEIGHTS, after=after)
            joined = store.search(words, 25, weights=COLUMN_WEIGHTS, after=after, condition="1")
            live = mem.db.scalar("SELECT count(*) FROM chunks WHERE id > ?", (after,))
            assert bare == joined
            assert len(bare) == min(25, live) > 0
            assert _best_first(bare) and all(rowid > after for rowid, _ in bare)


def test_the_read_path_ranks_fts_mode_through_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindfile.retrieve import retriever

    asked: list[dict[str, Any]] = []

    class Recording(SqliteFullTextStore):
        def search(self, words: Sequence[str], limit: int, **flt: Any) -> list[tuple[int, float]]:
            asked.append({"words": list(words), **flt})
            return super().search(words, limit, **flt)

    monkeypatch.setattr(retriever, "full_text", Recording)
    with mindfile.open(tmp_path / "f.db", embedder="hash", lexical_index="fts5") as mem:
        mem.store("a", 1, "lakes and rivers", tags=["geo"])
        mem.store("b", 1, "lakes are cold in winter", tags=["geo", "cold"])
        mem.store("b", 2, "cold lakes again", tags=["other"])
        hits = mem.search("the cold lakes", mode="fts", session_id=["b"], tags=["geo"])
    assert [h.text for h in hits] == ["lakes are cold in winter"]
    assert len(asked) == 1
    assert asked[0]["words"] == ["cold", "lakes"]
    assert list(asked[0]["session_ids"]) == ["b"] and list(asked[0]["tags"]) == ["geo"]


# -- Postgres: how the query and the weights are built -------------------------------------


def test_the_postgres_query_binds_every_word() -> None:
    assert tsquery_sql(2) == ("plainto_tsquery('english', %s) || plainto_tsquery('english', %s)")
    with pytest.raises(ValueError):
        tsquery_sql(0)


@pytest.fixture
def pg_filled(pg_url: str) -> Iterator[PgSeam]:
    with PgDatabase(pg_url) as db:
        apply_pg_migrations(db)
        seam = PgSeam(db)
        seam.store("a", 1, "rivers and lakes of the north", tags=["geo"])
        seam.store("c", 1, HOSTILE, tags=["odd"])
        yield seam


@settings(
    max_examples=80,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(words=st.lists(st.text(min_size=1, max_size=12), max_size=6))
def test_postgres_takes_any_words_as_text(pg_filled: PgSeam, words: list[str]) -> None:
    """Words the analyser did not make (any characters but NUL, which Postgres text
    cannot hold): still plain text to ``plainto_tsquery``, never a malformed query."""
    raw = [w.replace("\x00", "") or "x" for w in words]
    store = full_text(pg_filled.db)
    hits = store.search(raw, 10, weights=COLUMN_WEIGHTS)
    assert _best_first(hits) and len(hits) <= 2
    assert store.search(raw, 10, weights=COLUMN_WEIGHTS, session_ids=["c"], tags=["geo"]) == []


def test_the_weights_map_onto_tsvector_labels() -> None:
    # {D, C, B, A}: the text is A, both context columns share D (their mean).
    assert rank_weights((1.0, 0.5, 0.3)) == pytest.approx([0.4, 0.0, 0.0, 1.0])
    assert rank_weights((2.0, 1.0, 1.0)) == pytest.approx([0.5, 0.0, 0.0, 1.0])  # at most 1
    assert rank_weights((0.0, 0.0, 0.0)) == [0.0, 0.0, 0.0, 0.0]
