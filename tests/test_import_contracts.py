"""The import contracts of ``pyproject.toml`` (DESIGN.md, "Pipeline"), and no import circle.

* ``lint-imports`` keeps every contract: imports point down the pipeline (a layers
  contract), the compiler half knows nothing of the concrete interpreter, the core never
  imports what reads it, the corpus, exercises and benchmark do not know each other.
* The layers contract names every module and package of ``minidynamo``: a new stage
  cannot hide from it.
* The module graph (imports at module level and inside functions, drawn here from the
  source with ``ast``) has no circle at all: not even Dynamo's translator and its
  VariableTrackers, which torch's ``symbolic_convert.py`` and ``variables/`` tie by
  imports inside functions (Note [No import circle in Dynamo]).

Each check is also run on a small made-up case that breaks it, so it can fail.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
import textwrap
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minidynamo"


def _lint_imports(cwd: pathlib.Path, pythonpath: pathlib.Path) -> subprocess.CompletedProcess:
    exe = pathlib.Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"lint-imports not found beside {sys.executable}: pip install -e '.[dev]' brings import-linter")
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_lint_imports_keeps_every_contract():
    proc = _lint_imports(ROOT, ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " broken" in proc.stdout and "0 broken" in proc.stdout, proc.stdout


def test_lint_imports_fails_on_an_import_against_the_layers(tmp_path):
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from toy import high  # a lazy import climbing the layers\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.importlinter]
        root_package = "toy"

        [[tool.importlinter.contracts]]
        name = "high above low"
        type = "layers"
        containers = ["toy"]
        layers = ["high", "low"]
    """))
    proc = _lint_imports(tmp_path, tmp_path)
    assert proc.returncode != 0 and "toy.low -> toy.high" in proc.stdout, proc.stdout + proc.stderr


# --- the layers contract names every stage ------------------------------------------------


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def layer_names(layers: list[str]) -> set[str]:
    """The module names of a layers contract's ``layers`` ("a | b", "a : b" hold several)."""
    return {name.strip() for layer in layers for part in layer.split("|") for name in part.split(":")}


def children(package: pathlib.Path) -> set[str]:
    """Every module and package directly inside ``package`` (``__init__`` aside)."""
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").exists()}


def test_layer_names_reads_both_separators():
    assert layer_names(["a : b", "c | d", "e"]) == {"a", "b", "c", "d", "e"}


def test_the_layers_contract_names_every_module_of_the_package():
    (pipeline,) = [c for c in _contracts() if c["type"] == "layers" and c.get("containers") == ["minidynamo"]]
    named = layer_names(pipeline["layers"])
    assert children(PACKAGE) - named == set(), "name it in pyproject.toml's layers contract, in pipeline order"
    assert named - children(PACKAGE) == set(), "the layers contract names a module that does not exist"
    (dynamo,) = [c for c in _contracts() if c["type"] == "layers" and c.get("containers") == ["minidynamo.symbolic"]]
    assert children(PACKAGE / "symbolic") == layer_names(dynamo["layers"]), "name it in the Dynamo layers contract"
    (trackers,) = [c for c in _contracts()
                   if c["type"] == "layers" and c.get("containers") == ["minidynamo.symbolic.variables"]]
    assert children(PACKAGE / "symbolic" / "variables") == layer_names(trackers["layers"]), \
        "name it in the variables/ layers contract"
    for stage in ("bytecode", "interpreter", "symbolic", "shapes", "fake", "dispatch", "aot", "backends"):
        assert (PACKAGE / stage / "__init__.py").exists() or (PACKAGE / f"{stage}.py").exists(), stage


# --- no import circle ---------------------------------------------------------------------


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """module -> the modules of ``root``'s package it imports, at module level or inside a function.

    Imports under ``if TYPE_CHECKING:`` never run and are left out, as ``lint-imports`` is told
    to (``exclude_type_checking_imports`` in pyproject.toml).
    """
    top = root.name
    files = {_module_name(p, root): p for p in root.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        type_only = {id(n) for block in ast.walk(tree) if _is_type_checking_block(block)
                     for stmt in block.body for n in ast.walk(stmt)}
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in type_only:  # never run: an annotation's name, not an arrow
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            targets |= {t for n in names if n.split(".")[0] == top and (t := resolve(n)) and t != mod}
        graph[mod] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan), i.e. the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:  # recursive: the package's import chains are short
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in list(graph):
        if v not in index:
            visit(v)
    return found


# Note [No import circle in Dynamo]
#     The translator, its VariableTrackers, the graph and the cache call each other; torch
#     ties ``torch/_dynamo/symbolic_convert.py`` and ``variables/`` by imports inside
#     functions, which are imports all the same (grimp and import-linter count them, and
#     so does ``import_graph`` here). Ours call upward only through an object handed down
#     (Note [The translator's layers], symbolic_convert.py): a tracker makes trackers and
#     runs operators through ``tx``, a resume function calls its cache through its
#     config, an opcode mixin inlines a call through the class its translator names. So
#     the graph has no circle, and the "dynamo" and "dynamo-variables" layers contracts of
#     pyproject.toml keep each stage in its place.


def test_the_graph_sees_lazy_imports_and_finds_a_circle(tmp_path):
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from toy.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (pkg / "c.py").write_text("import toy.a\n")
    (pkg / "d.py").write_text("from . import a\n")
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n")
    graph = import_graph(pkg)
    assert graph["toy.sub.b"] == {"toy.c"} and graph["toy.d"] == {"toy.a"} and graph["toy.e"] == set()
    assert circles(graph) == [{"toy.a", "toy.sub.b", "toy.c"}]


def test_no_import_circle():
    found = [sorted(c) for c in circles(import_graph(PACKAGE))]
    assert found == [], f"import circles (break them by layering, Note [No import circle in Dynamo]): {found}"
