"""SymNode: one symbolic value (a sympy expression and its example value), as torch.SymInt wants it.

Place in the pipeline: inside every ``torch.SymInt``/``SymBool``/``SymFloat`` of a dynamic
fake trace; meta kernels and the user's code compute on it (``add``, ``mul``, ``eq``), and
every decision (``guard_bool``, ``guard_int``) goes to its ``ShapeEnv``
(``symbolic_shapes.py``, which holds Note [Our SymNode inside torch.SymInt]). Mirrors
``torch/fx/experimental/sym_node.py`` (``SymNode``).
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import sympy
import torch

from .sym_functions import FloorDiv, TruncToInt


def _sympify(x):
    return x if isinstance(x, sympy.Basic) else sympy.Integer(x) if type(x) is int else sympy.sympify(x)


def _h(fn, *hints):
    """The example value of a result: none when an operand has none (an unbacked symbol, symbolic_shapes.py)."""
    return None if any(h is None for h in hints) else fn(*hints)


class SymNode:
    """One symbolic value: a sympy expression, its type, and its value for the example inputs.

    Speaks the protocol ``torch.SymInt`` expects (Note [Our SymNode inside torch.SymInt]).
    """

    def __init__(self, expr, shape_env: "ShapeEnv", pytype: type, hint):
        self._expr = _sympify(expr)
        self.shape_env = shape_env
        self.pytype = pytype
        self.hint = hint

    @property
    def expr(self) -> sympy.Basic:
        return self.shape_env.simplify(self._expr)

    @property
    def _hint(self):  # torch's refs read the hint under this name (_sym_node_hint_disproves)
        return self.hint

    # -- what kind ------------------------------------------------------------------
    def is_int(self) -> bool:
        return self.pytype is int

    def is_float(self) -> bool:
        return self.pytype is float

    def is_bool(self) -> bool:
        return self.pytype is bool

    def is_nested_int(self) -> bool:
        return False

    def is_symbolic(self) -> bool:
        return True

    def is_constant(self) -> bool:
        return False

    def has_hint(self) -> bool:
        return self.hint is not None  # an unbacked symbol has none (symbolic_shapes.py)

    def maybe_as_int(self):
        e = self.expr
        return int(e) if e.is_Integer else None

    def maybe_as_bool(self):
        e = self.expr
        return bool(e) if e in (sympy.true, sympy.false) else None

    def maybe_as_float(self):
        return None

    # -- making nodes --------------------------------------------------------------------
    def _new(self, expr, pytype, hint) -> "SymNode":
        return SymNode(expr, self.shape_env, pytype, hint)

    def wrap_int(self, num: int) -> "SymNode":
        return self._new(sympy.Integer(num), int, num)

    def wrap_float(self, num: float) -> "SymNode":
        return self._new(sympy.Float(num), float, num)

    def wrap_bool(self, num: bool) -> "SymNode":
        return self._new(sympy.true if num else sympy.false, bool, num)

    def clone(self) -> "SymNode":
        return self

    def with_shape_env(self, shape_env) -> "SymNode":
        return SymNode(self._expr, shape_env, self.pytype, self.hint)

    # -- arithmetic (ints) -----------------------------------------------------------------
    def _binary(self, other: "SymNode", fn, pyfn, pytype=None):
        pytype = pytype or (float if float in (self.pytype, other.pytype) else int)
        return self._new(fn(self.expr, other.expr), pytype, _h(pyfn, self.hint, other.hint))

    def add(self, other):
        return self._binary(other, lambda a, b: a + b, lambda a, b: a + b)

    def sub(self, other):
        return self._binary(other, lambda a, b: a - b, lambda a, b: a - b)

    def mul(self, other):
        return self._binary(other, lambda a, b: a * b, lambda a, b: a * b)

    def mod(self, other):
        return self._binary(other, sympy.Mod, lambda a, b: a % b)

    def floordiv(self, other):
        return self._binary(other, FloorDiv, lambda a, b: a // b, int)

    int_floordiv = floordiv

    def truediv(self, other):
        return self._binary(other, lambda a, b: a / b, lambda a, b: a / b, float)

    int_truediv = float_truediv = truediv

    def pow(self, other):
        return self._binary(other, lambda a, b: a ** b, lambda a, b: a ** b)

    pow_by_natural = float_pow = pow

    def sym_sum(self, args):
        return self._new(sympy.Add(*[a.expr for a in args]), int, _h(lambda *h: sum(h), *[a.hint for a in args]))

    def neg(self):
        return self._new(-self.expr, self.pytype, _h(lambda h: -h, self.hint))

    def sym_min(self, other):
        return self._binary(other, sympy.Min, builtins.min)

    def sym_max(self, other):
        return self._binary(other, sympy.Max, builtins.max)

    def sym_float(self):
        return self._new(self.expr, float, _h(float, self.hint))

    def sym_int(self):
        """``int(s0 / 2)``: truncation toward zero; ``floor`` when the value cannot be negative."""
        e = self.expr
        if not e.is_integer:
            e = sympy.floor(e) if e.is_nonnegative else TruncToInt(e)
        return self._new(e, int, _h(int, self.hint))

    trunc = sym_int  # math.trunc(SymFloat), which torch.sym_int calls

    def floor(self):
        return self._new(self.expr if self.expr.is_integer else sympy.floor(self.expr), int, _h(math.floor, self.hint))

    def ceil(self):
        return self._new(self.expr if self.expr.is_integer else sympy.ceiling(self.expr), int, _h(math.ceil, self.hint))

    def sym_sqrt(self):
        return self._new(sympy.sqrt(self.expr), float, _h(math.sqrt, self.hint))

    def abs(self):
        return self._new(sympy.Abs(self.expr), self.pytype, _h(builtins.abs, self.hint))

    # -- comparisons and logic (bools) -----------------------------------------------------
    def _compare(self, other, fn, pyfn):
        return self._new(fn(self.expr, other.expr), bool, _h(pyfn, self.hint, other.hint))

    def eq(self, other):
        return self._compare(other, sympy.Eq, lambda a, b: a == b)

    def ne(self, other):
        return self._compare(other, sympy.Ne, lambda a, b: a != b)

    def lt(self, other):
        return self._compare(other, sympy.Lt, lambda a, b: a < b)

    def le(self, other):
        return self._compare(other, sympy.Le, lambda a, b: a <= b)

    def gt(self, other):
        return self._compare(other, sympy.Gt, lambda a, b: a > b)

    def ge(self, other):
        return self._compare(other, sympy.Ge, lambda a, b: a >= b)

    def sym_and(self, other):
        return self._compare(other, sympy.And, lambda a, b: a and b)

    def sym_or(self, other):
        return self._compare(other, sympy.Or, lambda a, b: a or b)

    def sym_not(self):
        return self._new(sympy.Not(self.expr), bool, _h(lambda h: not h, self.hint))

    def sym_ite(self, then_node, else_node):
        return then_node if self.guard_bool("", 0) else else_node

    # -- decisions: the value is needed as a Python value -> a guard -----------------------
    def guard_bool(self, file="", line=0) -> bool:
        return bool(self.shape_env.evaluate_expr(self.expr, self.hint, "guard_bool"))

    def expect_true(self, file="", line=0) -> bool:
        """A kernel's ``TORCH_CHECK``-like expectation: on an unbacked symbol that nothing settles, not a
        question but a fact to check when the graph runs (torch's ``expect_true`` -> ``defer_runtime_assert``)."""
        env = self.shape_env
        if env.is_unbacked(self.expr) and env.statically_known(self.expr) is None and env._implied(self.expr) is None:
            env.defer_runtime_assert(self.expr, "expect_true (a kernel's check)")
            return True
        return self.guard_bool(file, line)

    def guard_size_oblivious(self, file="", line=0) -> bool:
        return self.guard_bool(file, line)

    def guard_or_false(self, file="", line=0) -> bool:
        """Known, or else the guarded answer; with no hint (an unbacked symbol) False, asking nothing
        (torch's ``guard_or_false``: a broadcast of ``u0`` against 3 assumes ``u0 != 1``)."""
        known = self.shape_env.statically_known(self.expr)
        if known is None and self.shape_env.is_unbacked(self.expr):
            known = self.shape_env._implied(self.expr)
            return False if known is None else bool(known)
        return bool(known) if known is not None else self.guard_bool(file, line)

    def guard_or_true(self, file="", line=0) -> bool:
        known = self.shape_env.statically_known(self.expr)
        if known is None and self.shape_env.is_unbacked(self.expr):
            known = self.shape_env._implied(self.expr)
            return True if known is None else bool(known)
        return bool(known) if known is not None else self.guard_bool(file, line)

    def statically_known_true(self, file="", line=0) -> bool:
        return self.shape_env.statically_known(self.expr) is True

    def bool_(self) -> bool:
        return self.guard_bool()

    def guard_int(self, file="", line=0) -> int:
        return int(self.shape_env.evaluate_expr(self.expr, self.hint, "guard_int"))

    def int_(self) -> int:
        return self.guard_int()

    def guard_float(self, file="", line=0) -> float:
        return float(self.shape_env.evaluate_expr(self.expr, self.hint, "guard_float"))

    # -- printing --------------------------------------------------------------------------
    def str(self) -> str:
        return f"{self.expr}"

    def _graph_repr(self) -> str:
        return self.str()

    def __str__(self) -> str:
        return self.str()

    def __repr__(self) -> str:
        return f"SymNode({self.expr}, hint={self.hint})"


def is_symbolic(x: Any) -> bool:
    """A ``torch.SymInt``/``SymBool``/``SymFloat`` over a symbolic expression of ours."""
    return isinstance(x, (torch.SymInt, torch.SymBool, torch.SymFloat)) and isinstance(x.node, SymNode)
