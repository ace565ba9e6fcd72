"""Read-only stores (issue 8 part 4): nothing created, nothing changed, typed errors.

``mindfile.open(path, read_only=True)`` reads an existing store and never writes: not
the file, not a migration, not the embedder record, not a purge on close. Every write
is a :class:`ReadOnlyError` (code ``read_only``); a missing file is ``not_found``.
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import mindfile
from mindfile.errors import (
    ConfigError,
    MindfileError,
    NotFoundError,
    ReadOnlyError,
    SchemaError,
)
from mindfile.tools import dispatch

FIXTURE = Path(__file__).parent.parent / "fixtures" / "store-0.1.0.db"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _make_store(path: Path) -> None:
    with mindfile.open(path, embedder="hash") as mem:
        mem.store("s1", 1, {"role": "user", "content": "I moved to Lisbon in May"}, user_id="al")
        mem.store("s1", 2, {"role": "assistant", "content": "Lisbon is lovely"}, user_id="al")
        mem.store_note("memory:al", "n1", "Al likes trains", tags=["travel"])
        mem.set_fact("al", "home", "city", "Lisbon")
        mem.write_scratchpad("s1", ["plan: book a train"])


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    _make_store(path)
    return path


@pytest.fixture
def ro(store_path: Path) -> Iterator[mindfile.Mindfile]:
    with mindfile.open(store_path, read_only=True) as mem:
        yield mem


def test_reads_work_and_the_file_is_unchanged(store_path: Path) -> None:
    before = _digest(store_path)
    with mindfile.open(store_path, read_only=True) as mem:
        assert mem.read_only
        hits = mem.search("where did I move", top_k=3, user_id="al")
        assert hits and "Lisbon" in hits[0].text
        assert [r.sequence for r in mem.recall("s1")] == [1, 2]
        assert [s.session_id for s in mem.list_sessions(user_id="al")]
        ctx = mem.build_context("s1", "where do I live", token_budget=500, user_id="al")
        assert any("Lisbon" in str(m["content"]) for m in ctx.messages)
        assert [n.note_id for n in mem.list_notes("memory:al")] == ["n1"]
        assert mem.get_fact("al", "home", "city").value == "Lisbon"
        pad = mem.read_scratchpad("s1")
        assert pad is not None and pad.items == ("plan: book a train",)
        assert mem.reconcile(repair=False).consistent
        answer = dispatch(mem, "memory_search", {"query": "trains"}, user_id="al", session_id="s1")
        assert answer["ok"], answer
    assert _digest(store_path) == before


def test_writes_are_typed_errors_and_change_nothing(ro: mindfile.Mindfile) -> None:
    path = Path(ro.path)
    before = _digest(path)
    writes = [
        lambda: ro.store("s1", 3, "never stored"),
        lambda: ro.store_many([("s2", 1, "never stored")]),
        lambda: ro.store_note("memory:al", "n2", "never stored"),
        lambda: ro.delete_note("memory:al", "n1"),
        lambda: ro.set_fact("al", "home", "city", "Porto"),
        lambda: ro.pin("s1", 1),
        lambda: ro.record_use(["ch_x"]),
        lambda: ro.set_quota("user:al", max_items=3),
        lambda: ro.sweep_expired(),
        lambda: ro.write_scratchpad("s1", ["overwritten"]),
        lambda: ro.forget("s1"),
        lambda: ro.forget_user("al"),
        lambda: ro.purge(),
        lambda: ro.reconcile(repair=True),
        lambda: ro.consolidate(session_id="s1", older_than=0, similarity=None),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyError) as caught:
            write()
        assert caught.value.code == "read_only"
    ro.rebuild_index()  # the in-memory index only: allowed, and writes nothing
    answer = dispatch(ro, "memory_save", {"content": "x"}, user_id="al", session_id="s1")
    assert answer["error"]["code"] == "read_only"
    assert [r.sequence for r in ro.recall("s1")] == [1, 2]
    assert ro.get_fact("al", "home", "city").value == "Lisbon"
    assert _digest(path) == before


SANE: dict[str, Any] = {
    "session_id": "s1",
    "query": "lisbon",
    "token_budget": 300,
    "user_id": "al",
    "sequence": 3,
    "payload": "hello",
    "note_id": "n1",
    "content": "a note",
    "scope": "al",
    "category": "home",
    "key": "city",
    "value": "Porto",
    "items": ["one item"],
    "chunk_ids": ["ch_x"],
    "expected_epoch": 0,
    "events": [("s1", 3, "x")],
    "text": "x",
}


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, m in inspect.getmembers(mindfile.Mindfile)
        if not n.startswith("_") and callable(m) and n not in ("close", "hybrid_query")
    ),
)
def test_no_public_method_writes(store_path: Path, name: str) -> None:
    before = _digest(store_path)
    with mindfile.open(store_path, read_only=True) as mem:
        sig = inspect.signature(getattr(mindfile.Mindfile, name))
        args = [
            SANE.get(p.name)
            for p in sig.parameters.values()
            if p.name != "self"
            and p.default is inspect.Parameter.empty
            and p.kind is not inspect.Parameter.KEYWORD_ONLY
        ]
        kwargs = {
            p.name: SANE.get(p.name)
            for p in sig.parameters.values()
            if p.default is inspect.Parameter.empty and p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        try:
            getattr(mem, name)(*args, **kwargs)
        except MindfileError as exc:  # a read-only refusal or a plain validation error
            assert exc.code != "storage", exc
    assert _digest(store_path) == before


def test_a_missing_file_is_not_found_and_nothing_is_created(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "m.db"
    with pytest.raises(NotFoundError):
        mindfile.open(target, read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_memory_stores_cannot_be_read_only() -> None:
    with pytest.raises(ConfigError):
        mindfile.open(":memory:", read_only=True)
    with pytest.raises(ConfigError):
        mindfile.open(":memory:", read_only="yes")  # type: ignore[arg-type]


def test_sqlite_vec_needs_a_writable_store(store_path: Path) -> None:
    with pytest.raises(ConfigError):
        mindfile.open(store_path, read_only=True, vector_index="sqlite-vec")


def test_another_applications_file_is_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.close()
    before = _digest(other)
    for read_only in (True, False):
        with pytest.raises(SchemaError):
            mindfile.open(other, read_only=read_only)
    assert _digest(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_an_empty_file_is_not_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(SchemaError):
        mindfile.open(empty, read_only=True)
    assert empty.read_bytes() == b""


def test_a_store_that_needs_migrating_says_how(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    shutil.copy(FIXTURE, old)
    before = _digest(old)
    with pytest.raises(SchemaError, match="without read_only"):
        mindfile.open(old, read_only=True)
    assert _digest(old) == before
    with mindfile.open(old):  # writable: migrated
        pass
    with mindfile.open(old, read_only=True) as mem:
        assert mem.list_sessions()


def test_sqlite_uris_that_say_read_only_open_read_only(store_path: Path) -> None:
    before = _digest(store_path)
    for query in ("mode=ro", "immutable=1"):
        with mindfile.open(f"file:{store_path}?{query}") as mem:
            assert mem.read_only
            assert mem.search("Lisbon", top_k=1)
            with pytest.raises(ReadOnlyError):
                mem.store("s1", 9, "no")
    assert _digest(store_path) == before
    assert not (Path.cwd() / "file:").exists()


READ_ONLY_MEDIA = textwrap.dedent(
    """
    import sys
    import mindfile
    with mindfile.open(sys.argv[1], read_only=True) as mem:
        hit = mem.search("Lisbon", top_k=1)[0]
        try:
            mem.store("s1", 9, "no")
        except mindfile.ReadOnlyError as exc:
            print("Lisbon" in hit.text, "|", exc.code, "|", mem.db.immutable)
    """
)


def test_a_wal_store_on_read_only_media(store_path: Path, tmp_path: Path) -> None:
    # A read-only bind mount in a private mount namespace (needs unshare; CI runs as
    # root). SQLite cannot create the -shm file there, so the store opens immutable.
    for leftover in ("m.db-wal", "m.db-shm"):
        assert not (store_path.parent / leftover).exists()
    mount = tmp_path / "mnt"
    mount.mkdir()
    script = tmp_path / "probe.py"
    script.write_text(READ_ONLY_MEDIA)
    shell = (
        f"mount --bind {store_path.parent} {mount} && "
        f"mount -o remount,bind,ro {mount} && "
        f"{sys.executable} {script} {mount / store_path.name}"
    )
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0 and "mount" in probe.stderr and "denied" in probe.stderr.lower():
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split(" | ") == ["True", "read_only", "True\n"]
