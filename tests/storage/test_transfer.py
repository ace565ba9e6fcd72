"""``migrate_store`` / ``mindfile migrate-store``: a store copied between backends.

Real SQLite files and the session's real Postgres (tests/pg_server.py). The source is
populated through the engine's public API (conversations with tags, metadata,
occurred_at, dedup; notes; facts with history; scratchpad and summary; a schedule
with runs; pending embedding jobs; quotas; the embedding cache; a synced folder; an
LLM failure; deletions, so id counters are above the highest id), copied SQLite ->
Postgres -> SQLite, and every table compared row for row with the original.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConflictError, LLMError, NotFoundError, StorageError
from mindfile.llm.failures import record_llm_failure
from mindfile.memory.types import SummaryState
from mindfile.retrieve import preferences
from mindfile.scheduler import RunStatus, ScheduleCadence, ScheduleRunRecord
from mindfile.storage import transfer
from mindfile.storage.db import Database
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations
from mindfile.storage.postgres.writer_lock import CHUNK_WRITER_KEY
from mindfile.storage.transfer import (
    DERIVED_COLUMNS,
    DERIVED_META,
    TABLES,
    TransferVerifyError,
    migrate_store,
)

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

QUERIES = ("where did I move?", "tomatoes in the garden", "project deadline", "pizza")


# -- a store with a bit of everything --------------------------------------------------


def populate(path: Path, folder: Path) -> None:
    """Write through the real engine: every table gets rows, some ids get deleted."""
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nThe project deadline is in March.\n")
    (folder / "todo.txt").write_text("water the tomatoes\nrepot the basil\n")
    with mindfile.open(path, embedder="hash", embedding_cache=True) as mem:
        mem.store(
            "chat-1",
            1,
            {"role": "user", "content": "I moved to Lisbon in May"},
            tags=["travel", "home"],
            metadata={"mood": "happy"},
            user_id="alice",
            channel="web",
            occurred_at="2025-05-03T10:00:00+00:00",
        )
        mem.store("chat-1", 2, {"role": "assistant", "content": "Lisbon is lovely in spring."})
        # The same text again: dedup extends the chunk (the UPDATE-linking trigger).
        mem.store("chat-1", 3, {"role": "user", "content": "I moved to Lisbon in May"})
        # A user statement (chunks.user_statement = 1 once classified, migration 0014).
        mem.store("chat-4", 1, {"role": "user", "content": "I've been learning Portuguese"})
        mem.store_many(
            [
                ("chat-2", i, {"role": "user", "content": f"day {i}: the tomatoes in the garden"})
                for i in range(1, 25)
            ],
            agent_identity="gardener",
            user_id="bob",
        )
        # Condense old spans: summary chunks linked to many events (consolidations).
        mem.consolidate(
            session_id="chat-2", similarity=None, older_than=0, now="2030-01-01T00:00:00+00:00"
        )
        mem.store_note("notes-alice", "n1", "Alice prefers window seats", tags=["travel"])
        mem.store_note("notes-alice", "n2", "Alice is allergic to peanuts")
        mem.store_note("notes-alice", "n3", "a note to delete")
        mem.delete_note("notes-alice", "n3")
        mem.set_fact("alice", "food", "likes", "pizza")
        mem.set_fact("alice", "food", "likes", "sushi", source="user")
        mem.set_fact("alice", "home", "city", "Lisbon")
        mem.set_fact("alice", "home", "old", "Porto")
        mem.delete_fact("alice", "home", "old", keep_history=True)
        mem.write_scratchpad("chat-1", ["book flights", "call mum"])
        mem.write_summary_state("chat-1", SummaryState("Alice moved to Lisbon.", 2), 0)
        mem.pin("chat-1", 2)
        mem.mark_important("chat-2", 3, 0.95)
        mem.record_use([h.chunk_id for h in mem.search("Lisbon", top_k=2)])
        mem.set_quota("user:bob", max_items=1000, max_bytes=10_000_000)
        mem.set_decay_policy(half_life=timedelta(days=30), floor=0.05)
        mem.sync(str(folder))
        record_llm_failure(
            mem,
            LLMError("model timed out", reason="timeout", model="m1", raw="partial"),
            task="summarize",
            scope="alice",
            session_id="chat-1",
        )
        schedules = mem.schedules
        digest = schedules.add(
            goal="daily digest", user_id="alice", cadence=ScheduleCadence.interval(3600), now=T0
        )
        for hour, ok in ((1, True), (2, False)):
            run = ScheduleRunRecord.build(
                schedule_id=digest.schedule_id,
                scheduled_for=schedules.get(digest.schedule_id).next_run_at,
                started_at=T0 + timedelta(hours=hour),
                finished_at=T0 + timedelta(hours=hour, seconds=5),
                status=RunStatus.SUCCEEDED if ok else RunStatus.FAILED,
                output=f"run {hour}",
            )
            schedules.record_run_and_reschedule(
                digest.schedule_id, run, T0 + timedelta(hours=hour + 1)
            )
        schedules.add(
            goal="weekly", user_id="bob", cadence=ScheduleCadence.interval(604800), now=T0
        )
        preferences.backfill(mem.db)  # flags 1 and 0; the chunks stored many below stay NULL
    # Embedding jobs still pending: chunks without vectors yet.
    with mindfile.open(path, embedder="hash", indexing="background") as mem:
        mem.store_many(  # unclassified (NULL) until a backfill
            [
                ("chat-3", 1, {"role": "user", "content": "the project deadline moved"}),
                ("chat-3", 2, {"role": "user", "content": "pizza on friday"}),
            ]
        )
        mem.store("gone", 1, {"role": "user", "content": "this session is forgotten"})
        mem.forget("gone")  # the highest chunk id: never handed out again
    # A sqlite-vec table in the file, and its bookkeeping in store_meta: derived.
    with mindfile.open(path, embedder="hash", vector_index="sqlite-vec") as mem:
        assert mem.search("Lisbon", top_k=1)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "source.db"
    populate(path, tmp_path / "folder")
    return path


# -- reading a store back ----------------------------------------------------------------


def _sqlite_rows(path: Path, table: transfer.Table) -> list[tuple[Any, ...]]:
    db = Database(path)
    try:
        cols = ", ".join("embedding_blob" if c == "embedding" else c for c in table.columns)
        return db.query(f"SELECT {cols} FROM {table.name} ORDER BY {', '.join(table.key)}")
    finally:
        db.close()


def _sqlite_scalar(path: Path, sql: str) -> Any:
    db = Database(path)
    try:
        return db.scalar(sql)
    finally:
        db.close()


def _sqlite_flags(path: Path) -> list[tuple[Any, ...]]:
    db = Database(path)
    try:
        return db.query("SELECT user_statement, count(*) FROM chunks GROUP BY 1 ORDER BY 1")
    finally:
        db.close()


def _meta(path: Path) -> dict[str, str]:
    db = Database(path)
    try:
        return dict(db.query("SELECT key, value FROM store_meta"))
    finally:
        db.close()


def _sequences(path: Path) -> dict[str, int]:
    db = Database(path)
    try:
        return dict(db.query("SELECT name, seq FROM sqlite_sequence"))
    finally:
        db.close()


def _pg_count(url: str, table: str) -> int:
    with PgDatabase(url) as db:
        return int(db.scalar(f"SELECT count(*) FROM {table}"))


def _hits(path: str | Path, **options: Any) -> list[list[tuple[str, float]]]:
    with mindfile.open(path, embedder="hash", **options) as mem:
        return [[(h.chunk_id, h.score) for h in mem.search(q, top_k=8)] for q in QUERIES]


def assert_same_hits(copy: str | Path, original: Path, **options: Any) -> None:
    """The same hits in the same order, scores equal to float32 rounding (~1e-8: the
    copy's derived indexes are built from scratch, the original's grew incrementally,
    and their float32 sums may round differently; rebuilding the original's own
    indexes moves its scores as much)."""
    ours, theirs = _hits(copy, **options), _hits(original, **options)
    assert [[c for c, _ in q] for q in ours] == [[c for c, _ in q] for q in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-6)
    assert all(ours)


def assert_same_store(original: Path, copy: Path) -> None:
    """Every copied table equal row for row; settings equal but for derived keys."""
    for table in TABLES:
        assert _sqlite_rows(copy, table) == _sqlite_rows(original, table), table.name
    kept = {k: v for k, v in _meta(original).items() if k not in DERIVED_META}
    copied = _meta(copy)
    assert {k: v for k, v in copied.items() if k != "ann_store_id"} == kept
    assert copied["ann_store_id"] != _meta(original).get("ann_store_id")
    # Id counters: at the source's high-water marks (deleted ids are not reused).
    before, after = _sequences(original), _sequences(copy)
    for table in TABLES:
        if table.counter and not table.rowid:
            assert after.get(table.name, 0) == before.get(table.name, 0), table.name
    # Derived: the FTS5 index was filled by the triggers, the change logs are empty.
    assert _sqlite_scalar(copy, "SELECT count(*) FROM chunks_fts") == _sqlite_scalar(
        copy, "SELECT count(*) FROM chunks"
    )
    assert _sqlite_scalar(copy, "SELECT count(*) FROM chunks_changes") == 0
    assert _sqlite_scalar(copy, "SELECT count(*) FROM chunks_vec_changes") == 0


# -- the list of tables is the schema's ---------------------------------------------------


def _covered(table: transfer.Table, vector_column: str) -> set[str]:
    """The table's copied columns, as a backend names them (no implicit rowid)."""
    return {vector_column if c == "embedding" else c for c in table.columns} - {"rowid"}


def test_every_table_and_column_of_both_schemas_is_copied_or_derived(
    tmp_path: Path, pg_url: str
) -> None:
    """A migration that adds a table or a column must teach migrate-store about it."""
    db = Database(tmp_path / "schema.db")
    try:
        transfer.apply_migrations(db)
        sqlite_tables = {
            str(name): {str(r[1]) for r in db.query(f"PRAGMA table_info({name})")}
            for (name,) in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(name).startswith("chunks_fts_")  # FTS5's shadow tables
        }
    finally:
        db.close()
    with PgDatabase(pg_url) as pg:
        apply_pg_migrations(pg)
        pg_tables: dict[str, set[str]] = {}
        for name, column in pg.query(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        ):
            pg_tables.setdefault(str(name), set()).add(str(column))
    copied = {t.name: t for t in TABLES}
    known = set(copied) | {"store_meta"} | set(transfer.SKIPPED)
    assert set(sqlite_tables) - known == set()
    assert set(pg_tables) - known == set()
    for name, table in copied.items():
        derived = DERIVED_COLUMNS.get(name, frozenset())
        assert sqlite_tables[name] - derived == _covered(table, "embedding_blob"), name
        pg_columns = pg_tables[name] - derived - ({"rowid"} if table.rowid else set())
        assert pg_columns == _covered(table, "embedding"), name
        if table.rowid:  # SQLite's implicit rowid is Postgres's identity column
            assert "rowid" in pg_tables[name] and "rowid" not in sqlite_tables[name]
    assert sqlite_tables["store_meta"] == pg_tables["store_meta"] == {"key", "value"}


# -- the round trip ---------------------------------------------------------------------


def test_sqlite_to_postgres_and_back(source: Path, tmp_path: Path, pg_url: str) -> None:
    seen: list[tuple[str, int, int]] = []
    report = migrate_store(
        source, pg_url, batch_size=7, progress=lambda t, d, n: seen.append((t, d, n))
    )
    assert (report.source_backend, report.destination_backend) == ("sqlite", "postgres")
    counts = {t.table: t.destination_rows for t in report.tables}
    assert [t.table for t in report.tables] == [t.name for t in TABLES] + ["store_meta"]
    for table in TABLES:
        expected = len(_sqlite_rows(source, table))
        assert counts[table.name] == expected == _pg_count(pg_url, table.name), table.name
    # Every table of interest has rows, so the comparison below means something.
    empty = {name for name, n in counts.items() if n == 0}
    assert empty == set(), empty
    assert report.seconds > 0 and report.rows == sum(counts.values())
    # Progress: each table announced, then batches of at most 7 rows, ending at the total.
    chunks = [(d, n) for t, d, n in seen if t == "chunks"]
    assert chunks[0] == (0, counts["chunks"]) and chunks[-1] == (counts["chunks"],) * 2
    assert all(b - a <= 7 for (a, _), (b, _) in itertools.pairwise(chunks))

    with PgDatabase(pg_url) as db:
        # pgvector holds the same float32 values, dimensions kept.
        dims = int(db.scalar("SELECT value FROM store_meta WHERE key = 'embedding_dims'"))
        assert db.scalar("SELECT min(vector_dims(embedding)) FROM chunks_vec") == dims
        assert db.scalar("SELECT count(*) FROM chunks_vec_changes") == 0
        # The generated full-text column is there; the identity counters are past the
        # source's high-water marks.
        assert db.scalar("SELECT count(*) FROM chunks WHERE search_tsv @@ 'lisbon'") > 0
        high = _sequences(source)["chunks"]
        assert high > int(db.scalar("SELECT max(id) FROM chunks"))  # a forgotten session
        assert (
            db.scalar(
                "SELECT pg_sequence_last_value(pg_get_serial_sequence('chunks', 'id')::regclass)"
            )
            == high
        )
        # A new session gets the next rowid, a new fact the next id.
        n_sessions = db.scalar("SELECT max(rowid) FROM sessions")
        db.execute(
            "INSERT INTO sessions (session_id, created_at, updated_at) VALUES ('new', 'x', 'x')"
        )
        assert db.scalar("SELECT rowid FROM sessions WHERE session_id = 'new'") == n_sessions + 1
        db.execute("DELETE FROM sessions WHERE session_id = 'new'")

        # The preference flags survive: unclassified, the statement and the others.
        flags = db.query("SELECT user_statement, count(*) FROM chunks GROUP BY 1")
        assert sorted(flags, key=repr) == sorted(_sqlite_flags(source), key=repr)
        assert len(flags) == 3

    back = tmp_path / "back.db"
    report = migrate_store(pg_url, back)
    assert (report.source_backend, report.destination_backend) == ("postgres", "sqlite")
    assert_same_store(source, back)
    assert_same_hits(back, source)


def test_the_postgres_copy_opens_with_the_engine(source: Path, pg_url: str) -> None:
    """mindfile.open(url) on the copy: the same embedder, memory and search hits."""
    migrate_store(source, pg_url)
    assert_same_hits(pg_url, source)
    with mindfile.open(pg_url) as mem:  # the model comes from the copied store_meta
        assert mem.embedder.model_id == _meta(source)["embedding_model"]
        assert mem.get_fact("alice", "food", "likes").value == "sushi"  # type: ignore[union-attr]
        assert [v.value for v in mem.fact_history("alice", "food", "likes")] == ["pizza"]
        assert mem.read_scratchpad("chat-1").items == ("book flights", "call mum")  # type: ignore[union-attr]
        assert mem.read_summary_state("chat-1").summary == "Alice moved to Lisbon."  # type: ignore[union-attr]
        assert {n.note_id for n in mem.list_notes("notes-alice")} == {"n1", "n2"}
        assert mem.get_quota("user:bob").max_items == 1000  # type: ignore[union-attr]
        pending = "SELECT count(*) FROM memory_jobs WHERE status = 'pending'"
        assert mem.job_status().pending == _sqlite_scalar(source, pending) > 0
        # Writes continue above the copied ids (the identity sequences were set).
        mem.store("chat-1", 4, {"role": "user", "content": "a message written on Postgres"})
        assert mem.search("written on Postgres", top_k=1)[0].session_id == "chat-1"
    with PgDatabase(pg_url) as db:
        newest = db.scalar("SELECT max(id) FROM chunks")
    assert newest > _sequences(source)["chunks"]


def test_sqlite_to_sqlite(source: Path, tmp_path: Path) -> None:
    copy = tmp_path / "sub" / "copy.db"
    report = migrate_store(str(source), str(copy), batch_size=5)
    assert report.destination_backend == "sqlite"
    assert_same_store(source, copy)
    assert_same_hits(copy, source)
    assert_same_hits(copy, source, vector_index="sqlite-vec", lexical_index="fts5")
    assert "sqlite_vec_dims" in _meta(source)
    # The copy is a working store: writes continue above the copied ids.
    with mindfile.open(copy, embedder="hash") as mem:
        mem.store("chat-1", 4, {"role": "user", "content": "a new message after the move"})
        assert mem.search("new message after the move", top_k=1)[0].session_id == "chat-1"
        assert mem.get_fact("alice", "food", "likes").value == "sushi"  # type: ignore[union-attr]
        assert len(mem.fact_history("alice", "food", "likes")) == 1
        assert mem.read_scratchpad("chat-1").items == ("book flights", "call mum")  # type: ignore[union-attr]
    assert _sequences(copy)["chunks"] > _sequences(source)["chunks"]


def test_counters_of_emptied_tables_survive_both_ways(tmp_path: Path, pg_url: str) -> None:
    """A table whose rows were all deleted still remembers its highest id."""
    path = tmp_path / "emptied.db"
    with mindfile.open(path, embedder="hash") as mem:
        mem.store("s", 1, {"role": "user", "content": "hello"})
        for i in range(3):
            mem.set_fact("u", "c", f"k{i}", "v")
            mem.delete_fact("u", "c", f"k{i}")
    facts = next(t for t in TABLES if t.name == "facts")
    assert _sequences(path)["facts"] == 3 and not _sqlite_rows(path, facts)
    migrate_store(path, pg_url)
    with PgDatabase(pg_url) as db:
        assert (
            db.scalar(
                "SELECT pg_sequence_last_value(pg_get_serial_sequence('facts', 'id')::regclass)"
            )
            == 3
        )
    back = tmp_path / "back.db"
    migrate_store(pg_url, back)
    assert _sequences(back)["facts"] == 3
    with mindfile.open(back, embedder="hash") as mem:
        mem.set_fact("u", "c", "k9", "v")
    assert _sqlite_scalar(back, "SELECT id FROM facts") == 4  # not a reused id


def test_postgres_to_postgres(source: Path, pg_server: Any) -> None:
    first, second = pg_server.fresh_url(), pg_server.fresh_url()
    try:
        migrate_store(source, first)
        report = migrate_store(first, second, batch_size=3)
        for t in report.tables[:-1]:
            assert t.destination_rows == _pg_count(first, t.table) == _pg_count(second, t.table)
    finally:
        pg_server.drop(first)
        pg_server.drop(second)


# -- refusals ------------------------------------------------------------------------------


def _dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    out = {t.name: _sqlite_rows(path, t) for t in TABLES}
    out["store_meta"] = sorted(_meta(path).items())
    return out


def test_a_destination_with_data_is_refused_and_unchanged(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "busy.db"
    with mindfile.open(dest, embedder="hash") as mem:
        mem.store("mine", 1, {"role": "user", "content": "already here"})
    before = _dump(dest)
    with pytest.raises(ConflictError) as caught:
        migrate_store(source, dest)
    assert caught.value.code == "conflict"
    assert "not empty" in caught.value.message and "sessions" in caught.value.message
    assert _dump(dest) == before


def test_a_postgres_destination_with_data_is_refused(source: Path, pg_url: str) -> None:
    with PgDatabase(pg_url) as db:
        apply_pg_migrations(db)
        db.execute("INSERT INTO quotas (scope, created_at, updated_at) VALUES ('x', 'a', 'a')")
    with pytest.raises(ConflictError):
        migrate_store(source, pg_url)
    assert _pg_count(pg_url, "sessions") == 0 and _pg_count(pg_url, "quotas") == 1


def test_the_postgres_destination_is_locked_against_writers_during_the_copy(
    source: Path, pg_url: str
) -> None:
    """Another writer cannot slip a row in between the emptiness check and the commit."""
    import psycopg

    outcomes: list[str] = []

    def probe(table: str, done: int, total: int) -> None:
        if table != "chunks" or done != 0:
            return
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '200ms'")
            try:
                conn.execute(
                    "INSERT INTO quotas (scope, created_at, updated_at) VALUES ('x', 'a', 'a')"
                )
                outcomes.append("written")
            except psycopg.errors.LockNotAvailable:
                outcomes.append("blocked")
            # Readers are not blocked (they see the empty, committed state).
            outcomes.append(str(conn.execute("SELECT count(*) FROM sessions").fetchone()))
            # The chunk writers' lock is held too (taken first, as every writer does).
            free = conn.execute("SELECT pg_try_advisory_lock(%s)", (CHUNK_WRITER_KEY,))
            outcomes.append(str(free.fetchone()))

    migrate_store(source, pg_url, progress=probe)
    assert outcomes == ["blocked", "(0,)", "(False,)"]
    assert _pg_count(pg_url, "quotas") == 1  # the source's


def test_an_opened_but_empty_destination_is_accepted(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "opened.db"
    with mindfile.open(dest, embedder="hash") as mem:
        mem.search("anything")  # binds the model, makes a store id
    migrate_store(source, dest)
    assert_same_store(source, dest)


def test_a_destination_bound_to_another_model_is_refused(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "other-model.db"
    with mindfile.open(dest, embedder="hash:64"):
        pass
    with pytest.raises(ConflictError, match="embedding_model"):
        migrate_store(source, dest)


def test_a_missing_source_is_not_found_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        migrate_store(tmp_path / "nope.db", tmp_path / "dest.db")
    assert not (tmp_path / "nope.db").exists() and not (tmp_path / "dest.db").exists()


def test_a_source_without_a_store_is_not_found(tmp_path: Path, pg_url: str) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(NotFoundError):
        migrate_store(empty, tmp_path / "dest.db")
    with pytest.raises(NotFoundError):  # a database without Mindfile's schema
        migrate_store(pg_url, tmp_path / "dest.db")
    with PgDatabase(pg_url) as db:  # and it was not given one
        assert db.scalar("SELECT to_regclass('memory_migrations')") is None
    assert not (tmp_path / "dest.db").exists()


def test_the_same_store_twice_is_refused(source: Path) -> None:
    with pytest.raises(mindfile.InvalidInputError):
        migrate_store(source, str(source))


# -- failures roll the whole copy back --------------------------------------------------------


def _sqlite_empty(path: Path) -> None:
    for table in [*TABLES]:
        assert _sqlite_rows(path, table) == [], table.name
    assert _meta(path) == {}
    assert _sqlite_scalar(path, "SELECT count(*) FROM chunks_fts") == 0


def test_a_row_the_sqlite_destination_rejects_leaves_it_empty(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "trap.db"
    db = Database(dest)
    try:
        transfer.apply_migrations(db)
        # Facts come after sessions, events, chunks, vectors and links.
        db.execute(
            "CREATE TRIGGER trap BEFORE INSERT ON facts WHEN new.value = 'Lisbon' "
            "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )
    finally:
        db.close()
    with pytest.raises(ConflictError, match="injected failure") as caught:
        migrate_store(source, dest, batch_size=4)
    assert caught.value.message.startswith("facts: ")  # the table it happened in
    assert caught.value.details["table"] == "facts"
    _sqlite_empty(dest)


def test_a_row_the_postgres_destination_rejects_leaves_it_empty(source: Path, pg_url: str) -> None:
    with PgDatabase(pg_url) as db:
        apply_pg_migrations(db)
        db.execute(
            """
            CREATE FUNCTION trap() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.status = 'failed' THEN RAISE EXCEPTION 'injected failure'; END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER trap BEFORE INSERT ON schedule_runs
            FOR EACH ROW EXECUTE FUNCTION trap();
            """
        )
    with pytest.raises(StorageError, match="injected failure"):
        migrate_store(source, pg_url, batch_size=4)
    for table in [*TABLES, transfer.Table("store_meta", ("key",), ("key",))]:
        assert _pg_count(pg_url, table.name) == 0, table.name


def test_a_value_postgres_cannot_hold_is_one_line_and_leaves_it_empty(
    source: Path, pg_url: str
) -> None:
    """SQLite's dynamic types let a bad value in (text in an INTEGER column); Postgres
    refuses it: a typed error naming the table, exit code 2, nothing committed."""
    db = Database(source)
    try:
        db.execute("UPDATE quotas SET max_items = 'lots'")
    finally:
        db.close()
    with pytest.raises(mindfile.InvalidInputError) as caught:
        migrate_store(source, pg_url)
    assert caught.value.message.startswith("quotas: a value the store cannot hold")
    for table in TABLES:
        assert _pg_count(pg_url, table.name) == 0, table.name
    result = CliRunner().invoke(cli, ["migrate-store", str(source), pg_url])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error [invalid_input]: quotas: ")


def test_a_verification_failure_rolls_back(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that silently drops a row (the seam faked): counts differ, no commit."""
    real = transfer._SqliteSide.write_batch

    def lossy(self: Any, table: transfer.Table, rows: list[Any]) -> None:
        real(self, table, rows[:-1] if table.name == "notes" else rows)

    monkeypatch.setattr(transfer._SqliteSide, "write_batch", lossy)
    dest = tmp_path / "lossy.db"
    with pytest.raises(TransferVerifyError) as caught:
        migrate_store(source, dest)
    assert caught.value.code == "transfer_verify"
    assert caught.value.details["table"] == "notes"
    _sqlite_empty(dest)


# -- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def runner() -> Iterator[CliRunner]:
    yield CliRunner()


def test_cli_migrate_store(source: Path, tmp_path: Path, pg_url: str, runner: CliRunner) -> None:
    result = runner.invoke(cli, ["migrate-store", str(source), pg_url, "--batch-size", "10"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    n_chunks = _pg_count(pg_url, "chunks")
    progress = result.stderr.splitlines()  # per-table progress, on stderr
    assert f"chunks: 0/{n_chunks}" in progress
    assert f"chunks: {n_chunks}/{n_chunks}" in progress
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"copied {source} (sqlite) -> ") and "(postgres)" in lines[0]
    chunks = next(line.split() for line in lines if line.startswith("chunks "))
    assert chunks[1] == chunks[2] == str(_pg_count(pg_url, "chunks"))
    assert "verified" in lines[-1]

    back = tmp_path / "back.db"
    result = runner.invoke(cli, ["migrate-store", pg_url, str(back), "--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    assert data["destination_backend"] == "sqlite"
    assert {t["table"] for t in data["tables"]} >= {"chunks", "store_meta"}
    assert all(t["source_rows"] == t["destination_rows"] for t in data["tables"])
    assert_same_store(source, back)

    # Into a store that is not empty: one line, the conflict exit code.
    result = runner.invoke(cli, ["migrate-store", str(source), str(back)])
    assert result.exit_code == 5
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error [conflict]: "), result.stderr
    result = runner.invoke(cli, ["migrate-store", str(tmp_path / "nope.db"), "x.db", "--json"])
    assert result.exit_code == 4 and json.loads(result.stdout)["error"] == "not_found"


def test_cli_never_shows_the_password(source: Path, pg_url: str, runner: CliRunner) -> None:
    # The test server trusts its socket, so a password in the URL is accepted and unused.
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@", 1)
    assert url != pg_url
    for args in (["migrate-store", str(source), url], ["migrate-store", str(source), url]):
        result = runner.invoke(cli, args)  # the second one is refused: not empty
        assert "s3cret" not in result.stdout + result.stderr
        assert "postgres:***@" in result.stdout + result.stderr
    assert result.exit_code == 5


def test_cli_migrate_store_subprocess(source: Path, tmp_path: Path) -> None:
    """The installed entry point end to end (a subprocess, the worktree's source)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    src = Path(transfer.__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    copy = tmp_path / "copy.db"
    done = subprocess.run(
        [sys.executable, "-m", "mindfile", "migrate-store", str(source), str(copy), "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "verified" in done.stdout
    assert_same_store(source, copy)
