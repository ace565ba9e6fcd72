"""Time-aware retrieval on real stores: occurred_at, as_of, the time boost, migration 0013."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import InvalidInputError, InvalidTimeError
from mindfile.storage.migrations import load_migrations

AS_OF = datetime(2023, 10, 20, tzinfo=UTC)
HIKES = [
    ("I went hiking in the mountains with my sister", "2023-03-11"),
    ("I went hiking by the lake with my sister", "2023-05-13"),
    ("I went hiking in the forest with my sister", "2023-07-15"),
    ("I went hiking along the coast with my sister", "2023-09-16"),
]


@pytest.fixture
def hikes(store_location: str) -> mindfile.Mindfile:
    """On both backends (tests/conftest.py)."""
    mem = mindfile.open(store_location)
    events = [("s", i, text, None, when) for i, (text, when) in enumerate(HIKES, start=1)]
    mem.store_many(events, user_id="u")
    mem.store("s", 10, "my sister likes pottery and painting", occurred_at="2023-10-01")
    return mem


def test_a_temporal_query_ranks_the_in_window_memory_first(hikes: mindfile.Mindfile) -> None:
    with hikes:
        plain = hikes.search("where did I go hiking with my sister?", as_of=AS_OF)
        assert plain.time is None and plain[0].breakdown.time is None
        for question, expected in (
            ("where did I go hiking with my sister in May?", "lake"),
            ("where did I go hiking with my sister last March?", "mountains"),
            ("where did I go hiking with my sister in July 2023?", "forest"),
            ("where did I go hiking with my sister a month ago?", "coast"),
        ):
            hits = hikes.search(question, as_of=AS_OF)
            assert expected in hits[0].text, (question, [h.text for h in hits])
            assert hits.time is not None and hits.time["as_of"].startswith("2023-10-20")
            top = hits[0].breakdown
            assert top.time is not None and top.time > 0
            # the time component is part of the fused score
            assert top.fused == pytest.approx(
                hits.weights[0] * top.vector_norm
                + hits.weights[1] * top.fts_norm
                + top.time
                + (top.neighbors or 0.0)
                + (top.token_match or 0.0)
            )
        off = hikes.search(
            "where did I go hiking with my sister in May?", as_of=AS_OF, temporal=False
        )
        assert off.time is None and all(h.breakdown.time is None for h in off)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is my favourite colour now?", "green"),
        ("What is my latest favourite colour?", "green"),
        ("What was my first favourite colour?", "blue"),
    ],
)
def test_latest_and_first_prefer_the_newest_or_oldest_of_similar_memories(
    tmp_path: Path, question: str, expected: str
) -> None:
    with mindfile.open(tmp_path / "c.db") as mem:
        mem.store("a", 1, "My favourite colour is blue.", occurred_at="2021-04-01")
        mem.store("b", 1, "My favourite colour is green.", occurred_at="2023-04-01")
        others = ["I walk the dog every morning.", "We had pasta for dinner.",
                  "The meeting moved to Tuesday.", "My brother plays the guitar.",
                  "It rained all weekend.", "I am reading a novel about whales."]  # fmt: skip
        mem.store_many([("c", i, text) for i, text in enumerate(others)])
        for mode in ("hybrid", "fts"):
            hits = mem.search(question, as_of=AS_OF, mode=mode)  # type: ignore[arg-type]
            assert expected in hits[0].text, (mode, [(h.text, h.breakdown) for h in hits])


def test_the_boost_never_drops_a_memory(hikes: mindfile.Mindfile) -> None:
    with hikes:
        # a window no memory is in: same memories, only reordered
        hits = hikes.search("hiking with my sister in 1999", as_of=AS_OF, top_k=10)
        plain = hikes.search("hiking with my sister", as_of=AS_OF, top_k=10, temporal=False)
        assert {h.chunk_id for h in hits} >= {h.chunk_id for h in plain if "hiking" in h.text}


def test_as_of_defaults_to_now_and_top_k_stays_a_prefix(hikes: mindfile.Mindfile) -> None:
    with hikes:
        hits = hikes.search("hiking in 2023", top_k=5)
        assert hits.time is not None
        assert datetime.fromisoformat(hits.time["as_of"]).year >= 2024
        short = hikes.search("hiking in May", top_k=2, as_of=AS_OF)
        long = hikes.search("hiking in May", top_k=5, as_of=AS_OF)
        assert [h.chunk_id for h in short] == [h.chunk_id for h in long[:2]]
        assert [h.score for h in short] == [h.score for h in long[:2]]


def test_hits_and_recall_expose_occurred_at(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "t.db", embedder="hash") as mem:
        mem.store("s", 1, "dated", occurred_at=datetime(2023, 5, 8, 14, 0, tzinfo=UTC))
        mem.store("s", 2, "a date", occurred_at=date(2022, 1, 2))
        mem.store("s", 3, "offset", occurred_at="2021-06-01T12:00:00+02:00")
        mem.store("s", 4, "epoch", occurred_at=0)
        mem.store("s", 5, "naive", occurred_at=datetime(2020, 1, 1, 9, 30))
        mem.store("s", 6, "undated")
        mem.store_many(
            [("s", 7, "batch default"), ("s", 8, "own", None, "2019-01-01")],
            occurred_at="2018-01-01",
        )
        got = {r.payload: r.occurred_at for r in mem.recall("s")}
        assert got["dated"] == "2023-05-08T14:00:00.000000+00:00"
        assert got["a date"] == "2022-01-02T00:00:00.000000+00:00"
        assert got["offset"] == "2021-06-01T10:00:00.000000+00:00"
        assert got["epoch"] == "1970-01-01T00:00:00.000000+00:00"
        assert got["naive"] == "2020-01-01T09:30:00.000000+00:00"
        assert got["batch default"] == "2018-01-01T00:00:00.000000+00:00"
        assert got["own"] == "2019-01-01T00:00:00.000000+00:00"
        undated = next(r for r in mem.recall("s") if r.payload == "undated")
        assert undated.occurred_at == undated.created_at
        hit = mem.search("dated", mode="fts")[0]
        assert hit.text == "dated" and hit.occurred_at == got["dated"]
        assert hit.to_dict()["occurred_at"] == got["dated"]


@pytest.mark.parametrize(
    "bad",
    [
        "yesterday",
        "2023-13-01",
        "",
        "\x00",
        float("nan"),
        float("inf"),
        True,
        [],
        {},
        b"2023",
        1e20,
    ],
)
def test_bad_times_are_a_typed_error(tmp_path: Path, bad: object) -> None:
    with mindfile.open(tmp_path / "t.db", embedder="hash") as mem:
        with pytest.raises(InvalidTimeError) as err:
            mem.store("s", 1, "x", occurred_at=bad)  # type: ignore[arg-type]
        assert err.value.code == "invalid_time"
        assert isinstance(err.value, InvalidInputError)
        with pytest.raises(InvalidTimeError):
            mem.store_many([("s", 1, "x", None, bad)])
        with pytest.raises(InvalidTimeError):
            mem.search("x", as_of=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidTimeError):
            mem.build_context("s", "x", token_budget=500, as_of=bad)  # type: ignore[arg-type]
        assert mem.recall("s") == []  # nothing was written
    with pytest.raises(InvalidInputError):
        mindfile.open(tmp_path / "u.db", embedder="hash").search("x", temporal="yes")  # type: ignore[arg-type]


def test_a_shared_chunk_keeps_the_newest_time(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "t.db", embedder="hash") as mem:
        mem.store("s", 1, "same text", occurred_at="2023-01-01")
        mem.store("s", 2, "same text", occurred_at="2023-06-01")
        mem.store("s", 3, "same text", occurred_at="2022-01-01")
        mem.store("s", 4, "same text")  # no time given: keeps what it had
        hits = mem.search("same text", mode="fts")
        assert len(hits) == 1 and hits[0].occurred_at.startswith("2023-06-01")


def test_build_context_resolves_against_as_of(hikes: mindfile.Mindfile) -> None:
    with hikes:
        ctx = hikes.build_context(
            "q",
            "where did I go hiking with my sister in May?",
            token_budget=300,
            as_of=AS_OF,
            user_id="u",
            config=mindfile.ContextConfig(recent_turns=0),
        )
        memories = [i for i in ctx.items if i.source == "memory"]
        assert memories and "lake" in memories[0].text


def test_migration_0013_on_an_existing_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store("s", 1, "stored before the upgrade")
        created = mem.recall("s")[0].created_at
    # Make it a store from before migration 0013: its columns and its record gone.
    con = mindfile.storage.db.Database(path)
    try:
        with con.atomic():
            con.execute("ALTER TABLE chunks DROP COLUMN occurred_at")
            con.execute("ALTER TABLE conversation_events DROP COLUMN occurred_at")
            con.execute("DELETE FROM memory_migrations WHERE version = 13")
    finally:
        con.close()
    with mindfile.open(path, embedder="hash") as mem:
        assert mem.info().schema_version == len(load_migrations())  # 0013 applied again
        assert mem.db.scalar("SELECT count(*) FROM chunks WHERE occurred_at IS NULL") == 1
        old = mem.recall("s")[0]
        assert old.occurred_at == created  # NULL reads as the time it was stored
        hit = mem.search("stored before the upgrade", mode="fts")[0]
        assert hit.occurred_at == created
        mem.store("s", 2, "stored after the upgrade", occurred_at="2020-02-02")
        hits = mem.search("stored upgrade in February 2020", mode="fts", as_of=AS_OF)
        assert hits[0].text == "stored after the upgrade"
