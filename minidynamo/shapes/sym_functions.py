"""Sympy functions and the printer of size expressions: ``FloorDiv``, ``TruncToInt``, Python over sources.

Place in the pipeline: under the ShapeEnv (``symbolic_shapes.py``), which builds its
expressions from these functions and prints its guards with ``python_expr``.
Mirrors ``torch/utils/_sympy/functions.py`` (``FloorDiv``, ``TruncToInt``) and
``torch/utils/_sympy/printers.py`` (``PythonPrinter``): two functions and a printer
of the dozens there.
"""

from __future__ import annotations

from typing import Optional

import sympy
from sympy.printing.str import StrPrinter

__all__ = ["FloorDiv", "TruncToInt", "python_expr"]


class FloorDiv(sympy.Function):
    """``a // b`` over integers (torch's ``torch.utils._sympy.functions.FloorDiv``)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer and b != 0:
            return sympy.Integer(int(a) // int(b))
        if b == 1:
            return a
        g = sympy.gcd(a, b)  # (4*s0) // (2*s1) -> (2*s0) // s1, as torch's FloorDiv
        if g != 1 and g.is_positive:
            return FloorDiv(sympy.cancel(a / g), sympy.cancel(b / g))
        if b.free_symbols or a.free_symbols:
            q = sympy.cancel(a / b)
            if q.is_integer or (q.is_polynomial() and sympy.denom(q) == 1 and all(
                    c.is_Integer for c in sympy.Poly(q, *q.free_symbols).coeffs()) if q.free_symbols else q.is_Integer):
                return q
        return None

    # value ranges, as far as sympy's assumptions carry them: a // b of a >= 0 and b > 0 is >= 0,
    # and > 0 when a >= b (so the guards a kernel's checks leave are decided, as torch's ranges do)
    def _eval_is_nonnegative(self):
        a, b = self.args
        if a.is_nonnegative and b.is_positive:
            return True
        return None

    def _eval_is_positive(self):
        a, b = self.args
        if a.is_nonnegative and b.is_positive and (a - b).is_nonnegative:
            return True
        return None


class TruncToInt(sympy.Function):
    """``int(a)`` of a float that may be negative: toward zero (torch's ``TruncToInt``)."""

    is_integer = True

    @classmethod
    def eval(cls, a):
        if a.is_Number:
            return sympy.Integer(int(a))
        return None


# --- printing: sympy over symbols -> Python over the inputs' sizes ------------------


class _PythonPrinter(StrPrinter):
    """``Eq(Mod(s0, 8), 0)`` -> ``L['x'].size()[0] % 8 == 0``."""

    def __init__(self, names: dict):
        super().__init__()
        self.names = names

    def _print_Symbol(self, expr):
        return self.names.get(expr, expr.name)

    def _print_Mod(self, expr):
        a, b = expr.args
        return f"{self.parenthesize(a, 60)} % {self.parenthesize(b, 60)}"

    def _print_FloorDiv(self, expr):
        a, b = expr.args
        return f"({self.parenthesize(a, 60)} // {self.parenthesize(b, 60)})"

    def _print_Relational(self, expr):
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[expr.rel_op]
        return f"{self._print(expr.lhs)} {op} {self._print(expr.rhs)}"

    def _print_Not(self, expr):
        return f"not ({self._print(expr.args[0])})"

    # sympy's own printer writes `a | b`, which Python reads as `x == (1 | x) == 3`:
    # `|` binds tighter than `==`. Each part is parenthesized and joined with or/and.
    def _print_Or(self, expr):
        return " or ".join(f"({self._print(a)})" for a in expr.args)

    def _print_And(self, expr):
        return " and ".join(f"({self._print(a)})" for a in expr.args)

    def _print_TruncToInt(self, expr):
        return f"int({self._print(expr.args[0])})"

    def _print_floor(self, expr):
        return f"int(({self._print(expr.args[0])}) // 1)"  # no `math` in a guard's scope

    def _print_ceiling(self, expr):
        return f"-int(-({self._print(expr.args[0])}) // 1)"

    def _print_Pow(self, expr):
        if expr.exp == sympy.Rational(1, 2):
            return f"({self._print(expr.base)}) ** 0.5"
        return super()._print_Pow(expr)

    def _print_Max(self, expr):
        return f"max({', '.join(self._print(a) for a in expr.args)})"

    def _print_Min(self, expr):
        return f"min({', '.join(self._print(a) for a in expr.args)})"


def python_expr(expr: sympy.Basic, names: Optional[dict] = None) -> str:
    """``expr`` as Python, each symbol written as ``names[symbol]`` (its source)."""
    return _PythonPrinter(names or {}).doprint(expr)
