"""Re-embedding a store with another model (issue 10): live, atomic, resumable, exclusive."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from backends import raw
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConfigError, ConflictError

from ._support import CountingEmbedder

CHILD = Path(__file__).with_name("_reembed_child.py")


Counting = CountingEmbedder


def _fill(path: Path, n: int = 50) -> None:
    with mindfile.open(path, embedder="hash:32") as mem:
        mem.store_many(
            [("chat", i, f"message {i} about topic{i % 7} and word{i}") for i in range(1, n + 1)]
        )
        mem.store_note("memory:al", "n1", "Al likes trains")
        mem.set_fact("al", "home", "city", "Lisbon")


def _vector_models(mem: mindfile.Mindfile) -> set[str]:
    return {str(r[0]) for r in raw(mem).query("SELECT DISTINCT embedding_model FROM chunks_vec")}


def test_reembed_switches_every_vector_and_the_model(store_location: str) -> None:
    path = store_location
    _fill(path)
    new = Counting(64)
    with mindfile.open(path) as mem:
        chunks = int(raw(mem).scalar("SELECT count(*) FROM chunks"))
        report = mem.reembed(new, batch_size=16)
        assert (report.old_model, report.new_model) == ("hash-blake3-32", new.model_id)
        assert report.chunks == chunks and report.embedded == len(set(new.sent)) == chunks
        assert report.queued == 0
        assert mem.info().embedding_model == new.model_id and mem.info().dimensions == 64
        assert _vector_models(mem) == {new.model_id}
        assert mem.embedder is new and mem.index.size() == chunks
        text = "message 7 about topic0 and word7"
        hit = mem.search(
            "x", mode="vector", top_k=1, query_embedding=new.embed_documents([text])[0].tolist()
        )[0]
        assert hit.text == text
        assert mem.reconcile(repair=False).consistent
        # Staged vectors stay as the cache of a remote(-like) embedder.
        assert mem.embedding_cache_stats().models == {new.model_id: chunks}
    with pytest.raises(ConfigError, match="reembed"):
        mindfile.open(path, embedder="hash:32")
    with mindfile.open(path, embedder=new) as mem:
        query = new.embed_documents(["Al likes trains"])[0].tolist()
        hit = mem.search("x", mode="vector", top_k=1, query_embedding=query)[0]
        assert hit.text == "Al likes trains"


def test_searches_and_writes_keep_working_meanwhile(
    store_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store_location
    _fill(path)
    seen: list[str] = []
    with mindfile.open(path) as mem:
        old = mem.embedder.model_id

        def progress(done: int, total: int) -> None:
            if not seen:  # mid-way: the store still answers on the old model
                assert mem.info().embedding_model == old
                seen.append(mem.search("topic3", top_k=1)[0].text)
                mem.store("chat", 1000, "written while re-embedding")

        # A write between the last staged batch and the switch: its chunk was not
        # staged, so the switch queues it (and a sync store embeds it right after).
        models = mem.stores.models
        original = models.switch_model

        def late_write_then_switch(model_id: str, dims: int) -> list[int]:
            mem.store("chat", 1001, "written just before the switch")
            return original(model_id, dims)

        monkeypatch.setattr(models, "switch_model", late_write_then_switch)
        report = mem.reembed("hash:64", batch_size=10, progress=progress)
        assert seen and "topic3" in seen[0]
        assert report.queued == 1  # the late one; the mid-way write was staged
        assert report.chunks == 54
        assert mem.job_status().pending == 0
        assert _vector_models(mem) == {mem.embedder.model_id}
        assert mem.embedding_cache_stats().entries == 0  # local model: no cache kept
        assert mem.reconcile(repair=False).consistent
        for text in ("written while re-embedding", "written just before the switch"):
            query = mem.embedder.embed_documents([text])[0].tolist()
            assert mem.search("x", mode="vector", top_k=1, query_embedding=query)[0].text == text


def test_a_killed_run_resumes_without_embedding_twice(store_location: str) -> None:
    path = store_location
    _fill(path)
    child = subprocess.run(
        [sys.executable, str(CHILD), str(path), "hash:64", "10", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 1, child.stderr
    new = Counting(64)
    with mindfile.open(path) as mem:
        chunks = int(raw(mem).scalar("SELECT count(*) FROM chunks"))
        assert mem.info().embedding_model != new.model_id  # not switched
        report = mem.reembed(new, batch_size=10)  # the dead owner's claim is taken over
        assert report.reused == 20 and report.embedded == chunks - 20
        assert len(new.sent) == chunks - 20
        assert _vector_models(mem) == {new.model_id}
        assert mem.reconcile(repair=False).consistent


def test_one_run_at_a_time(store_location: str) -> None:
    path = store_location
    _fill(path)
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    with mindfile.open(path) as mem:

        def progress(done: int, total: int) -> None:
            inside.set()
            release.wait(10)

        def first() -> None:
            try:
                mem.reembed("hash:64", batch_size=10, progress=progress)
            except BaseException as exc:  # reported below
                errors.append(exc)

        worker = threading.Thread(target=first)
        worker.start()
        assert inside.wait(10)
        with mindfile.open(path) as other, pytest.raises(ConflictError):
            other.reembed("hash:16")
        release.set()
        worker.join(30)
        assert errors == []
        assert mem.info().embedding_model == "hash-blake3-64"


def test_other_engines_learn_that_the_model_changed(store_location: str) -> None:
    path = store_location
    _fill(path)
    with mindfile.open(path) as mem, mindfile.open(path) as stale:
        assert stale.search("topic3", top_k=1)
        mem.reembed("hash:64")
        with pytest.raises(ConfigError, match="reopen"):
            stale.search("topic3", top_k=1)
        with pytest.raises(ConfigError, match="reopen"):
            stale.store("chat", 999, "old vectors must not come back")
        with pytest.raises(ConfigError, match="reopen"):
            stale.store_note("memory:al", "n2", "nor through notes")
    with mindfile.open(path) as fresh:
        assert fresh.embedder.dimensions == 64


def test_the_same_model_is_a_no_op(store_location: str) -> None:
    path = store_location
    _fill(path)
    with mindfile.open(path) as mem:
        report = mem.reembed("hash:32")
        assert report.embedded == 0 and report.new_model == report.old_model


def test_cli(store_location: str) -> None:
    path = store_location
    _fill(path, 5)
    runner = CliRunner()
    out = runner.invoke(cli, ["reembed", "--embedder", "hash:48", "--db", str(path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["new_model"] == "hash-blake3-48"
    assert data["chunks"] == data["embedded"] + data["reused"]
    out = runner.invoke(cli, ["info", "--db", str(path), "--json"])
    assert json.loads(out.output)["dimensions"] == 48
    out = runner.invoke(cli, ["reembed", "--embedder", "nope", "--db", str(path)])
    assert out.exit_code != 0 and "Traceback" not in out.output
