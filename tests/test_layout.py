"""The package's layout rules (STYLE.md, DESIGN.md), checked on the source.

* Private torch APIs are imported in ``minidynamo/_torch_private/`` only, so a torch
  upgrade touches one package.
* The teaching corpora live in the package (``minidynamo/corpus``); nothing imports
  from ``tests/`` by putting it on ``sys.path`` (notebooks included).
"""

from __future__ import annotations

import ast
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minidynamo"
# attributes of public objects whose names start with "_" and are torch's documented
# subclass API, or ATen op names (torch.ops.aten._unsafe_view is an op, not a private API)
ALLOWED_ATTRIBUTES = {"_make_subclass", "_make_wrapper_subclass"}


def private_torch_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each private torch import or ``torch._x`` attribute chain in ``tree``
    (a chain ``torch._C._f`` is reported once per prefix that is private; callers dedupe)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("torch", "functorch"):
            parts = node.module.split(".")
            if any(p.startswith("_") for p in parts) or any(a.name.startswith("_") for a in node.names):
                found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.split(".")[0] == "torch" and any(p.startswith("_") for p in a.name.split("."))]
        elif isinstance(node, ast.Attribute):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            chain.reverse()
            if not (isinstance(value, ast.Name) and value.id == "torch") or chain[:1] == ["ops"]:
                continue
            if chain[-1] in ALLOWED_ATTRIBUTES or not any(c.startswith("_") and not c.startswith("__") for c in chain):
                continue
            found.append((node.lineno, "torch." + ".".join(chain)))
    return found


def test_the_checker_can_fail():
    uses = private_torch_uses(ast.parse(
        "import torch._dynamo\nfrom torch.utils._pytree import tree_map\nx = torch._C._dispatch_keys\n"
        "y = torch.ops.aten._unsafe_view\nz = torch.Tensor._make_subclass\nw = torch.nn.functional.relu\n"))
    assert {line for line, _ in uses} == {1, 2, 3}


def test_private_torch_apis_only_in_torch_private():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "_torch_private":  # the seam itself (a package)
            continue
        for line, text in private_torch_uses(ast.parse(path.read_text())):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    assert not offenders, "import these from minidynamo._torch_private:\n" + "\n".join(sorted(set(offenders)))


def test_nothing_imports_from_tests():
    offenders = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "tests").glob("*.py"), *(ROOT / "notebooks").glob("*.ipynb")]):
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        elif path == pathlib.Path(__file__).resolve():
            continue
        else:
            text = path.read_text()
        if "sys.path.insert" in text and '"tests"' in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders
    assert (PACKAGE / "corpus" / "dynamo_cases.py").exists() and (PACKAGE / "corpus" / "aot_cases.py").exists()
    assert not (ROOT / "tests" / "dynamo_cases.py").exists() and not (ROOT / "tests" / "aot_cases.py").exists()
