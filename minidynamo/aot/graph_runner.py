"""Run a compiled aten graph with each op called through its cheapest entry point.

Place in the pipeline: the default ``fw_compiler``/``bw_compiler`` of ``aot_autograd``
(``_run_graph``, "aot_eager": run the graph as Python). Mirrors what fx's
``GraphModule`` does with ``torch/fx/graph.py``'s generated code, and how
``torch/_ops.py`` calls an op (``OpOverload.__call__`` is ``self._op(*args, **kwargs)``).
The graph the chapters print (``artifacts.fw_module``) is unchanged; only the
function that runs it is built here.

Note [Calling aten ops without OpOverload.__call__]
    fx's code for an aten graph calls ``torch.ops.aten.sin.default(x)``: four
    attribute reads, then ``OpOverload.__call__``, a Python frame around the
    C++ entry ``_op``, which matches the Python arguments to the op's schema and
    calls the kernel boxed. Eager's ``x.sin()`` goes through a Python binding
    (``torch._C._VariableFunctions.sin`` or ``TensorBase.sin``) whose argument
    parser is generated C++ and calls the kernel unboxed: about twice as fast
    per op as the OpOverload path, which is most of the overhead of a graph of
    50 small pointwise ops. So each node of the graph is bound, once, to:

    - the Python binding of the same name (``_VariableFunctions``, ``_nn``, or the
      ``TensorBase`` method), if it reaches the dispatcher as *this* overload
      with the *same* arguments: checked by calling both it and ``_op`` on the
      node's example values under a dispatch mode that records the first op it
      sees and stops there. The same op and arguments reach the same kernels,
      so the result is the one ``OpOverload.__call__`` gives. A binding that
      resolves to another overload (``torch.mul(x, 2)`` is ``mul.Tensor``, not
      ``mul.Scalar``), decomposes first, warns, or fails is not used;
    - else ``_op`` itself, without the ``__call__`` frame.

    The check depends only on the op and the types of its arguments (the
    parser chooses an overload by types), so its answer is cached per op and
    argument types. Graphs over symbolic sizes keep ``_op`` for nodes whose
    arguments hold a SymInt. The code is fx's own: each node's target is
    replaced by a named stand-in, fx generates the function, and the stand-ins
    in its globals are swapped for the chosen callables.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
import torch.fx as fx

from minidynamo._torch_private import NN_FUNCTIONS, TENSOR_BASE, VARIABLE_FUNCTIONS, OpOverload, TorchDispatchMode

__all__ = ["run_graph_fast", "op_bindings", "bind_op"]


class _Dispatched(Exception):
    """Raised by ``_FirstDispatch`` with what reached the dispatcher's Python key."""


class _FirstDispatch(TorchDispatchMode):
    """Records the first op that reaches the Python key, and stops the call there (no kernel runs)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # not wrapped in torch._disable_dynamo: that imports real Dynamo (seconds) at the first op (issue 17)
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise _Dispatched(func, args, kwargs or {})


def _first_dispatch(fn: Callable, args: tuple, kwargs: dict) -> tuple | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.no_grad(), _FirstDispatch():
                fn(*args, **kwargs)
    except _Dispatched as seen:
        return seen.args
    except Exception:
        return None
    return None  # it returned without dispatching


def _same(a: Any, b: Any) -> bool:
    """The same arguments as the dispatcher saw them: tensors by identity, the rest by type and value."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:
        return False


def _kind(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return torch.Tensor
    if isinstance(a, (list, tuple)):
        return type(a), tuple(_kind(x) for x in a)
    return type(a)


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_UNSET = object()
# (op, argument kinds, keyword names and kinds) -> the binding checked for them, or None (use _op).
_BINDINGS: dict[tuple, Callable | None] = {}


def _binding(node: fx.Node) -> Callable:
    """The callable that runs ``node`` (Note [Calling aten ops without OpOverload.__call__])."""
    op = node.target
    missing = []

    def val(n: fx.Node) -> Any:
        v = n.meta.get("val", _UNSET)
        if v is _UNSET or isinstance(v, _SYMBOLIC):
            missing.append(n)
        return v

    args, kwargs = fx.node.map_arg((node.args, node.kwargs), val)
    if missing:  # an argument with no example value, or a symbolic one: nothing to check a binding on
        return op._op
    return bind_op(op, args, kwargs)


def bind_op(op: Any, example_args: tuple, example_kwargs: dict | None = None) -> Callable:
    """The callable to run ``op`` on arguments like these (a tensor stands for any tensor).

    Note [Calling aten ops without OpOverload.__call__]: ``_binding`` asks it for each graph
    node, the runtime wrappers for their own aten calls (the view replayed to rebuild an alias).
    """
    if type(op) is not OpOverload:
        return op
    kwargs = dict(example_kwargs or {})
    if op.namespace != "aten" or _has_symbolic((example_args, kwargs)):
        return op._op
    key = (op, _kind(example_args), tuple((k, _kind(v)) for k, v in kwargs.items()))
    if key not in _BINDINGS:
        _BINDINGS[key] = _check_binding(op, *fx.node.map_aggregate((tuple(example_args), kwargs), _as_meta))
    return _BINDINGS[key] or op._op


def _as_meta(a: Any) -> Any:
    """A plain meta tensor like the example value: the parsers see what they see at run time, not a subclass."""
    if isinstance(a, torch.Tensor):
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
    return a


def _has_symbolic(a: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return any(_has_symbolic(x) for x in a)
    if isinstance(a, dict):
        return any(_has_symbolic(x) for x in a.values())
    return isinstance(a, _SYMBOLIC)


def _check_binding(op: OpOverload, args: tuple, kwargs: dict) -> Callable | None:
    reference = _first_dispatch(op._op, args, kwargs)
    if reference is None or reference[0] is not op:
        return None
    name = op._opname
    for namespace in (VARIABLE_FUNCTIONS, NN_FUNCTIONS, TENSOR_BASE):
        candidate = getattr(namespace, name, None)
        if candidate is None:
            continue
        seen = _first_dispatch(candidate, args, kwargs)
        if seen is not None and seen[0] is op and _same(seen[1], reference[1]) and _same(seen[2], reference[2]):
            return candidate
    return None


class _StandIn:
    """A node target fx binds as a global by name (its module is not torch's), swapped afterwards."""

    __module__ = "aten"

    def __init__(self, op: OpOverload, binding: Callable):
        self.op, self.binding = op, binding
        via = "op" if binding is op._op else "py"  # the generated code says which way each op is called
        self.__name__ = f"{op._opname}_{op._overloadname}_{via}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.binding(*args, **kwargs)


def run_graph_fast(gm: fx.GraphModule, graph: fx.Graph | None = None, *,
                   codegen: fx.graph.CodeGen | None = None) -> Callable:
    """``gm``'s function (or ``graph``'s), each aten op bound once; ``codegen``: how its code is written
    (default: fx's plain ``CodeGen``, whatever the graph's own).

    Note [The runner's code is written from the graph itself]
        The stand-ins must not stay in ``gm``'s graph (the chapters and the tests read
        its aten targets), so this used to write the code from a copy of the graph: a
        second copy of every forward and backward node (fx's ``node_copy``, a few
        percent of a ResNet's compile). Instead the targets (and, for a boxed backward,
        the codegen) are swapped into the graph only while fx writes the code, and put
        back at once, as is the graph's owning module. The runner keeps the graph for
        fx's bookkeeping; nothing regenerates its code.
    """
    graph = gm.graph if graph is None else graph
    stand_ins: dict[tuple, _StandIn] = {}
    swapped: list[tuple[fx.Node, Any]] = []
    saved_codegen, saved_owner = graph._codegen, graph.owning_module
    try:
        for node in graph.nodes:
            if node.op == "call_function" and type(node.target) is OpOverload:
                binding = _binding(node)
                swapped.append((node, node.target))
                node.target = stand_ins.setdefault((node.target, binding), _StandIn(node.target, binding))
        graph.set_codegen(codegen if codegen is not None else fx.graph.CodeGen())  # a copy's default, as before
        runner = fx.GraphModule(gm, graph)
    finally:
        for node, target in swapped:
            node.target = target
        graph._codegen = saved_codegen
        graph.owning_module = saved_owner
    forward = runner.forward
    g = forward.__globals__  # fx's own globals dict for this code
    for name, value in list(g.items()):
        if type(value) is _StandIn:
            g[name] = value.binding
    forward.__func__._md_op_bindings = {  # type: ignore[attr-defined]
        s.op: s.binding for s in stand_ins.values()}
    return forward


def op_bindings(forward: Callable) -> dict[OpOverload, Callable]:
    """Which callable each op of a ``run_graph_fast`` function is bound to (for tests and chapters)."""
    return dict(getattr(getattr(forward, "__func__", forward), "_md_op_bindings", {}))
