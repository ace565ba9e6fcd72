"""Quotas: scopes, policy ``fail`` (nothing written) and the eviction order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from backends import raw
from hypothesis import given, settings
from hypothesis import strategies as st

import mindfile
from mindfile.errors import InvalidInputError, LimitExceededError
from mindfile.manage.quota import scope_for
from mindfile.memory import notes_session

from ._support import (
    age_event,
    ago,
    assert_consistent,
    chunk_row,
    expire_event,
    iso,
    live_sequences,
    snapshot,
)


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


AGENT = "agent:planner"


def store(mem: mindfile.Mindfile, session: str, seq: int, text: str, **kwargs: object) -> None:
    mem.store(session, seq, {"role": "user", "content": text}, agent_identity="planner", **kwargs)  # type: ignore[arg-type]


def test_scope_of_a_session(mem: mindfile.Mindfile) -> None:
    mem.store("chat-1", 1, "hi", agent_identity="planner")
    mem.store("chat-2", 1, "hi")
    mem.store_note(notes_session("ann"), "n1", "a note")
    assert mem.quota_scope("chat-1") == "agent:planner"
    assert mem.quota_scope("chat-2") == "session:chat-2"
    assert mem.quota_scope("memory:ann") == "user:ann"
    assert mem.quota_scope("never-seen") == "session:never-seen"
    assert scope_for("memory:", None) == "session:memory:"
    # The SQL twin agrees with the Python rule for every stored session.
    from mindfile.storage.quotas import scope_sql

    rows = raw(mem).query(f"SELECT session_id, agent_identity, {scope_sql()} FROM sessions")
    assert all(scope_for(sid, agent) == scope for sid, agent, scope in rows)


def test_quota_crud_and_validation(mem: mindfile.Mindfile) -> None:
    assert mem.get_quota(AGENT) is None
    quota = mem.set_quota(AGENT, max_items=10)
    assert (quota.max_items, quota.max_bytes, quota.policy) == (10, None, "evict")
    quota = mem.set_quota(AGENT, max_bytes=1000, policy="fail")
    assert (quota.max_items, quota.max_bytes, quota.policy) == (None, 1000, "fail")
    mem.set_quota("user:ann", max_items=5)
    assert [q.scope for q in mem.list_quotas()] == [AGENT, "user:ann"]
    assert quota.to_dict()["scope"] == AGENT
    for bad_scope in ("planner", "team:x", "agent:", "agent: ", 7, ""):
        with pytest.raises(InvalidInputError):
            mem.set_quota(bad_scope, max_items=1)  # type: ignore[arg-type]
    for kwargs in (
        {},
        {"max_items": -1},
        {"max_bytes": 1.5},
        {"max_items": True},
        {"max_items": 1, "policy": "drop"},
    ):
        with pytest.raises(InvalidInputError):
            mem.set_quota(AGENT, **kwargs)  # type: ignore[arg-type]
    assert mem.remove_quota(AGENT) is True
    assert mem.remove_quota(AGENT) is False
    assert mem.get_quota(AGENT) is None


def test_usage_counts_chunks_text_and_payload_bytes(mem: mindfile.Mindfile) -> None:
    store(mem, "c1", 1, "héllo")
    store(mem, "c2", 1, "world")
    mem.set_fact("planner", "k", "v", "facts are not counted")
    usage = mem.quota_usage(AGENT)
    payloads = sum(
        len(p.encode()) for (p,) in raw(mem).query("SELECT payload_json FROM conversation_events")
    )
    assert usage.items == 2
    assert usage.bytes == len("héllo".encode()) + len(b"world") + payloads
    assert usage.expired_items == 0 and usage.quota is None


def test_fail_policy_rejects_the_write_and_writes_nothing(mem: mindfile.Mindfile) -> None:
    mem.set_quota(AGENT, max_items=2, policy="fail")
    store(mem, "c1", 1, "first")
    store(mem, "c2", 1, "second")  # another session of the same agent
    before = snapshot(mem)
    with pytest.raises(LimitExceededError) as info:
        store(mem, "c1", 2, "third")
    assert info.value.code == "limit_exceeded"
    assert info.value.details["scope"] == AGENT and info.value.details["items"] == 3
    assert "nothing was written" in info.value.message
    assert snapshot(mem) == before
    # Other scopes are unaffected; a bigger quota lets the write through.
    mem.store("elsewhere", 1, "free")
    mem.set_quota(AGENT, max_items=3, policy="fail")
    store(mem, "c1", 2, "third")
    assert_consistent(mem)


def test_fail_policy_on_bytes_and_for_a_users_notes(mem: mindfile.Mindfile) -> None:
    ns = notes_session("ann")
    mem.set_quota("user:ann", max_bytes=400, policy="fail")
    mem.store_note(ns, "n1", "short")
    before = snapshot(mem)
    with pytest.raises(LimitExceededError):
        mem.store_note(ns, "n2", "x" * 500)
    assert snapshot(mem) == before
    assert [n.note_id for n in mem.list_notes(ns)] == ["n1"]


def test_the_error_mentions_expired_items_under_fail(mem: mindfile.Mindfile) -> None:
    mem.set_quota(AGENT, max_items=1, policy="fail")
    store(mem, "c1", 1, "old")
    expire_event(mem, "c1", 1)
    with pytest.raises(LimitExceededError, match="sweep_expired"):
        store(mem, "c1", 2, "new")
    mem.sweep_expired()
    store(mem, "c1", 2, "new")
    assert live_sequences(mem, "c1") == [2]


def test_eviction_order_expired_then_lowest_importance_then_oldest(
    mem: mindfile.Mindfile,
) -> None:
    store(mem, "c1", 1, "important and oldest", importance=0.9)
    store(mem, "c1", 2, "expired though important", importance=0.95, ttl=3600)
    store(mem, "c2", 1, "low importance, older", importance=0.2)
    store(mem, "c2", 2, "low importance, newer", importance=0.2)
    store(mem, "c2", 3, "pinned and trivial", importance=0.05)
    mem.pin("c2", 3)
    store(mem, "c1", 3, "middling", importance=0.6)
    expire_event(mem, "c1", 2)
    mem.set_quota(AGENT, max_items=6)  # full: each new item evicts one

    order = []
    for seq in range(10, 15):
        store(mem, "c3", seq, f"new item {seq}", importance=0.99)
        remaining = {r.payload["content"] for s in ("c1", "c2") for r in mem.recall(s)}
        order.append(remaining)
        assert mem.quota_usage(AGENT).items <= 6
    gone = []
    previous = {
        "important and oldest",
        "expired though important",
        "low importance, older",
        "low importance, newer",
        "pinned and trivial",
        "middling",
    }
    for remaining in order:
        gone.extend(sorted(previous - remaining))
        previous = remaining
    assert gone == [
        "expired though important",
        "low importance, older",
        "low importance, newer",
        "middling",
        "important and oldest",
    ]
    assert previous == {"pinned and trivial"}  # pinned: never evicted
    quota = mem.get_quota(AGENT)
    assert quota is not None and quota.evicted_items == 5 and quota.evicted_bytes > 0
    assert_consistent(mem)
    # Now only the pinned item and the newest writes are left; the quota is tight
    # enough that the next write can only fit by evicting one of the new items.
    store(mem, "c3", 20, "one more", importance=0.99)
    assert "pinned and trivial" in {r.payload["content"] for r in mem.recall("c2")}


def test_oldest_breaks_importance_ties(mem: mindfile.Mindfile) -> None:
    for seq in (1, 2, 3):
        store(mem, "c1", seq, f"same importance {seq}")
    mem.set_quota(AGENT, max_items=3)
    store(mem, "c1", 4, "newest")
    assert live_sequences(mem, "c1") == [2, 3, 4]


def test_eviction_fails_when_only_pinned_or_new_items_are_left(mem: mindfile.Mindfile) -> None:
    store(mem, "c1", 1, "pinned one")
    mem.pin("c1", 1)
    mem.set_quota(AGENT, max_items=1)
    before = snapshot(mem)
    with pytest.raises(LimitExceededError, match="would not fit"):
        store(mem, "c1", 2, "does not fit")
    assert snapshot(mem) == before
    # A batch larger than the quota cannot evict its own events either.
    mem.set_quota(AGENT, max_items=2)
    before = snapshot(mem)
    with pytest.raises(LimitExceededError):
        mem.store_many([("c1", 2, "a"), ("c1", 3, "b"), ("c1", 4, "c")], agent_identity="planner")
    assert snapshot(mem) == before
    assert live_sequences(mem, "c1") == [1]


def test_evicting_by_bytes_frees_whole_events(mem: mindfile.Mindfile) -> None:
    store(mem, "c1", 1, "a" * 300)
    store(mem, "c1", 2, "b" * 300)
    usage = mem.quota_usage(AGENT)
    mem.set_quota(AGENT, max_bytes=usage.bytes)
    store(mem, "c1", 3, "c" * 300)
    assert live_sequences(mem, "c1") == [2, 3]
    assert mem.quota_usage(AGENT).bytes <= usage.bytes
    assert_consistent(mem)


def test_a_long_message_is_several_items_evicted_oldest_chunk_first(mem: mindfile.Mindfile) -> None:
    long_text = " ".join(f"Paragraph {i} of the design document." for i in range(40))
    store(mem, "c1", 1, long_text)
    n = mem.quota_usage(AGENT).items
    assert n > 2
    mem.set_quota(AGENT, max_items=n)
    store(mem, "c1", 2, "short")
    # One chunk of the long message went; the event stays while it has chunks left.
    assert mem.quota_usage(AGENT).items == n
    assert live_sequences(mem, "c1") == [1, 2]
    assert chunk_row(mem, "c1", 2)["importance"] == 0.5
    assert_consistent(mem)


def test_notes_and_messages_in_a_user_scope_evict_each_other(mem: mindfile.Mindfile) -> None:
    ns = notes_session("ann")
    mem.set_quota("user:ann", max_items=2)
    mem.store_note(ns, "n1", "first note", importance=0.1)
    mem.store_note(ns, "n2", "second note", importance=0.8)
    mem.store_note(ns, "n3", "third note", importance=0.8)
    assert [n.note_id for n in mem.list_notes(ns)] == ["n3", "n2"]
    assert_consistent(mem)


# -- the eviction order against a model ------------------------------------------------------

write_step = st.tuples(
    st.sampled_from([0.1, 0.3, 0.5, 0.7, 0.9]),  # importance
    st.booleans(),  # expire it right after writing
    st.booleans(),  # pin it right after writing
)


@settings(max_examples=40)
@given(steps=st.lists(write_step, min_size=1, max_size=12), limit=st.integers(1, 4))
def test_eviction_matches_a_model(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[float, bool, bool]],
    limit: int,
) -> None:
    path = tmp_path_factory.mktemp("model") / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.set_quota(AGENT, max_items=limit)
        model: list[dict[str, object]] = []  # live items in write order
        for seq, (importance, expire, pin) in enumerate(steps, start=1):
            before = snapshot(mem)
            candidates = [m for m in model if not m["pinned"]]
            candidates.sort(key=lambda m: (not m["expired"], m["importance"], m["seq"]))
            overflow = len(model) + 1 - limit
            if overflow > len(candidates):
                with pytest.raises(LimitExceededError):
                    store(mem, "c", seq, f"item number {seq}", importance=importance)
                after = snapshot(mem)
                assert after == before
                continue
            store(mem, "c", seq, f"item number {seq}", importance=importance)
            evicted = {m["seq"] for m in candidates[: max(overflow, 0)]}
            model = [m for m in model if m["seq"] not in evicted]
            model.append({"seq": seq, "importance": importance, "expired": False, "pinned": False})
            if expire:
                expire_event(mem, "c", seq)
                model[-1]["expired"] = True
            if pin:
                mem.pin("c", seq)
                model[-1]["pinned"] = True
            assert live_sequences(mem, "c") == [m["seq"] for m in model]
        assert_consistent(mem)


def test_eviction_compares_decayed_importance(mem: mindfile.Mindfile) -> None:
    store(mem, "c1", 1, "was important, long ago", importance=0.8)  # 0.8 -> 0.1 after 3 days
    store(mem, "c1", 2, "mildly important, fresh", importance=0.3)
    age_event(mem, "c1", 1, ago(days=3))
    mem.set_quota(AGENT, max_items=2)
    store(mem, "c1", 3, "without decay the fresh one goes")
    assert live_sequences(mem, "c1") == [1, 3]
    mem.set_decay_policy(half_life=timedelta(days=1))
    store(mem, "c1", 4, "with decay the old one goes")
    assert live_sequences(mem, "c1") == [3, 4]


@pytest.mark.sqlite_only("SQLite's julianday() arithmetic")
def test_the_sql_decay_matches_the_python_formula(mem: mindfile.Mindfile) -> None:
    from mindfile.manage.importance import decayed
    from mindfile.storage.quotas import DECAYED_IMPORTANCE

    store(mem, "c1", 1, "x", importance=0.8)
    now = datetime.now(UTC)
    for days in (0.0, 0.5, 1.0, 2.5, 40.0):
        age_event(mem, "c1", 1, iso(now - timedelta(days=days)))
        sql = DECAYED_IMPORTANCE.replace("?3", "?1").replace("?6", "?2")
        got = raw(mem).scalar(f"SELECT {sql} FROM chunks AS c", (iso(now), 86400.0))
        assert got == pytest.approx(decayed(0.8, days * 86400, 86400.0), rel=1e-6, abs=1e-12)
