"""``mindfile notes|scratchpad|facts|summary``: agent memory from the command line.

Notes and facts belong to a user (``--user``, env ``MINDFILE_USER``, default
``default``): notes live in the session ``memory:{user}``, facts in scope ``{user}``.
The scratchpad and summaries belong to a conversation session, given as an argument.
Every command takes ``--db`` and ``--json``; read-only commands never create a store.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click

import mindfile
from mindfile.cli._common import db_option, embedder_option, emit, json_option, missing_file, run
from mindfile.engine import Mindfile
from mindfile.errors import InvalidInputError, NotFoundError
from mindfile.memory import Fact, FactSource, Note, notes_session

__all__ = ["facts", "notes", "scratchpad", "summary"]

F = TypeVar("F", bound=Callable[..., Any])


def user_option(func: F) -> F:
    """``--user ID`` (env ``MINDFILE_USER``, default ``default``)."""
    return click.option(
        "--user",
        "user_id",
        envvar="MINDFILE_USER",
        default="default",
        show_default=True,
        help="Whose notes and facts (env MINDFILE_USER).",
    )(func)


@contextmanager
def _store(db_path: str, embedder: str | None = None, *, create: bool = True) -> Iterator[Mindfile]:
    if not create and missing_file(db_path):
        raise NotFoundError(f"no memory store at {db_path!r}", path=db_path)
    with mindfile.open(db_path, embedder=embedder) as mem:
        yield mem


T = TypeVar("T")


def _each(items: Sequence[T], show: Callable[[T], None], empty: str) -> Callable[[], None]:
    """A printer for ``emit``: ``show`` each item, or ``empty`` when there are none."""

    def human() -> None:
        for item in items:
            show(item)
        if not items:
            click.echo(empty)

    return human


def _print_item(item: str) -> None:
    click.echo(f"- {item}")


def _print_note(note: Note) -> None:
    tags = f"  [{', '.join(note.tags)}]" if note.tags else ""
    click.echo(f"{note.note_id}{tags}  (updated {note.updated_at})")
    click.echo(f"  {note.content}")


def _print_fact(fact: Fact) -> None:
    click.echo(f"{fact.category} / {fact.key}: {fact.value}  ({fact.source}, {fact.updated_at})")


# -- notes --------------------------------------------------------------------------------


@click.group()
def notes() -> None:
    """Explicit long-term notes of a user."""


@notes.command("add")
@click.argument("content", required=False)
@click.option("--id", "note_id", help="Note id (default: a new note-{uuid}).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable; at most 16).")
@click.option("--source", help="Provenance, e.g. the tool or person that wrote it.")
@user_option
@embedder_option
@db_option
@json_option
def notes_add(
    content: str | None,
    note_id: str | None,
    tags: tuple[str, ...],
    source: str | None,
    user_id: str,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Store a note (CONTENT, or stdin when omitted or '-'); an existing --id is replaced."""
    with run(as_json):
        text = sys.stdin.read() if content is None or content == "-" else content
        with _store(db_path, embedder) as mem:
            note = mem.store_note(
                notes_session(user_id),
                note_id or f"note-{uuid.uuid4()}",
                text,
                source=source,
                tags=list(tags),
            )
        emit(note, as_json, lambda: click.echo(f"saved {note.note_id}"))


@notes.command("list")
@click.option("--tag", "tags", multiple=True, help="Only notes with this tag (repeatable).")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--offset", type=int, default=0, show_default=True)
@user_option
@db_option
@json_option
def notes_list(
    tags: tuple[str, ...], limit: int, offset: int, user_id: str, db_path: str, as_json: bool
) -> None:
    """List notes, most recently written first."""
    with run(as_json), _store(db_path, create=False) as mem:
        found = mem.list_notes(notes_session(user_id), tags=list(tags), limit=limit, offset=offset)
        emit(found, as_json, _each(found, _print_note, "no notes"))


@notes.command("get")
@click.argument("note_id")
@user_option
@db_option
@json_option
def notes_get(note_id: str, user_id: str, db_path: str, as_json: bool) -> None:
    """Show one note."""
    with run(as_json), _store(db_path, create=False) as mem:
        note = mem.get_note(notes_session(user_id), note_id)
        if note is None:
            raise NotFoundError(f"no note {note_id!r} for user {user_id!r}", note_id=note_id)
        emit(note, as_json, lambda: _print_note(note))


@notes.command("update")
@click.argument("note_id")
@click.option("--content", help="New content ('-' reads stdin).")
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeatable).")
@click.option("--clear-tags", is_flag=True, help="Remove every tag.")
@click.option("--source", help="New provenance.")
@user_option
@embedder_option
@db_option
@json_option
def notes_update(
    note_id: str,
    content: str | None,
    tags: tuple[str, ...],
    clear_tags: bool,
    source: str | None,
    user_id: str,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Change a note's content, tags or source, keeping its id and creation time."""
    with run(as_json):
        if clear_tags and tags:
            raise InvalidInputError("give --tag or --clear-tags, not both")
        new_tags = [] if clear_tags else (list(tags) if tags else None)
        text = sys.stdin.read() if content == "-" else content
        with _store(db_path, embedder, create=False) as mem:
            note = mem.update_note(
                notes_session(user_id), note_id, content=text, source=source, tags=new_tags
            )
        emit(note, as_json, lambda: click.echo(f"updated {note.note_id}"))


@notes.command("delete")
@click.argument("note_id")
@user_option
@db_option
@json_option
def notes_delete(note_id: str, user_id: str, db_path: str, as_json: bool) -> None:
    """Delete a note and everything indexed from it."""
    with run(as_json), _store(db_path, create=False) as mem:
        if not mem.delete_note(notes_session(user_id), note_id):
            raise NotFoundError(f"no note {note_id!r} for user {user_id!r}", note_id=note_id)
        emit({"note_id": note_id, "deleted": True}, as_json, lambda: click.echo("deleted"))


@notes.command("search")
@click.argument("query")
@click.option("--tag", "tags", multiple=True, help="Only notes with this tag (repeatable).")
@click.option("--top-k", type=int, default=10, show_default=True)
@click.option("--no-facts", is_flag=True, help="Search notes only, not facts.")
@user_option
@embedder_option
@db_option
@json_option
def notes_search(
    query: str,
    tags: tuple[str, ...],
    top_k: int,
    no_facts: bool,
    user_id: str,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Hybrid search over the user's notes (and facts)."""
    with run(as_json), _store(db_path, embedder, create=False) as mem:
        hits = mem.search_notes(
            notes_session(user_id),
            query,
            tags=list(tags),
            top_k=top_k,
            facts_scope=None if no_facts else user_id,
        )

        def human() -> None:
            for h in hits:
                label = h.note_id if h.kind == "note" else f"fact {h.category}/{h.key}"
                click.echo(f"{h.score:.3f}  {label}  {h.text}")
            if not hits:
                click.echo("no results")

        emit(hits, as_json, human)


# -- scratchpad ---------------------------------------------------------------------------


@click.group()
def scratchpad() -> None:
    """A session's working-memory scratchpad (32 items of 240 characters at most)."""


@scratchpad.command("show")
@click.argument("session_id")
@db_option
@json_option
def scratchpad_show(session_id: str, db_path: str, as_json: bool) -> None:
    """Print the scratchpad (empty if never written)."""
    with run(as_json), _store(db_path, create=False) as mem:
        pad = mem.read_scratchpad(session_id)
        items = [] if pad is None else list(pad.items)
        data = {"session_id": session_id, "items": items, "updated_at": pad and pad.updated_at}
        emit(data, as_json, _each(items, _print_item, "empty"))


@scratchpad.command("write")
@click.argument("session_id")
@click.argument("items", nargs=-1)
@db_option
@json_option
def scratchpad_write(session_id: str, items: tuple[str, ...], db_path: str, as_json: bool) -> None:
    """Replace the scratchpad with ITEMS."""
    with run(as_json), _store(db_path) as mem:
        pad = mem.write_scratchpad(session_id, list(items))
        emit(pad, as_json, lambda: click.echo(f"{len(pad.items)} items"))


@scratchpad.command("clear")
@click.argument("session_id")
@db_option
@json_option
def scratchpad_clear(session_id: str, db_path: str, as_json: bool) -> None:
    """Remove the scratchpad."""
    with run(as_json), _store(db_path, create=False) as mem:
        cleared = mem.clear_scratchpad(session_id)
        emit(
            {"session_id": session_id, "cleared": cleared},
            as_json,
            lambda: click.echo("cleared" if cleared else "no scratchpad"),
        )


# -- facts --------------------------------------------------------------------------------


@click.group()
def facts() -> None:
    """Key/value facts of a user, with history."""


@facts.command("set")
@click.argument("category")
@click.argument("key")
@click.argument("value")
@click.option("--source", type=click.Choice(["user", "agent"]), default="user", show_default=True)
@user_option
@embedder_option
@db_option
@json_option
def facts_set(
    category: str,
    key: str,
    value: str,
    source: str,
    user_id: str,
    embedder: str | None,
    db_path: str,
    as_json: bool,
) -> None:
    """Set a fact; the previous value is kept in its history."""
    with run(as_json), _store(db_path, embedder) as mem:
        src: FactSource = "agent" if source == "agent" else "user"
        fact = mem.set_fact(user_id, category, key, value, source=src)
        emit(fact, as_json, lambda: _print_fact(fact))


@facts.command("get")
@click.argument("category")
@click.argument("key")
@click.option("--history", is_flag=True, help="Also print earlier values.")
@user_option
@db_option
@json_option
def facts_get(
    category: str, key: str, history: bool, user_id: str, db_path: str, as_json: bool
) -> None:
    """Show one fact."""
    with run(as_json), _store(db_path, create=False) as mem:
        fact = mem.get_fact(user_id, category, key)
        if fact is None:
            raise NotFoundError(f"no fact {category!r}/{key!r} for user {user_id!r}")
        versions = mem.fact_history(user_id, category, key) if history else []
        data: dict[str, Any] = fact.to_dict()
        if history:
            data["history"] = [v.to_dict() for v in versions]

        def human() -> None:
            _print_fact(fact)
            for v in versions:
                click.echo(f"  was: {v.value}  ({v.source}, until {v.superseded_at})")

        emit(data, as_json, human)


@facts.command("list")
@click.option("--category", help="Only this category.")
@user_option
@db_option
@json_option
def facts_list(category: str | None, user_id: str, db_path: str, as_json: bool) -> None:
    """List facts by category and key."""
    with run(as_json), _store(db_path, create=False) as mem:
        found = mem.list_facts(user_id, category=category)
        emit(found, as_json, _each(found, _print_fact, "no facts"))


@facts.command("history")
@click.argument("category")
@click.argument("key")
@user_option
@db_option
@json_option
def facts_history(category: str, key: str, user_id: str, db_path: str, as_json: bool) -> None:
    """Earlier values of a fact, most recently superseded first."""
    with run(as_json), _store(db_path, create=False) as mem:
        versions = mem.fact_history(user_id, category, key)

        def human() -> None:
            for v in versions:
                click.echo(f"{v.superseded_at}  {v.reason:<7}  {v.value}  ({v.source})")
            if not versions:
                click.echo("no history")

        emit(versions, as_json, human)


@facts.command("delete")
@click.argument("category")
@click.argument("key")
@click.option("--keep-history", is_flag=True, help="Retire: keep the value in the fact's history.")
@user_option
@db_option
@json_option
def facts_delete(
    category: str, key: str, keep_history: bool, user_id: str, db_path: str, as_json: bool
) -> None:
    """Delete a fact and its history (--keep-history retires it instead)."""
    with run(as_json), _store(db_path, create=False) as mem:
        if not mem.delete_fact(user_id, category, key, keep_history=keep_history):
            raise NotFoundError(f"no fact {category!r}/{key!r} for user {user_id!r}")
        emit(
            {"category": category, "key": key, "deleted": True},
            as_json,
            lambda: click.echo("deleted"),
        )


# -- summary ------------------------------------------------------------------------------


@click.group()
def summary() -> None:
    """A session's rolling summary."""


@summary.command("show")
@click.argument("session_id")
@db_option
@json_option
def summary_show(session_id: str, db_path: str, as_json: bool) -> None:
    """Print the rolling summary state (summary, epoch, upper sequence)."""
    with run(as_json), _store(db_path, create=False) as mem:
        state = mem.read_summary_state(session_id)
        if state is None:
            raise NotFoundError(f"session {session_id!r} has no summary", session_id=session_id)

        def human() -> None:
            click.echo(f"epoch {state.epoch}, covers up to #{state.upper_sequence}")
            click.echo(state.summary)

        emit(state, as_json, human)


@summary.command("run")
@click.argument("session_id")
@click.option("--budget", type=int, required=True, help="Token budget of the prompt.")
@embedder_option
@db_option
@json_option
def summary_run(
    session_id: str, budget: int, embedder: str | None, db_path: str, as_json: bool
) -> None:
    """Summarize the session if it is over budget, and print the resulting context."""
    with run(as_json), _store(db_path, embedder, create=False) as mem:
        ctx = mem.summarize(session_id, budget)

        def human() -> None:
            click.echo(
                f"condensed {ctx.condensed} messages ({ctx.outcome.replace('_', ' ')}); "
                f"context {ctx.tokens}/{budget} tokens, "
                f"{len(ctx.messages)} messages, epoch {ctx.epoch}"
            )

        emit(ctx, as_json, human)
