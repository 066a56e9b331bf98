"""SymNodeVariable: a symbolic size while tracing = an fx.Proxy + a ``torch.SymInt`` over our ShapeEnv.

Place in the pipeline: a dynamic trace (``minidynamo/symbolic/dynamic_shapes.py``)
gives some input sizes symbols; ``x.size(0)``, ``x.shape[0] * 2`` and ``n > 4`` on
them are values of this kind: a graph node (a SymInt placeholder, or arithmetic on
one) and the SymInt the fake tensors computed. Mirrors
``torch/_dynamo/variables/tensor.py`` (``SymNodeVariable``).

Note [A decision on a size is a guard, not a break]
    ``if x.size(0) > 4:`` needs a Python bool. A tensor's value would be a graph
    break; a size is known for the example inputs, so the ShapeEnv answers it from
    them and records the answer as a guard (``L['x'].size()[0] > 4``), exactly as
    torch's ``SymNodeVariable.evaluate_expr``. The comparison node, used by nothing
    now, leaves the graph. An int needed as a Python int (``range(n)``) fixes the
    symbol to its value (guard ``== 5``): the graph is then valid for that size only.
"""

from __future__ import annotations

import contextlib

from typing import Any

import torch
import torch.fx

from .. import graph_break_registry as gb
from .base import VariableTracker


@contextlib.contextmanager
def _data_dependent_is_a_break():
    """A decision on an unbacked symbol (``if u0 > 3``) is a graph break, as torch's ``generic_jump``:
    ``GuardOnDataDependentSymNode``'s message is the reason (shapes/symbolic_shapes.py)."""
    from minidynamo.shapes.symbolic_shapes import GuardOnDataDependentSymNode

    from ..exc import unimplemented

    try:
        yield
    except GuardOnDataDependentSymNode as e:
        unimplemented(f"Data-dependent branching: {e}", "use torch.cond, or torch._check the value first",
                      gb_id=gb.DATA_DEPENDENT_BRANCH)


class SymNodeVariable(VariableTracker):
    """A symbolic int or bool: ``proxy`` in the graph, ``sym_num`` (a torch.SymInt/SymBool) as its value."""

    def __init__(self, proxy: torch.fx.Proxy, sym_num: Any, **kwargs):
        super().__init__(**kwargs)
        self.proxy = proxy
        self.sym_num = sym_num

    @classmethod
    def lazy(cls, make_proxy, sym_num: Any, **kwargs) -> "SymNodeVariable":
        """A lifted float (Note [A float input is lifted once it changes], dynamic_shapes.py) whose graph
        input and ``.item()`` node are made when the trace first needs its node.

        torch wraps a float lazily (``LazyConstantVariable``, torch/_dynamo/variables/lazy.py): in
        ``s - x`` the tensor is realized first, so the graph's inputs are ``(x, s)``; making our
        placeholder on first use of ``proxy`` gives the same order.
        """
        var = cls(None, sym_num, **kwargs)
        var._make_proxy = make_proxy
        return var

    @property
    def proxy(self) -> torch.fx.Proxy:
        if self._proxy is None and self._make_proxy is not None:
            self._proxy, self._make_proxy = self._make_proxy(), None
        return self._proxy

    @proxy.setter
    def proxy(self, value: torch.fx.Proxy) -> None:
        self._proxy, self._make_proxy = value, None

    def as_proxy(self) -> torch.fx.Proxy:
        return self.proxy

    def python_type(self) -> type:
        return bool if isinstance(self.sym_num, torch.SymBool) else float if isinstance(self.sym_num, torch.SymFloat) else int

    def is_python_constant(self) -> bool:
        return False  # asking must not fix the symbol (as_python_constant does)

    def as_python_constant(self) -> Any:
        """The value as a Python constant: specializes the symbol (Note [A decision on a size ...])."""
        with _data_dependent_is_a_break():
            value = self.python_type()(self.sym_num)
        self._drop_if_unused()
        return value

    def truth(self, tx) -> bool:
        with _data_dependent_is_a_break():
            value = bool(self.sym_num)
        self._drop_if_unused()
        return value

    def _drop_if_unused(self) -> None:
        """The node of a decided comparison (and the arithmetic only it used) leaves the graph."""
        if self._proxy is None:  # a lifted float read only as a constant (``f"{scale:.3f}"``): no node made
            return
        node = self.proxy.node
        while node is not None and node.op == "call_function" and not node.users and node.graph is not None:
            inputs = [a for a in node.all_input_nodes]
            graph = node.graph
            graph.erase_node(node)
            # still a call the trace made: torch's graph keeps it until compile (Note [An empty graph ...])
            graph._md_dropped_calls = getattr(graph, "_md_dropped_calls", 0) + 1
            node = inputs[0] if len(inputs) == 1 else None

    def unpack_var_sequence(self, tx):
        from ..exc import unimplemented

        unimplemented("iterating over a symbolic int", gb_id=gb.BUILTIN_OPERATOR)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        import operator

        ops = {"__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul,
               "__floordiv__": operator.floordiv, "__mod__": operator.mod, "__eq__": operator.eq,
               "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt,
               "__ge__": operator.ge}
        if name in ops and not kwargs:
            return tx.call_operator(ops[name], [self, *args])
        if name == "__index__" or name == "__int__":
            from .constant import ConstantVariable

            return ConstantVariable(self.as_python_constant())
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        """Note [A size is rebuilt from the sizes]: ``2*s0`` after the graph is ``2*L['x'].size()[0]``.

        Every symbol stands for an input's size, so any expression over them is
        recomputed from the inputs in Python; it need not be a graph output (torch
        returns it from the graph instead).
        """
        from minidynamo.shapes.symbolic_shapes import python_expr

        node = self.sym_num.node
        names = node.shape_env.source_names()
        if not node.expr.free_symbols <= set(names):
            return codegen.tensor_expr(self)
        floats = node.expr.free_symbols & getattr(node.shape_env, "float_symbols", set())
        if floats:  # a lifted float leaving the trace: torch's graph returns it (Note [Tensorify before AOT])
            codegen.output.__dict__.setdefault("floats_leaving", set()).update(names[s] for s in floats)
        text = python_expr(node.expr, names)
        return f"bool({text})" if self.python_type() is bool else f"({text})"

    def __repr__(self) -> str:
        return f"SymNodeVariable({self.proxy.node.name}, {self.sym_num})"


def _sym_targets() -> dict:
    import builtins
    import math

    from minidynamo._torch_private import sym_sqrt

    return {builtins.max: torch.sym_max, builtins.min: torch.sym_min, builtins.int: torch.sym_int,
            builtins.float: torch.sym_float, math.sqrt: sym_sqrt(), math.floor: math.floor, math.ceil: math.ceil}


def call_sym_builtin(tx, fn, args: list, kwargs: dict):
    """Note [max, int, math.sqrt of a size are graph nodes]

    ``max(x.size(0), 4)``, ``int(n / 2)``, ``float(n)``, ``math.sqrt(n)`` on a symbolic
    size would need its Python value (a guard fixing the size, or a break); torch
    records them instead as graph nodes over the SymInt (``torch.sym_max(s0, 4)``,
    ``torch.sym_int(truediv)``, ``torch._sym_sqrt(s0)``), their results symbolic too
    (``Max(s0, 4)``), so one graph serves every size. So do we. Returns None when no
    argument is symbolic (the ordinary builtin path folds constants).
    """
    if kwargs or not any(isinstance(a, SymNodeVariable) for a in args):
        return None
    targets = _sym_targets()
    if fn not in targets:
        return None
    from .constant import ConstantVariable

    if not all(isinstance(a, SymNodeVariable) or (isinstance(a, ConstantVariable) and type(a.value) in (int, float))
               for a in args):
        return None  # a tensor in max(): BuiltinVariable's own min/max
    if fn in (max, min):
        if len(args) < 2:
            return None
        acc = args[0]
        for b in args[1:]:
            acc = tx.wrap_fx_proxy("call_function", targets[fn], (acc.as_proxy(), b.as_proxy()), {})
        return acc
    if len(args) != 1:
        return None
    if fn is int and args[0].python_type() is int:
        return args[0]
    return tx.wrap_fx_proxy("call_function", targets[fn], (args[0].as_proxy(),), {})


def specialize_args(args: list) -> list:
    """``range(n)`` and other builtins that need ints: each symbolic arg fixed to its value (a guard), as torch."""
    from .constant import ConstantVariable

    return [ConstantVariable(a.as_python_constant()) if isinstance(a, SymNodeVariable) else a for a in args]

