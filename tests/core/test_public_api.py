"""The public surface: ``engram.__all__`` is accurate, documented and typed."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import engram
import engram.errors

PUBLIC_MODULES = [
    "engram",
    "engram.errors",
    "engram.types",
    "engram.engine",
    "engram.embed",
    "engram.vector",
    "engram.retrieve",
    "engram.index",
    "engram.storage",
    "engram.tokens",
    "engram.memory",
    "engram.tools",
    "engram.scheduler",
    "engram.context",
    "engram.llm",
]


def test_all_matches_what_is_importable() -> None:
    exported = set(engram.__all__)
    assert len(exported) == len(engram.__all__), "duplicates in __all__"
    for name in exported:
        assert hasattr(engram, name), name
    public = {
        name
        for name, value in vars(engram).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and getattr(value, "__module__", "engram").startswith("engram")
    }
    assert public <= exported, f"public but not exported: {public - exported}"
    namespace: dict[str, object] = {}
    exec("from engram import *", namespace)
    assert exported <= set(namespace)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_all_is_accurate(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__, module_name
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name}"


@pytest.mark.parametrize("name", sorted(set(engram.__all__) - {"__version__"}))
def test_every_export_has_a_docstring(name: str) -> None:
    value = getattr(engram, name)
    if name == "MemoryHybridQueryResult":
        assert value is engram.SearchHit  # an alias keeps its target's docstring
    assert inspect.getdoc(value), name


def test_engine_methods_are_documented() -> None:
    for attr, member in inspect.getmembers(engram.Engram, inspect.isfunction):
        if not attr.startswith("_"):
            assert member.__doc__, attr


def test_error_tree() -> None:
    errors = [getattr(engram, n) for n in engram.errors.__all__]
    assert all(issubclass(e, engram.EngramError) for e in errors)
    codes = [e.code for e in errors]
    assert len(set(codes)) == len(codes)
    assert engram.InvalidInputError.exit_code == 2 and engram.ConflictError.exit_code == 5
    assert issubclass(engram.SchemaError, engram.StorageError)
    assert issubclass(engram.LimitExceededError, engram.InvalidInputError)
    err = engram.ConflictError("nope", sequence=3, when=object())
    data = err.to_dict()
    assert data["error"] == "conflict" and data["details"]["sequence"] == 3
    assert isinstance(data["details"]["when"], str)


def test_version() -> None:
    assert isinstance(engram.__version__, str)
    assert engram.__version__.count(".") == 2


def test_py_typed_is_shipped() -> None:
    assert (Path(engram.__file__).parent / "py.typed").is_file()


def test_module_doctest() -> None:
    import doctest

    failures, tried = doctest.testmod(engram, verbose=False)
    assert tried > 0 and failures == 0
