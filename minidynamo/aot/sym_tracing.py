"""SymInts in AOT's graphs: symbolic sizes traced as graph nodes, the inputs that carry them, the compile.

Place in the pipeline: under ``make_fx`` (pass 3) and at the door of AOTAutograd when
Dynamo hands over a graph with SymInt placeholders. Mirrors the SymInt half of
``torch/fx/experimental/proxy_tensor.py`` (``track_tensor_tree`` for ``SymNode``\\ s,
``_SymNodeDict``, ``sym_size``) and the symbolic path of
``torch/_functorch/aot_autograd.py`` (``process_inputs``: fake inputs with the
ShapeEnv Dynamo used, ``detect_fake_mode``). ``aot_module_simplified`` (``aot_autograd.py``)
compiles a dynamic Dynamo graph once for every size, or raises ``SymbolicAOTFailed`` for
the caller's per-size fallback (Note [AOT backends specialize per size] in ``backends.py``).
A graph whose only symbols are unbacked (``.item()``, ``nonzero``, ``md.mark_unbacked``) takes
the same path, its fresh symbols renamed to Dynamo's (Note [Unbacked symbols are rebound to
Dynamo's]); SymFloat and SymBool arguments become nodes too (Notes [A SymFloat argument becomes
nodes too], [A SymBool becomes nodes]).

Note [AOT traces Dynamo's symbols]
    A dynamic Dynamo graph takes its sizes as inputs (``s77: torch.SymInt``) and its
    tensors' fakes have sizes over those symbols. Torch's ``aot_module_simplified``
    receives those fakes and traces with *their* fake mode and ShapeEnv. Ours gets
    real example inputs (the backend contract of this book), so it rebuilds fakes
    with the same symbolic sizes in a fresh ``FakeTensorMode`` whose ``shape_env`` is
    Dynamo's: every decision AOT makes on a size (a kernel's broadcast check, the
    backward of ``expand``) lands in the same ShapeEnv, whose guards Dynamo installs
    after the backend returns. The SymInt placeholders get the SymInts themselves
    (Dynamo's ``example_value``), so ``primals_1`` of the joint graph *is* ``s77``.

Note [A SymInt argument becomes a node]
    When a traced op gets a SymInt argument (``view(x, [s77, 12])``, the backward's
    ``expand(g, [s77, 3])``), the graph must compute that value from its inputs.
    Torch traces every SymNode operation as it happens; ours rebuilds the value
    from its sympy expression: a symbol is the placeholder that carries it (the
    SymInt inputs of the graph), ``2*s77`` an ``operator.mul`` node over it, ``s77 // 2``
    ``operator.floordiv``. The nodes are memoized per expression, so the graph
    reads like torch's (``mul = s77 * 2``). A symbol no placeholder carries is read
    off a tensor input that has it as a size (``aten.sym_size.int``, as torch).
"""

from __future__ import annotations

import operator
import warnings
from typing import Any, Callable

import torch
import torch.fx as fx

__all__ = ["SymTracker", "rebind_unbacked", "shape_env_of_graph", "SymbolicAOTFailed", "static_copy", "check_no_symbolic_constants", "is_dynamic_graph", "symbolic_example_inputs", "hint", "sym_free", "size_resolver"]


def _our_symint(x: Any) -> bool:
    if not isinstance(x, torch.SymInt):  # a static graph: no import of the ShapeEnv (and sympy, issue 17)
        return False
    from minidynamo.shapes.symbolic_shapes import is_symbolic

    return is_symbolic(x)


def _is_ours(x: Any) -> bool:
    if not isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):  # no ShapeEnv (sympy) import: issue 17
        return False
    from minidynamo.shapes.symbolic_shapes import is_symbolic

    return is_symbolic(x)


def hint(x: Any, fallback: Any = None) -> Any:
    """The example value of a SymInt (an int unchanged): decisions of AOT's own that must not guard.

    An expression over an unbacked symbol has none: ``fallback`` then (torch's ``hint_int(x, fallback)``;
    its partitioners weigh such a tensor as 4096 elements)."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        h = x.node.hint
        return fallback if h is None else h
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
        self.env: Any = None  # the ShapeEnv of the symbols seen (for replacements: _lookup)
        self.tangent_size_of: dict[sympy.Basic, tuple[fx.Node, int]] = {}  # symbol -> (tangent node, dim)

    def placeholder(self, node: fx.Node, value: Any) -> None:
        if _our_symint(value):
            self.nodes.setdefault(value.node.expr, node)
        elif isinstance(value, torch.Tensor):
            # the joint trace makes the tangents (sized by the outputs' u0) before the forward runs; the
            # forward must read an unbacked u0 off the op that made it: a tangent's size is the last resort
            table = self.tangent_size_of if node.name.startswith("tangents") else self.size_of
            for d, s in enumerate(value.shape):
                if _our_symint(s) and s.node.expr.is_Symbol:
                    table.setdefault(s.node.expr, (node, d))

    def track(self, node: fx.Node, value: Any) -> None:
        """An op returned a SymInt (``aten.sym_size``, ``_local_scalar_dense``): later uses of its expression
        read this node."""
        if _is_ours(value):
            self.env = value.node.shape_env
            self.nodes.setdefault(value.node.expr if isinstance(value, torch.SymInt) else ("float", value.node.expr)
                                  if isinstance(value, torch.SymFloat) else ("bool", value.node.expr), node)

    def output(self, node: fx.Node, tensor: torch.Tensor) -> None:
        """An op's output with a new unbacked size (``nonzero``: ``(u0, 2)``): ``u0`` is read off it
        (``aten.sym_size.int``), as torch's ``unbacked_bindings`` bind it to the node that made it."""
        if node.op == "placeholder":
            return  # placeholder() files its sizes
        for d, s in enumerate(tensor.shape):
            if _our_symint(s) and s.node.hint is None and s.node.expr.is_Symbol:
                self.env = s.node.shape_env
                self.size_of.setdefault(s.node.expr, (node, d))

    def _lookup(self, table: dict, key: Any) -> Any:
        """``table[key]``, or the entry whose key the ShapeEnv now writes as ``key`` (Note [Unbacked symbols
        are rebound to Dynamo's]: the node was tracked as ``u1`` before ``u1`` became ``u0``)."""
        hit = table.get(key)
        if hit is not None or self.env is None or not (self.env.replacements or self.env.unbacked_renamings):
            return hit
        simplify = self.env.simplify
        for k, v in table.items():
            if isinstance(k, tuple):
                if isinstance(key, tuple) and k[0] == key[0] and simplify(k[1]) == key[1]:
                    return v
            elif not isinstance(key, tuple) and simplify(k) == key:
                return v
        return None

    def to_arg(self, value: Any) -> Any:
        if isinstance(value, torch.SymFloat) and getattr(getattr(value.node, "expr", None), "is_number", False):
            # a float computed from sizes that were specialized (``(d // heads) ** 0.5`` with ``d``
            # pinned by a weight's shape): its expression is a number, and the graph takes it as one
            return float(value.node.expr)
        if isinstance(value, torch.SymFloat):
            if not _is_ours(value):
                raise RuntimeError(f"make_fx: a SymFloat {value} that is not of our ShapeEnv")
            return self.emit_float(value.node.expr)  # Note [A SymFloat argument becomes nodes too]
        if isinstance(value, torch.SymBool):
            if not _is_ours(value):
                raise RuntimeError(f"make_fx: a SymBool {value} that is not of our ShapeEnv")
            self.env = value.node.shape_env
            return self.emit_bool(value.node.expr)  # _assert_scalar(u0 >= 2): Note [A SymBool becomes nodes]
        if not isinstance(value, torch.SymInt):
            return value
        if not _our_symint(value):
            raise RuntimeError(f"make_fx: a SymInt {value} that is not of our ShapeEnv")
        self.env = value.node.shape_env
        return self.emit(value.node.expr)

    def emit_bool(self, expr: sympy.Basic) -> Any:
        """Note [A SymBool becomes nodes]
            The runtime asserts Dynamo put in its graph (``_assert_scalar(ge, "Runtime assertion
            failed for expression u0 >= 2 ...")``, symbolic/runtime_assert.py) run again in AOT's
            trace; their condition is a SymBool over the (rebound) symbols. torch records the
            comparison as it happens (``ge = u0 >= 2``); ours rebuilds it from the relation,
            ``operator.ge`` of the sides' nodes, ``operator.and_``/``or_``/``not_`` for logic.
        """
        import sympy

        if expr in (sympy.true, sympy.false):
            return bool(expr)
        key = ("bool", expr)
        hit = self._lookup(self.nodes, key)
        if hit is not None:
            return hit
        rel = {sympy.Eq: operator.eq, sympy.Ne: operator.ne, sympy.Lt: operator.lt, sympy.Le: operator.le,
               sympy.Gt: operator.gt, sympy.Ge: operator.ge}
        side = lambda e: self.emit(e) if e.is_integer else self.emit_float(e)  # noqa: E731
        if type(expr) in rel:
            node = self._call(rel[type(expr)], (side(expr.lhs), side(expr.rhs)))
        elif isinstance(expr, (sympy.And, sympy.Or)):
            fn = operator.and_ if isinstance(expr, sympy.And) else operator.or_
            args = [self.emit_bool(a) for a in expr.args]
            node = args[0]
            for a in args[1:]:
                node = self._call(fn, (node, a))
        elif isinstance(expr, sympy.Not):
            node = self._call(torch.sym_not, (self.emit_bool(expr.args[0]),))
        else:
            raise RuntimeError(f"make_fx: cannot trace the condition {expr} ({type(expr).__name__})")
        self.nodes[key] = node
        return node

    def emit(self, expr: sympy.Basic) -> Any:
        if expr.is_Integer:
            return int(expr)
        hit = self._lookup(self.nodes, expr)
        if hit is not None:
            return hit
        node = self._build(expr)
        self.nodes[expr] = node
        return node

    def emit_float(self, expr: sympy.Basic) -> Any:
        """The node computing the float ``expr`` (Note [A SymFloat argument becomes nodes too]).

        Note [A SymFloat argument becomes nodes too]
            ``x * (x.size(0) / 2)``, ``x / math.sqrt(x.size(-1))``, ``x * float(x.size(0))``,
            ``x.size(-1) ** -0.5``: the op gets a SymFloat whose expression is over the
            size symbols. torch records the Python operations as they happen
            (``truediv = sym_size_int / 2``, ``torch._sym_sqrt``, ``torch.sym_float``,
            ``pow_1 = sym_size_int ** -0.5``); ours rebuilds them from the expression, as
            for SymInts: a rational coefficient ``p/q`` is a multiplication by ``p`` and a
            true division by ``q``, ``sqrt(e)`` is ``torch._sym_sqrt``, another power
            ``operator.pow``, and an integer-valued expression used as a float is
            ``torch.sym_float`` of its int node, so every node's value has the type
            Python's arithmetic gives it (an int tensor times ``float(s0)`` stays float).
        """
        import sympy

        if expr.is_Number:
            return float(expr)
        key = ("float", expr)
        hit = self._lookup(self.nodes, key)
        if hit is not None:
            return hit
        from minidynamo._torch_private import sym_sqrt

        if expr.is_integer:
            node = self._call(torch.sym_float, (self.emit(expr),))
        elif isinstance(expr, sympy.Pow):
            base = self.emit(expr.base) if expr.base.is_integer else self.emit_float(expr.base)
            exp = expr.exp
            if exp == sympy.Rational(1, 2):
                node = self._call(sym_sqrt(), (base,))
            elif exp == sympy.Rational(-1, 2):
                node = self._call(operator.truediv, (1.0, self._call(sym_sqrt(), (base,))))
            elif exp.is_Number:
                node = self._call(operator.pow, (base, int(exp) if exp.is_Integer else float(exp)))
            else:
                node = self._call(operator.pow, (base, self.emit_float(exp)))
        elif isinstance(expr, sympy.Mul):
            coeff, factors = expr.as_coeff_mul()
            num = [f for f in factors if not (isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp < 0)]
            den = [f.base ** -f.exp for f in factors if f not in num]
            acc: Any = None
            for f in sorted(num, key=sympy.default_sort_key):
                v = self.emit(f) if f.is_integer else self.emit_float(f)
                acc = v if acc is None else self._call(operator.mul, (acc, v))
            p, q = (coeff.p, coeff.q) if coeff.is_Rational else (float(coeff), 1)
            if acc is None:
                acc = float(p)
            elif p != 1:
                acc = self._call(operator.mul, (acc, p))
            if q != 1:
                acc = self._call(operator.truediv, (acc, q))
            for f in sorted(den, key=sympy.default_sort_key):
                acc = self._call(operator.truediv, (acc, self.emit(f) if f.is_integer else self.emit_float(f)))
            node = acc if isinstance(acc, fx.Node) and acc.meta.get("val") is not None and not isinstance(
                acc.meta["val"], (int, torch.SymInt)) else self._call(torch.sym_float, (acc,))
        elif isinstance(expr, sympy.Add):
            const, terms = expr.as_coeff_add()
            acc = None
            for t in sorted(terms, key=sympy.default_sort_key):
                v = self.emit(t) if t.is_integer else self.emit_float(t)
                acc = v if acc is None else self._call(operator.add, (acc, v))
            if const != 0:
                acc = self._call(operator.add, (acc, float(const)))
            node = acc
        else:
            raise RuntimeError(f"make_fx: cannot trace the float size expression {expr} ({type(expr).__name__})")
        self.nodes[key] = node
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
            where = self._lookup(self.size_of, expr)
            if where is None:
                where = self._lookup(self.tangent_size_of, expr)
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
    """A Dynamo graph with a SymInt placeholder, or any value over a symbol of Dynamo's ShapeEnv (an unbacked
    ``u0`` of ``.item()`` or ``nonzero``, an input ``md.mark_unbacked`` marked) (Note [AOT traces Dynamo's
    symbols])."""
    return shape_env_of_graph(gm) is not None


def shape_env_of_graph(gm: Any) -> Any:
    if not isinstance(gm, fx.GraphModule):
        return None
    for n in gm.graph.nodes:
        env = _env_of_value(n.meta.get("example_value"))
        if env is not None:
            return env
    return None


def _env_of_value(v: Any) -> Any:
    if _is_ours(v):
        return v.node.shape_env
    if isinstance(v, torch.Tensor):
        for s in v.shape:
            if _our_symint(s):
                return s.node.shape_env
    elif isinstance(v, (tuple, list)):
        for x in v:
            env = _env_of_value(x)
            if env is not None:
                return env
    return None


def rebind_unbacked(dynamo_value: Any, value: Any) -> None:
    """Note [Unbacked symbols are rebound to Dynamo's]
        AOT runs Dynamo's graph again on fakes; an ``item`` or ``nonzero`` node gives a
        fresh unbacked symbol each time (``u1``: fake/unbacked_impls.py), while Dynamo's
        runtime asserts, ``torch._check`` facts and later nodes speak of the one Dynamo
        made (``u0``, the node's ``example_value``). After each node, every fresh symbol
        in its value is made a replacement for Dynamo's at the same place (a size, the
        scalar), so the ShapeEnv writes ``u1`` as ``u0`` from then on: the facts on ``u0``
        decide AOT's questions, and AOT's graphs read ``u0``. torch does the same in
        ``torch.fx.Interpreter.run_node`` (``rebind_unbacked``, ``ShapeEnv._rename_unbacked_to``,
        torch/fx/experimental/symbolic_shapes.py), from the node's ``unbacked_bindings``.
    """
    if isinstance(dynamo_value, (tuple, list)) and isinstance(value, (tuple, list)):
        for a, b in zip(dynamo_value, value):
            rebind_unbacked(a, b)
        return
    if isinstance(dynamo_value, torch.Tensor) and isinstance(value, torch.Tensor):
        if dynamo_value.dim() == value.dim():
            for a, b in zip(dynamo_value.shape, value.shape):
                rebind_unbacked(a, b)
        return
    if not (_is_ours(dynamo_value) and _is_ours(value)):
        return
    old, new = dynamo_value.node.expr, value.node.expr
    if isinstance(old, sympy_Eq()) and isinstance(new, sympy_Eq()):  # a bool item: Eq(u0, 1)
        old, new = old.lhs, new.lhs
    env = value.node.shape_env
    if (old != new and getattr(new, "is_Symbol", False) and getattr(old, "is_Symbol", False)
            and new in env.unbacked and old in env.unbacked and env is dynamo_value.node.shape_env):
        env.unbacked_renamings[new] = old


def sympy_Eq() -> type:  # noqa: N802 - sympy imported only on the symbolic path (issue 17)
    import sympy

    return sympy.Eq


def symbolic_example_inputs(gm: fx.GraphModule, example_inputs: list[Any]) -> tuple[list[Any], Any]:
    """``(inputs, fake_mode)``: SymInts for SymInt placeholders, fakes with symbolic sizes for tensors.

    Tensors whose Dynamo fake has static sizes stay real (every AOT pass converts
    them in the same mode, aliasing kept); a symbolic one becomes a fresh fake of
    that mode with the same SymInt sizes, strides and storage offset. The same Dynamo fake twice gives the same new fake.
    A Dynamo fake made through its base (Note [A view input is fakified through its base],
    fake/converter.py) is made the same way here: the base's fake first, then the view
    replayed on it, so views of one base alias in AOT's passes as in Dynamo's (torch's
    AOTAutograd reuses Dynamo's fakes) and the view keeps its strides under autograd.
    """
    from minidynamo.fake import FakeTensor, FakeTensorMode
    from minidynamo.fake.converter import base_as
    from minidynamo._torch_private import DisableTorchDispatch

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise RuntimeError(f"{len(placeholders)} placeholders but {len(example_inputs)} example inputs")
    env = shape_env_of_graph(gm)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode.shape_env = env
    made: dict[int, Any] = {}
    out: list[Any] = []

    def through_base(v, real):  # the view replayed on its base's fake, as Dynamo's converter made it
        base = made.get(id(v._base))
        if base is None:
            base = made[id(v._base)] = fresh(v._base, real._base) if not sym_free((*v._base.shape, *v._base.stride())) \
                else mode.from_tensor(real._base)
        with mode._quiet(), mode, torch.set_grad_enabled(real.grad_fn is not None):
            base = base_as(base, v.dtype)  # a complex base read as real (view_as_real)
            with env.suppress_guards():
                fake = torch.as_strided(base, v.shape, v.stride(), v.storage_offset())
        if real.requires_grad and not fake.requires_grad:
            fake.requires_grad_(True)
        return fake

    def fresh(v, real):
        if v._is_view() and real._is_view() and isinstance(v._base, FakeTensor) and real._base is not None:
            return through_base(v, real)
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
        return fake

    for n, real in zip(placeholders, example_inputs):
        v = n.meta.get("example_value")
        if _our_symint(v):
            if v.node.hint is not None and v.node.hint != real:  # an unbacked input size (mark_unbacked): no hint
                raise RuntimeError(f"placeholder {n.name}: example value {real} but the symbol's hint is {v.node.hint}")
            out.append(v)
        elif isinstance(v, FakeTensor) and isinstance(real, torch.Tensor) \
                and not sym_free((*v.shape, *v.stride())):  # a stride symbol too (Note [Automatic dynamic strides])
            if id(v) not in made:
                if any(hint(s) is not None and hint(s) != r for s, r in zip(v.shape, real.shape, strict=True)):
                    raise RuntimeError(f"placeholder {n.name}: fake sizes {tuple(v.shape)} do not match {tuple(real.shape)}")
                made[id(v)] = fresh(v, real)
            out.append(made[id(v)])
        else:
            out.append(real)
    if not made and env is not None:
        # no input has a symbolic size (the symbols are unbacked, made inside the graph): the passes find
        # the mode through a fake input, so every tensor input is converted in it (aliasing kept by its memo)
        out = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in out]
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
