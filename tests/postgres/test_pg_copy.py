"""``PgDatabase.copy_rows`` (binary ``COPY FROM STDIN`` with INSERT's semantics) and
``query(binary=True)``.

What migrate-store relies on (mindfile.storage.transfer): given values for identity
columns are kept (even ``GENERATED ALWAYS``), triggers fire, generated columns are
computed, vectors and bytes arrive bit for bit, a value of the wrong type is a typed
error, and the load is part of the surrounding transaction.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from mindfile.errors import InvalidInputError
from mindfile.storage.postgres import PgDatabase, apply_pg_migrations

NOW = "2026-01-01T00:00:00.000000+00:00"

SESSION = ("rowid", "session_id", "created_at", "updated_at")
EVENT = ("session_id", "sequence", "payload_json", "created_at")
CHUNK = (
    "id",
    "chunk_id",
    "session_id",
    "chunk_text",
    "content_hash",
    "sequence_start",
    "sequence_end",
    "created_at",
)


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    with PgDatabase(pg_url) as opened:
        apply_pg_migrations(opened)
        yield opened


def test_ids_triggers_generated_columns_and_vectors(db: PgDatabase) -> None:
    vector = np.array([0.1, -0.25, 1e-7, 3.0], dtype=np.float32)
    with db.atomic():
        assert db.copy_rows("sessions", SESSION, [(41, "s", NOW, NOW)]) == 1
        db.copy_rows("conversation_events", EVENT, [("s", 7, "{}", NOW)])
        db.copy_rows("chunks", CHUNK, [(900, "c1", "s", "lisbon in may", "h", 7, 7, NOW)])
        db.copy_rows(
            "chunks_vec", ("chunk_rowid", "embedding", "embedding_model"), [(900, vector, "m")]
        )
        db.copy_rows(
            "embedding_cache",
            ("model_id", "text_hash", "embedding_blob", "created_at", "last_used_at"),
            [("m", "t", b"\x00\x01\xff", NOW, NOW)],
        )
    # GENERATED ALWAYS (sessions.rowid) and BY DEFAULT (chunks.id) keep the given ids.
    assert db.scalar("SELECT rowid FROM sessions") == 41
    assert db.scalar("SELECT id FROM chunks") == 900
    # The linking trigger fired; the generated tsvector was computed.
    assert db.query("SELECT session_id, sequence, chunk_rowid FROM event_chunks") == [("s", 7, 900)]
    assert db.scalar("SELECT search_tsv @@ to_tsquery('english', 'lisbon') FROM chunks") is True
    assert db.scalar("SELECT count(*) FROM chunks_vec_changes") == 1
    stored = db.scalar("SELECT embedding FROM chunks_vec")
    assert np.asarray(stored.to_numpy(), dtype=np.float32).tobytes() == vector.tobytes()
    assert bytes(db.scalar("SELECT embedding_blob FROM embedding_cache")) == b"\x00\x01\xff"
    # The same values read in binary format (what migrate-store reads with).
    [(embedding, text, rowid, blob)] = db.query(
        "SELECT v.embedding, c.chunk_text, c.id, e.embedding_blob "
        "FROM chunks_vec AS v JOIN chunks AS c ON c.id = v.chunk_rowid, embedding_cache AS e",
        binary=True,
    )
    assert np.asarray(embedding.to_numpy(), dtype=np.float32).tobytes() == vector.tobytes()
    assert (text, rowid, bytes(blob)) == ("lisbon in may", 900, b"\x00\x01\xff")


@pytest.mark.parametrize("bad", [1.5, "12", 2**70])
def test_a_value_of_the_wrong_type_is_invalid_input_and_rolls_back(
    db: PgDatabase, bad: object
) -> None:
    columns = ("scope", "max_items", "created_at", "updated_at")
    with pytest.raises(InvalidInputError, match="cannot hold"), db.atomic():
        db.copy_rows("quotas", columns, [("ok", 1, NOW, NOW)])
        db.copy_rows("quotas", columns, [("bad", bad, NOW, NOW)])
    assert db.scalar("SELECT count(*) FROM quotas") == 0


def test_text_postgres_cannot_hold_is_invalid_input(db: PgDatabase) -> None:
    columns = ("scope", "created_at", "updated_at")
    with pytest.raises(InvalidInputError):
        db.copy_rows("quotas", columns, [("a\x00b", NOW, NOW)])
    assert db.scalar("SELECT count(*) FROM quotas") == 0


def test_an_unknown_column_is_invalid_input(db: PgDatabase) -> None:
    with pytest.raises(InvalidInputError, match="quotas has no column nope"):
        db.copy_rows("quotas", ("scope", "nope"), [("a", 1)])
