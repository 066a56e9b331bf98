"""Symbolic shapes: a mini ShapeEnv, its symbols and the SymNodes inside ``torch.SymInt`` (chapter 15).

Place in the pipeline: under everything that traces with symbolic sizes. Dynamo
(``symbolic/dynamic_shapes.py``) asks the ShapeEnv for a symbol per dynamic dim, the
fake converter (``fake/converter.py``) builds meta tensors whose sizes are SymInts over
those symbols, AOT (``aot/sym_tracing.py``) traces with the same ShapeEnv; each decision
on a size becomes a guard. Imports nothing of ours. Mirrors
``torch/fx/experimental/symbolic_shapes.py``, ``torch/fx/experimental/sym_node.py`` and
``torch/utils/_sympy/``, one file each:

    symbolic_shapes.py   ShapeEnv (backed and unbacked symbols), ShapeGuard, GuardOnDataDependentSymNode,
                         Specialization, contiguous_strides
    sym_node.py          SymNode: one symbolic value, as torch.SymInt wants it
    sym_functions.py     FloorDiv, TruncToInt, and python_expr (sympy -> Python over sizes)

Names are imported lazily: the ShapeEnv brings sympy, which a static trace never needs.
"""

from __future__ import annotations

from minidynamo._lazy import lazy_exports

_EXPORTS = {
    "ShapeEnv": "symbolic_shapes",
    "ShapeGuard": "symbolic_shapes",
    "GuardOnDataDependentSymNode": "symbolic_shapes",
    "Specialization": "symbolic_shapes",
    "contiguous_strides": "symbolic_shapes",
    "SymNode": "sym_node",
    "is_symbolic": "sym_node",
    "FloorDiv": "sym_functions",
    "TruncToInt": "sym_functions",
    "python_expr": "sym_functions",
}
__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
