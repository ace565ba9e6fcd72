"""The working-memory cache: no history reads when warm, correct across processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from backends import is_postgres, raw

import mindfile
from mindfile.context import WorkingMemory
from mindfile.errors import ConfigError

from ._support import sql_spy, user


@pytest.fixture
def db_path(store_location: str) -> str:
    """Both backends: ``mem`` and ``mindfile.open(db_path)`` here open either
    (tests/conftest.py)."""
    return store_location


def other_process(db_path: Path, code: str) -> None:
    """Run ``code`` with ``mem`` open on the same file, in a separate Python process."""
    script = (
        "import mindfile\n" + f"with mindfile.open({str(db_path)!r}, embedder='hash') as mem:\n"
    )
    script += textwrap.indent(textwrap.dedent(code), "    ")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def turns(ctx: mindfile.context.Context) -> list[str]:
    return [m["content"] for m in ctx.messages if m["role"] in ("user", "assistant")]


def fill(mem: mindfile.Mindfile, n: int, session: str = "chat") -> None:
    mem.store_many([(session, i, user(f"message {i}")) for i in range(1, n + 1)])


def test_a_warm_cache_reads_no_history(mem: mindfile.Mindfile) -> None:
    fill(mem, 12)
    mem.build_context("chat", "hello", token_budget=2000)
    assert mem.cache_stats().loads == 1
    with sql_spy(mem) as seen:
        ctx = mem.build_context("chat", "hello", token_budget=2000)
    if is_postgres(mem):
        # The change stamp (the WAL position) also moves for writes the store does not
        # hold (docs/postgres.md, "Change stamp"): at most one aggregate re-check.
        assert not [s for s in seen if "payload_json" in s], seen
        stats = mem.cache_stats()
        assert stats.hits + stats.validated == 1 and stats.loads == 1
    else:
        assert not [s for s in seen if "conversation_events" in s], seen
        assert mem.cache_stats().hits == 1
    assert turns(ctx) == [f"message {i}" for i in range(3, 13)]


def test_own_writes_fill_the_cache_without_reading_payloads(mem: mindfile.Mindfile) -> None:
    fill(mem, 3)
    mem.build_context("chat", "hello", token_budget=2000)
    mem.store("chat", 4, user("message 4"))
    with sql_spy(mem) as seen:
        ctx = mem.build_context("chat", "hello", token_budget=2000)
    assert not [s for s in seen if "payload_json" in s], seen
    assert turns(ctx)[-1] == "message 4"
    stats = mem.cache_stats()
    assert (stats.loads, stats.validated) == (1, 1)


def test_another_process_appending_is_seen_without_reopening(
    mem: mindfile.Mindfile, db_path: Path
) -> None:
    fill(mem, 3)
    assert turns(mem.build_context("chat", "hi", token_budget=2000))[-1] == "message 3"
    other_process(db_path, "mem.store('chat', 4, {'role': 'user', 'content': 'from afar'})")
    ctx = mem.build_context("chat", "hi", token_budget=2000)
    assert turns(ctx) == ["message 1", "message 2", "message 3", "from afar"]
    assert mem.cache_stats().refreshed == 1
    # ... and a second store by this process after that is appended in order.
    mem.store("chat", 5, user("local again"))
    assert turns(mem.build_context("chat", "hi", token_budget=2000))[-2:] == [
        "from afar",
        "local again",
    ]


def test_deletes_by_another_process_are_seen(mem: mindfile.Mindfile, db_path: Path) -> None:
    fill(mem, 3)
    mem.build_context("chat", "hi", token_budget=2000)
    other_process(db_path, 'mem.db.execute("DELETE FROM conversation_events WHERE sequence = 2")')
    assert turns(mem.build_context("chat", "hi", token_budget=2000)) == [
        "message 1",
        "message 3",
    ]
    other_process(db_path, "mem.forget('chat')")
    assert turns(mem.build_context("chat", "hi", token_budget=2000)) == []


def test_a_rewritten_last_event_is_seen(mem: mindfile.Mindfile, db_path: Path) -> None:
    # Same count and same highest sequence, different event: created_at tells. The
    # public API never reuses a sequence (the session's high-water mark), so the other
    # writer lowers the mark by hand, as a foreign tool editing the file could.
    fill(mem, 3)
    mem.build_context("chat", "hi", token_budget=2000)
    other_process(
        db_path,
        """
        mem.db.execute("DELETE FROM conversation_events WHERE sequence = 3")
        mem.db.execute("UPDATE sessions SET sequence_high_water = 2")
        mem.store('chat', 3, {'role': 'user', 'content': 'rewritten'})
        """,
    )
    assert turns(mem.build_context("chat", "hi", token_budget=2000))[-1] == "rewritten"


def test_an_append_and_a_delete_that_cancel_out_are_seen(
    mem: mindfile.Mindfile, db_path: Path
) -> None:
    fill(mem, 3)
    mem.build_context("chat", "hi", token_budget=2000)
    other_process(
        db_path,
        """
        mem.store('chat', 4, {'role': 'user', 'content': 'four'})
        mem.db.execute("DELETE FROM conversation_events WHERE sequence = 1")
        """,
    )
    mem.store("chat", 5, user("five"))  # count and last sequence now match the cache's
    assert turns(mem.build_context("chat", "hi", token_budget=2000)) == [
        "message 2",
        "message 3",
        "four",
        "five",
    ]


def test_forget_and_note_deletes_in_this_process(mem: mindfile.Mindfile) -> None:
    fill(mem, 2)
    mem.build_context("chat", "hi", token_budget=2000)
    mem.forget("chat")
    assert turns(mem.build_context("chat", "hi", token_budget=2000)) == []
    mem.store_note("notes", "n1", "first note")
    mem.store_note("notes", "n2", "second note")
    assert len(mem.build_context("notes", "x", token_budget=2000).messages) == 2
    mem.delete_note("notes", "n2")
    (msg,) = mem.build_context("notes", "x", token_budget=2000).messages
    assert msg["content"] == "first note"  # a note payload is rendered as its text


def test_a_rolled_back_write_does_not_stay_in_the_cache(mem: mindfile.Mindfile) -> None:
    fill(mem, 2)
    mem.build_context("chat", "hi", token_budget=2000)
    with pytest.raises(RuntimeError), raw(mem).atomic():
        mem.store("chat", 3, user("never committed"))
        raise RuntimeError("abort")
    assert turns(mem.build_context("chat", "hi", token_budget=2000)) == [
        "message 1",
        "message 2",
    ]


def test_capacity_eviction_and_bypass(mem: mindfile.Mindfile) -> None:
    cache = WorkingMemory(capacity=5, max_sessions=2)
    for s in ("a", "b", "c"):
        fill(mem, 8, s)
        assert [r.sequence for r in cache.recent(mem.stores.events, s, 5)] == [4, 5, 6, 7, 8]
    assert cache.stats().sessions == 2  # "a" was evicted
    assert [r.sequence for r in cache.recent(mem.stores.events, "a", 7)] == [2, 3, 4, 5, 6, 7, 8]
    assert cache.stats().bypassed == 1
    assert cache.recent(mem.stores.events, "a", 0) == []
    stats = cache.stats()
    assert stats.to_dict()["capacity"] == 5
    cache.invalidate()
    assert cache.stats().sessions == 0


def test_the_deque_keeps_only_the_newest(mem: mindfile.Mindfile) -> None:
    cache = WorkingMemory(capacity=3)
    fill(mem, 2)
    assert len(cache.recent(mem.stores.events, "chat", 3)) == 2
    mem.store_many([("chat", i, user(f"message {i}")) for i in range(3, 9)])
    assert [r.sequence for r in cache.recent(mem.stores.events, "chat", 3)] == [6, 7, 8]


@pytest.mark.parametrize("kwargs", [{"capacity": 0}, {"capacity": True}, {"max_sessions": 0}])
def test_bad_sizes_are_config_errors(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        WorkingMemory(**kwargs)


def test_threads_writing_in_transactions_and_reading_do_not_deadlock(
    mem: mindfile.Mindfile,
) -> None:
    import threading

    fill(mem, 1)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(2, 60):
                with raw(mem).atomic():  # holds the database lock while the cache is told
                    mem.store("chat", i, user(f"message {i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(60):
                mem.build_context("chat", "hi", token_budget=2000)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer),
        *(threading.Thread(target=reader) for _ in range(3)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert errors == []
    assert turns(mem.build_context("chat", "hi", token_budget=2000)) == [
        f"message {i}" for i in range(50, 60)
    ]
