"""ConstantVariable: a Python value known while tracing (ints, strs, dtypes, shapes).

Place in the pipeline: sizes, dtypes, flags and literals are folded while tracing;
they never reach the graph. Mirrors ``torch/_dynamo/variables/constant.py``.

Note [Constants fold]
    ``x.shape[0] * 2`` runs right here on real ints: the graph only ever sees the
    result. That is why a change of shape or of a guarded int recompiles (the
    folded value is baked into the graph; a guard protects it). Real Dynamo can
    instead keep sizes symbolic (``SymInt``, dynamic shapes); ours always specializes.
"""

from __future__ import annotations

import enum
from typing import Any

import torch

from .. import graph_break_registry as gb
from ..exc import unimplemented
from .base import VariableTracker
from .iter import ListIteratorVariable

# Values we treat as constants. Immutable, so calling their methods at trace time is safe.
CONSTANT_TYPES = (
    int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format, slice, range,
    type((lambda: 0).__code__), enum.Enum,
)


def is_constant_value(value: Any) -> bool:
    if isinstance(value, CONSTANT_TYPES):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(is_constant_value(v) for v in value)
    return False


def _materialize(tx, arg: VariableTracker) -> VariableTracker:
    """An iterator of constants (``"-".join(n.upper() for n in names)``) as a constant tuple."""
    if isinstance(arg, ListIteratorVariable):
        items = arg.unpack_var_sequence(tx)
        if all(i.is_python_constant() for i in items):
            return ConstantVariable(tuple(i.as_python_constant() for i in items))
    return arg


class ConstantVariable(VariableTracker):
    def __init__(self, value: Any, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self) -> Any:
        return self.value

    def is_python_constant(self) -> bool:
        return True

    def python_type(self) -> type:
        return type(self.value)

    def as_proxy(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError:
            unimplemented(f"{type(self.value).__name__} has no attribute {name!r}", gb_id=gb.OBSERVED_EXCEPTION)
        if callable(attr) and not is_constant_value(attr):
            from .base import GetAttrVariable

            return GetAttrVariable(self, name)
        return ConstantVariable(attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        args = [_materialize(tx, a) for a in args]
        if all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values()):
            fn = getattr(self.value, name, None)
            if fn is None and name == "__len__":  # len(5)
                tx.raise_observed_exception(TypeError, [f"object of type {type(self.value).__name__!r} has no len()"])
            if fn is None:
                unimplemented(f"{type(self.value).__name__} has no method {name!r}", gb_id=gb.OBSERVED_EXCEPTION)
            cargs = [a.as_python_constant() for a in args]
            ckw = {k: v.as_python_constant() for k, v in kwargs.items()}
            try:
                result = fn(*cargs, **ckw)
            except Exception as e:  # noqa: BLE001 - the user's own error ("abc".index("z")), raised in the trace
                tx.raise_error_of(e)
            return tx.wrap_constant_result(result)
        if name == "format" and isinstance(self.value, str):
            unimplemented("str.format with non-constant arguments", gb_id=gb.UNSUPPORTED_METHOD)
        return super().call_method(tx, name, args, kwargs)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, (tuple, list, str, torch.Size, range, bytes, frozenset, set)):
            return [ConstantVariable(v) for v in self.value]
        unimplemented(f"iterating over {type(self.value).__name__}", gb_id=gb.BUILTIN_OPERATOR)

    def reconstruct(self, codegen) -> str:
        if type(self.value) is set:  # a new set at each call, never one object shared by all calls
            return f"set({codegen.constant_expr(tuple(self.value))})"
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


class ConstantLikeVariable(VariableTracker):
    """A compiled regex or a match: not a literal, but as fixed as one (torch's ``ConstantLikeVariable``).

    Note [A regex is a constant of the trace]
        ``re.compile("x+")`` folds on constants (Note [re's functions fold on constants],
        polyfills.py); torch 2.13 wraps the ``re.Pattern`` it returns, and any ``re.Match``,
        as a ``ConstantLikeVariable`` (torch/_dynamo/variables/misc.py): a method called
        with constant arguments runs while tracing, and its result is a constant (a
        literal) or another constant-like value (a match); any other call breaks, with
        torch's registry types. Neither object can change, so nothing is guarded.
    """

    def __init__(self, value: Any, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        result = getattr(self.value, name)
        if callable(result):
            from .base import GetAttrVariable

            return GetAttrVariable(self, name)
        return wrap_constant_like(result, f"{type(self.value).__name__}.{name}", tx)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        prefix = f"{type(self.value).__name__}.{name}"
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unimplemented(f"Attempted to call {prefix} with non-constant args.",
                          "Ensure that the args to the method call are constant (int, str, etc.).",
                          gb_id="GB0299", context=f"{prefix}(*{args}, **{kwargs})")
        result = getattr(self.value, name)(*[a.as_python_constant() for a in args],
                                           **{k: v.as_python_constant() for k, v in kwargs.items()})
        return wrap_constant_like(result, prefix, tx)

    def reconstruct(self, codegen) -> str:
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"ConstantLikeVariable({type(self.value).__name__})"


def is_constant_like(value: Any) -> bool:
    import re

    return isinstance(value, (re.Pattern, re.Match))


def _literal(value: Any) -> bool:
    """torch's ``ConstantVariable.is_literal``: a constant, or a list/tuple/set of literals."""
    if type(value) in (list, tuple, set, frozenset):
        return all(_literal(v) for v in value)
    return is_constant_value(value)


def wrap_constant_like(result: Any, what: str, tx=None) -> VariableTracker:
    """A literal result is a constant, a match is constant-like; anything else breaks (torch's rule)."""
    if type(result) in (list, tuple) and tx is not None and _literal(result):
        return tx.wrap_constant_result(result)  # ``pattern.findall(text)``: a list of strings
    if is_constant_value(result) and not isinstance(result, (list, dict, set)):
        return ConstantVariable(result)
    if is_constant_like(result):
        return ConstantLikeVariable(result)
    unimplemented(f"Attempted to call {what}, got unsupported return value {result!r:.60}.",
                  gb_id="GB0292", context=f"{what} returned {result!r:.60}")
