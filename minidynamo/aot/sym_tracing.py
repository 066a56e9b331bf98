"""SymInts in AOT's graphs: symbolic sizes traced as graph nodes, the inputs that carry them, the compile.

Place in the pipeline: under ``make_fx`` (pass 3) and at the door of AOTAutograd when
Dynamo hands over a graph with SymInt placeholders. Mirrors the SymInt half of
``torch/fx/experimental/proxy_tensor.py`` (``track_tensor_tree`` for ``SymNode``\\ s,
``_SymNodeDict``, ``sym_size``) and the symbolic path of
``torch/_functorch/aot_autograd.py`` (``process_inputs``: fake inputs with the
ShapeEnv Dynamo used, ``detect_fake_mode``). ``aot_module_simplified`` (``aot_autograd.py``)
compiles a dynamic Dynamo graph once for every size, or raises ``SymbolicAOTFailed`` for
the caller's per-size fallback (Note [AOT backends specialize per size] in ``backends.py``).

Note [AOT traces Dynamo's symbols]
    A dynamic Dynamo graph takes its sizes as inputs (``s0: torch.SymInt``) and its
    tensors' fakes have sizes over those symbols. Torch's ``aot_module_simplified``
    receives those fakes and traces with *their* fake mode and ShapeEnv. Ours gets
    real example inputs (the backend contract of this book), so it rebuilds fakes
    with the same symbolic sizes in a fresh ``FakeTensorMode`` whose ``shape_env`` is
    Dynamo's: every decision AOT makes on a size (a kernel's broadcast check, the
    backward of ``expand``) lands in the same ShapeEnv, whose guards Dynamo installs
    after the backend returns. The SymInt placeholders get the SymInts themselves
    (Dynamo's ``example_value``), so ``primals_1`` of the joint graph *is* ``s0``.

Note [A SymInt argument becomes a node]
    When a traced op gets a SymInt argument (``view(x, [s0, 12])``, the backward's
    ``expand(g, [s0, 3])``), the graph must compute that value from its inputs.
    Torch traces every SymNode operation as it happens; ours rebuilds the value
    from its sympy expression: a symbol is the placeholder that carries it (the
    SymInt inputs of the graph), ``2*s0`` an ``operator.mul`` node over it, ``s0 // 2``
    ``operator.floordiv``. The nodes are memoized per expression, so the graph
    reads like torch's (``mul = s0 * 2``). A symbol no placeholder carries is read
    off a tensor input that has it as a size (``aten.sym_size.int``, as torch).
"""

from __future__ import annotations

import operator
import warnings
from typing import Any, Callable

import torch
import torch.fx as fx

__all__ = ["SymTracker", "SymbolicAOTFailed", "static_copy", "check_no_symbolic_constants", "is_dynamic_graph", "symbolic_example_inputs", "hint", "sym_free", "size_resolver"]


def _our_symint(x: Any) -> bool:
    if not isinstance(x, torch.SymInt):  # a static graph: no import of the ShapeEnv (and sympy, issue 17)
        return False
    from minidynamo.shapes.symbolic_shapes import is_symbolic

    return is_symbolic(x)


def hint(x: Any) -> Any:
    """The example value of a SymInt (an int unchanged): decisions of AOT's own that must not guard."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return x.node.hint
    return x


def check_no_symbolic_constants(graph: fx.Graph) -> None:
    """No SymInt/SymFloat/SymBool object left as a constant argument of a node (it would not run)."""
    from minidynamo._torch_private import tree_flatten

    for node in graph.nodes:
        if node.op == "call_function":
            leaves, _ = tree_flatten((node.args, node.kwargs))
            if not sym_free(leaves):
                raise RuntimeError(f"make_fx: node {node.name} ({node.target}) has a symbolic constant argument")


def sym_free(value: Any) -> bool:
    """No SymInt anywhere in ``value`` (nested tuples/lists, tensor sizes not looked at)."""
    if isinstance(value, (tuple, list)):
        return all(sym_free(v) for v in value)
    return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


class SymTracker:
    """Sympy expression -> the fx node computing it (Note [A SymInt argument becomes a node])."""

    def __init__(self, graph: fx.Graph) -> None:
        self.graph = graph
        self.nodes: dict[sympy.Basic, fx.Node] = {}
        self.size_of: dict[sympy.Basic, tuple[fx.Node, int]] = {}  # symbol -> (tensor node, dim)

    def placeholder(self, node: fx.Node, value: Any) -> None:
        if _our_symint(value):
            self.nodes.setdefault(value.node.expr, node)
        elif isinstance(value, torch.Tensor):
            for d, s in enumerate(value.shape):
                if _our_symint(s) and s.node.expr.is_Symbol:
                    self.size_of.setdefault(s.node.expr, (node, d))

    def track(self, node: fx.Node, value: Any) -> None:
        """An op returned a SymInt (``aten.sym_size``): later uses of its expression read this node."""
        if _our_symint(value):
            self.nodes.setdefault(value.node.expr, node)

    def to_arg(self, value: Any) -> Any:
        if isinstance(value, torch.SymFloat) and getattr(getattr(value.node, "expr", None), "is_number", False):
            # a float computed from sizes that were specialized (``(d // heads) ** 0.5`` with ``d``
            # pinned by a weight's shape): its expression is a number, and the graph takes it as one
            return float(value.node.expr)
        if isinstance(value, (torch.SymFloat, torch.SymBool)):
            # torch traces these as nodes too (sym_float, _sym_sqrt); ours does not: the graph is refused
            raise RuntimeError(f"make_fx: cannot trace the symbolic {type(value).__name__} {value} as a graph node")
        if not isinstance(value, torch.SymInt):
            return value
        if not _our_symint(value):
            raise RuntimeError(f"make_fx: a SymInt {value} that is not of our ShapeEnv")
        return self.emit(value.node.expr)

    def emit(self, expr: sympy.Basic) -> Any:
        if expr.is_Integer:
            return int(expr)
        hit = self.nodes.get(expr)
        if hit is not None:
            return hit
        node = self._build(expr)
        self.nodes[expr] = node
        return node

    def _call(self, fn: Any, args: tuple) -> fx.Node:
        """A node computing a size, with its value in ``meta["val"]`` as torch's proxy tracing records it.

        torch's partitioners tell a size node by that value (``is_sym_node``: a SymInt ``val``)
        and save or recompute it at the price of an int; a node without one looked to our min-cut
        like a tuple of unknown size (infinite weight), and a backward view that read such a size
        made the cut impossible (issue 29's dynamic transformer block).
        """
        node = self.graph.call_function(fn, args)
        if fn is torch.ops.aten.sym_size.int:
            tensor = args[0].meta.get("val", args[0].meta.get("example_value"))
            if isinstance(tensor, torch.Tensor):
                node.meta["val"] = tensor.shape[args[1]]
        else:
            vals = [a.meta.get("val") if isinstance(a, fx.Node) else a for a in args]
            if all(v is not None for v in vals):
                node.meta["val"] = fn(*vals)
        return node

    def _build(self, expr: sympy.Basic) -> fx.Node:
        import sympy

        from minidynamo.shapes.symbolic_shapes import FloorDiv

        if isinstance(expr, sympy.Symbol):
            where = self.size_of.get(expr)
            if where is None:
                raise RuntimeError(f"make_fx: the size {expr} is neither a graph input nor a size of one")
            return self._call(torch.ops.aten.sym_size.int, where)
        if isinstance(expr, (sympy.Add, sympy.Mul)):
            const, rest = expr.as_coeff_add() if isinstance(expr, sympy.Add) else expr.as_coeff_mul()
            op = operator.add if isinstance(expr, sympy.Add) else operator.mul
            terms = sorted(rest, key=sympy.default_sort_key)
            acc = self.emit(terms[0])
            for t in terms[1:]:
                acc = self._call(op, (acc, self.emit(t)))
            unit = 0 if op is operator.add else 1
            if const != unit:
                if not const.is_Integer:
                    raise RuntimeError(f"make_fx: cannot trace the non-integer size expression {expr}")
                acc = self._call(op, (acc, int(const)))
            return acc
        if isinstance(expr, sympy.floor) and isinstance(expr.args[0], sympy.Mul):
            num, den = sympy.fraction(expr.args[0])  # floor(s0/2): s0 // 2
            if den.is_Integer and den != 1:
                return self._call(operator.floordiv, (self.emit(num), int(den)))
        if isinstance(expr, FloorDiv):
            return self._call(operator.floordiv, tuple(self.emit(a) for a in expr.args))
        if isinstance(expr, sympy.Mod):
            return self._call(operator.mod, tuple(self.emit(a) for a in expr.args))
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            return self._call(operator.pow, (self.emit(expr.base), int(expr.exp)))
        if isinstance(expr, (sympy.Max, sympy.Min)):
            fn = torch.sym_max if isinstance(expr, sympy.Max) else torch.sym_min
            args = [self.emit(a) for a in expr.args]
            acc = args[0]
            for a in args[1:]:
                acc = self._call(fn, (acc, a))
            return acc
        raise RuntimeError(f"make_fx: cannot trace the size expression {expr} ({type(expr).__name__})")


# -- Dynamo's graph in, symbolic inputs out --------------------------------------------------


def is_dynamic_graph(gm: torch.nn.Module) -> bool:
    """A Dynamo graph with a SymInt placeholder (Note [AOT traces Dynamo's symbols])."""
    if not isinstance(gm, fx.GraphModule):
        return False
    return any(_our_symint(n.meta.get("example_value")) for n in gm.graph.nodes if n.op == "placeholder")


def symbolic_example_inputs(gm: fx.GraphModule, example_inputs: list[Any]) -> tuple[list[Any], Any]:
    """``(inputs, fake_mode)``: SymInts for SymInt placeholders, fakes with symbolic sizes for tensors.

    Tensors whose Dynamo fake has static sizes stay real (every AOT pass converts
    them in the same mode, aliasing kept); a symbolic one becomes a fresh fake of
    that mode with the same SymInt sizes, strides and storage offset. The same Dynamo fake twice gives the same new fake.
    """
    from minidynamo.fake import FakeTensor, FakeTensorMode
    from minidynamo._torch_private import DisableTorchDispatch

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise RuntimeError(f"{len(placeholders)} placeholders but {len(example_inputs)} example inputs")
    env = None
    for n in placeholders:
        v = n.meta.get("example_value")
        if _our_symint(v):
            env = v.node.shape_env
            break
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode.shape_env = env
    made: dict[int, Any] = {}
    out: list[Any] = []
    for n, real in zip(placeholders, example_inputs):
        v = n.meta.get("example_value")
        if _our_symint(v):
            if v.node.hint != real:
                raise RuntimeError(f"placeholder {n.name}: example value {real} but the symbol's hint is {v.node.hint}")
            out.append(v)
        elif isinstance(v, FakeTensor) and isinstance(real, torch.Tensor) and not sym_free(tuple(v.shape)):
            if id(v) not in made:
                if tuple(hint(s) for s in v.shape) != tuple(real.shape):
                    raise RuntimeError(f"placeholder {n.name}: fake sizes {tuple(v.shape)} do not match {tuple(real.shape)}")
                sizes, strides, offset = list(v.shape), list(v.stride()), v.storage_offset()
                with DisableTorchDispatch(), torch.no_grad(), torch.inference_mode(False):
                    # Dynamo's strides and offset (a non-contiguous input's may be symbols: Note [A symbolic fake])
                    elem = torch.empty_strided(sizes, strides, dtype=real.dtype, device="meta")
                    if not (isinstance(offset, int) and offset == 0):
                        extent = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
                        elem = torch.empty((offset + extent,), dtype=real.dtype, device="meta")
                        elem.as_strided_(sizes, strides, offset)
                fake = FakeTensor(mode, elem, real.device, requires_grad=real.requires_grad)
                if real.requires_grad and not real.is_leaf:
                    with mode._quiet(), mode, torch.enable_grad():
                        fake = fake.clone()
                made[id(v)] = fake
            out.append(made[id(v)])
        else:
            out.append(real)
    return out, mode


def size_resolver(flat_args: list[Any]) -> Callable[[Any, tuple], Any] | None:
    """``resolve(value, args)``: ``value``'s SymInts evaluated for this call's ``args``.

    Each symbol is read from the argument that carries it (a SymInt input: the
    call's int) or from a size of a tensor argument. None when some symbol of the
    trace has no such argument. Runtime wrappers use it for layouts metadata
    collection recorded symbolically (Note [Sizes per call]).
    """
    where: dict[sympy.Symbol, tuple[int, int | None]] = {}
    for i, a in enumerate(flat_args):
        if _our_symint(a) and a.node.expr.is_Symbol:
            where.setdefault(a.node.expr, (i, None))
    for i, a in enumerate(flat_args):
        if isinstance(a, torch.Tensor):
            for d, s in enumerate(a.shape):
                if _our_symint(s) and s.node.expr.is_Symbol:
                    where.setdefault(s.node.expr, (i, d))

    def resolve(value: Any, args: tuple) -> Any:
        if isinstance(value, (tuple, list)):
            return type(value)(resolve(v, args) for v in value)
        if not isinstance(value, torch.SymInt):
            return value
        expr = value.node.expr
        subs = {}
        for s in expr.free_symbols:
            if s not in where:
                raise RuntimeError(f"no argument carries the size {s}")
            i, d = where[s]
            subs[s] = int(args[i]) if d is None else int(args[i].shape[d])
        return int(expr.xreplace(subs))

    return resolve


# -- the compile: symbolic once, or the caller's per-size fallback -----------------------------

class SymbolicAOTFailed(RuntimeError):
    """The AOT trace over a dynamic graph's SymInts failed; the caller compiles per size instead."""


def static_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` without the symbolic example values (the backend sees real inputs only)."""
    graph = torch.fx.Graph()
    env: dict = {}
    for n in gm.graph.nodes:
        env[n] = graph.node_copy(n, lambda x: env[x])
        env[n].meta = {k: v for k, v in n.meta.items() if k not in ("example_value", "val")}
    new = torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)
    new.meta.update(gm.meta)
    return new
