"""A helper process that embeds large batches for the bundled model (docs/embeddings.md).

Tokenizing is pure Python on the fast path (:mod:`mindfile.embed._wordpiece`), so a thread
that embeds holds the GIL: during a file sync it starved the thread writing SQLite. A
batch of at least :data:`MIN_CHARS` characters therefore goes to one helper process per
embedder, which runs the same code (the same vectors, to float32 rounding) while the caller's thread
waits on a pipe without the GIL.

- Never on the critical path: the process starts in the background at the first large
  batch; until it is ready, or while it already holds :data:`MAX_IN_FLIGHT` batches of
  other threads, or after it failed, batches are embedded in the calling thread.
- Pipelined: a second thread's batch is written while the first is embedded, so the
  helper starts on it at once instead of idling while the first caller turns its
  vectors into rows (file sync embeds from two threads: docs/files.md). Answers come
  back in the order the batches were sent.
- Lifecycle: it exits when its stdin closes (the embedder's ``close()``, garbage
  collection, the parent's exit or death) or after :data:`IDLE_SECONDS` without work;
  the next large batch starts a new one.
- ``MINDFILE_EMBED_WORKER=0`` (or ``StaticEmbedder(worker=False)``) turns it off; it is
  off on one-CPU machines and in frozen applications.

Protocol on stdin/stdout: the child writes ``R`` when loaded. A request is ``E``, the
text count and byte lengths (uint32), then the UTF-8 texts; the answer is ``V``, rows,
dims (uint32) and float32 rows, or ``X``, a length and an error message.
"""

from __future__ import annotations

import gc
import os
import select
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from mindfile._helpers import helper_processes_allowed

__all__ = ["IDLE_SECONDS", "MAX_IN_FLIGHT", "MIN_CHARS", "EmbedWorker", "worker_allowed"]

#: Batches with at least this many characters go to the helper process.
MIN_CHARS = 64_000
#: Batches sent to the helper and not yet answered, at most (one embedded, one queued).
MAX_IN_FLIGHT = 2
#: The helper exits after this long without a batch.
IDLE_SECONDS = 300.0

_U32 = struct.Struct("<I")


def worker_allowed() -> bool:
    """Whether helper processes may be used here (environment, CPUs, interpreter)."""
    return helper_processes_allowed("MINDFILE_EMBED_WORKER")


class EmbedWorker:
    """The parent's handle on one helper process (thread-safe; see the module docstring)."""

    def __init__(self, model_dir: Path | None) -> None:
        self._model_dir = model_dir
        self._state = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: _Channel | None = None
        self._pid = os.getpid()
        self._ready = threading.Event()
        self._failures = 0
        self._finalizer: Any = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._ready.is_set()

    def try_embed(self, texts: Sequence[str], dims: int) -> np.ndarray | None:
        """Vectors from the helper, or None: embed in this thread instead."""
        if self._failures >= 3 or os.getpid() != self._pid:
            return None
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._start()
            return None
        channel = self._channel
        if not self._ready.is_set() or channel is None or channel.proc is not proc:
            return None
        try:
            return channel.request(texts, dims)
        except (OSError, EOFError, ValueError, struct.error):
            if channel.first_report():  # the other callers in flight fail with it
                self._failures += 1
            self._discard(proc)
            return None

    def close(self) -> None:
        with self._state:
            proc, self._proc = self._proc, None
            self._ready.clear()
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.fail()
        if proc is not None:
            _stop(proc)

    # -- internals ----------------------------------------------------------------------

    def _start(self) -> None:
        with self._state:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._ready.clear()
            env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
            argv = [sys.executable, "-m", "mindfile.embed._worker"]
            if self._model_dir is not None:
                argv.append(str(self._model_dir))
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    close_fds=True,
                )
            except OSError:
                self._failures = 3
                return
            self._proc = proc
            self._finalizer = weakref.finalize(self, _stop, proc)
        threading.Thread(
            target=self._await_ready, args=(proc,), name="mindfile-embed-worker", daemon=True
        ).start()

    def _await_ready(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            ok = proc.stdout.read(1) == b"R"
        except (OSError, ValueError):
            ok = False
        if ok and self._proc is proc:
            self._channel = _Channel(proc)
            self._ready.set()
        else:
            self._failures += 1
            self._discard(proc)

    def _discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._state:
            if self._proc is proc:
                self._proc = None
                self._ready.clear()
            channel = self._channel
            if channel is not None and channel.proc is proc:
                channel.fail()
        _stop(proc)


class _Channel:
    """Requests to one running helper: up to :data:`MAX_IN_FLIGHT` at a time, each
    caller reading its answer in the order the requests were written."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._send_lock = threading.Lock()
        self._turn = threading.Condition()
        self._sent = 0  # requests written (the next request's ticket)
        self._answered = 0  # answers read (the ticket whose answer comes next)
        self._in_flight = 0
        self._failed = False
        self._reported = False

    def request(self, texts: Sequence[str], dims: int) -> np.ndarray | None:
        """The helper's vectors; None when it already holds enough batches. Raises
        (OSError, EOFError, ValueError) when the helper failed: every waiter fails."""
        with self._turn:
            if self._failed or self._in_flight >= MAX_IN_FLIGHT:
                return None
            self._in_flight += 1
        try:
            with self._send_lock:
                ticket = self._sent
                self._sent += 1
                try:
                    _send(self._stdin, texts)
                except BaseException:
                    self.fail()
                    raise
            with self._turn:
                while self._answered != ticket and not self._failed:
                    self._turn.wait()
                if self._failed:
                    raise EOFError("embedding helper failed")
            try:
                return _receive(self._stdout, len(texts), dims)
            except BaseException:
                self.fail()
                raise
            finally:
                with self._turn:
                    self._answered += 1
                    self._turn.notify_all()
        finally:
            with self._turn:
                self._in_flight -= 1

    def first_report(self) -> bool:
        """True for the first caller that reports this channel's failure."""
        with self._turn:
            first, self._reported = not self._reported, True
            return first

    def fail(self) -> None:
        """The stream is out of step or closed: wake every waiter, accept nothing more."""
        with self._turn:
            self._failed = True
            self._turn.notify_all()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=2)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


def _send(out: IO[bytes], texts: Sequence[str]) -> None:
    blobs = [t.encode("utf-8", "surrogatepass") for t in texts]
    lengths = np.fromiter(map(len, blobs), dtype="<u4", count=len(blobs))
    out.write(b"E" + _U32.pack(len(blobs)) + lengths.tobytes() + b"".join(blobs))
    out.flush()


def _receive(inp: IO[bytes], rows: int, dims: int) -> np.ndarray:
    kind = _read(inp, 1)
    if kind == b"X":
        message = _read(inp, _U32.unpack(_read(inp, 4))[0]).decode("utf-8", "replace")
        raise ValueError(f"embedding helper failed: {message}")
    if kind != b"V":
        raise ValueError("embedding helper: bad answer")
    got_rows, got_dims = struct.unpack("<II", _read(inp, 8))
    if (got_rows, got_dims) != (rows, dims):
        raise ValueError("embedding helper: wrong shape")
    data = _read(inp, rows * dims * 4)
    return np.frombuffer(data, dtype="<f4").reshape(rows, dims).astype(np.float32)


def _read(inp: IO[bytes], n: int) -> bytes:
    parts: list[bytes] = []
    while n:
        part = inp.read(n)
        if not part:
            raise EOFError("embedding helper closed its output")
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _serve(model_dir: str | None) -> None:  # pragma: no cover - runs in the child
    from mindfile.embed.static import StaticEmbedder

    # This process only turns texts into vectors: its objects form no cycles, and the
    # collector's passes over millions of short-lived token lists cost ~10%.
    gc.disable()
    embedder = StaticEmbedder(model_dir, worker=False)
    embedder.embed_documents(["warm up"])
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(b"R")
    stdout.flush()
    while True:
        ready, _, _ = select.select([stdin], [], [], IDLE_SECONDS)
        if not ready:
            return
        kind = stdin.read(1)
        if kind != b"E":
            return
        count = _U32.unpack(_read(stdin, 4))[0]
        lengths = np.frombuffer(_read(stdin, 4 * count), dtype="<u4")
        blob = _read(stdin, int(lengths.sum()))
        texts, start = [], 0
        for n in lengths.tolist():
            texts.append(blob[start : start + n].decode("utf-8", "surrogatepass"))
            start += n
        try:
            vectors = np.ascontiguousarray(embedder.embed_documents(texts), dtype="<f4")
        except Exception as exc:  # reported to the parent, which embeds itself
            message = str(exc).encode("utf-8", "replace")[:4000]
            stdout.write(b"X" + _U32.pack(len(message)) + message)
        else:
            stdout.write(b"V" + struct.pack("<II", *vectors.shape) + vectors.tobytes())
        stdout.flush()


if __name__ == "__main__":  # pragma: no cover - the child
    _serve(sys.argv[1] if len(sys.argv) > 1 else None)
