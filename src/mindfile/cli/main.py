"""The ``mindfile`` command: store, search, list, recall and forget conversation memory.

Every command takes ``--db`` (env ``MINDFILE_DB``) and ``--json``; errors become a
one-line message (or a JSON error object) and the error's exit code (see
:mod:`mindfile.errors`). Feature groups from other packages (``schedule``, ``notes``,
``facts``...) are attached at the bottom when they are importable.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import click

import mindfile
from mindfile.cli._common import (
    db_option,
    embedder_option,
    emit,
    json_option,
    missing_file,
    parse_json_arg,
    run,
)
from mindfile.engine import Mindfile
from mindfile.errors import ConflictError, InvalidInputError, NotFoundError, ScopeError
from mindfile.index.extract import extract_role, extract_text
from mindfile.index.pipeline import check_id
from mindfile.retrieve.search import SearchResults
from mindfile.types import FusionMode, MemoryRecord, SearchMode, SessionInfo, StoreInfo

__all__ = ["cli", "main"]

PREVIEW_CHARS = 100
AUTO_SEQUENCE_ATTEMPTS = 3

F = Any


def user_option(func: F) -> F:
    """``--user ID`` (env ``MINDFILE_USER``): scope to one user (docs/privacy.md)."""
    return click.option(
        "--user",
        "user_id",
        envvar="MINDFILE_USER",
        default=None,
        help="Only this user's sessions; on add, the session's user (env MINDFILE_USER).",
    )(func)


def channel_option(func: F) -> F:
    """``--channel NAME``."""
    return click.option(
        "--channel", default=None, help="Only this channel's sessions; on add, the session's."
    )(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(mindfile.__version__, "--version", prog_name="mindfile")
def cli() -> None:
    """Mindfile: long-term memory for LLM agents in one SQLite file."""


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="mindfile")


# -- helpers ------------------------------------------------------------------------------


@contextmanager
def _store(db_path: str, embedder: str | None = None, *, create: bool = True) -> Iterator[Mindfile]:
    """Open the store; without ``create``, a missing file is a :class:`NotFoundError`."""
    if not create and missing_file(db_path):
        raise NotFoundError(f"no memory store at {db_path!r}", path=db_path)
    with mindfile.open(db_path, embedder=embedder) as mem:
        yield mem


def _session_exists(mem: Mindfile, session_id: str) -> bool:
    return mem.stores.sessions.exists(session_id)


def _require_session(mem: Mindfile, session_id: str) -> None:
    check_id(session_id, "session_id")
    if not _session_exists(mem, session_id):
        raise NotFoundError(f"no such session: {session_id!r}", session_id=session_id)


def _next_sequence(mem: Mindfile, session_id: str) -> int:
    # Above the session's high-water mark: deleted events' sequences are never reused.
    return mem.stores.sessions.next_sequence(session_id)


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _seq_range(start: int, end: int) -> str:
    return f"#{start}" if start == end else f"#{start}-{end}"


# -- commands -----------------------------------------------------------------------------


@cli.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("text", required=False)
@click.option("--role", default="user", show_default=True, help="Message role.")
@click.option(
    "--sequence", type=int, default=None, help="Event sequence number (default: the next one)."
)
@click.option("--tag", "tags", multiple=True, help="Tag the event's chunks (repeatable).")
@click.option("--payload-json", default=None, help="Store this JSON payload instead of TEXT.")
@click.option("--metadata-json", default=None, help="A JSON object of chunk metadata.")
@user_option
@channel_option
@embedder_option
@db_option
@json_option
def add(
    session_id: str,
    text: str | None,
    role: str,
    sequence: int | None,
    tags: tuple[str, ...],
    payload_json: str | None,
    metadata_json: str | None,
    user_id: str | None,
    channel: str | None,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Store a message in SESSION.

    TEXT is the message content (stored as {"role": ROLE, "content": TEXT}), or "-" to
    read it from stdin; --payload-json stores any JSON payload instead.
    """
    with run(as_json):
        payload = _payload(text, role, payload_json)
        metadata = None if metadata_json is None else parse_json_arg(metadata_json, "metadata")
        with _store(db_path, embedder) as mem:
            scope = {"user_id": user_id, "channel": channel}
            stored_at, added = _add(mem, session_id, sequence, payload, metadata, list(tags), scope)
        result = {"session_id": session_id, "sequence": stored_at, "chunks_added": added}
        noun = "chunk" if added == 1 else "chunks"
        emit(
            result,
            as_json,
            lambda: click.echo(f"stored {session_id} #{stored_at} ({added} new {noun})"),
        )


def _payload(text: str | None, role: str, payload_json: str | None) -> Any:
    if payload_json is not None:
        if text is not None:
            raise InvalidInputError("give either TEXT or --payload-json, not both")
        return parse_json_arg(payload_json, "payload")
    if text is None:
        raise InvalidInputError("missing TEXT (or --payload-json)")
    if text == "-":
        text = sys.stdin.read()
    return {"role": role, "content": text}


def _add(
    mem: Mindfile,
    session_id: str,
    sequence: int | None,
    payload: Any,
    metadata: Any,
    tags: list[str],
    scope: dict[str, str | None],
) -> tuple[int, int]:
    """Store and return ``(sequence, chunks_added)``; an automatic sequence that loses a
    race with another writer is retried with the new next number."""
    check_id(session_id, "session_id")  # before it reaches SQL in _next_sequence
    for attempt in range(AUTO_SEQUENCE_ATTEMPTS):
        seq = sequence if sequence is not None else _next_sequence(mem, session_id)
        try:
            added = mem.store(
                session_id,
                seq,
                payload,
                metadata=metadata,
                tags=tags or None,
                user_id=scope["user_id"],
                channel=scope["channel"],
            )
        except ScopeError:
            raise
        except ConflictError:
            if sequence is not None or attempt == AUTO_SEQUENCE_ATTEMPTS - 1:
                raise
            continue
        return seq, added
    raise AssertionError("unreachable")  # pragma: no cover


@cli.command()
@click.argument("query")
@click.option("--session", "sessions", multiple=True, help="Only these sessions (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only chunks with every one of these tags.")
@click.option("--top-k", type=int, default=10, show_default=True, help="How many hits.")
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "vector", "fts"]),
    default="hybrid",
    show_default=True,
)
@click.option(
    "--fusion",
    type=click.Choice(["calibrated", "weighted", "rrf"]),
    default="calibrated",
    show_default=True,
)
@click.option("--min-score", type=float, default=None, help="Drop hits scoring below this.")
@click.option(
    "--vector-weight", type=float, default=None, help="Vector weight (default: the embedder's)."
)
@click.option(
    "--fts-weight", type=float, default=None, help="BM25 weight (default: the embedder's)."
)
@user_option
@channel_option
@embedder_option
@db_option
@json_option
def search(
    query: str,
    sessions: tuple[str, ...],
    tags: tuple[str, ...],
    top_k: int,
    mode: str,
    fusion: str,
    min_score: float | None,
    vector_weight: float | None,
    fts_weight: float | None,
    user_id: str | None,
    channel: str | None,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Search stored memory for QUERY."""
    with run(as_json), _store(db_path, embedder, create=False) as mem:
        results = mem.search(
            query,
            session_id=list(sessions) or None,
            tags=list(tags) or None,
            top_k=top_k,
            mode=cast(SearchMode, mode),  # click.Choice has validated both
            fusion=cast(FusionMode, fusion),
            min_score=min_score,
            vector_weight=vector_weight,
            fts_weight=fts_weight,
            user_id=user_id,
            channel=channel,
        )
        emit(results, as_json, lambda: _print_results(results))


def _print_results(results: SearchResults) -> None:
    if results.degraded:
        click.echo(f"(degraded: {results.degraded})")
    if not results:
        click.echo("no results")
    for rank, hit in enumerate(results, start=1):
        where = f"{hit.session_id} {_seq_range(hit.sequence_start, hit.sequence_end)}"
        click.echo(f"{rank:>3}. {hit.score:.4f}  {where}  {_preview(hit.text)}")


@cli.command()
@user_option
@channel_option
@db_option
@json_option
def sessions(user_id: str | None, channel: str | None, db_path: str, as_json: bool) -> None:
    """List sessions, most recently updated first."""
    with run(as_json), _store(db_path, create=False) as mem:
        found = mem.list_sessions(user_id=user_id, channel=channel)
        emit(found, as_json, lambda: _print_sessions(found))


def _print_sessions(found: list[SessionInfo]) -> None:
    if not found:
        click.echo("no sessions")
    for s in found:
        click.echo(
            f"{s.session_id}  events={s.event_count}  last=#{s.last_sequence}  "
            f"updated={s.updated_at}"
        )


@cli.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--limit", type=int, default=None, help="Only the last N events.")
@user_option
@db_option
@json_option
def recall(
    session_id: str, limit: int | None, user_id: str | None, db_path: str, as_json: bool
) -> None:
    """Print SESSION's events in order."""
    with run(as_json), _store(db_path, create=False) as mem:
        records = mem.recall(session_id, limit, user_id=user_id)
        if not records:
            _require_session(mem, session_id)
        emit(records, as_json, lambda: _print_records(records))


def _print_records(records: list[MemoryRecord]) -> None:
    for r in records:
        role = extract_role(r.payload) or "-"
        click.echo(f"#{r.sequence} {role}: {extract_text(r.payload)}")


@cli.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@db_option
@json_option
def forget(session_id: str, yes: bool, db_path: str, as_json: bool) -> None:
    """Delete SESSION and everything indexed from it."""
    with run(as_json), _store(db_path, create=False) as mem:
        _require_session(mem, session_id)
        if not yes:
            click.confirm(
                f"Forget session {session_id!r} and all its memory?", abort=True, err=True
            )
        if not mem.forget(session_id):  # another process got there first
            raise NotFoundError(f"no such session: {session_id!r}", session_id=session_id)
        emit(
            {"session_id": session_id, "forgotten": True},
            as_json,
            lambda: click.echo(f"forgot {session_id}"),
        )


@cli.command("forget-user")
@click.argument("user_id", metavar="USER")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@db_option
@json_option
def forget_user(user_id: str, yes: bool, db_path: str, as_json: bool) -> None:
    """Erase everything of USER: sessions, notes, facts and their history, schedules..."""
    with run(as_json), _store(db_path, create=False) as mem:
        check_id(user_id, "user_id")
        if not yes:
            click.confirm(f"Erase all memory of user {user_id!r}?", abort=True, err=True)
        counts = mem.forget_user(user_id)
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        emit(
            {"user_id": user_id, "deleted": counts},
            as_json,
            lambda: click.echo(f"forgot user {user_id}: {summary or 'nothing stored'}"),
        )


@cli.command()
@embedder_option
@db_option
@json_option
def info(embedder: str | None, db_path: str, as_json: bool) -> None:
    """Show schema version, counts, model and index."""
    with run(as_json), _store(db_path, embedder, create=False) as mem:
        store_info = mem.info()
        emit(store_info, as_json, lambda: _print_info(store_info))


def _print_info(i: StoreInfo) -> None:
    rows = [
        ("path", i.path),
        ("schema version", i.schema_version),
        ("embedding model", f"{i.embedding_model} ({i.dimensions} dims)"),
        ("vector index", i.vector_index),
        ("sessions", i.sessions),
        ("events", i.events),
        ("chunks", i.chunks),
        ("vectors", i.vectors),
        ("size", f"{i.size_bytes} bytes"),
        *i.extra.items(),
    ]
    for key, value in rows:
        click.echo(f"{key + ':':<17}{value}")


@cli.command()
@click.option(
    "--db",
    "db_path",
    default="mindfile-demo.db",
    show_default=True,
    help="Where to write the demo store (replaced if it exists).",
)
def demo(db_path: str) -> None:
    """Store a sample conversation in a file and run a few hybrid searches."""
    from mindfile.demo import run_demo

    with run():
        run_demo(db_path, echo=click.echo)


# -- feature groups contributed by other packages ------------------------------------------

_OPTIONAL_COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mindfile.cli.schedule", ("schedule",)),
    ("mindfile.cli.memory", ("notes", "scratchpad", "facts", "summary")),
    ("mindfile.cli.jobs", ("jobs",)),
    ("mindfile.cli.cache", ("cache", "reembed")),
    ("mindfile.cli.mcp", ("mcp",)),
    ("mindfile.cli.sync", ("sync",)),
    ("mindfile.cli.serve", ("serve",)),
    ("mindfile.cli.migrate", ("migrate_store_command",)),
)


def _register_optional(
    group: click.Group, import_module: Callable[[str], Any] = importlib.import_module
) -> None:
    """Attach the optional groups whose modules exist; a module that exists but fails to
    import is a bug and is not hidden."""
    for module_name, names in _OPTIONAL_COMMANDS:
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        for name in names:
            command = getattr(module, name, None)
            if isinstance(command, click.Command):
                group.add_command(command)


_register_optional(cli)

if __name__ == "__main__":  # pragma: no cover
    main()
