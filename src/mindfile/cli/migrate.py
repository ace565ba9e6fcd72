"""``mindfile migrate-store SRC DST``: copy a store between backends (docs/postgres.md,
"Moving a store: migrate-store")."""

from __future__ import annotations

import sys
import time

import click

from mindfile.cli._common import emit, json_option, run
from mindfile.storage.transfer import DEFAULT_BATCH_SIZE, TransferReport, migrate_store

__all__ = ["migrate_store_command"]

#: Seconds between two progress lines of one table.
PROGRESS_EVERY = 1.0


@click.command("migrate-store")
@click.argument("source", metavar="SRC")
@click.argument("destination", metavar="DST")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Rows per batch.",
)
@click.option("--quiet", "-q", is_flag=True, help="No per-table progress lines.")
@json_option
def migrate_store_command(
    source: str, destination: str, batch_size: int, quiet: bool, as_json: bool
) -> None:
    """Copy the store SRC into the empty store DST, verified, in one transaction.

    SRC and DST are SQLite files or postgresql:// URLs (prefer the PG* environment
    variables to a password in the URL). Every id is kept; row counts and key checksums
    are checked before the copy commits, and a failure leaves DST empty.
    """
    with run(as_json):
        shown: dict[str, float] = {}

        def step(table: str, done: int, total: int) -> None:
            # On stderr, so --json's stdout stays one document: each table's start and
            # end, and in between at most one line a second.
            if quiet or total == 0:
                return
            now = time.monotonic()
            if done in (0, total) or now - shown.get(table, now) >= PROGRESS_EVERY:
                click.echo(f"{table}: {done}/{total}", err=True)
                shown[table] = now

        report = migrate_store(source, destination, batch_size=batch_size, progress=step)
        emit(report, as_json, lambda: _print(report))
        sys.stdout.flush()


def _print(report: TransferReport) -> None:
    click.echo(
        f"copied {report.source} ({report.source_backend}) -> "
        f"{report.destination} ({report.destination_backend})"
    )
    width = max(len(t.table) for t in report.tables)
    click.echo(f"{'table':<{width}}  {'source':>10}  {'copied':>10}")
    for t in report.tables:
        click.echo(f"{t.table:<{width}}  {t.source_rows:>10}  {t.destination_rows:>10}")
    click.echo(
        f"{report.rows} rows in {len(report.tables)} tables, counts and keys verified, "
        f"{report.seconds:.2f} s"
    )
