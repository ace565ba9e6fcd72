"""Folders indexed next to the conversations: sync and the store's status (docs/files.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike

from mindfile import files as _files
from mindfile._api._facet import Facet
from mindfile.errors import MindfileError
from mindfile.files.lines import LineSpec
from mindfile.files.sync import SyncReport
from mindfile.types import StoreStatus

__all__ = ["FilesAPI"]


class FilesAPI(Facet):
    """File sync on :class:`mindfile.Mindfile`."""

    def sync(
        self,
        paths: str | PathLike[str] | Sequence[str | PathLike[str]],
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        progress: Callable[[int, int, int], None] | None = None,
        max_file_bytes: int = 2 * 1024 * 1024,
        lines: LineSpec | None = None,
    ) -> SyncReport:
        """Index the folders ``paths`` next to the conversations (docs/files.md).

        ``include``/``exclude`` are gitignore-style globs (``"*.md"``,
        ``"node_modules"``); default excludes and ``.gitignore`` files apply. Unchanged
        files are not read, changed ones re-embed only new text, moved ones are renamed,
        deleted ones leave the index; each file is replaced in one transaction.
        ``progress(files_done, files_total, bytes_read)``; ``lines`` sets the chunk
        size (:class:`~mindfile.files.LineSpec`: 1,000 characters, 2 lines of overlap).
        Search them with
        ``search(..., source="files")``; hits carry ``metadata["path"]``,
        ``["start_line"]`` and ``["end_line"]``.
        """
        eng = self._mindfile
        eng._syncing += 1
        try:
            report = _files.sync(
                eng,
                paths,
                include=include,
                exclude=exclude,
                progress=progress,
                max_file_bytes=max_file_bytes,
                lines=lines,
            )
        except MindfileError as exc:
            eng._last_error = exc.message
            raise
        finally:
            eng._syncing -= 1
        eng._last_error = None
        # A first sync of a big tree is a bulk write: the indexes catch up once it pauses.
        eng._follower.wrote(report.chunks_added + report.chunks_removed)
        return report

    def status(self) -> StoreStatus:
        """``ready``, ``syncing`` (a :meth:`sync` is running), ``closed``, or ``error``
        (the last sync failed; ``error`` says why) - the seed's index manager states."""
        eng = self._mindfile
        if eng.db.closed:
            return StoreStatus("closed")
        if eng._syncing:
            return StoreStatus("syncing")
        if eng._last_error is not None:
            return StoreStatus("error", eng._last_error)
        return StoreStatus("ready")
