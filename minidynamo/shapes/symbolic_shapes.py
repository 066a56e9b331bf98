"""A mini ShapeEnv: symbolic sizes, the guards a trace's decisions on them make, readable.

Place in the pipeline: under the fake tensors of a dynamic trace. Dynamo asks the
ShapeEnv for a symbol per dynamic dimension of an input (``create_symbol``), the
converter builds a meta tensor whose sizes are ``torch.SymInt``s over those symbols,
meta kernels compute output sizes as expressions (``2*s77``), and whenever a kernel or
the user's code needs a *decision* (``if x.size(0) > 4``, a broadcast check
``Eq(s17, s77)``) the ShapeEnv answers it from the example sizes and records the answer
as a guard. At the end of the trace the guards are printed as Python over the
inputs' sizes (``2 <= L['x'].size()[0]``) and join the entry's check function.

Mirrors ``torch/fx/experimental/symbolic_shapes.py`` (``ShapeEnv``: ``create_symbol``,
``evaluate_expr``, ``produce_guards``; 8000 lines) and ``torch/fx/experimental/sym_node.py``
(``SymNode``). Unbacked symbols (``u0``: Note [An unbacked symbol has no value]) have a range
``[lo, hi]`` and the facts ``torch._check`` states; a backed symbol has a range too, narrowed
by the trace's guards and printed as one guard (Note [A symbol's range guard]). Ours drops symbolic
floats beyond comparisons, ``sqrt``/``floor`` and ``int`` (float inputs: Note [A float input becomes a symbol]),
and the guard-simplification machinery beyond substitution (``replacements``) and
questions the recorded guards already decide. The sympy functions and the printer
live in ``sym_functions.py``, ``SymNode`` in ``sym_node.py`` (re-exported here).

Note [Our SymNode inside torch.SymInt]
    ``torch.SymInt(node)`` accepts any Python object that speaks the SymNode
    protocol: C++ (``torch/csrc/utils/python_symnode.h``, ``PythonSymNodeImpl``)
    calls ``node.add(other)``, ``node.mul``, ``node.eq``, ``node.guard_bool``,
    ``node.guard_int``, ``node.wrap_int(3)``, ``node.is_int()``, ``node.str()``...
    and the Python magic methods of ``torch.SymInt`` (installed by torch's
    ``sym_node.py``) call the same names. So a meta kernel computing
    ``x.size(0) * 2`` in C++ builds *our* node ``SymNode(2*s77)``, and a kernel's
    ``TORCH_CHECK(a == b)`` lands in our ``guard_bool``/``expect_true``. This is the
    one place we lean on torch's machinery: the ``torch.SymInt`` wrapper and the
    C++ plumbing that carries a SymInt through the dispatcher into meta kernels.
    The symbols, the expressions, the decisions and the guards are ours.

    Torch's Python decompositions and refs (``torch/_refs``, ``_prims_common``) ask
    decisions through free functions (``guard_or_false``, ``statically_known_true``)
    that reach into ``node.shape_env`` and ``node._hint``; our ShapeEnv answers the
    two methods they call (``evaluate_sym_node``, ``_maybe_evaluate_static``) with
    its own ``evaluate_expr`` and ``statically_known``: adapters, no torch logic.

Note [0/1 specialization]
    A size of 0 or 1 never becomes a symbol, as in torch: broadcasting treats 1
    specially (a size-1 dim stretches), and 0 makes a tensor empty, so a graph
    traced with ``s0`` could not be right for both ``s0 == 1`` and ``s0 == 5``
    without guarding on it everywhere. Instead every symbol is known to be ``>= 2``
    (its first guard), and a 0 or 1 stays a constant: ``specializations`` says
    which size and why.

Note [A symbol's range guard]
    Every backed symbol has a value range: ``[2, oo]`` for a size (Note [0/1
    specialization]), every int for an int input. A decision of the trace that bounds
    one symbol (``s0 <= 3`` from ``if x.size(0) > 3`` traced with 2, ``s1 >= 0`` from
    an index) narrows that range as it is recorded (torch's ``ShapeEnv._refine_ranges``,
    which solves the guard for each of its symbols; ours solves linear ones). When the
    guards are produced, a decision the ranges already settle is not printed by itself:
    each symbol's range is printed once, after the other guards, as ``2 <= L['x'].size()[0]
    <= 3`` (torch's ``ShapeEnv.produce_guards_verbose``, "3. Every symbol must be within its
    value range"), and an int's range only when some guard bounded it (``0 <= L['i'] <= 3``).
    A range narrowed to one value (``s0 > 2`` false for a size: ``[2, 2]``) replaces the
    symbol by that value, as torch's does: the size is static again.

Note [Duck sizing]
    Under ``dynamic=True`` (torch: ``assume_static_by_default=False``, dims
    ``DimDynamic.DUCK``), two input sizes that are equal when the trace starts get the same symbol
    (torch's ``duck_shape``): ``x + y`` with ``x: [5]`` and ``y: [5]`` needs no
    broadcast decision then, and the guard ``L['y'].size()[0] == L['x'].size()[0]``
    records the assumption. Sizes that are different get different symbols; if the
    trace then needs them equal (a broadcast of ``s77`` against ``s17``), the decision
    ``Eq(s17, s77)`` is a guard and the symbol whose name sorts last (``s77``) is *replaced* by
    the other (``s17``) from then on, as torch's ``_maybe_guard_rel`` picks it, so later
    expressions are simplified (``replacements``); the guards still name each symbol after the
    first input it appears in (Note [Guards walk the inputs]). A dim made dynamic by
    automatic dynamic or ``mark_dynamic`` is ``DimDynamic.DYNAMIC``: a symbol of its
    own even when its size equals another's (torch/_dynamo/variables/builder.py,
    ``_automatic_dynamic``), so ``cat([x, y])`` seen with (6, 6) serves (6, 7) too.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional

import sympy
import torch

from minidynamo import events

from .sym_functions import FloorDiv, python_expr  # FloorDiv, python_expr re-exported
from .sym_node import SymNode, _sympify, is_symbolic  # SymNode, is_symbolic re-exported

__all__ = ["ShapeEnv", "GuardOnDataDependentSymNode", "SymNode", "ShapeGuard", "Specialization", "FloorDiv", "is_symbolic", "python_expr"]


# --- records -------------------------------------------------------------------------


@dataclass
class ShapeGuard:
    """One decision of the trace on sizes: ``expr`` (sympy) held for the example sizes."""

    expr: sympy.Basic
    why: str  # what asked: "guard_bool" from a kernel, "x.size(0) > 4" from the user's code
    # ``expr`` with its two sides as asked, where our one spelling reorders them (Note [Two sizes as asked])
    asked: Optional[sympy.Basic] = None

    def __str__(self) -> str:
        return f"{self.expr}  # {self.why}"


@dataclass
class Specialization:
    """A size kept static (Note [0/1 specialization]), or marked static by the user."""

    source: str
    value: int
    reason: str


def _canonical(expr: sympy.Basic) -> sympy.Basic:
    """``s0 - 4 >= 0`` -> ``s0 >= 4``; ``Ne(s1, s0)`` -> ``Ne(s0, s1)``; ``s0 - s1 > 0`` -> ``s0 > s1``: one
    spelling per decision."""
    if isinstance(expr, sympy.Rel):
        lhs, rhs = expr.lhs - expr.rhs, sympy.Integer(0)
        const = lhs.as_coeff_Add()[0]
        lhs, rhs = lhs - const, rhs - const
        if isinstance(expr, (sympy.Eq, sympy.Ne)) and lhs.could_extract_minus_sign():
            lhs, rhs = -lhs, -rhs
        if isinstance(expr, (sympy.Eq, sympy.Ne)) and rhs == 0 and isinstance(lhs, sympy.Add) and len(lhs.args) == 2:
            a, b = lhs.args  # s1 - s0 == 0 -> s0 == s1
            if b.could_extract_minus_sign():
                lhs, rhs = a, -b
            elif a.could_extract_minus_sign():
                lhs, rhs = b, -a
            lhs, rhs = sorted((lhs, rhs), key=sympy.default_sort_key)
        elif rhs == 0 and isinstance(lhs, sympy.Add) and len(lhs.args) == 2:
            neg = [a for a in lhs.args if a.could_extract_minus_sign()]
            if len(neg) == 1:  # s0 - s1 > 0 -> s0 > s1: the user's two sides, as torch's guard keeps them
                lhs, rhs = lhs - neg[0], -neg[0]
        return type(expr)(lhs, rhs)
    return expr


class GuardOnDataDependentSymNode(RuntimeError):
    """A decision on an unbacked symbol that its range and facts do not settle (torch's class of the name,
    torch/fx/experimental/symbolic_shapes.py; its message begins as torch's)."""

    def __init__(self, expr, size_like: list):
        super().__init__(
            f"Could not guard on data-dependent expression {expr} (unhinted: {expr}).  (Size-like symbols: "
            f"{', '.join(size_like) or 'none'})\n\nConsider annotating your code using torch._check*().")
        self.expr = expr


# --- the environment ------------------------------------------------------------------


@dataclass
class ShapeEnv:
    """Symbols for input sizes, and every decision a trace made on them.

    ``var_to_val``: the example value of each symbol; ``var_to_sources``: where each
    symbol's size was read (``L['x'].size()[0]``); ``guards``: the decisions;
    ``replacements``: symbols found equal to another (Note [Duck sizing]);
    ``specializations``: sizes kept static and why (Note [0/1 specialization]).
    """

    duck_shape: bool = True
    var_to_val: dict = field(default_factory=dict)
    var_to_sources: dict = field(default_factory=dict)
    val_to_var: dict = field(default_factory=dict)
    guards: list = field(default_factory=list)
    replacements: dict = field(default_factory=dict)
    specializations: list = field(default_factory=list)
    duck_guards: list = field(default_factory=list)  # (source, first source): sizes duck-sized together
    divisible: dict = field(default_factory=dict)  # symbol -> k, after the guard Eq(Mod(s, k), 0)
    int_symbols: set = field(default_factory=set)  # symbols of int inputs: any int (Note [An int input ...])
    # backed symbol -> [lo, hi] (None: unbounded), narrowed by guards (Note [A symbol's range guard]); torch keeps
    # these in ``var_to_range`` beside the unbacked symbols' ranges, ours keeps the two apart
    backed_var_to_range: dict = field(default_factory=dict)
    range_why: dict = field(default_factory=dict)  # backed symbol -> the guards that narrowed its range
    float_symbols: set = field(default_factory=set)  # symbols of float inputs (Note [A float input ...])
    # unbacked symbols (Note [An unbacked symbol has no value])
    unbacked: list = field(default_factory=list)  # u0, u1, ..., zuf0 in the order made
    var_to_range: dict = field(default_factory=dict)  # unbacked symbol -> [lo, hi] (None: unbounded)
    size_like: set = field(default_factory=set)  # unbacked symbols known to be sizes (>= 0)
    deferred_runtime_asserts: list = field(default_factory=list)  # ShapeGuard facts from torch._check
    unbacked_why: dict = field(default_factory=dict)  # symbol -> where it came from ("Tensor.item()")
    unbacked_inputs: set = field(default_factory=set)  # input sizes md.mark_unbacked marked ("L['x'].size()[0]")
    creation_range: dict = field(default_factory=dict)  # symbol -> the range it was made with (runtime_assert.py)
    # whether a FakeTensorMode with this ShapeEnv may make unbacked symbols itself (``_local_scalar_dense``,
    # ``nonzero``): torch's ShapeEnv fields of these names, which torch's Dynamo sets from
    # ``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` (torch/_dynamo/output_graph.py)
    allow_scalar_outputs: bool = False
    # an unbacked symbol a later pass made, written as the one Dynamo made for the same value (u1 -> u0):
    # torch's ``unbacked_renamings`` (``_rename_unbacked_to``); a renaming, not a decision, so no guard
    unbacked_renamings: dict = field(default_factory=dict)
    allow_dynamic_output_shape_ops: bool = False
    unique_ids: set = field(default_factory=set)  # the numbers backed symbols took (Note [A symbol's name])
    tracked_fakes: list = field(default_factory=list)  # (source, fake or SymInt): Note [Guards walk the inputs]
    # tensor source -> the dims whose stride is a symbol of its own (DimDynamic.DYNAMIC strides: torch's
    # automatic dynamic of a stride that changed while every size stayed, Note [Automatic dynamic strides])
    dynamic_strides: dict = field(default_factory=dict)
    suppressed: int = 0  # inside ``suppress_guards()``: decisions are answered, not recorded

    @contextlib.contextmanager
    def suppress_guards(self):
        """Answer decisions from the example values without recording them (torch's ``ShapeEnv.suppress_guards``).

        Torch suppresses the guards of one step only: the ``as_strided`` that replays a view input on its
        base's fake (torch/_subclasses/meta_utils.py ``view_from_base``), whose bounds check would guard
        on the base's sizes (Note [A view input is fakified through its base], fake/converter.py).
        """
        self.suppressed += 1
        try:
            yield
        finally:
            self.suppressed -= 1

    # -- unbacked symbols -------------------------------------------------------------------
    def create_unbacked_symint(self, why: str, lo=None, hi=None) -> torch.SymInt:
        """Note [An unbacked symbol has no value]

        A size read off an input has an example value (a *hint*): the trace may ask
        "is s0 > 4?" and answer from it, recording a guard. ``x.sum().item()`` or the
        length of ``x.nonzero()`` has none: it is known only when the graph runs. Such a
        symbol (torch's ``create_unbacked_symint``: ``u0, u1, ...``; a float ``zuf0``) has
        a range instead (``[0, 5]`` for the rows of ``nonzero`` of 5 elements), facts
        the user states (``torch._check(u0 >= 2)``), and no hint: a question those do not
        decide raises ``GuardOnDataDependentSymNode``, as torch's ``ShapeEnv`` does.
        """
        sym = sympy.Symbol(f"u{sum(1 for u in self.unbacked if u.name.startswith('u'))}", integer=True)
        self._new_unbacked(sym, why, lo, hi)
        return torch.SymInt(SymNode(sym, self, int, None))

    def create_unbacked_symfloat(self, why: str) -> torch.SymFloat:
        sym = sympy.Symbol(f"zuf{sum(1 for u in self.unbacked if u.name.startswith('zuf'))}", real=True)
        self._new_unbacked(sym, why, None, None)
        return torch.SymFloat(SymNode(sym, self, float, None))

    def _new_unbacked(self, sym, why: str, lo, hi) -> None:
        self.unbacked.append(sym)
        self.var_to_range[sym] = [lo, hi]
        if lo is not None or hi is not None:
            self.creation_range[sym] = (lo, hi)
        self.unbacked_why[sym] = why
        if lo is not None and lo >= 0:
            self.size_like.add(sym)

    def is_unbacked(self, expr) -> bool:
        return bool(set(getattr(_sympify(expr), "free_symbols", ())) & set(self.unbacked))

    def defer_runtime_assert(self, expr, why: str) -> None:
        """A fact the user states (``torch._check(u0 >= 2)``): kept, narrows ranges, checked when the graph runs."""
        expr = _canonical(self.simplify(_sympify(expr)))
        if expr in (sympy.true,):
            return
        if expr is sympy.false:
            raise RuntimeError(f"torch._check failed: {why} is always false")
        self.deferred_runtime_asserts.append(ShapeGuard(expr, why))
        if isinstance(expr, (sympy.Ge, sympy.Gt, sympy.Le, sympy.Lt)) and expr.lhs in self.var_to_range \
                and expr.rhs.is_Integer:
            bound = int(expr.rhs)
            rng = self.var_to_range[expr.lhs]
            if isinstance(expr, (sympy.Ge, sympy.Gt)):
                low = bound + (1 if isinstance(expr, sympy.Gt) else 0)
                rng[0] = low if rng[0] is None else max(rng[0], low)
                if rng[0] >= 0:
                    self.size_like.add(expr.lhs)
            else:
                high = bound - (1 if isinstance(expr, sympy.Lt) else 0)
                rng[1] = high if rng[1] is None else min(rng[1], high)

    def value_ranges(self) -> dict:
        """``{symbol: (lo, hi)}`` of every unbacked symbol (None: unbounded on that side)."""
        return {s: tuple(r) for s, r in self.var_to_range.items()}

    # -- symbols ---------------------------------------------------------------------------
    def _generate_unique_id(self, source: str) -> int:
        """Note [A symbol's name]

        A backed symbol is named after where its value was read, not after how many came
        before it: torch's ``ShapeEnv._generate_unique_id`` (torch/fx/experimental/symbolic_shapes.py,
        called from ``create_symbol``) takes the sha256 of the source's name (``L['x'].size()[0]``),
        mod 100, and steps up by one while that number is taken in this ShapeEnv (so ``s100`` can
        follow ``s99``). ``L['x'].size()[0]`` is therefore ``s77`` in every program, and a guard or
        a recompile reason reads the same in torch and here. Sizes (``s``), int inputs (``s``)
        and float inputs (``zf``) share the numbers; unbacked symbols still count up (``u0``,
        ``u1``: ``create_unbacked_symint``), and a size that is duck-sized with an earlier one
        takes that one's symbol, so which source is hashed depends on the order sizes are read.
        """
        attempt = int(hashlib.sha256(str(source).encode()).hexdigest(), 16) % 100
        while attempt in self.unique_ids:
            attempt += 1
        self.unique_ids.add(attempt)
        return attempt

    def create_symbol(self, val: int, source: str, duck: bool = True) -> "sympy.Symbol | int":
        """The symbol for the size ``val`` read at ``source`` (or ``val`` itself for 0 and 1).

        ``duck``: torch's ``DimDynamic.DUCK`` (share the symbol of an equal size made DUCK
        before); False is ``DimDynamic.DYNAMIC``, a symbol of its own (Note [Duck sizing]).
        """
        if val in (0, 1):
            self.specializations.append(Specialization(source, val, f"size {val} is specialized (0/1 "
                                                                    "specialization: broadcasting and emptiness "
                                                                    "depend on it)"))
            return val
        if duck and self.duck_shape and val in self.val_to_var:
            sym = self.val_to_var[val]
            self.var_to_sources[sym].append(source)
            self.duck_guards.append((source, self.var_to_sources[sym][0]))
            return sym
        sym = sympy.Symbol(f"s{self._generate_unique_id(source)}", integer=True, positive=True)
        self.var_to_val[sym] = val
        self.var_to_sources[sym] = [source]
        self.backed_var_to_range[sym] = [2, None]  # Note [0/1 specialization]
        if duck:
            self.val_to_var.setdefault(val, sym)
        events.emit("create_symbol", symbol=str(sym), value=val, source=str(source))
        return sym

    def create_int_symbol(self, val: int, source: str) -> sympy.Symbol:
        """Note [An int input becomes a symbol]

        An int argument that changed between calls (or any, under ``dynamic=True``)
        gets a symbol of its own, as torch's ``create_unspecified_symbol``: it is not
        duck-sized with a tensor size of the same value, not specialized for 0 and 1
        (torch specializes 0/1 plain ints only inside Meta), and its range is every
        int, so it has no ``>= 2`` guard; a decision on it (``n > 3``) is a guard, and one that
        bounds it prints as its range (Note [A symbol's range guard]).
        """
        sym = sympy.Symbol(f"s{self._generate_unique_id(source)}", integer=True)
        self.var_to_val[sym] = val
        self.var_to_sources[sym] = [source]
        self.backed_var_to_range[sym] = [None, None]
        self.int_symbols.add(sym)
        events.emit("create_symbol", symbol=str(sym), value=val, source=str(source))
        return sym

    def create_float_symbol(self, val: float, source: str) -> sympy.Symbol:
        """Note [A float input becomes a symbol]

        A float argument lifted to a graph input (``dynamic_shapes.float_input``) is read
        in the graph as ``.item()`` of a 0-d float64 tensor, whose value is this backed
        symbol (torch's ``create_unspecified_symbol`` of ``SymT.FLOAT``, named after a hash of its
        source as a size is: ``zf72`` for ``L['s']``, Note [A symbol's name]). Its range is every float: no ``>= 2`` guard, no 0/1 specialization,
        and a decision on it (``scale > 1``) is a guard over the argument (``L['scale'] > 1``).
        """
        sym = sympy.Symbol(f"zf{self._generate_unique_id(source)}", real=True)
        self.var_to_val[sym] = val
        self.var_to_sources[sym] = [source]
        self.float_symbols.add(sym)
        events.emit("create_symbol", symbol=str(sym), value=val, source=str(source))
        return sym

    def create_symint(self, expr, hint: int):
        """A ``torch.SymInt`` over ``expr`` (a plain int when ``expr`` is a number)."""
        expr = _sympify(expr)
        if expr.is_Integer:
            return int(expr)
        return torch.SymInt(SymNode(expr, self, int, hint))

    # -- simplification and decisions ----------------------------------------------------------
    def simplify(self, expr: sympy.Basic) -> sympy.Basic:
        if self.unbacked_renamings and getattr(expr, "free_symbols", None):
            expr = expr.xreplace(self.unbacked_renamings)
        if self.replacements and getattr(expr, "free_symbols", None):
            expr = expr.xreplace(self.replacements)
        return expr

    def statically_known(self, expr: sympy.Basic, use_guards: bool = True) -> Optional[bool]:
        """True/False when ``expr`` holds for every value of its symbols in their ranges, else None.

        The test: write each symbol as ``t + lo`` with ``t >= 0`` (``lo``: 2 for a size, or
        what guards narrowed its range to) and let sympy decide, then as ``hi - t`` where a
        range has an upper end; with ``use_guards`` a symbol already guarded divisible by ``k``
        is written ``k*t`` with ``t >= 1`` (so after ``s0 % 8 == 0``, ``(3*s0) // 24 >= 0``
        needs no guard of its own).
        (Torch's ``_maybe_evaluate_static`` uses value ranges and divisibility the same way, and more.)
        """
        expr = self.simplify(_sympify(expr))
        if expr in (sympy.true, sympy.false):
            return bool(expr)
        if not isinstance(expr, sympy.Basic) or not expr.free_symbols:
            try:
                return bool(expr)
            except TypeError:
                return None
        ranges = {**self.backed_var_to_range, **self.var_to_range}  # unbacked: Note [An unbacked symbol ...]
        shifted = {s: sympy.Symbol(f"_t_{s.name}", integer=True, positive=True) * self.divisible[s]
                   for s in expr.free_symbols if use_guards and s in self.divisible}
        for s in expr.free_symbols & set(ranges) - set(shifted):
            lo, hi = ranges[s]
            if lo is not None and s.is_integer:
                shifted[s] = sympy.Symbol(f"_t_{s.name}", integer=True, nonnegative=True) + lo
            elif hi is not None and s.is_integer:
                shifted[s] = hi - sympy.Symbol(f"_t_{s.name}", integer=True, nonnegative=True)
        try:
            out = sympy.simplify(expr.xreplace(shifted))
        except Exception:  # noqa: BLE001 - sympy could not decide
            return None
        if out not in (sympy.true, sympy.false):  # an unbacked symbol's upper bound may settle it
            upper = {s: hi - sympy.Symbol(f"_t_{s.name}", integer=True, nonnegative=True)
                     for s, (lo, hi) in ranges.items() if s in expr.free_symbols and hi is not None}
            if upper:
                try:
                    out = sympy.simplify(expr.xreplace({**shifted, **upper}))
                except Exception:  # noqa: BLE001
                    return None
        return bool(out) if out in (sympy.true, sympy.false) else None

    def evaluate_expr(self, expr: sympy.Basic, hint: Any, why: str) -> Any:
        """The value of ``expr`` for the example sizes; records it as a guard unless always so."""
        expr = self.simplify(_sympify(expr))
        if not expr.free_symbols:
            return expr if not expr.is_Integer else int(expr)
        if self.is_unbacked(expr):  # no hint to answer from (Note [An unbacked symbol has no value])
            known = self.statically_known(expr) if (expr.is_Boolean or isinstance(expr, sympy.Rel)) else None
            if known is None:
                known = self._implied(expr)
            if known is None:
                raise GuardOnDataDependentSymNode(expr, sorted(str(u) for u in self.size_like))
            return known
        if expr.is_Boolean or isinstance(expr, sympy.Rel):
            known = self.statically_known(expr)
            if known is None:
                known = self._implied(expr)
            if known is not None:
                return known
            value = bool(hint)
            if self.suppressed:
                return value
            self._record(expr if value else sympy.Not(expr), why)
            if value and isinstance(expr, sympy.Eq):
                self._unify(expr)
            return value
        # an int needed as a Python int (range(n), a Python list of that length): the symbol is fixed;
        # a float needed as a Python float (Note [A float input becomes a symbol]) the same way
        value = float(hint) if expr.free_symbols & self.float_symbols and not expr.is_integer else int(hint)
        if self.suppressed:
            return value
        self._record(sympy.Eq(expr, value), why)
        if isinstance(expr, sympy.Symbol):
            self.replacements[expr] = sympy.Integer(value) if type(value) is int else sympy.Float(value)
        return value

    def _implied(self, expr: sympy.Basic) -> Optional[bool]:
        """True/False when the guards already recorded decide ``expr`` (``Ne(a, 1)`` decides
        ``Not(Eq(a, 1) & ...)``), else None: a compound question asks nothing new (torch's axioms)."""
        facts = {}
        for g in [*self.guards, *self.deferred_runtime_asserts]:
            e = g.expr
            if isinstance(e, sympy.Not):
                facts[_canonical(e.args[0])] = sympy.false
            elif isinstance(e, sympy.Ne):
                facts[_canonical(sympy.Eq(*e.args))] = sympy.false
            else:
                facts[e] = sympy.true
        if not facts:
            return None
        atoms = {a: facts[_canonical(a)] for a in expr.atoms(sympy.Eq, sympy.Ne, sympy.Rel)
                 if _canonical(a) in facts}
        atoms.update({a: sympy.Not(facts[_canonical(sympy.Eq(*a.args))])
                      for a in expr.atoms(sympy.Ne) if _canonical(sympy.Eq(*a.args)) in facts})
        if not atoms:
            return None
        out = expr.xreplace(atoms)
        return bool(out) if out in (sympy.true, sympy.false) else None

    # adapters for torch's free functions (Note [Our SymNode inside torch.SymInt])
    def evaluate_sym_node(self, node: SymNode, size_oblivious: bool = False, fallback_value=None):
        if fallback_value is not None and self.is_unbacked(node.expr):  # guard_or_false/true: no question
            known = self.statically_known(node.expr)
            if known is None:
                known = self._implied(node.expr)
            return fallback_value if known is None else known
        return self.evaluate_expr(node.expr, node.hint, "guard_or_false" if fallback_value is False else "guard")

    def _maybe_evaluate_static(self, expr, **_):
        known = self.statically_known(expr)
        return None if known is None else sympy.true if known else sympy.false

    def _record(self, expr: sympy.Basic, why: str) -> None:
        """Note [Two sizes as asked]

        ``_canonical`` gives each decision one spelling, so a question asked twice, either way
        round, is one guard; an equality or inequality of two symbols is sorted by name
        (``Ne(s27, s7)``). Torch prints the guard with its two sides as the kernel asked them
        (``L['x'].stride()[0] != L['x'].size()[1]`` for ``Ne(s7, s27)``: torch/fx/experimental/
        symbolic_shapes.py ``ShapeEnv.evaluate_expr`` keeps ``Not(Eq(a, b))``), so ours keeps
        that spelling beside the canonical one, for printing only.
        """
        raw = expr
        expr = _canonical(expr)
        if not any(g.expr == expr for g in self.guards):
            two = isinstance(raw, (sympy.Eq, sympy.Ne)) and raw.lhs.is_Symbol and raw.rhs.is_Symbol and raw != expr
            self.guards.append(ShapeGuard(expr, why, raw if two else None))
        self._refine_ranges(expr, why)
        if isinstance(expr, sympy.Eq) and expr.rhs == 0 and isinstance(expr.lhs, sympy.Mod):
            s, k = expr.lhs.args
            if isinstance(s, sympy.Symbol) and k.is_Integer:
                self.divisible[s] = int(k)

    def _refine_ranges(self, expr: sympy.Basic, why: str) -> None:
        """Narrow the range of each backed symbol ``expr`` bounds (Note [A symbol's range guard]).

        As torch's ``ShapeEnv._refine_ranges``: solve ``expr`` for each symbol (``s0 > s1`` is
        ``s0 >= s1 + 1``), bound the other side by the other symbols' ranges (``s1 >= 2``, so
        ``s0 >= 3``), and keep the tighter end. Ours solves a relation linear in the symbol with
        coefficient 1 or -1 (torch's ``try_solve`` does more); ``!=`` narrows nothing, as in torch.
        """
        flip = {sympy.Ge: sympy.Le, sympy.Gt: sympy.Lt, sympy.Le: sympy.Ge, sympy.Lt: sympy.Gt, sympy.Eq: sympy.Eq}
        if type(expr) not in flip:
            return
        diff = sympy.expand(expr.lhs - expr.rhs)
        for s in diff.free_symbols & set(self.backed_var_to_range):
            c = diff.coeff(s)
            rest = sympy.expand(diff - c * s)
            if c not in (1, -1) or rest.has(s):
                continue
            rel, rhs = (type(expr), -rest) if c == 1 else (flip[type(expr)], rest)  # s REL rhs
            lo_rhs, hi_rhs = self._bound(rhs)
            rng = self.backed_var_to_range[s]
            old = list(rng)
            if rel in (sympy.Eq, sympy.Ge, sympy.Gt) and lo_rhs is not None:
                low = lo_rhs + (1 if rel is sympy.Gt else 0)
                rng[0] = low if rng[0] is None else max(rng[0], low)
            if rel in (sympy.Eq, sympy.Le, sympy.Lt) and hi_rhs is not None:
                high = hi_rhs - (1 if rel is sympy.Lt else 0)
                rng[1] = high if rng[1] is None else min(rng[1], high)
            if rng != old:
                self.range_why.setdefault(s, []).append(f"{expr}: {why}")
            if rng[0] is not None and rng[0] == rng[1] and s not in self.replacements:
                self.replacements[s] = sympy.Integer(rng[0])  # one value left: torch's "range_refined_to_singleton"

    def _bound(self, expr: sympy.Basic) -> tuple:
        """``(lo, hi)`` of a linear ``expr`` over the symbols' ranges (None: unbounded; torch's ``bound_sympy``)."""
        expr = sympy.expand(expr)
        if expr.is_Integer:
            return int(expr), int(expr)
        const, terms = expr.as_coeff_add()
        if not const.is_Integer:
            return None, None
        lo = hi = int(const)
        for term in terms:
            k, s = term.as_coeff_Mul()
            if not (k.is_Integer and s.is_Symbol):
                return None, None
            s_lo, s_hi = self.backed_var_to_range.get(s) or self.var_to_range.get(s) or (None, None)
            a, b = (s_lo, s_hi) if k > 0 else (s_hi, s_lo)
            lo = None if lo is None or a is None else lo + int(k) * a
            hi = None if hi is None or b is None else hi + int(k) * b
        return lo, hi

    def _unify(self, eq: sympy.Eq) -> None:
        """After ``Eq(s17, s77)`` held, write ``s77`` as ``s17`` from now on (Note [Duck sizing])."""
        lhs, rhs = eq.lhs, eq.rhs
        if isinstance(lhs, sympy.Symbol) and isinstance(rhs, sympy.Symbol):
            # torch's ``_maybe_guard_rel`` solves for the symbol sorting last by (hint, name); the two
            # hints are equal here, so the name decides: ``Eq(s27, s77)`` writes s77 as s27
            new, old = sorted((lhs, rhs), key=lambda s: s.name)
            self.replacements[old] = new
        elif isinstance(lhs, sympy.Symbol) and not rhs.has(lhs):
            self.replacements[lhs] = rhs
        elif isinstance(rhs, sympy.Symbol) and not lhs.has(rhs):
            self.replacements[rhs] = lhs

    # -- the guards, as Python ---------------------------------------------------------------
    def source_names(self) -> dict:
        return {s: srcs[0] for s, srcs in self.var_to_sources.items()}

    def track_fake(self, source: str, value) -> None:
        """An input the trace made symbolic (a fake tensor, a SymInt, a SymFloat), in the order the trace wrapped
        it: torch's ``ShapeEnv.tracked_fakes``, which ``produce_guards`` walks (Note [Guards walk the inputs])."""
        self.tracked_fakes.append((source, value))

    def _tracked_exprs(self) -> list:
        """(source, simplified expression, is a tensor property) for every size, stride, offset and scalar tracked."""
        def expr(v):
            if isinstance(v, (torch.SymInt, torch.SymFloat)):
                return self.simplify(v.node.expr)
            return sympy.Float(v) if isinstance(v, float) else sympy.Integer(v)

        out = []
        for source, v in self.tracked_fakes:
            if isinstance(v, torch.Tensor):
                out += [(f"{source}.size()[{i}]", expr(s), True) for i, s in enumerate(v.shape)]
                out += [(f"{source}.stride()[{i}]", expr(s), True) for i, s in enumerate(v.stride())]
                out.append((f"{source}.storage_offset()", expr(v.storage_offset()), True))
            else:
                out.append((source, expr(v), False))
        if not self.tracked_fakes:  # a ShapeEnv used on its own (no trace tracked inputs): its symbols' sources
            out = [(src, self.simplify(sym), True) for sym, srcs in self.var_to_sources.items() for src in srcs]
        return out

    def produce_guards(self) -> list[tuple[str, str]]:
        """Note [Guards walk the inputs]

        Every shape guard as ``(python expression, why)``, over the inputs' sizes, in torch's
        order (``ShapeEnv.produce_guards_verbose``, torch/fx/experimental/symbolic_shapes.py):

        1. every tracked input's sizes, strides and storage offset, then each symbolic int and
           float, in the order the trace wrapped them, each as its expression after the
           replacements: the first source where a symbol appears names it, and any later
           source of a symbol or an expression is a guard (``L['y'].size()[0] == L['x'].size()[0]``
           from duck sizing or a unification, ``L['x'].stride()[0] == L['x'].size()[1]`` for a
           contiguous 2-D input); a constant of a tensor is left to its TENSOR_MATCH;
        2. the trace's decisions, simplified, minus those the symbols' ranges settle;
        3. each symbol's range, in the order of step 1 (``2 <= L['x'].size()[0] <= 3``: Note
           [A symbol's range guard]), and ``not math.isnan(L['s'])`` for a float symbol.
        """
        tracked = self._tracked_exprs()
        symbol_to_source: dict = {}
        for source, e, _ in tracked:
            if isinstance(e, sympy.Symbol):
                symbol_to_source.setdefault(e, []).append(source)
        names = {**self.source_names(), **{s: srcs[0] for s, srcs in symbol_to_source.items()}}
        out: list[tuple[str, str]] = []
        for source, e, is_property in tracked:
            if isinstance(e, sympy.Symbol) and symbol_to_source[e][0] == source:
                continue
            if is_property and e.is_number:
                continue
            if isinstance(e, sympy.Symbol) and e in self.var_to_val and len(self.var_to_sources[e]) > 1 \
                    and source in self.var_to_sources[e]:
                why = "duck sizing: these sizes were equal when traced"
            elif isinstance(e, sympy.Symbol):
                why = f"the trace needed the two sizes equal (unified as {e})"
            else:
                why = f"the trace computed {source} as {e}"
            out.append((f"{source} == {python_expr(e, names)}", why))
        issued = set()
        for g in self.guards:
            e = self.simplify(g.expr)
            # a guard is dropped when the ranges settle it (its bounds print as the range guard below), not
            # when it only follows from another guard (a divisibility guard stays: it may be a fact used by others)
            if e in (sympy.true, sympy.false) or e in issued or self.statically_known(e, use_guards=False) is True:
                continue
            issued.add(e)
            shown = self.simplify(g.asked) if g.asked is not None else e  # Note [Two sizes as asked]
            out.append((python_expr(shown if _canonical(shown) == e else e, names), f"{g.expr}: {g.why}"))
        order = list(symbol_to_source) + [s for s in self.backed_var_to_range if s not in symbol_to_source]
        for sym in order:
            lo, hi = self.backed_var_to_range.get(sym, (None, None))
            if sym in self.replacements:
                continue
            src = names[sym]
            if lo is not None or hi is not None:
                expr = f"{lo} <= {src} <= {hi}" if lo is not None and hi is not None else \
                    f"{lo} <= {src}" if lo is not None else f"{src} <= {hi}"
                why = ([f"{sym} is a dynamic size, never 0 or 1 (0/1 specialization)"] if sym not in self.int_symbols
                       else []) + self.range_why.get(sym, [])
                out.append((expr, "; ".join(why)))
            if sym in self.float_symbols:
                out.append((f"not math.isnan({src})", "implicit guard for float input due to NaN specialization "
                                                      "in the framework (torch's words)"))
        return out

    def format_guards(self) -> str:
        return "\n".join(f"{e}   # {why}" for e, why in self.produce_guards())

    # -- symbolic meta tensors -------------------------------------------------------------
    def symbolic_strides_and_offset(self, t: torch.Tensor, source: str, sizes: list) -> tuple[list, Any]:
        """The strides and storage offset of ``t``'s symbolic fake, as torch's ``_compute_symbolic_stride``.

        Strides are visited smallest first. A stride of 0 or 1 stays itself (unless it
        is also the product of the next dim's size and stride); a stride equal to an
        earlier dim's ``size * stride`` is that expression (``x.t()``: ``(1, s77)``); any
        other becomes a DUCK symbol of its own, read from ``L['x'].stride()[i]``, once
        some size of ``t`` is symbolic. The storage offset is a DUCK symbol
        (``L['x'].storage_offset()``) when some size is, with 0/1 specialization.
        """
        ex_size, ex_stride = [int(s) for s in t.shape], [int(s) for s in t.stride()]
        size_exprs = [s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(s) for s in sizes]
        static = not any(isinstance(s, torch.SymInt) for s in sizes)
        n = len(ex_size)
        strides: list = [None] * n
        candidates: dict = {}
        for val, neg_i in sorted((v, -i) for i, v in enumerate(ex_stride)):
            i = -neg_i
            contiguous = i != n - 1 and ex_stride[i] == ex_size[i + 1] * ex_stride[i + 1]
            if i in self.dynamic_strides.get(source, ()):  # a stride that changed: its own symbol, as torch's
                out = _sympify(self.create_symbol(val, f"{source}.stride()[{i}]", duck=False))
            elif val in (0, 1) and not contiguous:
                out = sympy.Integer(val)
            elif val in candidates:
                out = candidates[val]
            elif static:
                out = sympy.Integer(val)
            else:
                out = _sympify(self.create_symbol(val, f"{source}.stride()[{i}]", duck=True))
            strides[i] = out
            candidates[ex_size[i] * val] = size_exprs[i] * out
        ex_offset = int(t.storage_offset())
        offset = ex_offset if static else self.create_symbol(ex_offset, f"{source}.storage_offset()", duck=True)
        return ([self.create_symint(e, v) for e, v in zip(strides, ex_stride)],
                self.create_symint(offset, ex_offset))


    def symbolic_sizes(self, t: torch.Tensor, source: str, dynamic_dims) -> list:
        """Sizes of ``t`` with the dims in ``dynamic_dims`` symbolic (SymInts), the rest ints."""
        sizes = []
        for i, s in enumerate(t.shape):
            if i in dynamic_dims and f"{source}.size()[{i}]" in self.unbacked_inputs:  # md.mark_unbacked
                sizes.append(self.create_unbacked_symint(f"md.mark_unbacked: {source}.size()[{i}]", 0))
            elif i in dynamic_dims:  # a dict says per dim whether it is DUCK (True) or DYNAMIC (False)
                duck = dynamic_dims.get(i, True) if isinstance(dynamic_dims, dict) else True
                sym = self.create_symbol(int(s), f"{source}.size()[{i}]", duck=duck)
                sizes.append(self.create_symint(sym, int(s)))
            else:
                sizes.append(int(s))
        return sizes


def contiguous_strides(sizes: list) -> list:
    """The strides of a contiguous tensor of ``sizes`` (SymInt products where sizes are symbolic)."""
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc = acc * s if not (isinstance(s, int) and s in (0, 1)) else acc
    return list(reversed(strides))
