"""Author match (mindfile/retrieve/authors.py): what the people a query names wrote is
lifted in the ranks after the first ten."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mindfile
from mindfile.errors import ConfigError, InvalidInputError
from mindfile.index.extract import extract_author
from mindfile.retrieve import authors
from mindfile.retrieve.authors import named
from mindfile.storage.backend import search_store

QUERY = "What pets does Nate have?"
ANSWER = "this is Max! a happy dog at the park"


def _store(mem: mindfile.Mindfile, *, with_authors: bool = True) -> None:
    """12 memories with both of the question's words and 30 with one, all by Alice; Nate's
    answer (none of the question's words) and 20 unrelated memories by Nate."""

    def by(name: str) -> dict[str, str]:
        return {"author": name} if with_authors else {}

    events: list[tuple[str, int, object, dict[str, str]]] = [
        (f"talk{i}", 1, f"Nate asked about the pets {i} of the neighbours", by("Alice"))
        for i in range(12)
    ]
    events += [(f"shelter{i}", 1, f"pets {i} wait at the shelter", by("Alice")) for i in range(30)]
    answer = {"role": "user", "content": ANSWER}
    if with_authors:
        answer["name"] = "Nate"  # the author from the message (OpenAI's participant name)
    events.append(("answer", 1, answer, {}))
    events += [
        (f"work{i}", 1, f"the quarterly review {i} covers budgets", by("Nate")) for i in range(20)
    ]
    mem.store_many(events, user_id="alice")
    mem.rebuild_index()


@pytest.fixture
def model_mem(store_location: str) -> Iterator[mindfile.Mindfile]:
    """A store with the bundled model (the hash embedder's cosines are noise of the size
    of these lifts), on each backend."""
    with mindfile.open(store_location) as store:
        yield store


def _key(results: mindfile.SearchResults) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in results]


def _rank(results: mindfile.SearchResults, text: str) -> int | None:
    return next((i for i, h in enumerate(results, 1) if h.text == text), None)


def test_a_query_names_an_author_as_whole_words() -> None:
    people = ["Nate", "Dr. Ines Silva", "Al", "x", "  ", "bob"]
    assert named("What pets does Nate have?", people) == {"Nate"}
    assert named("what did NATE's sister say", people) == {"Nate"}
    assert named("Is Dr. Ines Silva coming?", people) == {"Dr. Ines Silva"}
    assert named("Did Natehaven call?", people) == set()  # not inside another word
    assert named("Did Al call Nate?", people) == {"Al", "Nate"}
    assert named("x marks the spot", people) == set()  # one letter: never matched
    assert named("", people) == set()
    # A query in one case names authors whatever their case ...
    assert named("is dr. ines silva coming", people) == {"Dr. Ines Silva"}
    assert named("WHAT DID NATE SAY", people) == {"Nate"}
    assert named("Did Bob call?", people) == {"bob"}  # a name given in lower case
    # ... one in mixed case only where a capitalised name is capitalised.
    assert named("What will I do in May?", ["Will", "May"]) == {"May"}
    assert named("what will I do", ["Will"]) == set()
    assert named("what will i do", ["Will"]) == {"Will"}


def test_the_author_of_a_message_is_its_participant_name() -> None:
    assert extract_author({"role": "user", "name": " Nate ", "content": "hi"}) == "Nate"
    assert extract_author({"role": "assistant", "name": "helper", "content": "hi"}) == "helper"
    # A tool result's name is the tool's; a typed content part's too (tool_use).
    assert extract_author({"role": "tool", "name": "get_weather", "content": "sunny"}) is None
    assert extract_author({"type": "tool_use", "name": "search", "input": {}}) is None
    assert extract_author({"role": "user", "name": "", "content": "hi"}) is None
    assert extract_author({"role": "user", "name": 7, "content": "hi"}) is None
    assert extract_author("Nate: hi") is None


def test_the_author_is_kept_in_the_metadata_and_a_given_one_wins(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, {"role": "user", "name": "Nate", "content": "my dog is Max"})
    mem.store(
        "s", 2, {"role": "user", "name": "Nate", "content": "a cat"}, metadata={"author": "N"}
    )
    hits = {h.text: h for h in mem.search("dog cat", top_k=5, mode="fts")}
    assert hits["my dog is Max"].metadata["author"] == "Nate"
    assert hits["a cat"].metadata["author"] == "N"


def test_what_the_named_author_wrote_climbs_after_the_first_ten(
    model_mem: mindfile.Mindfile,
) -> None:
    mem = model_mem
    _store(mem)
    with_it = mem.search(QUERY, top_k=50, feedback=False)
    without = mem.search(QUERY, top_k=50, feedback=False, authors=False)
    ten = mem.search(QUERY, top_k=10, feedback=False)
    # The first ten never change, nor their scores; top_k=10 stays a prefix.
    assert _key(with_it)[:10] == _key(without)[:10] == _key(ten)
    assert all(h.breakdown.author is None for h in [*with_it[:10], *without, *ten])
    rank, before = _rank(with_it, ANSWER), _rank(without, ANSWER)
    assert before is not None and before > 20  # behind memories with "pets"
    assert rank is not None and rank <= 13  # right after the memories with both words
    hit, was = with_it[rank - 1], without[before - 1]
    # The lift is WEIGHT x the fused score it had.
    assert hit.breakdown.author == pytest.approx(authors.WEIGHT * was.score)
    assert hit.score <= with_it[9].score  # shown at most at the tenth's score
    # Alice's memories after the first ten get nothing.
    alice = [h for h in with_it[10:] if h.metadata.get("author") == "Alice"]
    assert alice and all(h.breakdown.author == 0.0 for h in alice)
    # Naming Nate does not make his unrelated memories answers: with next to no score
    # of their own they stay behind every memory with "pets".
    work = [i for i, h in enumerate(with_it, 1) if h.text.startswith("the quarterly review")]
    shelter = [i for i, h in enumerate(with_it, 1) if h.text.startswith("pets ")]
    assert work and len(shelter) == 30 and min(work) > max(shelter)


def test_a_store_without_authors_ranks_the_same(any_mem: mindfile.Mindfile) -> None:
    mem = any_mem
    _store(mem, with_authors=False)
    with_it = mem.search(QUERY, top_k=50)
    without = mem.search(QUERY, top_k=50, authors=False)
    assert _key(with_it) == _key(without)
    assert all(h.breakdown.author in (None, 0.0) for h in with_it)


def test_build_context_lifts_the_named_author_too(mem_static: mindfile.Mindfile) -> None:
    mem = mem_static
    _store(mem)

    def held(config: mindfile.ContextConfig) -> set[str]:
        ctx = mem.build_context(
            "question", QUERY, token_budget=1000, user_id="alice", config=config
        )
        return {i.text for i in ctx.items if i.source in ("memory", "salient")}

    assert ANSWER in held(mindfile.ContextConfig(feedback=False))
    assert ANSWER not in held(mindfile.ContextConfig(feedback=False, authors=False))


def test_authors_must_be_a_bool(mem: mindfile.Mindfile) -> None:
    with pytest.raises(InvalidInputError, match="authors"):
        mem.search("x", authors="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="authors"):
        mindfile.ContextConfig(authors=1)  # type: ignore[arg-type]


def test_the_store_reads_string_authors_only(any_mem: mindfile.Mindfile) -> None:
    mem = any_mem
    mem.store_many(
        [
            ("s", 1, {"role": "user", "name": "Nate", "content": "one"}, {}),
            ("s", 2, "two", {"author": "Ines"}),
            ("s", 3, "three", {"author": 5}),
            ("s", 4, "four", {}),
        ]
    )
    rowids = [int(r[0]) for r in mem.db.query("SELECT id FROM chunks ORDER BY id")]
    authors = search_store(mem.db).chunk_authors([*rowids, 10**9])
    assert sorted(authors.values()) == ["Ines", "Nate"]
    assert search_store(mem.db).chunk_authors([]) == {}


def test_authors_come_from_their_index_not_the_chunk_rows(mem: mindfile.Mindfile) -> None:
    """Migration 0018: the candidates' authors are index probes (the rows hold ~1 KB of
    text each; reading ~300 of them cost ~1 ms)."""
    from mindfile.storage.search import AUTHORS

    plan = " ".join(str(r) for r in mem.db.query(f"EXPLAIN QUERY PLAN {AUTHORS}", ("[1, 2]",)))
    assert "idx_chunks_author" in plan, plan


@pytest.mark.parametrize("seed", range(20))
def test_reading_only_the_reachable_candidates_changes_no_result(
    mem: mindfile.Mindfile, seed: int
) -> None:
    """The top ``limit`` after the head are the same as when every candidate of the named
    author is lifted (only those that can reach it are looked up), with or without an
    ``eligible`` rule (build_context's admission)."""
    import random

    from mindfile.retrieve.authors import apply_authors
    from mindfile.retrieve.fusion import Fused

    mem.store_many(
        [("s", i, f"turn {i}", {"author": ("Nate", "Ann")[i % 3 == 0]}) for i in range(90)]
    )
    rowids = [int(r[0]) for r in mem.db.query("SELECT id FROM chunks ORDER BY id")]
    who = search_store(mem.db).chunk_authors(rowids)
    rng = random.Random(seed)
    scores = {r: rng.choice([0.0, rng.random(), rng.random() ** 3]) for r in rowids}
    odd = rng.random() < 0.5

    def eligible(f: Fused) -> bool:
        return f.rowid % 2 == 1 if odd else True

    def ranked(lift_all: bool) -> list[int]:
        fused = {r: Fused(r, score=s) for r, s in scores.items()}
        head = sorted(fused.values(), key=lambda f: (-f.score, f.rowid))[:10]
        if lift_all:
            pinned = {f.rowid for f in head}
            for f in fused.values():
                if f.rowid not in pinned and who[f.rowid] == "Nate":
                    f.score += authors.WEIGHT * f.score
        else:
            apply_authors(mem.db, fused, head, "What did Nate say?", 30, eligible)
        pinned = {f.rowid for f in head}
        rest = [f for f in fused.values() if f.rowid not in pinned and eligible(f)]
        return [f.rowid for f in sorted(rest, key=lambda f: (-f.score, f.rowid))[:20]]

    assert ranked(lift_all=False) == ranked(lift_all=True)
