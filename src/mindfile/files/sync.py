"""``Mindfile.sync(paths)``: index folders next to the conversations (docs/files.md).

For each root folder (one session ``files:<hash of its absolute path>``):

1. scan it (:mod:`mindfile.files.scan`); a file whose size and modification time match
   the ``files`` row is not read;
2. read the others (too large, binary, not UTF-8, unreadable, vanished or changing
   while read: skipped with a reason), hash their bytes; same hash as indexed = only
   the modification time is remembered;
3. a new path whose content hash is a path that disappeared = a rename: the file row
   and its chunks' ``metadata["path"]`` move, nothing is embedded;
4. new and changed files are cut along lines (:mod:`mindfile.files.lines`); text the
   file already had keeps its vector, the rest goes through the write pipeline's
   prepare stage (embedding cache, background indexing) in batches across files;
5. each file is then replaced inside **one transaction** (its old chunks out, the new
   ones in, the row updated; small files share a transaction of <= 256 chunks), so a
   concurrent search sees the old or the new file, never a mix, and an interrupted
   sync (exception, ``kill -9``) leaves every file either fully old or fully new: the
   next sync finishes the job;
6. files gone from the folder (or now excluded) are deleted with their chunks.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3
import numpy as np

from mindfile.errors import InvalidInputError
from mindfile.files.lines import FileChunk, LineSpec, chunk_lines
from mindfile.files.scan import Candidate, scan
from mindfile.index.chunking import content_hash
from mindfile.index.pipeline import dump_json
from mindfile.memory._write import embed_texts
from mindfile.storage.backend import files_store
from mindfile.storage.chunks import ChunkRow
from mindfile.storage.db import utcnow
from mindfile.types import _ToDict

if TYPE_CHECKING:
    from mindfile.engine import Mindfile

__all__ = ["MAX_FILE_BYTES", "SyncReport", "root_session", "sync"]

#: Files larger than this are skipped (``too large``); ``max_file_bytes=`` changes it.
MAX_FILE_BYTES = 2 * 1024 * 1024
#: Characters of chunk text embedded together (one prepare call; a larger file alone).
#: Above the bundled model's helper-process threshold (``embed._worker.MIN_CHARS``), so
#: every batch of a large sync is embedded there, not in a thread of this process.
BATCH_CHARS = 256_000
#: Batches embedded ahead of the one being written.
EMBED_AHEAD = 4
#: Threads embedding those batches: with two, the bundled model's helper process embeds
#: one batch while the other thread sends the next or unpacks its vectors (one thread
#: left it idle ~30% of the time). One when the embedding cache is on: its hit counter,
#: which ``SyncReport.embedded`` reads, is per store.
EMBED_THREADS = 2
#: Chunks written per transaction: small files share one (a file is never split).
#: Fewer, larger transactions halve FTS5's segment merging: 3,575 -> 6,025 chunks/s
#: from 8 to 200 chunks per transaction on source files; the write lock is held
#: ~40 ms at this size.
COMMIT_CHUNKS = 256
SESSION_PREFIX = "files:"
#: Skip reasons that remove a previously indexed file from the index.
PERMANENT = ("too large", "binary", "not UTF-8")

#: ``progress(files_done, files_total, bytes_read)`` after each file.
Progress = Callable[[int, int, int], None]


@dataclass(slots=True)
class SyncReport(_ToDict):
    """What a sync did. File counts, then chunks; ``embedded``: chunk texts sent to the
    embedder (reused vectors and embedding-cache hits are not)."""

    roots: list[str] = field(default_factory=list)
    added: int = 0
    updated: int = 0
    deleted: int = 0
    renamed: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    embedded: int = 0
    bytes_read: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class _Pending:
    candidate: Candidate
    digest: str
    chunks: list[FileChunk]
    old_id: int | None
    vectors: Any = None


def root_session(root: Path) -> str:
    """The session of a synced root folder."""
    digest = blake3.blake3(str(root).encode("utf-8", "surrogateescape")).hexdigest(length=8)
    return f"{SESSION_PREFIX}{digest}"


def sync(
    engine: Mindfile,
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    progress: Progress | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
    lines: LineSpec | None = None,
) -> SyncReport:
    """Index the folders ``paths`` (see the module docstring); returns what changed."""
    started = time.perf_counter()
    roots = _roots(paths)
    include = _patterns(include, "include")
    exclude = _patterns(exclude, "exclude")
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
        raise InvalidInputError("max_file_bytes must be an integer")
    if max_file_bytes < 1:
        raise InvalidInputError("max_file_bytes must be positive")
    if progress is not None and not callable(progress):
        raise InvalidInputError("progress must be callable")
    if lines is not None and not isinstance(lines, LineSpec):
        raise InvalidInputError("lines must be a mindfile.files.LineSpec")
    spec = lines or LineSpec()
    report = SyncReport()
    for root in roots:
        report.roots.append(str(root))
        _sync_root(engine, root, include, exclude, progress, max_file_bytes, spec, report)
    report.seconds = time.perf_counter() - started
    return report


def _roots(paths: Any) -> list[Path]:
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if not isinstance(paths, Sequence) or not paths:
        raise InvalidInputError("paths must be a folder or a non-empty list of folders")
    out = []
    for p in paths:
        if not isinstance(p, str | os.PathLike):
            raise InvalidInputError("each path must be a string or a path")
        text = os.fspath(p)
        if not isinstance(text, str) or not text.strip() or "\x00" in text or len(text) > 4096:
            raise InvalidInputError("each path must be a non-empty folder path")
        try:
            root = Path(text).expanduser().resolve()
            is_dir = root.is_dir()
        except (OSError, RuntimeError, ValueError) as exc:
            raise InvalidInputError(f"cannot use {text[:80]!r} as a folder: {exc}") from exc
        if not is_dir:
            raise InvalidInputError(f"not a folder: {text[:200]!r}")
        out.append(root)
    return list(dict.fromkeys(out))


def _patterns(value: Any, what: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"{what} must be a list of glob patterns")
    return list(value)


def _sync_root(
    engine: Mindfile,
    root: Path,
    include: list[str] | None,
    exclude: list[str] | None,
    progress: Progress | None,
    max_file_bytes: int,
    spec: LineSpec,
    report: SyncReport,
) -> None:
    db, files = engine.db, files_store(engine.db)
    session_id = root_session(root)
    root_text = str(root)
    known = files.known(session_id)
    # A new path with the content of an indexed file may be a rename (step 3): it waits
    # for the end of the scan. Every other changed file is embedded while the scan goes on.
    known_hashes = {row[1] for row in known.values()}
    skipped: list[tuple[str, str]] = []
    candidates = list(scan(root, include=include, exclude=exclude, skipped=skipped))
    seen: set[str] = set()
    held: list[_Pending] = []
    ahead = _Ahead(engine)
    try:
        for done, cand in enumerate(candidates, start=1):
            seen.add(cand.relpath)
            old = known.get(cand.relpath)
            if old is not None and old[2] == cand.size and old[3] == cand.mtime_ns:
                report.unchanged += 1
            else:
                read = _read(cand, max_file_bytes, skipped)
                if read is not None:
                    data, cand = read
                    report.bytes_read += len(data)
                    digest = blake3.blake3(data).hexdigest(length=16)
                    if old is not None and old[1] == digest:
                        with db.atomic():
                            files.retouch(old[0], cand.size, cand.mtime_ns)
                        report.unchanged += 1
                    else:
                        text = data.decode("utf-8")
                        old_id = None if old is None else old[0]
                        item = _Pending(cand, digest, chunk_lines(text, spec), old_id)
                        if old_id is None and digest in known_hashes:
                            held.append(item)
                        else:
                            ahead.add(item)
            if progress is not None:
                progress(done, len(candidates), report.bytes_read)
        # A file that can no longer be indexed (too large, binary, not UTF-8) leaves the
        # index; one that failed to read for a passing reason keeps its last version.
        seen -= {p for p, reason in skipped if reason.startswith(PERMANENT)}
        gone = {p: row for p, row in known.items() if p not in seen}
        report.skipped.extend(skipped)
        if ahead.files or held or gone:
            with db.atomic():
                engine.stores.sessions.upsert(session_id, utcnow(), touch=False)
        _renames(engine, session_id, held, gone, report)
        for item in held:
            ahead.add(item)
        # Batches are written in order as their vectors arrive; the embedder (its helper
        # process, numpy) and SQLite release the GIL, so the two cores overlap.
        for batch, embedded in ahead.drain():
            report.embedded += embedded
            for group in _groups(batch):
                _commit(engine, session_id, root_text, group, report)
    finally:
        ahead.close()
    for _relpath, row in sorted(gone.items()):
        with db.atomic():
            report.chunks_removed += files.delete(row[0])
        report.deleted += 1


class _Ahead:
    """Batches of changed files (:data:`BATCH_CHARS`), embedded up to
    :data:`EMBED_AHEAD` ahead of the one being written, by :data:`EMBED_THREADS`."""

    def __init__(self, engine: Mindfile) -> None:
        self._engine = engine
        threads = 1 if engine.embedding_cache.enabled else EMBED_THREADS
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="mindfile-sync-embed")
        self._queued: deque[list[_Pending]] = deque()
        self._running: deque[tuple[list[_Pending], Future[int]]] = deque()
        self._batch: list[_Pending] = []
        self._chars = 0
        self.files = 0

    def add(self, item: _Pending) -> None:
        self.files += 1
        self._batch.append(item)
        self._chars += sum(len(chunk.text) for chunk in item.chunks)
        if self._chars >= BATCH_CHARS:
            self._cut()

    def drain(self) -> Iterator[tuple[list[_Pending], int]]:
        """Each batch with its vectors set, in order, and the texts it embedded."""
        self._cut()
        while self._running:
            batch, future = self._running.popleft()
            embedded = future.result()
            self._submit()
            yield batch, embedded

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _cut(self) -> None:
        if self._batch:
            self._queued.append(self._batch)
            self._batch, self._chars = [], 0
        self._submit()

    def _submit(self) -> None:
        while self._queued and len(self._running) < EMBED_AHEAD:
            batch = self._queued.popleft()
            self._running.append((batch, self._pool.submit(_embed, self._engine, batch)))


def _read(
    cand: Candidate, max_file_bytes: int, skipped: list[tuple[str, str]]
) -> tuple[bytes, Candidate] | None:
    """The file's bytes (and its stat after reading), or None with a reason recorded."""
    if cand.size > max_file_bytes:
        skipped.append((cand.relpath, f"too large ({cand.size} bytes > {max_file_bytes})"))
        return None
    for _attempt in range(3):
        try:
            data = cand.path.read_bytes()
            after = cand.path.stat()
        except FileNotFoundError:
            skipped.append((cand.relpath, "vanished while syncing"))
            return None
        except OSError as exc:
            skipped.append((cand.relpath, f"unreadable: {exc.strerror or exc}"))
            return None
        if after.st_size == len(data) and len(data) <= max_file_bytes:
            break
        time.sleep(0.05)  # changing while read: try again
    else:
        skipped.append((cand.relpath, "changing while being read"))
        return None
    if len(data) > max_file_bytes:
        skipped.append((cand.relpath, f"too large ({len(data)} bytes > {max_file_bytes})"))
        return None
    if b"\x00" in data[:8192]:
        skipped.append((cand.relpath, "binary"))
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        skipped.append((cand.relpath, "not UTF-8 text"))
        return None
    fresh = Candidate(cand.relpath, cand.path, len(data), after.st_mtime_ns)
    return data, fresh


def _renames(
    engine: Mindfile,
    session_id: str,
    changed: list[_Pending],
    gone: dict[str, tuple[int, str, int, int]],
    report: SyncReport,
) -> None:
    by_hash: dict[str, str] = {row[1]: path for path, row in gone.items()}
    keep: list[_Pending] = []
    for item in changed:
        old_path = by_hash.get(item.digest) if item.old_id is None else None
        if old_path is None or old_path not in gone:
            keep.append(item)
            continue
        file_id = gone.pop(old_path)[0]
        with engine.db.atomic():
            files_store(engine.db).rename(
                file_id,
                item.candidate.relpath,
                item.candidate.size,
                item.candidate.mtime_ns,
            )
        report.renamed += 1
    changed[:] = keep


def _embed(engine: Mindfile, batch: list[_Pending]) -> int:
    """Vectors for the batch's chunks: a file's unchanged text keeps its vector. Returns
    the texts sent to the embedder (:attr:`SyncReport.embedded`)."""
    model = engine.embedder.model_id
    wanted: list[str] = []
    for item in batch:
        if item.old_id is None:  # a new file: nothing to reuse
            item.vectors = [None] * len(item.chunks)
            wanted.extend(chunk.text for chunk in item.chunks)
            continue
        reuse = files_store(engine.db).vectors(item.old_id, model)
        vectors: list[Any] = []
        for chunk in item.chunks:
            blob = reuse.get(content_hash(chunk.text)) if reuse else None
            if blob is not None and len(blob) == engine.embedder.dimensions * 4:
                vectors.append(np.frombuffer(blob, dtype="<f4").copy())
            else:
                vectors.append(None)
                wanted.append(chunk.text)
        item.vectors = vectors
    if not wanted:
        return 0
    cache = engine.embedding_cache
    before = cache.hits
    fresh = embed_texts(engine, wanted)
    embedded = len(dict.fromkeys(wanted)) - (cache.hits - before if cache.enabled else 0)
    if fresh is None:  # background indexing: the commit queues jobs
        return embedded
    made = dict(zip(wanted, fresh, strict=True))
    for item in batch:
        item.vectors = [
            made[c.text] if v is None else v for c, v in zip(item.chunks, item.vectors, strict=True)
        ]
    return embedded


def _groups(batch: list[_Pending]) -> list[list[_Pending]]:
    """Consecutive files whose chunks together stay within ``COMMIT_CHUNKS`` (a larger
    file alone): one transaction each."""
    groups: list[list[_Pending]] = []
    size = 0
    for item in batch:
        if not groups or size + len(item.chunks) > COMMIT_CHUNKS:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += len(item.chunks)
    return groups


def _commit(
    engine: Mindfile, session_id: str, root: str, group: list[_Pending], report: SyncReport
) -> None:
    """Replace the group's files in one transaction (each file whole: old or new)."""
    files = files_store(engine.db)
    now = utcnow()
    removed = added = 0
    with engine.db.atomic():
        for item in group:
            if item.old_id is not None:
                removed += files.clear_chunks(item.old_id)
            added += _write_file(engine, session_id, root, item, now)
    report.chunks_removed += removed
    report.chunks_added += added
    for item in group:
        if item.old_id is None:
            report.added += 1
        else:
            report.updated += 1


def _write_file(engine: Mindfile, session_id: str, root: str, item: _Pending, now: str) -> int:
    files = files_store(engine.db)
    cand = item.candidate
    file_id = files.upsert(
        session_id, root, cand.relpath, item.digest, cand.size, cand.mtime_ns, now
    )
    # The file's part of every chunk's metadata, checked once; lines are added per chunk.
    head = dump_json({"kind": "file", "path": cand.relpath, "root": root}, "file metadata")
    head = head[:-1]
    rows = [
        ChunkRow(
            session_id,
            chunk.text,
            content_hash(f"file\x00{file_id}\x00{chunk.start_line}\x00{chunk.text}"),
            f'{head},"start_line":{chunk.start_line},"end_line":{chunk.end_line}}}',
            chunk.start_line,
            chunk.end_line,
            file_id=file_id,
        )
        for chunk in item.chunks
    ]
    files.insert_chunks(rows, item.vectors, engine.embedder.model_id, now)
    files.set_chunk_count(file_id, len(item.chunks))
    return len(item.chunks)
