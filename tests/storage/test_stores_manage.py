"""Conformance of the stores added in phase 2 of the storage seam, on every backend.

Meta, sessions, lifecycle, quotas, consolidation and jobs (mindfile.storage.stores),
plus the event store's working-memory reads. Like tests/storage/test_stores.py, the
tests create what they need through the public API or the stores, never with SQL, and
pin each store's own contract (return values, order, conditional writes).
"""

from __future__ import annotations

import numpy as np
import pytest

import mindfile
from mindfile.errors import ScopeError
from mindfile.index.pipeline import PreparedChunk
from mindfile.storage.consolidation import ConsolidationRow
from mindfile.storage.jobs import FailedAttempt

NOW = "2026-01-01T00:00:00.000000+00:00"
LATER = "2026-01-02T00:00:00.000000+00:00"
MUCH_LATER = "2027-01-01T00:00:00.000000+00:00"


def _rowids(mem: mindfile.Mindfile) -> list[int]:
    """The managed chunks' rowids, oldest first (read through the lifecycle store)."""
    return sorted(c.rowid for c in mem.stores.lifecycle.managed_live(NOW))


def test_the_engine_composes_the_new_stores(store_backend: mindfile.Mindfile) -> None:
    stores = store_backend.stores
    names = ("meta", "sessions", "lifecycle", "quotas", "consolidation", "jobs")
    assert all(getattr(stores, name) is not None for name in names)


# -- meta ----------------------------------------------------------------------------


def test_meta_get_set_and_defaults(store_backend: mindfile.Mindfile) -> None:
    meta = store_backend.stores.meta
    # Opening the store bound its model.
    assert meta.get("embedding_model") == store_backend.embedder.model_id
    assert meta.get("no such key") is None
    meta.set({"k1": "a", "k2": "b"})
    meta.set({"k1": "c"})
    meta.set_default({"k1": "ignored", "k3": "d"})
    assert meta.get_many(["k1", "k2", "k3", "missing"]) == {"k1": "c", "k2": "b", "k3": "d"}
    assert meta.get_many([]) == {}
    every = meta.get_many()
    assert every["k1"] == "c" and "embedding_dims" in every


# -- sessions ------------------------------------------------------------------------


def test_sessions_upsert_scope_and_sequences(store_backend: mindfile.Mindfile) -> None:
    mem, sessions = store_backend, store_backend.stores.sessions
    assert not sessions.exists("s1") and sessions.scope("s1") is None
    assert sessions.next_sequence("s1") == 1
    with mem.db.atomic():
        sessions.upsert("s1", NOW, user_id="ann", touch=False)
    assert sessions.exists("s1") and sessions.scope("s1") == ("ann", None)
    with pytest.raises(ScopeError), mem.db.atomic():
        sessions.upsert("s1", LATER, user_id="bob")
    mem.store("s1", 5, "five", user_id="ann")
    assert sessions.next_sequence("s1") == 6


def test_sessions_add_chunks_without_an_event(store_backend: mindfile.Mindfile) -> None:
    mem, sessions = store_backend, store_backend.stores.sessions
    texts = ["loose chunk one", "loose chunk two"]
    chunks = [PreparedChunk(t, f"hash-{i}", '{"kind": "test"}') for i, t in enumerate(texts)]
    vectors = mem.embedder.embed_documents(texts)
    with mem.db.atomic():
        sessions.upsert("loose", NOW)
        added = sessions.add_chunks("loose", chunks, vectors, mem.embedder.model_id, 3, NOW)
        again = sessions.add_chunks("loose", chunks, vectors, mem.embedder.model_id, 4, NOW)
    assert (added, again) == (2, 0)  # a content hash the session holds is skipped
    assert sessions.next_sequence("loose") == 5  # the high-water mark rose anyway
    hits = mem.search("loose chunk", session_id="loose", mode="fts")
    assert sorted(h.text for h in hits) == texts
    assert not mem.stores.events.exists("loose", 3)


# -- events: the working-memory reads --------------------------------------------------


def test_event_signature_newest_and_tail(store_backend: mindfile.Mindfile) -> None:
    mem, events = store_backend, store_backend.stores.events
    empty = events.signature("s1")
    assert empty[:3] == (0, None, 0) and empty[3] is None
    stamp = events.change_stamp()
    for seq in (1, 2, 4):
        mem.store("s1", seq, f"message {seq}")
    assert events.change_stamp() != stamp
    count, last, checksum, newest = events.signature("s1")
    assert (count, last, checksum) == (3, 4, 7) and newest is not None
    signature, rows = events.newest("s1", 1, 10)
    assert signature == events.signature("s1")
    assert [r.sequence for r in rows] == [2, 4]
    _, rows = events.newest("s1", -1, 2)
    assert [r.sequence for r in rows] == [2, 4]  # the newest two, in order
    assert [r.sequence for r in events.tail("s1", 2)] == [2, 4]
    assert events.tail("s1", 10)[0].payload == "message 1"
    assert events.newest("missing", -1, 5) == ((0, None, 0, None), [])


# -- lifecycle -----------------------------------------------------------------------


def test_lifecycle_hidden_live_and_delete(store_backend: mindfile.Mindfile) -> None:
    mem, lifecycle = store_backend, store_backend.stores.lifecycle
    mem.store("s1", 1, "kept forever")
    mem.store("s1", 2, "expires soon", ttl=60)
    mem.store("s1", 3, "pinned though expiring", ttl=60)
    first, expiring, pinned = _rowids(mem)
    mem.pin("s1", 3)
    assert lifecycle.hidden(NOW) == set()
    assert lifecycle.hidden(MUCH_LATER) == {expiring}
    live = {c.rowid for c in lifecycle.managed_live(MUCH_LATER)}
    assert live == {first}  # expired and pinned ones are not candidates
    assert pinned not in live
    deleted = lifecycle.delete_chunks([expiring, expiring])
    assert (deleted.chunks, deleted.events, deleted.notes) == (1, 1, 0)
    assert not mem.stores.events.exists("s1", 2) and mem.stores.events.exists("s1", 1)
    assert lifecycle.delete_chunks([]) == type(deleted)(0, 0, 0)


def test_lifecycle_delete_takes_a_note_with_its_last_chunk(
    store_backend: mindfile.Mindfile,
) -> None:
    mem = store_backend
    note = mem.store_note("ns", "n1", "a note to evict")
    (rowid,) = _rowids(mem)
    deleted = mem.stores.lifecycle.delete_chunks([rowid])
    assert (deleted.chunks, deleted.events, deleted.notes) == (1, 1, 1)
    assert mem.stores.notes.find("ns", "n1") is None
    assert not mem.stores.events.exists("ns", note.sequence)


# -- quotas --------------------------------------------------------------------------


def test_quota_rows_and_usage(store_backend: mindfile.Mindfile) -> None:
    mem, quotas = store_backend, store_backend.stores.quotas
    assert not quotas.has_any() and quotas.get("session:s1") is None
    mem.store("s1", 1, "one")
    mem.store("s1", 2, "two", ttl=60)
    quotas.upsert("session:s1", 10, None, "evict", NOW)
    quotas.upsert("session:s1", 5, 1000, "fail", LATER)
    row = quotas.get("session:s1")
    assert row is not None and quotas.has_any()
    assert (row.max_items, row.max_bytes, row.policy) == (5, 1000, "fail")
    assert (row.created_at, row.updated_at) == (NOW, LATER)
    quotas.count_eviction("session:s1", 2, 30)
    again = quotas.get("session:s1")
    assert again is not None and (again.evicted_items, again.evicted_bytes) == (2, 30)
    assert [q.scope for q in quotas.list_quotas()] == ["session:s1"]
    usage = quotas.usage("session:s1", MUCH_LATER, count_bytes=True)
    assert (usage.items, usage.expired_items) == (2, 1) and usage.bytes > len("onetwo")
    assert quotas.usage("session:s1", NOW, count_bytes=False).bytes == 0
    assert quotas.scopes_with_quotas(["s1", "other"]) == ["session:s1"]
    assert quotas.scope_sessions("session:s1") == ["s1"]
    assert quotas.agent_of("s1") is None and quotas.agent_of("missing") is None
    assert quotas.remove("session:s1") is True and quotas.remove("session:s1") is False


def test_quota_eviction_candidates_in_order(store_backend: mindfile.Mindfile) -> None:
    mem, quotas = store_backend, store_backend.stores.quotas
    mem.store("s1", 1, "important", importance=0.9)
    mem.store("s1", 2, "trivial", importance=0.1)
    mem.store("s1", 3, "expired", importance=0.95, ttl=60)
    mem.store("s1", 4, "being written", importance=0.1)
    important, trivial, expired, written = _rowids(mem)
    protected = quotas.protected([("s1", 4)])
    assert protected == [written]
    found = quotas.candidates("session:s1", protected, MUCH_LATER, None, limit=10, offset=0)
    assert [r for r, _ in found] == [expired, trivial, important]
    assert all(size > 0 for _, size in found)
    page = quotas.candidates("session:s1", protected, MUCH_LATER, None, limit=1, offset=1)
    assert [r for r, _ in page] == [trivial]
    decayed = quotas.candidates("session:s1", protected, MUCH_LATER, 3600.0, limit=10, offset=0)
    assert [r for r, _ in decayed] == [expired, trivial, important]
    (linked,) = quotas.candidate_events([trivial])
    assert (linked.chunk_rowid, linked.session_id, linked.sequence, linked.chunks) == (
        trivial,
        "s1",
        2,
        1,
    )
    assert linked.payload_bytes > 0


# -- consolidation -------------------------------------------------------------------


def test_consolidation_reads_and_summary_chunks(store_backend: mindfile.Mindfile) -> None:
    mem, store = store_backend, store_backend.stores.consolidation
    for seq in (1, 2, 3):
        mem.store("s1", seq, f"turn {seq} about the garden")
    mem.store("s2", 1, "elsewhere")
    assert store.sessions() == ["s1", "s2"]
    assert store.sessions(session_id="s2") == ["s2"] and store.sessions(session_id="x") == []
    assert store.sessions(scope="session:s1") == ["s1"]
    candidates = store.merge_candidates("s1", NOW)
    assert len(candidates) == 3 and all(len(c.vector) > 0 for c in candidates)
    group = store.group_chunks("s1", [c.rowid for c in candidates] + [10**9])
    assert sorted(group) == sorted(c.rowid for c in candidates)
    assert [e.sequence for e in store.span_events("s1")] == [1, 2, 3]
    assert [e.sequence for e in store.span_events("s1", 2, 3)] == [2, 3]
    assert not any(e.blocked or e.is_note for e in store.span_events("s1"))
    span = store.span_chunks("s1", 1, 2)
    assert len(span) == 2 and all(c.own for c in span)

    from mindfile.storage.chunks import ChunkRow

    text = "a summary of the garden"
    row = ChunkRow("s1", text, "summary-hash", '{"kind": "summary"}', 1, 2, 0.5, None)
    record = ConsolidationRow("summary", "s1", "", 1, 2, '[{"sequence": 1}]', NOW)
    vector = np.asarray(mem.embedder.embed_documents([text])[0])
    with mem.db.atomic():
        chunk_id = store.add_summary_chunk(row, vector, mem.embedder.model_id, [1, 2], record)
        store.mark_consolidated([c.rowid for c in span], NOW)
    assert store.has_chunk("s1", "summary-hash") and not store.has_chunk("s1", "nope")
    (recorded,) = store.records(chunk_id)
    assert (recorded.kind, recorded.chunk_id, recorded.sequence_end) == ("summary", chunk_id, 2)
    # The span's events are now linked to a summary: blocked from another span.
    assert [e.blocked for e in store.span_events("s1")] == [True, True, False]
    assert store.records("ch_missing") == []


# -- jobs ----------------------------------------------------------------------------


def _never_gone(_owner: str) -> bool:
    return False


def test_jobs_claim_complete_fail_release(store_backend: mindfile.Mindfile) -> None:
    mem, jobs = store_backend, store_backend.stores.jobs
    for seq in (1, 2, 3):
        mem.store("s1", seq, f"text {seq}")
    rowids = _rowids(mem)
    assert jobs.enqueue(rowids, NOW) == 3
    assert jobs.counts(NOW).by_status == {"pending": 3} and jobs.counts(NOW).due == 3
    leased, recovered = jobs.claim(
        "t1", "w1", now=NOW, expires=LATER, limit=2, max_retries=3, gone=_never_gone
    )
    assert recovered == [] and [j.chunk_rowid for j in leased] == rowids[:2]
    assert leased[0].text == "text 1"
    assert jobs.running_leases() == [("w1", LATER), ("w1", LATER)]
    blob = np.zeros(mem.embedder.dimensions, dtype="<f4").tobytes()
    # Another token completes nothing; the holder completes its job.
    assert jobs.complete("other", leased[:1], [blob], mem.embedder.model_id, NOW) == 0
    assert jobs.complete("t1", leased[:1], [blob], mem.embedder.model_id, NOW) == 1
    attempt = FailedAttempt(leased[1].job_id, "pending", 1, LATER)
    assert jobs.fail("t1", [attempt], "boom", NOW) == ["pending"]
    assert jobs.fail("t1", [attempt], "boom", NOW) == []  # the claim is gone
    (failed,) = [j for j in jobs.list_jobs(None, 10) if j.retry_count == 1]
    assert (failed.status, failed.last_error, failed.next_retry_at) == ("pending", "boom", LATER)
    assert [j.status for j in jobs.list_jobs("done", 10)] == ["done"]
    # Only due jobs are claimed: the failed one waits for its retry time.
    third, _ = jobs.claim(
        "t2", "w2", now=NOW, expires=LATER, limit=5, max_retries=3, gone=_never_gone
    )
    assert [j.chunk_rowid for j in third] == [rowids[2]]
    jobs.release("t2", [third[0].job_id], NOW)
    counts = jobs.counts(LATER)
    assert counts.by_status == {"pending": 2, "done": 1} and counts.due == 2
    assert counts.oldest_waiting_at == NOW and counts.next_retry_at is None
    assert jobs.prune_done(MUCH_LATER) == 1 and jobs.prune_done(MUCH_LATER) == 0


def test_jobs_recover_abandoned_and_retry_failed(store_backend: mindfile.Mindfile) -> None:
    mem, jobs = store_backend, store_backend.stores.jobs
    mem.store("s1", 1, "text")
    jobs.enqueue(_rowids(mem), NOW)
    jobs.claim(
        "t", "dead-worker", now=NOW, expires=MUCH_LATER, limit=1, max_retries=0, gone=_never_gone
    )
    # The lease is live; the holder is found gone: the lost attempt dead-letters it.
    assert jobs.recover_abandoned(LATER, 0, _never_gone) == []
    assert jobs.recover_abandoned(LATER, 0, lambda owner: owner == "dead-worker") == ["failed"]
    assert [j.status for j in jobs.list_jobs("failed", 5)] == ["failed"]
    assert jobs.retry_failed(LATER) == 1
    (job,) = jobs.list_jobs(None, 5)
    assert (job.status, job.retry_count, job.claimed_by) == ("pending", 0, None)


def test_sessions_write_events_and_list(store_backend: mindfile.Mindfile) -> None:
    from mindfile.errors import ConflictError
    from mindfile.index.pipeline import prepare_event

    mem, sessions = store_backend, store_backend.stores.sessions
    events = [prepare_event("w1", seq, f"written {seq}", spec=mem.chunk_spec) for seq in (1, 2)]
    vectors = mem.embedder.embed_documents([c.text for e in events for c in e.chunks])
    with mem.db.atomic():
        added = sessions.write_events(
            events, vectors, mem.embedder.model_id, NOW, user_id="ann", channel="chat"
        )
    assert added == 2 and sessions.scope("w1") == ("ann", "chat")
    assert [r.payload for r in mem.stores.events.recent("w1", None)] == ["written 1", "written 2"]
    with pytest.raises(ConflictError), mem.db.atomic():  # not above the high-water mark
        sessions.write_events(events[:1], vectors[:1], mem.embedder.model_id, LATER)
    mem.store("other", 1, "hello", user_id="bob")
    assert [s.session_id for s in sessions.list_sessions(user_id="ann")] == ["w1"]
    assert [s.session_id for s in sessions.list_sessions(channel="chat")] == ["w1"]
    assert {s.session_id for s in sessions.list_sessions()} == {"w1", "other"}


# -- privacy -------------------------------------------------------------------------


def test_privacy_erases_a_user_and_purges(store_backend: mindfile.Mindfile) -> None:
    mem, privacy = store_backend, store_backend.stores.privacy
    mem.store("ann-chat", 1, "ann's secret", user_id="ann")
    mem.store_note("memory:ann", "n1", "ann's note")
    mem.set_fact("ann", "food", "likes", "figs")
    mem.store("bob-chat", 1, "bob's words", user_id="bob")
    assert set(privacy.user_sessions("ann")) == {"ann-chat", "memory:ann", "facts:ann"}
    assert privacy.purge_pending() is False
    counts = privacy.erase_user("ann")
    assert counts["sessions"] == 3 and counts["facts"] == 1 and counts["notes"] == 1
    assert privacy.user_sessions("ann") == [] and mem.stores.sessions.exists("bob-chat")
    assert privacy.purge_pending() is True
    assert privacy.purge() >= 0 and privacy.purge_pending() is False
    assert privacy.delete_session("bob-chat") is True
    assert privacy.delete_session("bob-chat") is False
    mem.set_fact("carol", "city", "home", "Porto")
    assert privacy.erase_facts_scope("carol") == 1 and mem.get_fact("carol", "city", "home") is None


# -- models --------------------------------------------------------------------------


def test_models_reembed_claim_and_chunk_batches(store_backend: mindfile.Mindfile) -> None:
    mem, models = store_backend, store_backend.stores.models
    assert models.reembed_holder() == (None, None)
    models.claim_reembed("host:1:2:3", "hash:64")
    assert models.reembed_holder() == ("host:1:2:3", "hash:64")
    with mem.db.atomic():
        models.clear_reembed()
    assert models.reembed_holder() == (None, None)
    for seq in (1, 2, 3):
        mem.store("s1", seq, f"chunk {seq}")
    first = models.chunk_batch(0, 2)
    assert [t for _, t, _ in first] == ["chunk 1", "chunk 2"]
    assert all(h is not None for _, _, h in first)  # written with their text hash
    rest = models.chunk_batch(first[-1][0], 10)
    assert [t for _, t, _ in rest] == ["chunk 3"]
    assert models.missing_text_hashes() == []
    with mem.db.atomic():
        models.set_text_hashes([("h-new", first[0][0])])
    assert models.chunk_batch(0, 1)[0][2] == "h-new"


# -- embedding cache -----------------------------------------------------------------


def test_embedding_cache_rows(store_backend: mindfile.Mindfile) -> None:
    cache = store_backend.stores.embedding_cache
    one, two = b"\x00" * 8, b"\x01" * 8
    cache.record("m1", [], [("h1", one), ("h2", two)], NOW, None)
    cache.record("m2", [], [("h1", one)], NOW, None)
    assert cache.lookup("m1", ["h1", "h2", "h3"]) == {"h1": one, "h2": two}
    assert cache.lookup("m1", []) == {}
    cache.record("m1", ["h2"], [], LATER, None)  # h2 used later than h1
    cache.record("m1", [], [("h3", one)], LATER, 3)  # 4 entries, 3 kept: the LRU goes
    assert sorted(cache.lookup("m1", ["h1", "h2", "h3"])) == ["h2", "h3"]
    summary = {m.model_id: m for m in cache.summary()}
    assert (summary["m1"].entries, summary["m1"].bytes) == (2, 16)
    assert summary["m2"].oldest_used_at == NOW
    assert cache.drop_model("m2") == 1 and cache.drop_model("m2") == 0
    assert cache.prune(unused_since=MUCH_LATER) == 2  # no chunk holds these texts either
    cache.record("m1", [], [("h4", one)], NOW, None)
    assert cache.prune(everything=True) == 1 and cache.summary() == []


def test_integrity_row_counts(store_backend: mindfile.Mindfile) -> None:
    mem = store_backend
    assert mem.stores.integrity.row_counts() == {
        "sessions": 0,
        "conversation_events": 0,
        "chunks": 0,
        "chunks_vec": 0,
    }
    mem.store("s1", 1, "one")
    mem.store("s2", 1, "two")
    counts = mem.stores.integrity.row_counts()
    assert counts == {"sessions": 2, "conversation_events": 2, "chunks": 2, "chunks_vec": 2}
