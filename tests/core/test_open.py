"""Opening stores: the embedding model is bound to the store; bad options fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

import mindfile
from mindfile.errors import ConfigError, StorageError

from ._support import TableEmbedder


def test_model_is_recorded_on_first_open(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        meta = dict(mem.db.query("SELECT key, value FROM store_meta"))
    assert meta["embedding_model"] == "hash-blake3-256"
    assert meta["embedding_dims"] == "256"


def test_reopening_with_another_model_is_refused(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        mem.store("s", 1, "hello")
    with pytest.raises(ConfigError, match="hash-blake3-256"):
        mindfile.open(db_path, embedder="static")
    with pytest.raises(ConfigError):
        mindfile.open(db_path, embedder="hash:128")  # same family, other dimensions


def test_reopening_without_an_embedder_uses_the_stores_own(db_path: Path) -> None:
    with mindfile.open(db_path, embedder="hash") as mem:
        mem.store("s", 1, "hello there")
    with mindfile.open(db_path) as mem:
        assert mem.embedder.model_id == "hash-blake3-256"
        assert mem.search("hello there", mode="vector")[0].breakdown.vector == pytest.approx(1)


def test_new_store_defaults_to_the_bundled_model(mem_static: mindfile.Mindfile) -> None:
    assert mem_static.embedder.model_id == mindfile.StaticEmbedder().model_id
    assert mem_static.info().dimensions == mem_static.embedder.dimensions


def test_custom_model_must_be_passed_again(db_path: Path) -> None:
    mindfile.open(db_path, embedder=TableEmbedder({})).close()
    with pytest.raises(ConfigError, match="test-table-3"):
        mindfile.open(db_path)
    mindfile.open(db_path, embedder=TableEmbedder({})).close()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"embedder": "nonsense"}, ConfigError),
        ({"embedder": "hash:x"}, ConfigError),
        ({"embedder": 42}, ConfigError),
        ({"vector_index": "faiss"}, ConfigError),
        ({"chunk_max_chars": 4}, ConfigError),
        ({"chunk_overlap": 400}, ConfigError),
    ],
)
def test_bad_options(db_path: Path, kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        mindfile.open(db_path, **kwargs)  # type: ignore[arg-type]


def test_unopenable_path(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        mindfile.open(tmp_path, embedder="hash")  # a directory


def test_failed_open_releases_the_file(db_path: Path) -> None:
    mindfile.open(db_path, embedder="hash").close()
    with pytest.raises(ConfigError):
        mindfile.open(db_path, embedder="static")
    with mindfile.open(db_path) as mem:  # not left locked or half-open
        mem.store("s", 1, "fine")


def test_info(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "one")
    mem.store("s", 2, "two")
    mem.store("t", 1, "one")
    info = mem.info()
    assert (info.sessions, info.events, info.chunks, info.vectors) == (2, 3, 3, 3)
    assert info.vector_index == "exact"
    assert info.embedding_model == "hash-blake3-256" and info.dimensions == 256
    assert info.schema_version == mem.schema_version >= 1
    assert info.size_bytes > 0
    assert info.to_dict()["path"] == mem.path


def test_close_is_idempotent(db_path: Path) -> None:
    mem = mindfile.open(db_path, embedder="hash")
    mem.close()
    mem.close()
    assert mem.db.closed


@pytest.mark.parametrize(
    "kwargs",
    [
        {"path": None},
        {"path": 42},
        {"chunk_max_chars": "x"},
        {"chunk_overlap": 1.5},
        {"chunk_max_chars": True},
        {"vector_index": 3},
    ],
)
def test_bad_open_arguments_are_config_errors(tmp_path: Path, kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"path": tmp_path / "m.db", "embedder": "hash"}
    args.update(kwargs)
    path = args.pop("path")
    with pytest.raises(mindfile.ConfigError):
        mindfile.open(path, **args)  # type: ignore[arg-type]
    assert not (Path.cwd() / "None").exists()


def test_a_token_counter_returning_junk_is_invalid_input(mem: mindfile.Mindfile) -> None:
    mem.store("s", 1, "hello")
    with pytest.raises(mindfile.InvalidInputError):
        mem.restore("s", 100, token_counter=lambda text: "many")  # type: ignore[arg-type,return-value]
