"""File sync: index folders next to the conversations (docs/files.md)."""

from mindfile.files.lines import FileChunk, LineSpec, chunk_lines
from mindfile.files.scan import DEFAULT_EXCLUDES
from mindfile.files.sync import MAX_FILE_BYTES, SyncReport, root_session, sync

__all__ = [
    "DEFAULT_EXCLUDES",
    "MAX_FILE_BYTES",
    "FileChunk",
    "LineSpec",
    "SyncReport",
    "chunk_lines",
    "root_session",
    "sync",
]
