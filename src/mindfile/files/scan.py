"""Which files a sync indexes: include/exclude globs, default excludes, .gitignore.

Patterns use gitignore syntax (matched with ``pathspec``, the maintained
implementation): ``"*.md"`` matches at any depth, ``"node_modules"`` a file or folder
of that name anywhere, ``"docs/**/*.txt"`` a path. ``include`` (when given) keeps only
matching files; ``exclude`` and :data:`DEFAULT_EXCLUDES` drop matching files and whole
folders; every ``.gitignore`` under the root applies to its folder, as in git.

Symbolic links are followed only when their target stays inside the root (a link
pointing outside, or a loop, is skipped with a reason); each real directory is walked
once, so loops never hang.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

__all__ = ["DEFAULT_EXCLUDES", "Candidate", "scan"]

_Spec = pathspec.GitIgnoreSpec

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    "dist",
    "build",
    ".DS_Store",
    "*.pyc",
    "*.db",
    "*.db-wal",
    "*.db-shm",
    "*.sqlite",
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A file to consider: its path relative to the root (posix), and where it is."""

    relpath: str
    path: Path
    size: int
    mtime_ns: int


def _spec(patterns: Sequence[str]) -> _Spec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def scan(
    root: Path,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    use_defaults: bool = True,
    skipped: list[tuple[str, str]],
) -> Iterator[Candidate]:
    """The files under ``root`` to index (``skipped`` collects ``(path, reason)``)."""
    real_root = root.resolve()
    excludes = _spec([*(DEFAULT_EXCLUDES if use_defaults else ()), *(exclude or ())])
    includes = _spec(include) if include else None
    seen_dirs: set[tuple[int, int]] = set()
    # (directory, its path relative to the root, .gitignore specs that apply: (base, spec))
    stack: list[tuple[Path, str, list[tuple[str, _Spec]]]] = [(real_root, "", [])]
    while stack:
        folder, rel, ignores = stack.pop()
        try:
            info = folder.stat()
        except OSError as exc:
            skipped.append((rel or ".", f"unreadable folder: {exc.strerror or exc}"))
            continue
        key = (info.st_dev, info.st_ino)
        if key in seen_dirs:
            skipped.append((rel or ".", "symlink loop"))
            continue
        seen_dirs.add(key)
        gitignore = folder / ".gitignore"
        if gitignore.is_file():
            try:
                lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
                ignores = [*ignores, (rel, _spec(lines))]
            except OSError:
                pass
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            skipped.append((rel or ".", f"unreadable folder: {exc.strerror or exc}"))
            continue
        subdirs = []
        for entry in entries:
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
                is_file = entry.is_file(follow_symlinks=True)
            except OSError:
                skipped.append((child_rel, "unreadable"))
                continue
            probe = child_rel + "/" if is_dir else child_rel
            if excludes.match_file(probe) or _ignored(ignores, probe):
                continue
            if entry.is_symlink():
                try:
                    target = Path(entry.path).resolve()
                except (OSError, RuntimeError):
                    skipped.append((child_rel, "broken or looping symlink"))
                    continue
                if not target.is_relative_to(real_root):
                    skipped.append((child_rel, "symlink out of the root"))
                    continue
            if is_dir:
                subdirs.append((Path(entry.path), child_rel, ignores))
            elif is_file:
                if includes is not None and not includes.match_file(child_rel):
                    continue
                try:
                    st = entry.stat(follow_symlinks=True)
                except OSError as exc:
                    skipped.append((child_rel, f"unreadable: {exc.strerror or exc}"))
                    continue
                yield Candidate(child_rel, Path(entry.path), st.st_size, st.st_mtime_ns)
            elif not entry.is_symlink():
                skipped.append((child_rel, "not a regular file"))
            else:
                skipped.append((child_rel, "broken symlink"))
        stack.extend(reversed(subdirs))


def _ignored(ignores: list[tuple[str, _Spec]], probe: str) -> bool:
    for base, spec in ignores:
        local = probe[len(base) + 1 :] if base else probe
        if (not base or probe.startswith(base + "/")) and spec.match_file(local):
            return True
    return False
