"""The embedding cache (issue 10): consulted before the embedder, shared, bounded, purged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import raw
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConfigError, InvalidInputError
from mindfile.index.chunking import content_hash

from ._support import CountingEmbedder

RemoteLike = CountingEmbedder


CONVERSATION = [
    "I moved to Lisbon in May.",
    "My sister Ines lives in Porto.",
    "We hiked the Rota Vicentina last spring.",
    "I moved to Lisbon in May.",  # said twice
]


@pytest.fixture
def remote() -> RemoteLike:
    return RemoteLike()


def test_a_replayed_conversation_costs_no_provider_call(
    store_location: str, remote: RemoteLike
) -> None:
    with mindfile.open(store_location, embedder=remote) as mem:
        assert mem.embedding_cache_stats().enabled  # on by default for remote embedders
        mem.store_many([("s1", i, t) for i, t in enumerate(CONVERSATION, 1)])
        assert sorted(remote.sent) == sorted(set(CONVERSATION))  # the repeat sent once
        remote.sent.clear()
        # Another session, another agent, another user: the cache is store-wide.
        mem.store_many(
            [("s2", i, t) for i, t in enumerate(CONVERSATION, 1)], agent_identity="b", user_id="u"
        )
        assert remote.sent == []
        stats = mem.embedding_cache_stats()
        assert stats.entries == 3 and stats.models == {remote.model_id: 3}
        assert stats.bytes == 3 * remote.dimensions * 4
        assert (stats.hits, stats.misses) == (3, 3)
        assert stats.hit_rate == 0.5
        # Same vectors either way: a cached vector is the one the embedder made.
        hits = mem.search("Lisbon", mode="vector", top_k=2)
        assert {h.session_id for h in hits} == {"s1", "s2"}
        assert hits[0].score == pytest.approx(hits[1].score)


def test_notes_and_facts_consult_it_and_it_survives_reopening(
    store_location: str, remote: RemoteLike
) -> None:
    path = store_location
    with mindfile.open(path, embedder=remote) as mem:
        mem.store("s1", 1, "Alice likes green tea")
    remote.sent.clear()
    with mindfile.open(path, embedder=remote) as mem:
        mem.store_note("memory:alice", "n1", "Alice likes green tea")
        mem.store("s9", 1, "Alice likes green tea")
        assert remote.sent == []
        mem.set_fact("alice", "drink", "tea", "green")
        assert remote.sent  # a new text
        sent = len(remote.sent)
        mem.set_fact("bob", "drink", "tea", "green")
        assert len(remote.sent) == sent  # the same fact text for another user


def test_local_embedders_skip_it_unless_asked(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "a.db", embedder="hash") as mem:
        mem.store("s1", 1, "hello there")
        assert not mem.embedding_cache_stats().enabled
        assert mem.embedding_cache_stats().entries == 0
    with mindfile.open(tmp_path / "b.db", embedder="hash", embedding_cache=True) as mem:
        mem.store("s1", 1, "hello there")
        assert mem.embedding_cache_stats().entries == 1
    with pytest.raises(ConfigError):
        mindfile.open(tmp_path / "c.db", embedding_cache="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        mindfile.open(tmp_path / "c.db", embedding_cache_max_entries=0)


def test_lru_bound(store_location: str, remote: RemoteLike) -> None:
    with mindfile.open(store_location, embedder=remote, embedding_cache_max_entries=3) as mem:
        for i, text in enumerate(["one a", "two b", "three c"], 1):
            mem.store("s1", i, text)
        mem.store("s2", 1, "one a")  # used again: now the most recent
        mem.store("s1", 4, "four d")  # evicts the least recently used: "two b"
        assert mem.embedding_cache_stats().entries == 3
        remote.sent.clear()
        mem.store("s3", 1, "one a")
        mem.store("s3", 2, "two b")
        assert remote.sent == ["two b"]


def test_deleted_texts_leave_the_cache(store_location: str, remote: RemoteLike) -> None:
    with mindfile.open(store_location, embedder=remote) as mem:
        mem.store("bob-chat", 1, "Bob's bank pin is 4321", user_id="bob")
        mem.store("bob-chat", 2, "shared words", user_id="bob")
        mem.store("al-chat", 1, "shared words", user_id="al")
        assert mem.embedding_cache_stats().entries == 2
        counts = mem.forget_user("bob")
        assert counts["cached_vectors"] == 1  # the pin's vector; "shared words" is Al's too
        rows = raw(mem).query("SELECT text_hash FROM embedding_cache")
        assert [r[0] for r in rows] == [content_hash("shared words")]
        mem.forget("al-chat")
        mem.purge()
        assert mem.embedding_cache_stats().entries == 0


def test_prune_older_than_and_everything(store_location: str, remote: RemoteLike) -> None:
    with mindfile.open(store_location, embedder=remote) as mem:
        mem.store("s1", 1, "kept a while")
        assert mem.prune_embedding_cache(older_than=3600) == 0
        raw(mem).execute("UPDATE embedding_cache SET last_used_at = '2000-01-01T00:00:00+00:00'")
        assert mem.prune_embedding_cache(older_than=3600) == 1
        mem.store("s1", 2, "another text")
        assert mem.prune_embedding_cache(everything=True) == 1
        for bad in (-1, float("nan"), "x", True):
            with pytest.raises(InvalidInputError):
                mem.prune_embedding_cache(older_than=bad)  # type: ignore[arg-type]


def test_a_damaged_entry_is_embedded_again(store_location: str, remote: RemoteLike) -> None:
    with mindfile.open(store_location, embedder=remote) as mem:
        mem.store("s1", 1, "a text")
        raw(mem).execute("UPDATE embedding_cache SET embedding_blob = ?", (b"\x00\xff",))
        remote.sent.clear()
        mem.store("s2", 1, "a text")
        assert remote.sent == ["a text"]
        assert mem.reconcile(repair=False).consistent


def test_read_only_stores_do_not_write_it(store_location: str, remote: RemoteLike) -> None:
    path = store_location
    with mindfile.open(path, embedder=remote) as mem:
        mem.store("s1", 1, "a text")
    with mindfile.open(path, embedder=remote, read_only=True) as mem:
        assert not mem.embedding_cache_stats().enabled
        assert mem.embedding_cache_stats().entries == 1


def test_cli_stats_and_prune(store_location: str, tmp_path: Path) -> None:
    path = store_location
    with mindfile.open(path, embedder="hash", embedding_cache=True) as mem:
        mem.store("s1", 1, "one text")
    runner = CliRunner()
    out = runner.invoke(cli, ["cache", "stats", "--db", str(path), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["entries"] == 1
    out = runner.invoke(cli, ["cache", "prune", "--all", "--db", str(path), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == {"removed": 1}
    out = runner.invoke(cli, ["cache", "stats", "--db", str(tmp_path / "nope.db")])
    assert out.exit_code == 4
