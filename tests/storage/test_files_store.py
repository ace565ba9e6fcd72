"""Conformance of file sync's store (``FilesStore``, storage/files.py) on both backends."""

from __future__ import annotations

import json

import numpy as np

from mindfile.index.chunking import content_hash
from mindfile.storage.chunks import ChunkRow

from ._seam import Seam

NOW = "2026-01-01T00:00:00.000000+00:00"
SESSION = "files:/notes"


def _rows(file_id: int, path: str, texts: list[str]) -> list[ChunkRow]:
    meta = {"kind": "file", "path": path, "root": "/notes"}
    return [
        ChunkRow(
            SESSION,
            text,
            content_hash(f"file\x00{file_id}\x00{line}\x00{text}"),
            json.dumps({**meta, "start_line": line, "end_line": line}),
            line,
            line,
            file_id=file_id,
        )
        for line, text in enumerate(texts, start=1)
    ]


def test_files_store_records_files_and_their_chunks(seam: Seam) -> None:
    files = seam.files_store()
    with seam.atomic():
        seam.stores.sessions.upsert(SESSION, NOW, touch=False)
    assert files.known(SESSION) == {}
    with seam.atomic():
        a = files.upsert(SESSION, "/notes", "a.md", "h1", 10, 100, NOW)
        vectors = seam.embedder.embed_documents(["alpha", "beta"])
        files.insert_chunks(_rows(a, "a.md", ["alpha", "beta"]), list(vectors), seam.model_id, NOW)
        files.set_chunk_count(a, 2)
        b = files.upsert(SESSION, "/notes", "b.md", "h2", 20, 200, NOW)
        files.insert_chunks(_rows(b, "b.md", ["gamma"]), [None], seam.model_id, NOW)  # a job
        files.set_chunk_count(b, 1)
    assert files.known(SESSION) == {"a.md": (a, "h1", 10, 100), "b.md": (b, "h2", 20, 200)}
    assert seam.chunk_texts(SESSION) == ["alpha", "beta", "gamma"]
    reuse = files.vectors(a, seam.model_id)
    assert sorted(reuse) == sorted([content_hash("alpha"), content_hash("beta")])
    expected = np.asarray(vectors[0], dtype="<f4").tobytes()
    assert reuse[content_hash("alpha")] == expected
    assert files.vectors(a, "another-model") == {} and files.vectors(b, seam.model_id) == {}
    with seam.atomic():
        assert files.upsert(SESSION, "/notes", "a.md", "h3", 11, 101, NOW) == a  # same id
        files.retouch(b, 21, 201)
        files.rename(b, "c.md", 22, 202)
    assert files.known(SESSION) == {"a.md": (a, "h3", 11, 101), "c.md": (b, "h2", 22, 202)}
    search, _ = seam.read_stores()
    [gamma] = [r for r in search.chunk_rows(seam.rowids()).values() if r[3] == "gamma"]
    assert json.loads(gamma[6])["path"] == "c.md"
    with seam.atomic():
        assert files.clear_chunks(a) == 2
    assert seam.chunk_texts(SESSION) == ["gamma"]
    with seam.atomic():
        assert files.delete(b) == 1
    assert files.known(SESSION) == {"a.md": (a, "h3", 11, 101)}
    assert seam.chunk_texts(SESSION) == []
