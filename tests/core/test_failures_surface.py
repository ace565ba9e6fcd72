"""Failures surface: a failing BM25 build is logged, shown by info() and retried;
durability is a stated, tested option."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ConfigError, StorageError
from mindfile.retrieve import lexical


def _wait_for(predicate: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_a_failing_bm25_build_is_logged_shown_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store_many([("s", i, f"the lisbon hike number {i}") for i in range(1, 20)])
    monkeypatch.setattr(lexical, "RETRY_SECONDS", 0.05)
    real = lexical.Bm25Index._read_changes
    broken = {"on": True}

    def flaky(self: lexical.Bm25Index, state: object) -> object:
        if broken["on"]:
            raise StorageError("disk I/O error (simulated)")
        return real(self, state)  # type: ignore[arg-type]

    monkeypatch.setattr(lexical.Bm25Index, "_read_changes", flaky)
    caplog.set_level(logging.ERROR, logger="mindfile.retrieve")
    with mindfile.open(path, embedder="hash") as mem:
        assert mem.info().extra["lexical_index"] == "not built"
        hits = mem.search("lisbon hike", top_k=3)  # answered by FTS5; the build starts
        assert len(hits) == 3
        assert mem.lexical is not None
        _wait_for(lambda: mem.lexical is not None and mem.lexical.state().startswith("failed"))
        assert "simulated" in mem.info().extra["lexical_index"]
        assert any("BM25 index build failed" in r.getMessage() for r in caplog.records)
        again = mem.search("lisbon hike", top_k=3)  # still answers
        assert [h.chunk_id for h in again] == [h.chunk_id for h in hits]
        broken["on"] = False
        time.sleep(0.1)  # past the retry delay
        mem.search("lisbon", top_k=1)  # starts the retry
        _wait_for(lambda: mem.lexical is not None and mem.lexical.state() == "ready")
        assert mem.info().extra["lexical_index"] == "ready"


def test_info_reports_a_ready_index_and_fts5_mode(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "a.db", embedder="hash") as mem:
        mem.store("s", 1, "hello there")
        mem.rebuild_index()
        assert mem.info().extra["lexical_index"] == "ready"
    with mindfile.open(tmp_path / "b.db", embedder="hash", lexical_index="fts5") as mem:
        assert mem.info().extra["lexical_index"] == "fts5"


def test_durability_full_sets_synchronous_full(tmp_path: Path) -> None:
    with mindfile.open(tmp_path / "f.db", embedder="hash", durability="full") as mem:
        assert mem.db.scalar("PRAGMA synchronous") == 2  # FULL
        assert mem.info().extra["durability"] == "full"
        mem.store("s", 1, "kept through a power cut")
    with mindfile.open(tmp_path / "n.db", embedder="hash") as mem:
        assert mem.db.scalar("PRAGMA synchronous") == 1  # NORMAL
        assert mem.info().extra["durability"] == "normal"


@pytest.mark.parametrize("bad", ["FULL", "off", None, 1])
def test_bad_durability_is_a_config_error(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError):
        mindfile.open(tmp_path / "x.db", embedder="hash", durability=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()
