"""The full-text store (storage/fulltext.py): BM25 by the database within a read filter.

Rows are written through the public API; the store is asked with analysed words (as the
read path asks it) and must agree with the SQL-filter form the read path used before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import mindfile
from mindfile.retrieve.fts import COLUMN_WEIGHTS, fts_search, query_words
from mindfile.retrieve.retriever import ReadFilter
from mindfile.storage.fulltext import SqliteFullTextStore, full_text, match_expression
from mindfile.storage.index_source import index_source


@pytest.fixture
def filled(mem: mindfile.Mindfile) -> mindfile.Mindfile:
    mem.store("a", 1, "rivers and lakes of the north", tags=["geo"])
    mem.store("a", 2, "a recipe for bread", tags=["food"])
    mem.store("b", 1, "lakes are cold in winter", tags=["geo", "cold"])
    mem.store("c", 1, 'NEAR(rivers lakes) OR "quoted" -minus *star', tags=["odd"])
    return mem


def _search(mem: mindfile.Mindfile, text: str, **flt: object) -> list[tuple[int, float]]:
    store = full_text(mem.db)
    return store.search(query_words(text), 10, weights=COLUMN_WEIGHTS, **flt)  # type: ignore[arg-type]


def _text(mem: mindfile.Mindfile, hits: list[tuple[int, float]]) -> list[str]:
    rows = {r[0]: r[2] for r in index_source(mem.db).chunks_by_ids([r for r, _ in hits])}
    return [rows[rowid] for rowid, _ in hits]


def test_words_are_text_never_fts5_syntax(filled: mindfile.Mindfile) -> None:
    assert match_expression(["near", "or"]) == '"near" OR "or"'
    assert match_expression([]) is None
    hits = _search(filled, 'NEAR( "quoted" -minus *star')
    assert len(hits) == 1 and _text(filled, hits)[0].startswith("NEAR(")
    assert _search(filled, "!!! ...") == []  # no words
    assert full_text(filled.db).search(["lakes"], 0, weights=COLUMN_WEIGHTS) == []


def test_ranked_best_first_within_the_filter(filled: mindfile.Mindfile) -> None:
    every = _search(filled, "lakes rivers")
    # four: the bread recipe matches through its neighbour's text (a context column)
    assert len(every) == 4 and [s for _, s in every] == sorted((s for _, s in every), reverse=True)
    assert _text(filled, _search(filled, "lakes", session_ids=["b"])) == [
        "lakes are cold in winter"
    ]
    assert _search(filled, "lakes", session_ids=[]) == []
    assert len(_search(filled, "lakes", session_ids=["a", "b"])) == 3
    assert _text(filled, _search(filled, "lakes", tags=["geo", "cold"])) == [
        "lakes are cold in winter"
    ]
    assert _search(filled, "winter", tags=["food"]) == []
    only_a = _search(filled, "lakes", condition="c.session_id = ?", params=["a"])
    assert _text(filled, only_a) == ["rivers and lakes of the north", "a recipe for bread"]


def test_the_store_and_the_sql_filter_form_agree(filled: mindfile.Mindfile) -> None:
    for flt in (
        ReadFilter(),
        ReadFilter(session_ids=("a", "c")),
        ReadFilter(tags=("geo",)),
        ReadFilter(session_ids=("b",), tags=("cold",), condition="c.id > ?", params=(0,)),
        ReadFilter(session_ids=()),
    ):
        where, params = flt.clause()
        old = fts_search(filled.db, "lakes rivers quoted", 10, where, params)
        new = _search(
            filled,
            "lakes rivers quoted",
            session_ids=flt.session_ids,
            tags=flt.tags,
            condition=flt.condition,
            params=flt.params,
        )
        assert new == old
    assert isinstance(full_text(filled.db), SqliteFullTextStore)


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
