"""Runtime asserts: the ranges of unbacked symbols, checked when the graph runs.

Place in the pipeline: the end of a Dynamo trace (``OutputGraph.compile_graph``), before the
graph goes to the backend. An unbacked symbol (``u0``: the rows of ``x.nonzero()``, the size
``md.mark_unbacked`` marked) was given a range the trace relied on, and the user may state more (``torch._check``); nothing checked it before
the call, so the graph checks it itself, right where the symbol first has a value. Mirrors
``torch/fx/passes/runtime_assert.py`` (``insert_deferred_runtime_asserts``), which torch's
Dynamo runs on every graph with unbacked symbols.

Note [A range the trace relied on is asserted in the graph]
    A backed symbol's facts become guards: checked before the graph runs. An unbacked
    symbol's value exists only inside the graph, so its facts are checked there: after the
    node that makes it, ``sym_size_int = aten.sym_size.int(nonzero, 0)``, ``ge = sym_size_int
    >= 0``, ``aten._assert_scalar(ge, "Runtime assertion failed for expression u0 >= 0 on
    node 'ge'")``, and the same for the upper end. Ours asserts the range a symbol was made
    with (``[0, numel]`` for ``nonzero``, ``>= 0`` for a marked size); a fact stated with
    ``torch._check(u0 >= 2)`` becomes an ``_assert_scalar`` of the user's comparison where the
    call was (``torch._check_is_size(u0)``: of ``u0 >= 0``), made by ``variables/unbacked.py``.
    torch also asserts a range narrowed by several facts (``u0 <= 99`` after ``u0 < 100``);
    ours asserts each fact as written.
"""

from __future__ import annotations

import operator

import torch
import torch.fx


def _new_unbacked(value, env, bound: set) -> list:
    """``(symbol, dim or None)`` for each unbacked symbol ``value`` brings that is not bound yet."""
    found = []
    if isinstance(value, torch.Tensor):
        for i, s in enumerate(value.shape):
            if isinstance(s, torch.SymInt) and s.node.expr in env.creation_range and s.node.expr not in bound:
                found.append((s.node.expr, i, s))
    elif isinstance(value, torch.SymInt) and value.node.expr in env.creation_range and value.node.expr not in bound:
        found.append((value.node.expr, None, value))
    return found


def insert_deferred_runtime_asserts(graph: torch.fx.Graph, env) -> None:
    """After each node that first gives an unbacked symbol a value, assert the symbol's range."""
    if env is None or not getattr(env, "creation_range", None):
        return
    bound: set = set()
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in list(graph.nodes):
        new = _new_unbacked(node.meta.get("example_value"), env, bound)
        if not new:
            continue
        anchor = placeholders[-1] if node.op == "placeholder" else node
        with graph.inserting_after(anchor):
            inserted = []
            for sym, dim, symint in new:
                bound.add(sym)
                if dim is None:
                    size = node
                else:
                    size = graph.call_function(torch.ops.aten.sym_size.int, (node, dim))
                    size.meta["example_value"] = symint
                    inserted.append(size)
                lo, hi = env.creation_range[sym]
                for op, bound_value in ((operator.ge, lo), (operator.le, hi)):
                    if bound_value is None:
                        continue
                    with graph.inserting_after(inserted[-1] if inserted else anchor):
                        test = graph.call_function(op, (size, bound_value))
                        test.meta["example_value"] = op(symint, bound_value)
                        text = f"{sym} {'>=' if op is operator.ge else '<='} {bound_value}"
                    with graph.inserting_after(test):
                        check = graph.call_function(torch.ops.aten._assert_scalar.default, (
                            test, f"Runtime assertion failed for expression {text} on node '{test.name}'"))
                    inserted += [test, check]
            if node.op == "placeholder":
                placeholders = [n for n in graph.nodes if n.op == "placeholder"]
