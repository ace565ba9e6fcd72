"""The package's import graph has no cycle through the facade (issue 13).

The facade is ``mindfile.engine`` and the ``mindfile._api`` mixins it is assembled
from. Feature code (memory, manage, jobs, context, scheduler, the write path) depends on
the storage seam and on the pieces it uses (embedder, indexes), never on the facade:
the facade composes the features, not the other way round.

Measured before the storage seam (grimp 3.20 and this module's graph agree): no cycle
at *runtime* — every feature module that named the facade did so under
``if TYPE_CHECKING:`` — but 13 modules imported ``mindfile.engine`` for their type
annotations, which put 23 modules (all of ``memory``, ``_api``, ``context.builder``,
``files.sync``, ``index.reembed``, ``jobs.reconcile``/``worker``,
``manage.consolidate``...) in one type-level cycle with ``engine.py``.

Two checks, on a graph built from the source with :mod:`ast` (no import side effects):

* **Runtime edges** (module-level *and* function-level imports; a lazy import back into
  the facade is still a hidden cycle): no cycle through any facade module. Strict.
* **Type-only edges** (imports under ``if TYPE_CHECKING:``) are excluded from the first
  check, because they do not run. They are still a dependency on the facade's type, so
  the second check lists the modules the facade imports that still name it for typing,
  and compares the list with the known remainder below: it may only shrink.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import mindfile

SRC = Path(mindfile.__file__).resolve().parent
FACADE = "mindfile.engine"

#: Modules the facade imports that still import ``mindfile.engine`` for type annotations
#: only. files/ is owned by other work at the time of writing (docs/architecture.md,
#: "Storage seam"). Remove a name when its module stops naming the facade; never add one.
TYPE_ONLY_LEFT = {
    "mindfile.files.sync",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py") if "models" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """``(runtime, type_only)`` mindfile modules ``name`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    runtime: set[str] = set()
    type_only: set[str] = set()

    def targets(node: ast.Import | ast.ImportFrom) -> set[str]:
        if isinstance(node, ast.Import):
            return {alias.name for alias in node.names}
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        found = set()
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            found.add(sub if sub in known else base)
        return found

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_stmt(stmt, True)
                for stmt in child.orelse:
                    visit_stmt(stmt, typing_only)
                continue
            visit_stmt(child, typing_only)

    def visit_stmt(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            hits = {t for t in targets(node) if t in known}
            (type_only if typing_only else runtime).update(hits)
            return
        visit(node, typing_only)

    visit(tree, False)
    return runtime, type_only - runtime


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = _modules()
    known = set(modules)
    runtime: dict[str, set[str]] = {}
    type_only: dict[str, set[str]] = {}
    for name, path in modules.items():
        runtime[name], type_only[name] = _imports(name, path, known)
    return runtime, type_only


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest import chain from ``start`` to ``goal`` (breadth first), or None."""
    came: dict[str, str | None] = {start: None}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        for nxt in sorted(graph.get(node, ())):
            if nxt == goal:
                chain = [goal, node]
                back = came[node]
                while back is not None:
                    chain.append(back)
                    back = came[back]
                return chain[::-1]
            if nxt not in came:
                came[nxt] = node
                todo.append(nxt)
    return None


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _facade(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m in graph if m == FACADE or m.startswith("mindfile._api"))


def test_the_graph_sees_the_facade_and_its_features() -> None:
    runtime, _ = _graph()
    assert "mindfile._api.memory" in runtime[FACADE]
    assert "mindfile.memory.notes" in _reachable(runtime, FACADE)


def test_imports_are_told_apart(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from mindfile import memory\n"
        "import mindfile.errors\n"
        "if TYPE_CHECKING:\n"
        "    from mindfile.engine import Mindfile\n"
        "def lazy():\n"
        "    from mindfile.storage.db import utcnow\n",
        encoding="utf-8",
    )
    known = set(_modules())
    runtime, type_only = _imports("mindfile.fake", source, known)
    assert runtime == {"mindfile.memory", "mindfile.errors", "mindfile.storage.db"}
    assert type_only == {FACADE}


def test_no_runtime_import_cycle_through_the_facade() -> None:
    runtime, _ = _graph()
    cycles = {m: _path(runtime, m, m) for m in _facade(runtime)}
    found = {m: " -> ".join(chain) for m, chain in cycles.items() if chain is not None}
    assert found == {}, f"import cycles through the facade: {found}"


def test_modules_the_facade_imports_do_not_import_it_at_runtime() -> None:
    runtime, _ = _graph()
    facade = set(_facade(runtime))
    below = {m for f in facade for m in _reachable(runtime, f)} - facade
    back = {m: sorted(runtime[m] & facade) for m in sorted(below) if runtime[m] & facade}
    assert back == {}, f"feature modules importing the facade: {back}"


def test_type_only_imports_of_the_facade_only_shrink() -> None:
    runtime, type_only = _graph()
    both = {m: runtime[m] | type_only[m] for m in runtime}
    facade = set(_facade(runtime))
    # The mixins in _api *are* the Mindfile class: inside the facade, naming it is fine.
    below = {m for f in facade for m in _reachable(both, f)} - facade
    naming = {m for m in below if FACADE in type_only[m]}
    new = sorted(naming - TYPE_ONLY_LEFT)
    assert new == [], f"new type-only imports of the facade from code it imports: {new}"
    gone = sorted(TYPE_ONLY_LEFT - naming)
    assert gone == [], f"these no longer import the facade; remove them from the list: {gone}"
