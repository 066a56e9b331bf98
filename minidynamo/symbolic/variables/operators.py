"""Operators while tracing: ``+``, ``<``, ``is``, ``in`` and the in-place forms, on any trackers.

Place in the pipeline: ``BINARY_OP``, ``COMPARE_OP``, ``IS_OP``, ``CONTAINS_OP``
(``opcodes_data.py``) and ``operator.*`` called as functions land here (through
``BuiltinVariable``, ``builtin.py``). On constants they fold; on tensors and symbolic
sizes they add a graph node (``operator.add`` etc., as Dynamo records them). Mirrors the
operator half of ``torch/_dynamo/variables/builtin.py`` (``BuiltinVariable``'s binop and
comparison handlers, ``_handle_insert_op_in_graph``).
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

from .. import graph_break_registry as gb
from ..exc import unimplemented
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import ListVariable, TupleVariable
from .numpy import call_numpy_operator
from .sets import SetVariable, call_set_operator
from .tensor import DataPtrVariable, TensorVariable


def identity_of(v: VariableTracker) -> Any:
    """The real object behind a tracker, when we know it (for ``is``)."""
    if hasattr(v, "value") and not isinstance(v, ConstantVariable):
        return v.value
    if hasattr(v, "fn"):
        return v.fn
    return v


def compare_in(tx, item: VariableTracker, container: VariableTracker) -> VariableTracker:
    from .dicts import ConstDictVariable

    from .misc import UserDefinedObjectVariable

    if isinstance(container, (ConstDictVariable, UserDefinedObjectVariable, SetVariable)):
        return container.call_method(tx, "__contains__", [item], {})
    cls = getattr(container, "cls", None)
    contains = inspect.getattr_static(cls, "__contains__", None) if isinstance(cls, type) else None
    if inspect.isfunction(contains):  # an object made in the trace whose class has a Python __contains__
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, TensorVariable) or isinstance(item, TensorVariable):
        unimplemented("`in` with a tensor depends on the tensor's data", gb_id=gb.DATA_DEPENDENT_BRANCH)
    if container.is_python_constant() and item.is_python_constant():
        return ConstantVariable(item.as_python_constant() in container.as_python_constant())
    elems = container.unpack_var_sequence(tx)
    target = identity_of(item)
    from .sym_node import SymNodeVariable

    if isinstance(item, SymNodeVariable) or any(isinstance(e, SymNodeVariable) for e in elems):
        return _sym_contains(tx, item, elems)
    for e in elems:
        if e.is_python_constant() and item.is_python_constant():
            if e.as_python_constant() == item.as_python_constant():
                return ConstantVariable(True)
        elif identity_of(e) is target:
            return ConstantVariable(True)
        elif not e.is_python_constant() and not item.is_python_constant():
            unimplemented("`in` over non-constant values", gb_id=gb.BUILTIN_OPERATOR)
    return ConstantVariable(False)


def _sym_contains(tx, item: VariableTracker, elems: list) -> VariableTracker:
    """``n in (1, 3, 5)`` with a SymInt: ``(n == 1) | (n == 3) | (n == 5)``, one SymBool.

    As torch's ``iter_contains``: the ``==`` are combined, not decided one by one, so the
    ``if`` that asks the answer makes one guard (``Eq(s0, 1) | Eq(s0, 3) | ...``), not one
    per element (which would recompile for every element value met).
    """
    found = None
    for e in elems:
        check = call_operator(tx, operator.eq, [e, item])
        if check.is_python_constant():
            if check.as_python_constant():
                return ConstantVariable(True)
            continue
        found = check if found is None else call_operator(tx, operator.or_, [check, found])
    return ConstantVariable(False) if found is None else found


_OUT_OF_PLACE = {getattr(operator, f"i{n.rstrip('_')}"): getattr(operator, n) for n in (
    "add", "and_", "floordiv", "lshift", "matmul", "mod", "mul", "or_", "pow", "rshift", "sub", "truediv", "xor")}


class _Decided:
    """A sequence item compared as Python would: ``==`` asks the tracker and makes the answer a bool."""

    def __init__(self, tx, var: VariableTracker):
        self.tx, self.var = tx, var

    def _cmp(self, fn, other):
        result = call_operator(self.tx, fn, [self.var, other.var])
        return result.as_python_constant() if result.is_python_constant() else result.truth(self.tx)

    def __eq__(self, other):
        return self._cmp(operator.eq, other)

    def __ne__(self, other):
        return self._cmp(operator.ne, other)

    def __lt__(self, other):
        return self._cmp(operator.lt, other)

    def __le__(self, other):
        return self._cmp(operator.le, other)

    def __gt__(self, other):
        return self._cmp(operator.gt, other)

    def __ge__(self, other):
        return self._cmp(operator.ge, other)

    __hash__ = None


def _decided_items(tx, seq: VariableTracker) -> list:
    return [_Decided(tx, v) for v in seq.items]


def _is_none(v: VariableTracker) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift")
_DUNDERS = {getattr(operator, n + ("_" if n in ("and", "or") else "")): (f"__{n}__", f"__r{n}__", None) for n in _BINARY}
_DUNDERS.update({getattr(operator, f"i{n}"): (f"__i{n}__", f"__r{n}__", f"__{n}__") for n in _BINARY})


def _python_method(var: VariableTracker, name: str):
    """``type(obj).name`` where ``var`` is an instance of a user's class and that is a Python function."""
    from .misc import UserDefinedObjectVariable
    from .new_object import NewObjectVariable

    if not isinstance(var, (NewObjectVariable, UserDefinedObjectVariable)):
        return None
    method = inspect.getattr_static(var.python_type(), name, None)
    return method if inspect.isfunction(method) else None


def call_user_dunder(tx, fn, args: list) -> VariableTracker | None:
    """Note [A user class's binary operator is inlined]

    ``a + b`` where ``a`` or ``b`` is an instance of a class with a Python ``__add__`` /
    ``__radd__`` runs as Python runs it (``binary_op1`` in CPython's Objects/abstract.c):
    ``type(a).__add__(a, b)`` inlined, and if that returns ``NotImplemented``,
    ``type(b).__radd__(b, a)``; ``a += b`` tries ``__iadd__`` first, then the same two. torch's
    ``BuiltinVariable`` does the same for user-defined objects (its binop handlers call
    ``call_method(tx, "__add__", ...)``, torch/_dynamo/variables/builtin.py). None: no operand
    has a Python method for this operator (the other handlers decide).
    """
    first, reflected, plain = _DUNDERS[fn]  # plain: the operator an in-place one falls back to
    a, b = args
    names = [first, plain] if plain else [first]
    for name in names:
        if _python_method(a, name) is not None:
            result = a.call_method(tx, name, [b], {})
            if not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
                return result
    if isinstance(a, TensorVariable) or type(a) is type(b) and a.python_type() is b.python_type():
        return None  # Python tries the reflected method only for operands of different types
    if _python_method(b, reflected) is not None:
        result = b.call_method(tx, reflected, [a], {})
        if not (isinstance(result, ConstantVariable) and result.value is NotImplemented):
            return result
    return None


def call_operator(tx, fn, args: list) -> VariableTracker:
    """One entry for every operator: tensors -> graph node, constants -> folded."""
    if fn in (operator.is_, operator.is_not):
        a, b = args
        if a is b:  # one tracker is one object (a list's as_python_constant() is a new list each time)
            same = True
        elif a.is_python_constant() and b.is_python_constant():
            same = a.as_python_constant() is b.as_python_constant()
        elif isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
            # inputs are deduplicated by identity (OutputGraph.add_graph_input), so two
            # different nodes are two different tensors
            same = a.proxy.node is b.proxy.node
        elif isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            same = False  # a tensor is never a constant or a module
        else:
            same = identity_of(a) is identity_of(b)
        return ConstantVariable(same if fn is operator.is_ else not same)
    if fn in (operator.eq, operator.ne) and any(isinstance(a, DataPtrVariable) for a in args):
        a, b = args if isinstance(args[0], DataPtrVariable) else args[::-1]
        return a.compare(b, "__eq__" if fn is operator.eq else "__ne__")  # Note [A data pointer is read after ...]
    if fn is operator.contains:
        return compare_in(tx, args[1], args[0])
    if fn is operator.not_:
        return ConstantVariable(not args[0].truth(tx))
    if fn is operator.getitem:
        return args[0].call_method(tx, "__getitem__", [args[1]], {})
    if len(args) == 2 and isinstance(args[0], SetVariable):
        result = call_set_operator(tx, fn, args)  # Note [A set is a dict of hashable trackers]
        if result is not None:
            return result
    if len(args) == 2 and fn in _DUNDERS:
        result = call_user_dunder(tx, fn, args)  # Note [A user class's binary operator is inlined]
        if result is not None:
            return result
    if any(isinstance(a, TensorVariable) or type(a).__name__ == "SymNodeVariable" for a in args):
        result = call_numpy_operator(tx, fn, args)  # ndarrays only: NumPy's operator (variables/numpy.py)
        if result is not None:
            return result
        if fn in _OUT_OF_PLACE and not isinstance(args[0], TensorVariable):
            # `s += x` with an int s: int has no __iadd__, so Python runs s + x (a graph
            # node operator.iadd(0, x) would also print as `0 += x`, which is no Python)
            fn = _OUT_OF_PLACE[fn]
        return tx.wrap_fx_proxy("call_function", fn, tuple(a.as_proxy() for a in args), {})
    if all(a.is_python_constant() for a in args):
        consts = [a.as_python_constant() for a in args]
        try:
            return tx.wrap_constant_result(fn(*consts))
        except Exception as e:  # noqa: BLE001 - the user's own error (1 / 0), raised in the trace
            tx.raise_error_of(e)
    a = args[0]
    if isinstance(a, (ListVariable, TupleVariable)) and len(args) == 2:
        b = args[1]
        if fn in (operator.add, operator.iadd) and type(b) is type(a):
            if fn is operator.iadd and isinstance(a, ListVariable):
                return a.call_method(tx, "extend", [b], {}) and a
            return type(a)(a.items + b.items)
        if fn is operator.iadd and isinstance(a, ListVariable):
            a.call_method(tx, "extend", [b], {})
            return a
        if fn in (operator.mul, operator.imul) and b.is_python_constant():
            return type(a)(a.items * b.as_python_constant())
    if (fn is operator.mul and len(args) == 2 and isinstance(args[1], (ListVariable, TupleVariable))
            and isinstance(a, ConstantVariable) and type(a.value) is int):
        return type(args[1])(args[1].items * a.value)  # `n * [x]`: the same items, repeated
    if fn in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge) and len(args) == 2 \
            and isinstance(a, (ListVariable, TupleVariable)) and isinstance(args[1], (ListVariable, TupleVariable)) \
            and isinstance(a, ListVariable) == isinstance(args[1], ListVariable):
        # ``x.shape == y.shape`` with symbolic sizes: as Python compares sequences, item by item, each
        # ``==`` made a bool (a guard where it is symbolic), as torch's Dynamo does on SymInts
        return tx.wrap_constant_result(fn(_decided_items(tx, a), _decided_items(tx, args[1])))
    if fn in (operator.eq, operator.ne) and len(args) == 2:
        a, b = args
        if not isinstance(a, TensorVariable) and not isinstance(b, TensorVariable):
            if not a.is_python_constant() or not b.is_python_constant():
                same = identity_of(a) is identity_of(b)
                if a.is_python_constant() != b.is_python_constant() or same:
                    return ConstantVariable(same if fn is operator.eq else not same)
    if fn in (operator.eq, operator.ne) and len(args) == 2:
        from .new_object import NewObjectVariable

        a, b = args
        if isinstance(a, NewObjectVariable) and isinstance(b, NewObjectVariable):
            eqs = [inspect.getattr_static(v.cls, name) for v in (a, b) for name in ("__eq__", "__ne__")]
            if all(e in (object.__eq__, object.__ne__) for e in eqs):
                # neither class defines == or !=: object's, which is identity
                same = a is b
                return ConstantVariable(same if fn is operator.eq else not same)
    unimplemented(f"operator {fn.__name__} on {', '.join(type(a).__name__ for a in args)}", gb_id=gb.BUILTIN_OPERATOR)
