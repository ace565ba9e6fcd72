"""The public surface: ``mindfile.__all__`` is accurate, documented and typed."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import mindfile
import mindfile.errors

PUBLIC_MODULES = [
    "mindfile",
    "mindfile.errors",
    "mindfile.types",
    "mindfile.engine",
    "mindfile.embed",
    "mindfile.vector",
    "mindfile.retrieve",
    "mindfile.index",
    "mindfile.storage",
    "mindfile.tokens",
    "mindfile.memory",
    "mindfile.tools",
    "mindfile.scheduler",
    "mindfile.context",
    "mindfile.llm",
]


def test_all_matches_what_is_importable() -> None:
    exported = set(mindfile.__all__)
    assert len(exported) == len(mindfile.__all__), "duplicates in __all__"
    for name in exported:
        assert hasattr(mindfile, name), name
    public = {
        name
        for name, value in vars(mindfile).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and getattr(value, "__module__", "mindfile").startswith("mindfile")
    }
    assert public <= exported, f"public but not exported: {public - exported}"
    namespace: dict[str, object] = {}
    exec("from mindfile import *", namespace)
    assert exported <= set(namespace)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_all_is_accurate(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__, module_name
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name}"


@pytest.mark.parametrize("name", sorted(set(mindfile.__all__) - {"__version__"}))
def test_every_export_has_a_docstring(name: str) -> None:
    value = getattr(mindfile, name)
    if name == "MemoryHybridQueryResult":
        assert value is mindfile.SearchHit  # an alias keeps its target's docstring
    assert inspect.getdoc(value), name


def test_engine_methods_are_documented() -> None:
    for attr, member in inspect.getmembers(mindfile.Mindfile, inspect.isfunction):
        if not attr.startswith("_"):
            assert member.__doc__, attr


def test_error_tree() -> None:
    errors = [getattr(mindfile, n) for n in mindfile.errors.__all__]
    assert all(issubclass(e, mindfile.MindfileError) for e in errors)
    codes = [e.code for e in errors]
    assert len(set(codes)) == len(codes)
    assert mindfile.InvalidInputError.exit_code == 2 and mindfile.ConflictError.exit_code == 5
    assert issubclass(mindfile.SchemaError, mindfile.StorageError)
    assert issubclass(mindfile.LimitExceededError, mindfile.InvalidInputError)
    err = mindfile.ConflictError("nope", sequence=3, when=object())
    data = err.to_dict()
    assert data["error"] == "conflict" and data["details"]["sequence"] == 3
    assert isinstance(data["details"]["when"], str)


def test_version() -> None:
    assert isinstance(mindfile.__version__, str)
    assert mindfile.__version__.count(".") == 2


def test_py_typed_is_shipped() -> None:
    assert (Path(mindfile.__file__).parent / "py.typed").is_file()


def test_module_doctest() -> None:
    import doctest

    failures, tried = doctest.testmod(mindfile, verbose=False)
    assert tried > 0 and failures == 0


def test_one_version_everywhere() -> None:
    import importlib.metadata

    from click.testing import CliRunner

    from mindfile.cli.main import cli

    out = CliRunner().invoke(cli, ["--version"], prog_name="mindfile").output
    assert mindfile.__version__ in out.split()
    assert importlib.metadata.version("mindfile") == mindfile.__version__


def test_nothing_still_calls_the_product_by_its_old_name() -> None:
    """The rename to Mindfile is complete; only the changelog and the compatibility
    code for stores written before the rename may spell the old name."""
    root = Path(__file__).resolve().parents[2]
    allowed = {
        "CHANGELOG.md",
        "src/mindfile/storage/migrations/0007_rename.sql",
        "src/mindfile/storage/migrations.py",
        "tests/core/test_public_api.py",
    }
    old = "en" + "gram"
    offenders = []
    for folder in ("src", "tests", "docs", "benchmarks", "examples", "scripts", ".ci"):
        for path in (root / folder).rglob("*"):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or rel in allowed or path.suffix in {".db", ".safetensors"}:
                continue
            if "__pycache__" in rel or ".egg-info" in rel:
                continue
            if old in path.read_text(encoding="utf-8", errors="replace").lower():
                offenders.append(rel)
    for name in ("README.md", "pyproject.toml"):
        if old in (root / name).read_text(encoding="utf-8").lower():
            offenders.append(name)
    assert offenders == []
