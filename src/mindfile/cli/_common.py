"""Shared CLI plumbing: the ``--db``/``--json`` options, output, and error mapping.

Every command body runs inside :func:`run`, which turns an :class:`MindfileError` into a
one-line message on stderr (or a JSON error object with ``--json``) and the error's own
exit code, so no user ever sees a traceback for bad input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from mindfile.errors import MindfileError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DB = "mindfile.db"


def db_option(func: F) -> F:
    """``--db PATH`` (env ``MINDFILE_DB``, default ``./mindfile.db``)."""
    return click.option(
        "--db",
        "db_path",
        envvar="MINDFILE_DB",
        default=DEFAULT_DB,
        show_default=True,
        help="The memory store: a SQLite file, or a postgresql:// URL (env MINDFILE_DB).",
    )(func)


def missing_file(db_path: str) -> bool:
    """Whether ``db_path`` names a store file that does not exist (a ``postgresql://``
    URL or ``:memory:`` is never missing: ``mindfile.open`` says what is wrong with it,
    without showing a password)."""
    if db_path in (":memory:", "") or "://" in db_path:
        return False
    return not Path(db_path).exists()


def json_option(func: F) -> F:
    """``--json``: machine-readable output."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


def embedder_option(func: F) -> F:
    """``--embedder NAME`` (env ``MINDFILE_EMBEDDER``; default: what the store was made with)."""
    return click.option(
        "--embedder",
        envvar="MINDFILE_EMBEDDER",
        default=None,
        help="Embedder spec (default: the store's own, else the bundled static model).",
    )(func)


def rerank_option(func: F) -> F:
    """``--rerank-llm``: rerank searches with the LLM of the ``MINDFILE_LLM_*`` variables."""
    return click.option(
        "--rerank-llm",
        "rerank_llm",
        is_flag=True,
        help=(
            "Rerank each search's first 50 hits with the chat model of MINDFILE_LLM_BASE_URL"
            " and MINDFILE_LLM_MODEL (needs the llm extra; docs/retrieval.md 'Reranking')."
        ),
    )(func)


@contextmanager
def llm_reranker_from_env(wanted: bool) -> Iterator[Any]:
    """The ``--rerank-llm`` reranker (None when not wanted); its client is closed after.
    Missing variables are a :class:`~mindfile.errors.ConfigError`."""
    if not wanted:
        yield None
        return
    from mindfile.llm import OpenAICompatibleClient, llm_reranker

    client = OpenAICompatibleClient.from_env()
    try:
        yield llm_reranker(client)
    finally:
        client.close()


def emit(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """Print ``data`` as JSON, or call ``human`` to print it for people."""
    if as_json or human is None:
        click.echo(json.dumps(to_jsonable(data), ensure_ascii=False, indent=2))
    else:
        human()


def to_jsonable(data: Any) -> Any:
    if hasattr(data, "to_dict"):
        return data.to_dict()
    if isinstance(data, list | tuple):
        return [to_jsonable(x) for x in data]
    if isinstance(data, dict):
        return {k: to_jsonable(v) for k, v in data.items()}
    return data


@contextmanager
def run(as_json: bool = False) -> Iterator[None]:
    """Map Mindfile errors to a one-line message (or JSON) and the error's exit code."""
    try:
        yield
    except MindfileError as exc:
        if as_json:
            click.echo(json.dumps(exc.to_dict(), ensure_ascii=False))
        else:
            click.echo(f"error [{exc.code}]: {exc.message}", err=True)
        sys.exit(exc.exit_code)


def parse_json_arg(text: str, what: str) -> Any:
    """Parse a JSON command-line argument, or fail with a clear message."""
    from mindfile.errors import InvalidInputError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} is not valid JSON: {exc.msg}") from exc
