"""``mindfile cache`` (the embedding cache's size and pruning) and ``mindfile reembed``.

See docs/embedding-cache.md.
"""

from __future__ import annotations

import sys

import click

from mindfile.cli._common import db_option, embedder_option, emit, json_option, run
from mindfile.cli.jobs import _open
from mindfile.types import EmbeddingCacheStats

__all__ = ["cache", "reembed"]


@click.group("cache")
def cache() -> None:
    """The embedding cache: vectors by (model, text), consulted before the embedder."""


@cache.command("stats")
@embedder_option
@db_option
@json_option
def stats(embedder: str | None, db_path: str, as_json: bool) -> None:
    """Entries and bytes by model."""
    with run(as_json), _open(db_path, embedder) as mem:
        report = mem.embedding_cache_stats()
        emit(report, as_json, lambda: _print_stats(report))


def _print_stats(r: EmbeddingCacheStats) -> None:
    click.echo(f"{'entries:':<12}{r.entries}")
    click.echo(f"{'bytes:':<12}{r.bytes}")
    click.echo(f"{'oldest use:':<12}{r.oldest_used_at or '-'}")
    for model, n in r.models.items():
        click.echo(f"  {model}: {n}")


@cache.command("prune")
@click.option(
    "--older-than",
    "older_than",
    type=float,
    default=None,
    help="Also drop entries unused for this many days.",
)
@click.option("--all", "everything", is_flag=True, help="Empty the cache.")
@embedder_option
@db_option
@json_option
def prune(
    older_than: float | None, everything: bool, embedder: str | None, db_path: str, as_json: bool
) -> None:
    """Drop cached vectors of texts no longer stored (and, with options, more)."""
    with run(as_json), _open(db_path, embedder) as mem:
        seconds = None if older_than is None else older_than * 86400
        removed = mem.prune_embedding_cache(older_than=seconds, everything=everything)
        emit({"removed": removed}, as_json, lambda: click.echo(f"removed {removed} entries"))


@click.command("reembed")
@click.option(
    "--embedder", "new_spec", required=True, help="The new embedder spec (e.g. hash:128)."
)
@click.option(
    "--from-embedder",
    "old_spec",
    default=None,
    help="The store's current embedder, when its model id does not name a built-in one.",
)
@click.option("--batch-size", type=int, default=256, show_default=True)
@db_option
@json_option
def reembed(
    new_spec: str, old_spec: str | None, batch_size: int, db_path: str, as_json: bool
) -> None:
    """Re-embed every chunk with another model and switch the store to it.

    Searches keep working on the old model until the switch; an interrupted run resumes
    where it stopped when started again (docs/embedding-cache.md).
    """
    with run(as_json), _open(db_path, old_spec) as mem:
        total = mem.stores.integrity.chunk_count()
        if as_json or not sys.stderr.isatty():
            report = mem.reembed(new_spec, batch_size=batch_size)
        else:
            with click.progressbar(length=total, label="re-embedding", file=sys.stderr) as bar:
                seen = [0]

                def step(done: int, _total: int) -> None:
                    bar.update(done - seen[0])
                    seen[0] = done

                report = mem.reembed(new_spec, batch_size=batch_size, progress=step)
        emit(
            report,
            as_json,
            lambda: click.echo(
                f"{report.chunks} chunks: {report.embedded} embedded, {report.reused} reused, "
                f"{report.queued} queued; model {report.old_model} -> {report.new_model} "
                f"({report.seconds:.1f} s)"
            ),
        )
