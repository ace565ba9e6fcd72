"""``mindfile jobs``: status, run, reconcile, retry and prune the embedding-job queue.

``run`` processes what is due once and exits, so a system cron or timer can drive a
store written with ``indexing="background"``::

    * * * * *  mindfile jobs run --db ~/agent.db

``reconcile`` finds chunks without vectors, vectors from another model, and derived
indexes out of step, and repairs them (``--check`` only reports, and exits 1 when
something is wrong). See docs/background-indexing.md.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import click

import mindfile
from mindfile.cli._common import db_option, embedder_option, emit, json_option, missing_file, run
from mindfile.engine import Mindfile
from mindfile.errors import NotFoundError
from mindfile.jobs import JobInfo, JobPolicy, JobQueueStatus, JobReport, ReconcileReport

__all__ = ["jobs"]


@contextmanager
def _open(db_path: str, embedder: str | None, *, background: bool = False) -> Iterator[Mindfile]:
    """Open an existing store (a missing file is a :class:`NotFoundError`)."""
    if missing_file(db_path):
        raise NotFoundError(f"no memory store at {db_path!r}", path=db_path)
    indexing: Literal["sync", "background"] = "background" if background else "sync"
    with mindfile.open(db_path, embedder=embedder, indexing=indexing) as mem:
        yield mem


@click.group("jobs")
def jobs() -> None:
    """Background indexing: the embedding-job queue and the reconciler."""


@jobs.command("status")
@click.option("--failed", "show_failed", type=int, default=0, help="Also list N failed jobs.")
@embedder_option
@db_option
@json_option
def status(show_failed: int, embedder: str | None, db_path: str, as_json: bool) -> None:
    """Show job counts, what is due, and the oldest waiting job."""
    with run(as_json), _open(db_path, embedder) as mem:
        state = mem.job_status()
        failed = mem.list_jobs(status="failed", limit=show_failed) if show_failed > 0 else []
        data = {**state.to_dict(), "failed_jobs": [j.to_dict() for j in failed]}
        emit(data, as_json, lambda: _print_status(state, failed))


def _print_status(state: JobQueueStatus, failed: list[JobInfo]) -> None:
    rows = [
        ("pending", state.pending),
        ("running", state.running),
        ("done", state.done),
        ("failed", state.failed),
        ("due now", state.due),
        ("oldest waiting", state.oldest_pending_at or "-"),
        ("next retry", state.next_retry_at or "-"),
    ]
    for key, value in rows:
        click.echo(f"{key + ':':<16}{value}")
    for job in failed:
        error = (job.last_error or "").splitlines()[0] if job.last_error else "-"
        click.echo(
            f"job {job.job_id}  {job.chunk_id}  {job.session_id}  tries {job.retry_count}  {error}"
        )


@jobs.command("run")
@click.option("--max-jobs", type=int, default=None, help="Stop after claiming N jobs.")
@click.option("--batch-size", type=int, default=64, show_default=True, help="Chunks per call.")
@click.option("--max-retries", type=int, default=5, show_default=True, help="Then dead-letter.")
@click.option("--backoff", type=float, default=1.0, show_default=True, help="Base delay (s).")
@click.option("--lease", type=float, default=120.0, show_default=True, help="Claim lease (s).")
@embedder_option
@db_option
@json_option
def run_cmd(
    max_jobs: int | None,
    batch_size: int,
    max_retries: int,
    backoff: float,
    lease: float,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Embed the chunks whose jobs are due now, once, and exit."""
    with run(as_json):
        policy = JobPolicy(max_retries=max_retries, backoff_base=backoff, lease_seconds=lease)
        with _open(db_path, embedder) as mem:
            report = mem.run_jobs(max_jobs=max_jobs, batch_size=batch_size, policy=policy)
        emit(report, as_json, lambda: _print_run(report))


def _print_run(r: JobReport) -> None:
    click.echo(
        f"claimed {r.claimed}: {r.succeeded} done, {r.retried} to retry, "
        f"{r.dead_lettered} dead-lettered, {r.discarded} discarded"
        + (f"; {r.recovered} expired leases recovered" if r.recovered else "")
    )
    if r.stopped_early:
        click.echo("stopped early: the embedder kept failing")
    if r.last_error:
        click.echo(f"last error: {r.last_error}")


@jobs.command("reconcile")
@click.option("--check", is_flag=True, help="Only report; exit 1 if something is wrong.")
@click.option(
    "--enqueue-only", is_flag=True, help="Queue missing embeddings for a worker, do not embed."
)
@embedder_option
@db_option
@json_option
def reconcile_cmd(
    check: bool, enqueue_only: bool, embedder: str | None, db_path: str, as_json: bool
) -> None:
    """Find and repair chunk/vector/index mismatches."""
    with run(as_json):
        with _open(db_path, embedder, background=enqueue_only) as mem:
            report = mem.reconcile(repair=not check)
        emit(report, as_json, lambda: _print_reconcile(report))
    if check and not report.consistent:
        sys.exit(1)


def _print_reconcile(r: ReconcileReport) -> None:
    rows = [
        ("chunks", r.chunks),
        ("missing vectors", r.missing_vectors),
        ("dead-lettered", r.dead_lettered),
        ("abandoned jobs", r.abandoned_jobs),
        ("wrong-model vectors", r.wrong_model_vectors),
        ("orphan vectors", r.orphan_vectors),
        ("fts rows", r.fts_rows),
        ("vectors", r.vector_count),
        ("index size", r.index_size if r.index_size >= 0 else "not checked"),
    ]
    for key, value in rows:
        click.echo(f"{key + ':':<21}{value}")
    if r.repaired:
        done = [f"{r.enqueued} re-queued", f"{r.embedded} embedded"]
        done += ["fts rebuilt"] if r.fts_rebuilt else []
        done += ["vector index rebuilt"] if r.index_rebuilt else []
        click.echo("repaired: " + ", ".join(done))
    click.echo("consistent" if r.consistent else "inconsistent (before repair)")


@jobs.command("retry")
@embedder_option
@db_option
@json_option
def retry(embedder: str | None, db_path: str, as_json: bool) -> None:
    """Re-queue every dead-lettered (failed) job."""
    with run(as_json), _open(db_path, embedder) as mem:
        count = mem.retry_failed_jobs()
        emit({"requeued": count}, as_json, lambda: click.echo(f"re-queued {count} job(s)"))


@jobs.command("prune")
@click.option(
    "--older-than", type=float, default=86_400.0, show_default=True, help="Seconds since done."
)
@embedder_option
@db_option
@json_option
def prune(older_than: float, embedder: str | None, db_path: str, as_json: bool) -> None:
    """Delete finished (done) jobs older than --older-than seconds."""
    with run(as_json), _open(db_path, embedder) as mem:
        count = mem.prune_jobs(older_than_seconds=older_than)
        emit({"pruned": count}, as_json, lambda: click.echo(f"pruned {count} done job(s)"))
