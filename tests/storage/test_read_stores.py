"""Conformance of the read path's stores (search and recall) on both backends.

The read path builds them itself (they are not in the ``Stores`` bundle); a read filter
is a SQL condition in the backend's dialect (``seam.mark`` is its placeholder).
"""

from __future__ import annotations

import numpy as np

from mindfile.storage.recall import Scope

from ._seam import Seam

NOW = "2026-01-01T00:00:00.000000+00:00"


def test_search_store_backlog_vectors_times_and_filters(seam: Seam) -> None:
    search, _ = seam.read_stores()
    seam.store("s1", 1, "one")
    seam.store("s1", 2, "two")
    seam.store("s2", 1, "three")
    rowids = seam.rowids()
    assert search.backlog(10) is None  # no job at all: the cheap answer
    seam.stores.jobs.enqueue(rowids, NOW)
    assert search.backlog(2) == (2, 0, 0)  # counted up to the cap
    assert search.backlog(10) == (3, 0, 0)
    assert search.unembedded_among(rowids) == []
    with seam.atomic():
        seam.stores.integrity.drop_vectors([rowids[1]])
    assert search.unembedded_among([*rowids, 10**9]) == [rowids[1], 10**9]
    times = dict(search.chunk_times([*rowids, 10**9]))
    assert sorted(times) == rowids and all(t.startswith("20") for t in times.values())
    condition = f" AND c.session_id = {seam.mark}"
    assert search.rowids_where(condition, ["s2"]) == [rowids[2]]
    assert search.rowids_where("", []) == rowids


def test_search_store_statements(seam: Seam) -> None:
    search, _ = seam.read_stores()
    seam.store("s1", 1, "I love hiking")
    seam.store("s1", 2, "two")
    seam.store("s2", 1, "three")
    rowids = seam.rowids()
    rows = search.chunk_statements([rowids[2], rowids[0], 10**9])
    assert sorted((r, t) for r, t, _ in rows) == [
        (rowids[0], "I love hiking"),
        (rowids[2], "three"),
    ]
    assert all(m.startswith("{") for _, _, m in rows)
    # Unclassified (migration 0014; what store_many writes): the backfill's work.
    with seam.atomic():
        seam.db.execute("UPDATE chunks SET user_statement = NULL")
    assert search.statement_rowids() == []
    assert search.has_unclassified() and search.first_unclassified() == rowids[0]
    assert [r for r, _, _ in search.unclassified_after(0, 10)] == rowids
    among = search.unclassified_among([rowids[2], 10**9])
    assert [(r, t) for r, t, _ in among] == [(rowids[2], "three")]
    search.classify_statements([(rowids[0], True), (rowids[1], False)])
    assert search.first_unclassified() == rowids[2]
    assert search.unclassified_among(rowids[:2]) == []
    search.classify_statements([(rowids[2], False)])
    assert search.statement_rowids() == rowids[:1]
    assert not search.has_unclassified() and search.first_unclassified() is None


def test_search_store_classifies_what_is_unclassified(seam: Seam) -> None:
    search, _ = seam.read_stores()
    seam.store("s1", 1, "I love hiking")
    seam.store("s1", 2, "two")
    seam.store("s2", 1, "I have a golden retriever")
    rowids = seam.rowids()
    with seam.atomic():  # as if written before the migration
        seam.db.execute("UPDATE chunks SET user_statement = NULL")
    assert search.has_unclassified() and search.statement_rowids() == []
    after = search.unclassified_after(rowids[0], 10)
    assert [(r, t) for r, t, _ in after] == [
        (rowids[1], "two"),
        (rowids[2], "I have a golden retriever"),
    ]
    assert [r for r, _, _ in search.unclassified_after(0, 1)] == rowids[:1]
    search.classify_statements([(rowids[0], True), (rowids[1], False), (10**9, True)])
    assert search.statement_rowids() == rowids[:1]
    assert [r for r, _, _ in search.unclassified_after(0, 10)] == rowids[2:]
    # Only rows still unclassified are written: a classified row keeps its flag.
    search.classify_statements([(rowids[0], False), (rowids[2], True)])
    assert search.statement_rowids() == [rowids[0], rowids[2]]
    assert not search.has_unclassified()
    search.classify_statements([])
    # A newer lexicon: every flag cleared, once.
    assert search.statement_lexicon() == 1
    assert search.reset_statements(2)
    assert search.has_unclassified() and search.statement_rowids() == []
    assert len(search.unclassified_after(0, 10)) == 3
    assert search.statement_lexicon() == 2 and not search.reset_statements(2)


def _scope(session: str, **kw: object) -> Scope:
    fields: dict[str, object] = {
        "session_id": session, "user_id": None, "agent_identity": None,
        "cross_session": False, "namespaces": (), "channel": None, "cutoff": None,
        "now": NOW, "recent_from": None,
    }  # fmt: skip
    fields.update(kw)
    return Scope(**fields)  # type: ignore[arg-type]


def test_recall_store_owner_salience_and_candidates(seam: Seam) -> None:
    _, recall = seam.read_stores()
    seam.store("s1", 1, "ordinary", user_id="ann", importance=0.3)
    seam.store("s1", 2, "important", user_id="ann", importance=0.9)
    seam.store("s1", 3, "pinned", user_id="ann", importance=0.1)
    seam.store("s2", 1, "elsewhere but important", user_id="ann", importance=0.95)
    seam.store("s3", 1, "someone else's", user_id="bob", importance=0.99)
    seam.add_note("memory:ann", "n1", "a note", [])
    seam.pin("s1", 3)
    ordinary, important, pinned, elsewhere, other, note = seam.rowids()
    assert recall.session_owner("s1") == (None, "ann")
    assert recall.session_owner("missing") is None
    assert recall.salient(_scope("s1"), 0.8, 10) == [pinned, important]
    crossing = _scope("s1", user_id="ann", cross_session=True)
    assert recall.salient(crossing, 0.8, 10) == [pinned, elsewhere, important]
    assert recall.salient(crossing, 0.8, 1) == [pinned]
    with_notes = _scope("s1", namespaces=("memory:ann",))
    assert set(recall.salient(with_notes, 0.0, 10)) == {ordinary, important, pinned, note}
    rows = recall.candidates([important, pinned, 10**9])
    assert [r.rowid for r in rows] == sorted([important, pinned])
    first = rows[0]
    assert (first.text, first.session_id, first.sequence_end) == ("important", "s1", 2)
    assert first.importance == 0.9 and not first.pinned and rows[1].pinned
    assert first.occurred_at == first.created_at  # stored without occurred_at
    expected = np.asarray(seam.embedder.embed_documents(["important"])[0], dtype="<f4")
    assert first.vector == expected.tobytes()
    assert other not in recall.salient(crossing, 0.0, 100)


def test_search_store_filters_hit_rows_and_session_lists(seam: Seam) -> None:
    """What the read path reads through the search store on either backend: a read
    filter's rowids (sessions, tags, a condition in the backend's dialect), hits'
    columns, tie-break ends, a user's / channel's sessions and the files split."""
    search, recall = seam.read_stores()
    seam.store("s1", 1, "one", user_id="ann")
    seam.store("s1", 2, "two", user_id="ann")
    seam.store("s2", 1, "three", user_id="bob")
    seam.add_note("memory:ann", "n1", "a tagged note", ["food", "fav"])
    seam.add_note("memory:ann", "n2", "another note", ["food"])
    one, two, three, note1, note2 = seam.rowids()
    assert search.rowids_matching(None).tolist() == [one, two, three, note1, note2]
    assert search.rowids_matching(()).tolist() == []
    assert search.rowids_matching(["s1", "s2"]).tolist() == [one, two, three]
    assert search.rowids_matching(None, ["food"]).tolist() == [note1, note2]
    assert search.rowids_matching(None, ["food", "fav"]).tolist() == [note1]
    assert search.rowids_matching(["s1"], ["food"]).tolist() == []
    condition, params = recall.scope_condition(_scope("s1"))
    assert search.rowids_matching(None, (), condition, params).tolist() == [one, two]
    assert search.rowids_matching(["s2"], (), condition, params).tolist() == []
    scoped = recall.scope_condition(_scope("s1", recent_from=2))
    assert search.rowids_matching(None, (), *scoped).tolist() == [one]
    rows = search.chunk_rows([two, 10**9])
    assert list(rows) == [two]
    rowid, _chunk_id, session, text, start, end, meta, when = rows[two]
    assert (rowid, session, text, start, end) == (two, "s1", "two", 2, 2)
    assert isinstance(meta, str) and str(when).startswith("20")
    assert search.chunk_ends([one, two, 10**9]) == {one: 1, two: 2}
    assert search.chunk_rows([]) == {} and search.chunk_ends([]) == {}
    assert search.scoped_sessions(user_id="ann") == ["memory:ann", "s1"]
    assert search.scoped_sessions(user_id="nobody") == []
    assert sorted(search.source_sessions(files=False)) == ["memory:ann", "s1", "s2"]
    assert search.source_sessions(files=True) == []
