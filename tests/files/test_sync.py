"""File sync (issue 9) on real files in temporary folders."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from backends import raw
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import InvalidInputError
from mindfile.files import LineSpec, chunk_lines, root_session
from mindfile.tools import dispatch

CHILD = Path(__file__).with_name("_sync_child.py")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def lines(n: int, word: str) -> str:
    return "".join(
        f"{word} line {i}: the {word} paragraph talks about item {i}\n" for i in range(n)
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(root / "lisbon.md", "# Lisbon\n\nI moved to Lisbon in May.\nThe tram 28 is lovely.\n")
    write(root / "porto.md", "# Porto\n\nMy sister lives in Porto.\n")
    write(root / "code" / "app.py", "def main():\n    return 'hello'\n")
    write(root / "long.txt", lines(300, "alpha"))
    return root


@pytest.fixture
def mem(store_location: str) -> mindfile.Mindfile:
    """On both backends (tests/conftest.py)."""
    store = mindfile.open(store_location, embedder="hash")
    yield store
    store.close()


def file_rows(mem: mindfile.Mindfile) -> dict[str, int]:
    return {str(p): int(n) for p, n in raw(mem).query("SELECT path, chunk_count FROM files")}


def test_first_sync_then_nothing_to_do(mem: mindfile.Mindfile, tree: Path) -> None:
    report = mem.sync([tree])
    assert (report.added, report.updated, report.deleted, report.unchanged) == (4, 0, 0, 0)
    assert report.chunks_added == sum(file_rows(mem).values()) > 4
    assert report.embedded == report.chunks_added
    again = mem.sync(tree)
    assert (again.added, again.updated, again.unchanged, again.bytes_read) == (0, 0, 4, 0)
    assert again.embedded == 0
    assert mem.reconcile(repair=False).consistent


def test_hits_point_at_lines(mem: mindfile.Mindfile, tree: Path) -> None:
    mem.sync([tree])
    mem.store("chat", 1, "we talked about Lisbon trams yesterday")
    for mode in ("fts", "vector", "hybrid"):
        hits = mem.search("tram 28 Lisbon", source="files", mode=mode, top_k=10)
        assert hits and all(h.session_id == root_session(tree) for h in hits)
    hit = mem.search("tram 28 Lisbon", source="files", mode="fts", fusion="rrf")[0]
    assert hit.metadata["path"] == "lisbon.md" and hit.metadata["root"] == str(tree.resolve())
    original = (tree / "lisbon.md").read_text().splitlines()
    start, end = hit.metadata["start_line"], hit.metadata["end_line"]
    assert hit.text == "\n".join(original[start - 1 : end])
    chats = mem.search("Lisbon trams", source="conversations", mode="fts")
    assert [h.session_id for h in chats] == ["chat"]
    both = {h.session_id for h in mem.search("Lisbon", mode="fts", top_k=20)}
    assert both == {"chat", root_session(tree)}


def test_edit_reembeds_only_new_text(mem: mindfile.Mindfile, tree: Path) -> None:
    mem.sync([tree])
    before = file_rows(mem)["long.txt"]
    text = (tree / "long.txt").read_text().splitlines(keepends=True)
    text[150] = "a brand new sentence about quokkas\n"
    (tree / "long.txt").write_text("".join(text))
    report = mem.sync([tree])
    assert (report.updated, report.unchanged) == (1, 3)
    assert 0 < report.embedded <= 3  # only the chunks around the edit
    assert report.chunks_removed == before
    hit = mem.search("quokkas", source="files", mode="fts")[0]
    assert hit.metadata["path"] == "long.txt" and hit.metadata["start_line"] <= 151
    assert hit.metadata["end_line"] >= 151
    assert mem.reconcile(repair=False).consistent


def test_touch_without_change_reads_but_does_not_reindex(
    mem: mindfile.Mindfile, tree: Path
) -> None:
    mem.sync([tree])
    os.utime(tree / "porto.md", ns=(1, 1_000_000_000_000))
    report = mem.sync([tree])
    assert (report.updated, report.unchanged, report.embedded) == (0, 4, 0)
    assert report.bytes_read == (tree / "porto.md").stat().st_size
    assert mem.sync([tree]).bytes_read == 0  # the new mtime was remembered


def test_delete_and_rename(mem: mindfile.Mindfile, tree: Path) -> None:
    mem.sync([tree])
    (tree / "porto.md").unlink()
    (tree / "code" / "app.py").rename(tree / "main.py")
    report = mem.sync([tree])
    assert (report.deleted, report.renamed, report.added, report.embedded) == (1, 1, 0, 0)
    assert mem.search("sister Porto", source="files", mode="fts") == []
    hit = mem.search("hello main", source="files", mode="fts")[0]
    assert hit.metadata["path"] == "main.py"
    assert set(file_rows(mem)) == {"lisbon.md", "main.py", "long.txt"}
    assert mem.reconcile(repair=False).consistent


def test_skips_with_reasons(mem: mindfile.Mindfile, tree: Path) -> None:
    (tree / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (tree / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    write(tree / "huge.log", "x" * 20000)
    os.mkfifo(tree / "pipe")
    report = mem.sync([tree], max_file_bytes=18000)
    reasons = dict(report.skipped)
    assert reasons["image.png"] == "binary"
    assert reasons["latin1.txt"] == "not UTF-8 text"
    assert reasons["huge.log"].startswith("too large")
    assert reasons["pipe"] == "not a regular file"
    assert report.added == 4
    # A file that turns binary leaves the index.
    (tree / "porto.md").write_bytes(b"\x00\x01\x02")
    again = mem.sync([tree], max_file_bytes=18000)
    assert again.deleted == 1 and "porto.md" not in file_rows(mem)


def test_unreadable_keeps_the_last_version(
    mem: mindfile.Mindfile, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.sync([tree])
    write(tree / "porto.md", "# Porto\n\nMy sister moved.\n")
    real = Path.read_bytes

    def deny(self: Path) -> bytes:
        if self.name == "porto.md":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", deny)
    report = mem.sync([tree])
    assert dict(report.skipped)["porto.md"].startswith("unreadable")
    assert report.deleted == 0 and "porto.md" in file_rows(mem)


def test_globs_gitignore_and_default_excludes(mem: mindfile.Mindfile, tree: Path) -> None:
    write(tree / ".git" / "config", "[core]\n")
    write(tree / "node_modules" / "x" / "index.js", "module.exports = 1\n")
    write(tree / "build" / "out.txt", "generated\n")
    write(tree / ".gitignore", "secret*.md\n")
    write(tree / "secret-plan.md", "the secret plan\n")
    write(tree / "code" / ".gitignore", "*.tmp\n")
    write(tree / "code" / "scratch.tmp", "temporary\n")
    write(tree / "scratch.tmp", "kept: the code/.gitignore applies to code/ only\n")
    mem.sync([tree])
    assert set(file_rows(mem)) == {
        ".gitignore",
        "code/.gitignore",
        "code/app.py",
        "lisbon.md",
        "long.txt",
        "porto.md",
        "scratch.tmp",
    }
    md_only = mindfile.open(tree.parent / "md.db", embedder="hash")
    with md_only:
        md_only.sync([tree], include=["*.md"], exclude=["porto.md"])
        assert set(file_rows(md_only)) == {"lisbon.md"}


def test_symlinks_stay_in_the_root(mem: mindfile.Mindfile, tree: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "private.txt", "do not index me\n")
    (tree / "link-out.txt").symlink_to(outside)
    (tree / "loop").symlink_to(tree, target_is_directory=True)
    (tree / "alias.md").symlink_to(tree / "lisbon.md")
    report = mem.sync([tree])
    reasons = dict(report.skipped)
    assert reasons["link-out.txt"] == "symlink out of the root"
    assert reasons["loop"] == "symlink loop"
    assert "alias.md" in file_rows(mem)
    assert mem.search("do not index", source="files", mode="fts") == []


def test_concurrent_search_sees_whole_files(mem: mindfile.Mindfile, tree: Path) -> None:
    write(tree / "big.txt", lines(400, "alpha"))
    mem.sync([tree])
    stop = threading.Event()
    mixed: list[set[str]] = []

    def watch() -> None:
        while not stop.is_set():
            hits = mem.search("line paragraph", source="files", mode="fts", top_k=1000)
            words = {h.text.split()[0] for h in hits if h.metadata["path"] == "big.txt"}
            if len(words) > 1:
                mixed.append(words)

    reader = threading.Thread(target=watch)
    reader.start()
    try:
        for word in ("beta", "gamma", "delta", "alpha"):
            write(tree / "big.txt", lines(400, word))
            mem.sync([tree])
    finally:
        stop.set()
        reader.join(30)
    assert mixed == []


@pytest.mark.parametrize(("mode", "kept"), [("between", 5), ("inside", 0)])
def test_a_killed_sync_is_finished_by_the_next(
    tmp_path: Path, tree: Path, mode: str, kept: int
) -> None:
    for i in range(10):
        write(tree / "many" / f"f{i}.md", f"# file {i}\n\n{lines(5, f'w{i}')}")
    path = tmp_path / "k.db"
    child = subprocess.run(
        [sys.executable, str(CHILD), str(path), str(tree), "5", mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 1, child.stderr
    with mindfile.open(path, embedder="hash") as mem:
        # Whole files only: 5 committed transactions, or none when the process died
        # inside the one transaction the small files share.
        rows = file_rows(mem)
        assert len(rows) == kept
        written = raw(mem).query(
            "SELECT f.path, count(c.id) FROM files AS f LEFT JOIN chunks AS c "
            "ON c.file_id = f.id GROUP BY f.id"
        )
        assert {str(p): int(n) for p, n in written} == rows
        assert mem.reconcile(repair=False).consistent
        report = mem.sync([tree])
        assert (report.added, report.unchanged) == (14 - kept, kept)
        assert len(file_rows(mem)) == 14
        assert mem.reconcile(repair=False).consistent


def test_status_and_forget(mem: mindfile.Mindfile, tree: Path) -> None:
    seen: list[str] = []
    mem.sync([tree], progress=lambda done, total, read: seen.append(mem.status().state))
    assert seen and set(seen) == {"syncing"}
    assert mem.status().state == "ready"
    with pytest.raises(InvalidInputError):
        mem.sync([tree / "nope"])
    assert mem.status().state == "error" and "not a folder" in (mem.status().error or "")
    assert mem.forget(root_session(tree))
    assert file_rows(mem) == {}
    assert mem.sync([tree]).added == 4  # forgotten: indexed again from scratch
    mem.close()
    assert mem.status().state == "closed"


def test_bad_arguments(mem: mindfile.Mindfile, tree: Path) -> None:
    for bad in ([], "", ["\x00"], [5], ["a" * 5000], None):
        with pytest.raises(InvalidInputError):
            mem.sync(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.sync([tree], include=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.search("x", source="disk")  # type: ignore[arg-type]


def test_line_chunker() -> None:
    text = "short\n" + "y" * 2500 + "\n" + "\n".join(f"l{i}" for i in range(3, 400))
    chunks = chunk_lines(text, LineSpec(max_chars=1000, overlap_lines=2))
    assert chunks[0].start_line == 1
    # The 2,500-character line 2 is cut into pieces; each chunk stays within 1,000.
    assert sum(1 for c in chunks if c.start_line == 2) >= 2
    assert all(len(c.text) <= 1000 for c in chunks)
    assert chunks[-1].end_line == 399
    for a, b in itertools.pairwise(chunks):
        assert b.start_line <= a.end_line + 1  # no gap, some overlap


def test_files_search_tool_and_cli(mem: mindfile.Mindfile, tree: Path, tmp_path: Path) -> None:
    mem.sync([tree])
    out = dispatch(
        mem, "files_search", {"query": "tram", "path": "*.md"}, user_id="u", session_id="s"
    )
    assert out["ok"] and out["result"]["results"][0]["path"] == "lisbon.md"
    none = dispatch(
        mem, "files_search", {"query": "tram", "path": "*.py"}, user_id="u", session_id="s"
    )
    assert none["ok"] and all(r["path"].endswith(".py") for r in none["result"]["results"])
    runner = CliRunner()
    db = tmp_path / "cli.db"
    res = runner.invoke(cli, ["sync", str(tree), "--db", str(db), "--json", "--embedder", "hash"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["added"] == 4
    res = runner.invoke(
        cli,
        [
            "sync",
            str(tree),
            "--agent",
            "scout",
            "--state-dir",
            str(tmp_path / "state"),
            "--exclude",
            "*.py",
            "--json",
            "--embedder",
            "hash",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["added"] == 3
    assert (tmp_path / "state" / "memory" / "scout.db").exists()
    res = runner.invoke(cli, ["sync", str(tmp_path / "missing"), "--db", str(db)])
    assert res.exit_code == 2 and "not a folder" in res.output


def test_agent_stores(tmp_path: Path, tree: Path) -> None:
    with mindfile.agents(tmp_path / "state", embedder="hash") as stores:
        a = stores.get("researcher")
        assert stores.get("researcher") is a
        a.sync([tree])
        stores.get("writer").store("chat", 1, "hello")
        assert stores.list() == ["researcher", "writer"]
        assert (tmp_path / "state" / "memory" / "researcher.db").exists()
        assert stores.close("writer") and not stores.close("writer")
        for bad in ("../x", "a/b", "", ".hidden", "x" * 200, "a..b", None):
            with pytest.raises(InvalidInputError):
                stores.get(bad)  # type: ignore[arg-type]
    assert a.status().state == "closed"


def test_build_context_includes_files_only_when_asked(mem: mindfile.Mindfile, tree: Path) -> None:
    mem.sync([tree])
    mem.store("chat", 1, "hi")
    plain = mem.build_context("chat", "tram 28 in Lisbon", token_budget=800)
    assert not any(i.session_id == root_session(tree) for i in plain.items)
    cfg = mindfile.ContextConfig(include_files=True, relevance_threshold=0.0)
    ctx = mem.build_context("chat", "tram 28 in Lisbon", token_budget=800, config=cfg)
    files = [i for i in ctx.items if i.session_id == root_session(tree)]
    assert files and any("tram 28" in i.text for i in files)


def test_watch_resyncs_after_a_change(mem: mindfile.Mindfile, tree: Path) -> None:
    from mindfile.cli.sync import _watch

    mem.sync([tree])
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(mem, [str(tree)], {}, True, stop))
    watcher.start()
    try:
        time.sleep(0.5)  # let the watcher start
        write(tree / "new.md", "a brand new note about zeppelins\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if mem.search("zeppelins", source="files", mode="fts"):
                break
            time.sleep(0.2)
        assert mem.search("zeppelins", source="files", mode="fts")
    finally:
        stop.set()
        watcher.join(10)
    assert not watcher.is_alive()


def test_small_files_share_a_transaction_and_a_large_one_has_its_own() -> None:
    sync_module = importlib.import_module("mindfile.files.sync")
    limit = sync_module.COMMIT_CHUNKS

    def item(n: int) -> Any:
        return sync_module._Pending(None, "", [None] * n, None)

    sizes = [0, 10, 20, limit, 5, limit - 5, 1, 3 * limit, 2, 0]
    groups = sync_module._groups([item(n) for n in sizes])
    assert [[len(i.chunks) for i in g] for g in groups] == [
        [0, 10, 20],
        [limit],
        [5, limit - 5],
        [1],
        [3 * limit],
        [2, 0],
    ]
    assert sync_module._groups([item(0)]) != []
    assert sync_module._groups([]) == []


def test_many_batches_embedded_during_the_scan_with_copies_and_renames(
    mem: mindfile.Mindfile, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync_module = importlib.import_module("mindfile.files.sync")
    monkeypatch.setattr(sync_module, "BATCH_CHARS", 300)  # dozens of batches, two threads
    mem.sync([tree])
    for i in range(40):
        write(tree / "many" / f"f{i:02}.md", lines(3, f"topic{i}"))
    write(tree / "copy_of_porto.md", (tree / "porto.md").read_text("utf-8"))  # not a move
    (tree / "moved").mkdir()
    (tree / "lisbon.md").rename(tree / "moved" / "lisbon.md")  # a move: nothing embedded
    report = mem.sync([tree])
    assert (report.added, report.renamed, report.deleted) == (41, 1, 0)
    assert report.embedded == sum(len(chunk_lines(lines(3, f"topic{i}"))) for i in range(40)) + 1
    rows = raw(mem).query(
        "SELECT f.path, count(c.id), count(v.chunk_rowid) FROM files AS f"
        " JOIN chunks AS c ON c.file_id = f.id"
        " LEFT JOIN chunks_vec AS v ON v.chunk_rowid = c.id GROUP BY f.path"
    )
    assert all(n == vectors > 0 for _path, n, vectors in rows)  # every chunk has its vector
    assert {str(p) for p, _, _ in rows} >= {"moved/lisbon.md", "copy_of_porto.md", "many/f39.md"}
    for i in (0, 17, 39):
        hit = mem.search(f"topic{i} paragraph", source="files", mode="fts")[0]
        assert hit.metadata["path"] == f"many/f{i:02}.md"
    assert mem.reconcile(repair=False).consistent
