"""SQLite and Postgres give the same answers to the same random store operations.

Differential property tests: hypothesis draws a sequence of operations, applies it to
the stores of both backends, and compares every answer, ordering included (``COLLATE
"C"`` on Postgres, BINARY on SQLite): facts, LLM failures and scratchpads with arbitrary
Unicode (every character both backends can hold); and the log's write path (events in
batches, chunk de-duplication, neighbour context, deletions, pins, use counts) compared
row by row. Each example works in scopes and sessions of its own, so the stores need no
reset between examples.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mindfile.embed import HashEmbedder
from mindfile.errors import ConflictError, InvalidInputError
from mindfile.index.pipeline import prepare_event
from mindfile.storage import Database, apply_migrations
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.stores import pg_stores
from mindfile.storage.stores import Stores, sqlite_stores

NOW = "2026-01-01T00:00:00.000000+00:00"

# Every code point both can store: no surrogates (not UTF-8), no NUL (not Postgres text).
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6)
SMALL = st.sampled_from(["a", "B", "b", "_", "é", "10", "9", "Ω", ""])
NAMES = st.one_of(SMALL, TEXT)

SET = st.tuples(st.just("set"), NAMES, NAMES, TEXT, st.sampled_from(["agent", "user"]))
OPS = st.lists(
    st.one_of(
        SET,
        SET,
        SET,
        st.tuples(st.just("delete"), NAMES, NAMES),
        st.tuples(st.just("erase"), NAMES, NAMES),
        st.tuples(st.just("fail"), st.sampled_from(["facts", "notes"]), TEXT, TEXT),
        st.tuples(st.just("pad"), st.lists(TEXT, max_size=3)),
        st.tuples(st.just("clear")),
    ),
    max_size=25,
)


@pytest.fixture(scope="module")
def both(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """One SQLite store and one Postgres store, migrated, for the whole module."""
    lite = Database(tmp_path_factory.mktemp("agree") / "agree.db")
    apply_migrations(lite)
    url = pg_server.fresh_url()
    pg = PgDatabase(url)
    apply_pg_migrations(pg)
    try:
        yield [(lite, sqlite_stores(lite), "?"), (pg, pg_stores(pg), "%s")]
    finally:
        lite.close()
        pg.close()
        pg_server.drop(url)


_examples = itertools.count()


def _apply(db: Any, stores: Stores, mark: str, ops: list[tuple[Any, ...]], n: int) -> list[Any]:
    scope, session = f"scope{n}", f"session{n}"
    insert = "INSERT INTO sessions (session_id, created_at, updated_at) VALUES ({0}, {0}, {0})"
    db.execute(insert.format(mark), (session, NOW, NOW))
    out: list[Any] = []
    facts, failures, states = stores.facts, stores.llm_failures, stores.session_state
    for op in ops:
        kind = op[0]
        if kind == "set":
            _, category, key, value, source = op
            with db.atomic():
                row = facts.get(scope, category, key)
                if row is None:
                    facts.insert(scope, category, key, value, source, NOW)
                else:
                    facts.archive(row.id, NOW, "updated")
                    facts.update(row.id, value, source, NOW)
        elif kind == "delete":
            row = facts.get(scope, op[1], op[2])
            if row is not None:
                with db.atomic():
                    facts.archive(row.id, NOW, "deleted")
                    facts.delete(row.id)
            out.append(row is not None)
        elif kind == "erase":
            out.append(facts.erase_history(scope, op[1], op[2]))
        elif kind == "fail":
            failures.record(
                task=op[1], reason="timeout", message=op[2], model=None, scope=scope,
                session_id=session, raw_excerpt=op[3], details={"text": op[3]}, created_at=NOW,
            )  # fmt: skip
        elif kind == "pad":
            states.write_scratchpad(session, json.dumps({"items": op[1]}), NOW)
        else:
            out.append(states.clear_scratchpad(session, NOW))
    listed = facts.list_facts(scope, None)
    out.append([(f.category, f.key, f.value, f.source) for f in listed])
    out.append(
        [[(v.value, v.reason) for v in facts.history(scope, f.category, f.key)] for f in listed]
    )
    out.append(
        [
            (f.task, f.message, f.raw_excerpt, f.details)
            for f in failures.list_failures(None, scope, 50)
        ]
    )
    out.append(states.read_scratchpad(session))
    return out


@settings(max_examples=150)
@given(ops=OPS)
@example(
    ops=[("set", c, k, "v", "user") for c in ("a", "B", "é", "_") for k in ("b", "A", "9", "10")]
)
def test_both_backends_answer_alike(both: list[Any], ops: list[tuple[Any, ...]]) -> None:
    n = next(_examples)
    lite, pg = (_apply(db, stores, mark, ops, n) for db, stores, mark in both)
    assert lite == pg


def test_what_only_postgres_refuses(both: list[Any]) -> None:
    """Postgres text cannot hold U+0000: a typed error there; SQLite stores it."""
    (_, lite_stores, _), (_, pg_stores_, _) = both
    lite_stores.facts.insert("nul", "c", "k", "a\x00b", "agent", NOW)
    assert lite_stores.facts.get("nul", "c", "k").value == "a\x00b"  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError, match="NUL"):
        pg_stores_.facts.insert("nul", "c", "k", "a\x00b", "agent", NOW)
    for _, stores, _ in both:  # lone surrogates: refused by both
        with pytest.raises(InvalidInputError, match="surrogates"):
            stores.facts.insert("bad", "c", "k", "\ud800", "agent", NOW)
        with pytest.raises(ConflictError):  # CHECK (source IN ('agent', 'user'))
            stores.facts.insert("bad", "c", "k", "v", "robot", NOW)


# -- the log's write path ----------------------------------------------------------------

WORDS = st.sampled_from(["apples", "pears", "the blue door", "apples", "x" * 700, "é ü ß"])

LOG_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 1), WORDS, st.sampled_from([None, 0.2, 0.9])),
        st.tuples(st.just("batch"), st.lists(st.tuples(st.integers(0, 1), WORDS), max_size=4)),
        st.tuples(st.just("delete"), st.integers(0, 50)),
        st.tuples(st.just("use"), st.integers(0, 50)),
        st.tuples(st.just("pin"), st.integers(0, 1), st.integers(1, 8)),
    ),
    max_size=15,
)

_EMBEDDER = HashEmbedder(16)


def _write(stores: Stores, db: Any, pairs: list[tuple[str, Any]], importance: Any) -> None:
    with db.atomic():
        nxt: dict[str, int] = {}
        events = []
        for session, text in pairs:
            seq = nxt.get(session) or stores.sessions.next_sequence(session)
            nxt[session] = seq + 1
            payload = {"role": "user", "content": text}
            events.append(prepare_event(session, seq, payload, importance=importance))
        texts = [c.text for e in events for c in e.chunks]
        vectors = _EMBEDDER.embed_documents(texts) if texts else None
        stores.sessions.write_events(events, vectors, _EMBEDDER.model_id, NOW)


def _log(db: Any, stores: Stores, mark: str, ops: list[tuple[Any, ...]], n: int) -> list[Any]:
    sessions = [f"log{n}a", f"log{n}b"]
    chunk_sql = f"SELECT id, chunk_id FROM chunks WHERE session_id IN ({mark}, {mark}) ORDER BY id"
    for op in ops:
        rows = db.query(chunk_sql, sessions)
        if op[0] == "write":
            _write(stores, db, [(sessions[op[1]], op[2])], op[3])
        elif op[0] == "batch" and op[1]:
            _write(stores, db, [(sessions[i], t) for i, t in op[1]], None)
        elif op[0] == "delete" and rows:
            stores.lifecycle.delete_chunks([int(rows[op[1] % len(rows)][0])])
        elif op[0] == "use" and rows:
            stores.marks.record_use([str(rows[op[1] % len(rows)][1])], NOW, 0.1)
        elif op[0] == "pin":
            stores.marks.set_pinned(sessions[op[1]], op[2], True)
    out: list[Any] = []
    for session in sessions:
        out.append([(r.sequence, r.payload) for r in stores.events.recent(session, None)])
        out.append(stores.events.signature(session))
        out.append(stores.sessions.next_sequence(session))
        out.append(stores.sessions.scope(session))
    detail = (
        "SELECT session_id, chunk_text, content_hash, sequence_start, sequence_end, "
        "context_before, context_after, importance, pinned, access_count "
        f"FROM chunks WHERE session_id IN ({mark}, {mark}) ORDER BY id"
    )
    out.append([tuple(r) for r in db.query(detail, sessions)])
    links = (
        "SELECT l.session_id, l.sequence, c.content_hash FROM event_chunks AS l "
        f"JOIN chunks AS c ON c.id = l.chunk_rowid WHERE l.session_id IN ({mark}, {mark}) "
        "ORDER BY l.session_id, l.sequence, c.content_hash"
    )
    out.append([tuple(r) for r in db.query(links, sessions)])
    # Expiry and quota reads, by content hash (row ids may differ: Postgres spends an
    # identity value on a rolled-back insert, SQLite does not).
    hashes = {int(r[0]): str(r[1]) for r in db.query(_HASHES.format(mark), sessions)}
    mine = set(hashes)
    out.append(
        sorted(hashes[c.rowid] for c in stores.lifecycle.managed_live(NOW) if c.rowid in mine)
    )
    scope = f"session:{sessions[0]}"
    for half_life in (None, 3600.0):
        found = stores.quotas.candidates(scope, [], NOW, half_life, limit=100, offset=0)
        out.append([(hashes[r], size) for r, size in found])
    out.append(stores.quotas.usage(scope, NOW, count_bytes=True))
    return out


_HASHES = "SELECT id, content_hash FROM chunks WHERE session_id IN ({0}, {0})"


@settings(max_examples=60)
@given(ops=LOG_OPS)
def test_both_backends_write_the_log_alike(both: list[Any], ops: list[tuple[Any, ...]]) -> None:
    n = next(_examples)
    lite, pg = (_log(db, stores, mark, ops, n) for db, stores, mark in both)
    assert lite == pg
