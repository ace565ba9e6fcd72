"""Many threads on one engine, with a watchdog: the harness behind the thread stress test.

Every worker thread loops over a random mix of public operations on one shared
:class:`mindfile.Mindfile` (writes, every search mode, context building, agent memory,
upkeep, repair, and searches inside a caller's own ``db.atomic()``). A watchdog fails
the run, with every thread's stack, when no operation completes for ``stall_seconds``.

Used by ``tests/core/test_thread_stress.py`` (short, in CI) and
``scripts/stress_threads.py`` (long runs).
"""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mindfile
from mindfile._follow import IdleFollower
from mindfile.errors import ConflictError, MindfileError, NotFoundError

WORDS = (
    "lisbon",
    "porto",
    "hike",
    "dog",
    "pixel",
    "sister",
    "peanut",
    "allergy",
    "passport",
    "drawer",
    "concert",
    "piano",
    "battery",
    "review",
    "quarterly",
    "budget",
    "train",
    "sintra",
    "weather",
    "recipe",
    "garden",
    "book",
    "flight",
)

#: Errors an operation may meet legitimately under contention (a lost sequence race,
#: a session another thread just forgot): counted, not failures.
EXPECTED = (ConflictError, NotFoundError)


@dataclass
class StressReport:
    """What one run did."""

    seconds: float
    ops: Counter[str] = field(default_factory=Counter)
    expected_errors: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    stalled: str | None = None

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def _text(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


class _Worker:
    """One thread's operations; sessions named after the thread so sequences stay valid."""

    def __init__(self, mem: mindfile.Mindfile, name: str, seed: int) -> None:
        self.mem = mem
        self.name = name
        self.rng = random.Random(seed)
        self.seq = 0
        self.ops: dict[str, Callable[[], object]] = {
            "store": self.store,
            "store_many": self.store_many,
            "store_shared": self.store_shared,
            "search_hybrid": lambda: mem.search(self.q(), top_k=5),
            "search_vector": lambda: mem.search(self.q(), top_k=5, mode="vector"),
            "search_fts": lambda: mem.search(self.q(), top_k=5, mode="fts"),
            "search_rrf": lambda: mem.search(self.q(), top_k=5, fusion="rrf"),
            "search_session": lambda: mem.search(self.q(), session_id=self.session, top_k=3),
            "search_in_atomic": self.search_in_atomic,
            "index_in_atomic": self.index_in_atomic,
            "build_context": lambda: mem.build_context(
                self.session, self.q(), token_budget=400, user_id=self.name
            ),
            "note": self.note,
            "fact": self.fact,
            "scratchpad": lambda: mem.write_scratchpad(self.session, [self.q(), self.q()]),
            "summarize": lambda: mem.summarize(self.session, 200),
            "recall": lambda: mem.recall(self.session, 5),
            "consolidate": lambda: mem.consolidate(session_id=self.session, older_than=0),
            "reconcile": lambda: mem.reconcile(repair=True),
            "rebuild_index": mem.rebuild_index,
            "run_jobs": lambda: mem.run_jobs(max_jobs=16),
            "forget": self.forget,
            "info": mem.info,
        }
        # Cheap, common operations run often; repairs and rebuilds now and then.
        weights = {"reconcile": 1, "rebuild_index": 1, "consolidate": 1, "forget": 1}
        self.names = list(self.ops)
        self.weights = [weights.get(n, 6) for n in self.names]

    @property
    def session(self) -> str:
        return f"chat-{self.name}"

    def q(self) -> str:
        return _text(self.rng, 3)

    def store(self) -> object:
        self.seq += 1
        return self.mem.store(self.session, self.seq, {"role": "user", "content": _text(self.rng)})

    def store_many(self) -> object:
        events = []
        for _ in range(5):
            self.seq += 1
            events.append((self.session, self.seq, _text(self.rng, 40)))
        return self.mem.store_many(events)

    def store_shared(self) -> object:
        last = self.mem.db.scalar(
            "SELECT max(sequence) FROM conversation_events WHERE session_id = 'shared'"
        )
        return self.mem.store("shared", int(last or 0) + 1, _text(self.rng))

    def search_in_atomic(self) -> object:
        with self.mem.db.atomic():
            return self.mem.search(self.q(), top_k=3)

    def index_in_atomic(self) -> object:
        # The reproduction of issue 16: an index touched while the caller holds the
        # database's write transaction, racing searches in other threads.
        with self.mem.db.atomic():
            hits = self.mem.index.search(self.mem.embedder.embed_query(self.q()), 3)
            if self.mem.lexical is not None:
                self.mem.lexical.search(self.q(), 3)
            return hits

    def note(self) -> object:
        note_id = f"n{self.rng.randrange(4)}"
        ns = f"memory:{self.name}"
        action = self.rng.randrange(3)
        if action == 0:
            return self.mem.store_note(ns, note_id, _text(self.rng), tags=["t"])
        if action == 1:
            return self.mem.search_notes(ns, self.q(), top_k=3)
        return self.mem.delete_note(ns, note_id)

    def fact(self) -> object:
        key = f"k{self.rng.randrange(3)}"
        self.mem.set_fact(self.name, "prefs", key, _text(self.rng, 2))
        return self.mem.get_fact(self.name, "prefs", key)

    def forget(self) -> object:
        done = self.mem.forget(self.session)
        self.seq = 0  # a forgotten session starts over
        return done


def run_stress(
    path: Path | str,
    *,
    seconds: float,
    threads: int = 8,
    stall_seconds: float = 10.0,
    embedder: str = "hash",
    vector_index: str = "exact",
    switch_interval: float = 1e-6,
    seed: int = 0,
) -> StressReport:
    """Run the mix for ``seconds``; returns the report (``stalled`` set on a deadlock)."""
    mem = mindfile.open(path, embedder=embedder, vector_index=vector_index)
    # Some chunks to find before the first search.
    mem.store_many([("seed", i, _text(random.Random(i), 30)) for i in range(1, 41)])
    report = StressReport(seconds=seconds)
    lock = threading.Lock()

    def follow() -> None:
        try:
            mem._follow_indexes()
        except Exception:  # the engine would only log it: here it is a failure
            with lock:
                report.failures.append(f"idle follower: {traceback.format_exc()}")

    # The engine's own background thread too: its idle follower catching the indexes up
    # after every short pause in writing (mindfile._follow), not only after bulk writes.
    mem._follower = IdleFollower(follow, idle=0.005, min_chunks=1)
    last_progress = [time.monotonic()]
    stop = threading.Event()

    def loop(worker: _Worker) -> None:
        while not stop.is_set():
            name = worker.rng.choices(worker.names, worker.weights)[0]
            try:
                worker.ops[name]()
            except EXPECTED as exc:
                with lock:
                    report.expected_errors[f"{name}:{type(exc).__name__}"] += 1
            except MindfileError as exc:
                with lock:
                    report.failures.append(f"{name}: {type(exc).__name__}: {exc}")
            except Exception:
                with lock:
                    report.failures.append(f"{name}: {traceback.format_exc()}")
            with lock:
                report.ops[name] += 1
                last_progress[0] = time.monotonic()

    workers = [_Worker(mem, f"w{i}", seed * 1000 + i) for i in range(threads)]
    pool = [
        threading.Thread(target=loop, args=(w,), name=f"stress-{w.name}", daemon=True)
        for w in workers
    ]
    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    started = time.monotonic()
    try:
        for t in pool:
            t.start()
        while time.monotonic() - started < seconds:
            time.sleep(0.2)
            with lock:
                idle = time.monotonic() - last_progress[0]
            if idle > stall_seconds:
                report.stalled = _all_stacks(idle)
                break
        stop.set()
        deadline = time.monotonic() + stall_seconds
        for t in pool:
            t.join(max(0.0, deadline - time.monotonic()))
        if report.stalled is None and any(t.is_alive() for t in pool):
            report.stalled = _all_stacks(stall_seconds)
    finally:
        sys.setswitchinterval(old)
    report.seconds = time.monotonic() - started
    report.ops["(idle follower runs)"] = mem._follower.runs
    if report.stalled is None:
        mem.close()  # a deadlocked engine cannot be closed: leave it to the process exit
    return report


def _all_stacks(idle: float) -> str:
    frames = sys._current_frames()
    parts = [f"no operation completed for {idle:.1f} s; every thread's stack:"]
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            parts.append(f"--- {thread.name}\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


__all__ = ["StressReport", "run_stress"]
