"""``mindfile cache``: the embedding cache's size, hit rate, and pruning.

See docs/embedding-cache.md.
"""

from __future__ import annotations

import click

from mindfile.cli._common import db_option, embedder_option, emit, json_option, run
from mindfile.cli.jobs import _open
from mindfile.types import EmbeddingCacheStats

__all__ = ["cache"]


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
