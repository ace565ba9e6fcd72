"""``mindfile sync``: index folders (docs/files.md)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

import mindfile
from mindfile.cli._common import DEFAULT_DB, embedder_option, emit, json_option, run
from mindfile.errors import BackendUnavailableError, InvalidInputError
from mindfile.files import SyncReport

__all__ = ["sync"]


@click.command("sync")
@click.argument("paths", nargs=-1, required=True)
@click.option("--include", multiple=True, help="Glob of files to index (repeatable).")
@click.option("--exclude", multiple=True, help="Glob of files or folders to skip (repeatable).")
@click.option("--agent", "agent_id", default=None, help="Index into this agent's store...")
@click.option(
    "--state-dir",
    default=None,
    help="...under STATE_DIR/memory/AGENT.db (with --agent).",
)
@click.option("--db", "db_path", envvar="MINDFILE_DB", default=None, help="Or this store file.")
@click.option("--watch", is_flag=True, help="Keep syncing when the files change.")
@embedder_option
@json_option
def sync(
    paths: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    agent_id: str | None,
    state_dir: str | None,
    db_path: str | None,
    watch: bool,
    embedder: str | None,
    as_json: bool,
) -> None:
    """Index the files under PATHS; re-running only reads what changed."""
    with run(as_json):
        if agent_id is not None or state_dir is not None:
            if agent_id is None or state_dir is None or db_path is not None:
                raise InvalidInputError("use --agent with --state-dir, or --db, not both")
            stores = mindfile.agents(state_dir, embedder=embedder)
            mem = stores.get(agent_id)
        else:
            mem = mindfile.open(db_path or DEFAULT_DB, embedder=embedder)
        with mem:
            options = {"include": list(include) or None, "exclude": list(exclude) or None}
            report = _once(mem, list(paths), options, as_json)
            emit(report, as_json, lambda: _print(report))
            if watch:
                _watch(mem, list(paths), options, as_json)


def _once(mem: Any, paths: list[str], options: dict[str, Any], quiet: bool) -> SyncReport:
    if quiet or not sys.stderr.isatty():
        result: SyncReport = mem.sync(paths, **options)
        return result
    started = time.monotonic()
    with click.progressbar(length=1, label="scanning", file=sys.stderr) as bar:

        def step(done: int, total: int, read: int) -> None:
            bar.length = max(total, 1)
            elapsed = max(time.monotonic() - started, 1e-6)
            bar.label = f"{done}/{total} files, {read / 1e6 / elapsed:.1f} MB/s"
            bar.update(done - bar.pos)

        report: SyncReport = mem.sync(paths, progress=step, **options)
    return report


def _print(r: SyncReport) -> None:
    click.echo(
        f"{r.added} added, {r.updated} updated, {r.renamed} renamed, {r.deleted} deleted, "
        f"{r.unchanged} unchanged, {len(r.skipped)} skipped; {r.chunks_added} chunks added, "
        f"{r.chunks_removed} removed, {r.embedded} embedded ({r.seconds:.2f} s)"
    )
    for path, reason in r.skipped[:20]:
        click.echo(f"  skipped {path}: {reason}")
    if len(r.skipped) > 20:
        click.echo(f"  ... and {len(r.skipped) - 20} more skipped")


def _watch(
    mem: Any,
    paths: list[str],
    options: dict[str, Any],
    as_json: bool,
    stop: threading.Event | None = None,
) -> None:
    """Re-sync after every (debounced) change until Ctrl-C (or ``stop`` is set)."""
    try:
        import watchfiles
    except ImportError as exc:
        raise BackendUnavailableError(
            "--watch needs watchfiles: pip install 'mindfile[watch]'", package="watchfiles"
        ) from exc
    roots = [str(Path(p).expanduser()) for p in paths]
    click.echo(f"watching {', '.join(roots)} (Ctrl-C to stop)", err=True)
    try:
        changes = watchfiles.watch(*roots, debounce=1000, raise_interrupt=False, stop_event=stop)
        for _changes in changes:
            again: SyncReport = mem.sync(paths, **options)
            if as_json:
                emit(again, True)
            else:
                _print(again)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        pass
