"""No embedder call under the write lock (issue 16, part 3).

A slow (non-local) embedder blocks for a second inside each chunk-writing feature while
another *process* writes the same file: that write must finish during the block.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import mindfile
from mindfile.embed import HashEmbedder
from mindfile.index import embedding
from mindfile.index.embedding import WriteLockHeldError
from mindfile.llm._fake import ScriptedChatClient
from mindfile.llm.tasks import extract_facts


class SlowEmbedder:
    """A hash embedder that pretends to be a remote provider: not local, and slow."""

    def __init__(self) -> None:
        self._inner = HashEmbedder(64)
        self.block = threading.Event()
        self.entered = threading.Event()

    @property
    def model_id(self) -> str:
        return "test/slow-64"

    @property
    def dimensions(self) -> int:
        return 64

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if self.block.is_set():
            self.entered.set()
            time.sleep(1.0)
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._inner.embed_query(text)


def _child_write(path: str, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import apsw

    started = time.monotonic()
    conn = apsw.Connection(path)
    conn.set_busy_timeout(30_000)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO store_meta (key, value) VALUES ('child', 'was here')")
    conn.execute("COMMIT")
    out.put(time.monotonic() - started)


def _write_during_embedding(tmp_path: Path, action: Callable[[mindfile.Mindfile], object]) -> float:
    slow = SlowEmbedder()
    path = tmp_path / "m.db"
    mem = mindfile.open(path, embedder=slow)
    mem.store("chat", 1, "I moved to Lisbon in May")  # create the store before blocking
    slow.block.set()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action(mem)
        except BaseException as exc:  # reported below: the action itself must succeed
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert slow.entered.wait(10)
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    child = ctx.Process(target=_child_write, args=(str(path), out))
    t0 = time.monotonic()
    child.start()
    child.join(30)
    waited = out.get(timeout=5)
    worker.join(30)
    mem.close()
    assert errors == []
    assert time.monotonic() - t0 < 30
    return float(waited)


ACTIONS: dict[str, Callable[[mindfile.Mindfile], object]] = {
    "store": lambda m: m.store("chat", 2, "a long message about the hike"),
    "store_many": lambda m: m.store_many([("chat", 2, "one"), ("chat", 3, "two")]),
    "store_note": lambda m: m.store_note("memory:alice", "n1", "Alice likes tea"),
    "set_fact": lambda m: m.set_fact("alice", "home", "city", "Porto"),
    "llm_extract": lambda m: extract_facts(
        m,
        ScriptedChatClient(
            [
                '{"facts": [{"category": "home", "key": "city", "value": "Porto"}],'
                ' "notes": [{"content": "Alice likes tea", "tags": ["food"]}]}'
            ]
        ),
        ["I live in Porto and I like tea"],
        user_id="alice",
    ),
}


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_another_process_writes_while_we_embed(tmp_path: Path, name: str) -> None:
    # The child's write completes well within the 1 s embedding, not after it.
    waited = _write_during_embedding(tmp_path, ACTIONS[name])
    assert waited < 0.9, f"{name}: the other process waited {waited:.2f} s for the write lock"


def test_a_remote_embedder_inside_a_callers_transaction_is_refused(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "m.db", embedder=SlowEmbedder()) as mem:
        with pytest.raises(WriteLockHeldError), mem.db.atomic():
            mem.store("chat", 1, "never written")
        assert mem.recall("chat") == []


def test_our_paths_never_embed_under_the_lock_even_with_local_embedders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "STRICT", True)
    with mindfile.open(tmp_path / "m.db", embedder="hash") as mem:
        mem.store("chat", 1, "hello")
        mem.store_many([("chat", 2, "a"), ("chat", 3, "b")])
        mem.store_note("memory:bob", "n", "Bob likes coffee", tags=["x"])
        mem.update_note("memory:bob", "n", content="Bob likes strong coffee")
        mem.set_fact("bob", "home", "city", "Lisbon")
        extract_facts(
            mem,
            ScriptedChatClient(
                ['{"facts": [{"category": "a", "key": "b", "value": "c"}], "notes": []}']
            ),
            ["hi"],
            user_id="bob",
        )
        mem.consolidate(session_id="chat", older_than=0, similarity=None)
        with pytest.raises(WriteLockHeldError), mem.db.atomic():
            mem.store("chat", 9, "inside a transaction")
