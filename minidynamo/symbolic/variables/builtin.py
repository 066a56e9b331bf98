"""Builtins and operators while tracing: ``len``, ``isinstance``, ``range``, ``+``, ``<``, ``in``...

Place in the pipeline: ``BINARY_OP``, ``COMPARE_OP``, ``CONTAINS_OP`` and calls to
builtins all land here. On constants they fold; on tensors they add a graph node
(``operator.add`` etc., as Dynamo records them). Mirrors
``torch/_dynamo/variables/builtin.py`` (``BuiltinVariable``).

Note [print is a graph break]
    ``print`` writes to stdout: a side effect the graph cannot hold. Real Dynamo
    graph-breaks on it too (it can reorder prints with ``reorderable_logging_functions``).
"""

from __future__ import annotations

import builtins
import functools
import operator
import types
from typing import Any

import torch

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value
from .iter import ListIteratorVariable
from .lists import ListVariable, TupleVariable
from .numpy import NumpyVariable, is_ndarray
from .tensor import TensorVariable

# Builtins that are pure: on constant arguments we may simply call them.
PURE_BUILTINS = {
    abs, all, any, bool, chr, divmod, float, format, hash, int, isinstance, issubclass, len, max, min, ord,
    pow, repr, round, sorted, str, sum, tuple, list, dict, set, frozenset, range, slice, reversed, type,
    callable, complex, bin, hex, oct, getattr, hasattr, zip, enumerate, map, filter, iter, next,
}
BREAK_BUILTINS = {
    print: "print() writes to stdout, a side effect the graph cannot hold",
    input: "input() reads stdin",
    open: "open() does I/O",
    setattr: "setattr on an arbitrary object",
    delattr: "delattr on an arbitrary object",
    vars: "vars()",
    globals: "globals()",
    locals: "locals()",
    exec: "exec()",
    eval: "eval()",
}


def module_name(fn) -> str:
    return getattr(fn, "__module__", None) or "?"


def _all_const(args, kwargs=None) -> bool:
    return all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in (kwargs or {}).values())


from .operators import _is_none, call_operator, compare_in, identity_of  # noqa: F401 (re-exported)


class FakeIdVariable(ConstantVariable):
    """``id()`` of an object made during the trace (Note [id() while tracing]): usable inside, never output."""

    def reconstruct(self, codegen) -> str:
        unimplemented("id() of an object made in the trace leaves the graph: it has no address outside the trace",
                      "avoid returning id() of a value made in the compiled function, or a value it keys",
                      gb_id=gb.FAKE_ID, context=f"id {self.value}")


class BuiltinVariable(VariableTracker):
    """A builtin function (``len``, ``range``, ``print``) or an ``operator`` function."""

    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def as_python_constant(self) -> Any:
        return self.fn

    def as_proxy(self) -> Any:
        # ``np.sum(a, dtype=float)``, ``x.to(int)``: a Python type as a dtype argument goes into the graph
        # as torch's dtype for it (torch/_dynamo/variables/builtin.py BuiltinVariable.as_proxy)
        fn = self.fn
        return torch.bool if fn is bool else torch.int64 if fn is int else torch.float64 if fn is float else fn

    def reconstruct(self, codegen) -> str:
        return codegen.constant_expr(self.fn)

    def __repr__(self) -> str:
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        fn = self.fn
        if fn in (setattr, delattr) and not kwargs and len(args) == (3 if fn is setattr else 2):
            from .new_object import NewObjectVariable

            obj, name = args[0], args[1]
            if isinstance(obj, NewObjectVariable) and name.is_python_constant() and isinstance(name.as_python_constant(), str):
                if fn is setattr:  # an object made in the trace: its attributes are ours to set
                    obj.store_attr(tx, name.as_python_constant(), args[2])
                else:
                    obj.del_attr(tx, name.as_python_constant())
                return ConstantVariable(None)
        if fn in BREAK_BUILTINS:
            unimplemented(BREAK_BUILTINS[fn], "move it out of the compiled function, or accept the graph break",
                          gb_id=gb.BUILTIN_OPERATOR, context=f"builtin {fn.__name__} with arguments {args!r}")
        if getattr(fn, "__module__", None) == "_operator" or fn in vars(operator).values():
            if kwargs:
                unimplemented(f"operator.{fn.__name__} with keyword arguments", gb_id=gb.BUILTIN_OPERATOR)
            return call_operator(tx, fn, args)
        from .functional import handler_for

        functional = handler_for(fn)  # functools / itertools helpers, run at trace time
        if functional is not None:
            return functional(tx, *args, **kwargs)
        from .sym_node import call_sym_builtin, specialize_args

        sym = call_sym_builtin(tx, fn, args, kwargs)  # max(x.size(0), 4), int(n / 2), math.sqrt(n)
        if sym is not None:
            return sym
        if fn is range:  # range(n) unrolls a loop: n needs its value (a guard fixing it), as in torch
            args = specialize_args(args)
        handler = getattr(self, f"_call_{getattr(fn, '__name__', '')}", None)
        if handler is not None:
            result = handler(tx, *args, **kwargs)
            if result is not None:
                return result
        from ..polyfills import CONSTANT_FOLD_THROUGH

        if (fn in PURE_BUILTINS or fn in CONSTANT_FOLD_THROUGH  # Note [C functions folded on constants]
                or getattr(fn, "__module__", None) in ("math", "cmath")
                or getattr(fn, "__self__", None) in (str, bytes, int, float)) and _all_const(args, kwargs):
            cargs = [a.as_python_constant() for a in args]
            ckw = {k: v.as_python_constant() for k, v in kwargs.items()}
            try:
                return tx.wrap_constant_result(fn(*cargs, **ckw))
            except Exception as e:  # noqa: BLE001 - the user's own error, raised in the trace (int("x"))
                tx.raise_error_of(e)
        name = getattr(fn, '__name__', fn)
        context = f"builtin {name} with arguments {args!r}"
        if getattr(fn, "__module__", None) in ("math", "cmath") and any(isinstance(a, TensorVariable) for a in args):
            # torch runs math.floor(t) on the fake tensor: its __float__/__floor__ needs the value
            unimplemented(f"{module_name(fn)}.{name}() of a tensor needs the tensor's value",
                          "keep it a tensor (torch.floor, torch.sqrt...)", gb_id=gb.DATA_DEPENDENT_OPERATOR,
                          context="aten._local_scalar_dense.default")
        if fn is repr and any(isinstance(a, TensorVariable) for a in args):
            unimplemented("repr() of a tensor needs its data", gb_id=gb.REPR_TENSOR, context=context)
        if getattr(builtins, str(name), None) is fn:  # a Python builtin (str, format...): torch's BuiltinVariable
            unimplemented(f"{name}() on these arguments cannot be traced", gb_id=gb.BUILTIN_OPERATOR, context=context)
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, type):  # a C classmethod (datetime.now): torch's call_method on the class
            unimplemented(f"{owner.__name__}.{name}() is a C method minidynamo does not trace (it runs eagerly)",
                          "move it out of the compiled function, or accept the graph break",
                          gb_id=gb.UNSUPPORTED_METHOD, context=context)
        module = getattr(fn, "__module__", None) or getattr(owner, "__name__", "?")
        unimplemented(f"{module}.{name} is a C function minidynamo does not trace (it runs eagerly)",
                      "move it out of the compiled function, or accept the graph break",
                      gb_id=gb.SKIPPED_FUNCTION, context=context)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__getitem__" and self.fn in (list, tuple, dict, set, frozenset, type) and not kwargs \
                and len(args) == 1 and args[0].is_python_constant():
            # ``list[int]``: a types.GenericAlias of constants, folded (torch's BuiltinVariable does too)
            return tx.wrap_sourceless(self.fn[args[0].as_python_constant()])
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .functional import CLASS_METHODS

        if any(self.fn is owner and name == n for owner, n in CLASS_METHODS):  # itertools.chain.from_iterable
            return BuiltinVariable(getattr(self.fn, name))
        if self.fn in (str, bytes, int, float) and isinstance(getattr(self.fn, name, None), types.BuiltinMethodType):
            # ``str.maketrans``, ``int.from_bytes``: static/class methods of a constant type, folded on constants
            # (torch's BuiltinVariable.call_method constant-folds them the same way)
            return BuiltinVariable(getattr(self.fn, name))
        return super().var_getattr(tx, name)

    # --- builtins that look inside their arguments ----------------------------
    def _call_super(self, tx, *args):
        from .user_class import SuperVariable

        if args:
            cls, obj = args
            return SuperVariable(cls.as_python_constant(), obj)
        from .functions import CellVariable

        # zero-argument super(): the __class__ cell and the frame's first argument. An
        # inlined method has the cell among its closure cells; the top frame (or a resume
        # function) received it as its cell, its contents the input L['__class__'] (Note [A resume
        # function receives the frame's cells], resume_execution.py).
        cls = tx.closure_cells.get("__class__")
        if cls is None and "__class__" in tx.code.co_freevars:
            cls = tx.cells.get("__class__") or tx.symbolic_locals.get("__class__")
        if isinstance(cls, CellVariable):
            cls = cls.value
        first = tx.code.co_varnames[0] if tx.code.co_argcount and tx.code.co_varnames else None
        if cls is None or first not in tx.symbolic_locals:
            unimplemented("zero-argument super() outside a method (eager raises RuntimeError)",
                          gb_id=gb.OBSERVED_EXCEPTION)
        return SuperVariable(tx.realize(cls).as_python_constant(), tx.realize(tx.symbolic_locals[first]))

    def _call_id(self, tx, obj):
        """``id(x)``: the real address of an object we can name (guarded), a stand-in otherwise.

        Note [id() while tracing]
            ``copy.deepcopy`` keys its memo by ``id(x)``. As in Dynamo's ``call_id``: an
            object reached through a source has its real ``id``, and an ID_MATCH guard makes
            the graph hold only for that very object; ``None``/``True``/``False`` are
            singletons. An object made during the trace has no address yet: it gets the
            ``id`` of its tracker (unique while the trace lives, like Dynamo's
            ``FakeIdVariable``), which may key a dict inside the trace but never leaves it.
        """
        if isinstance(obj, ConstantVariable) and obj.value in (None, True, False) and type(obj.value) in (type(None), bool):
            return ConstantVariable(id(obj.value))
        if obj.source is None:  # a tensor made in the trace too: torch's get_id is None, a FakeIdVariable
            return FakeIdVariable(id(obj))
        try:
            value = obj.source.get(tx.output.L, tx.output.root_globals)  # the object itself, read as the guard reads it
        except Exception:  # noqa: BLE001 - a source we cannot evaluate here
            unimplemented("id() of this object", "move it out of the compiled function", gb_id=gb.ID, context=f"id() of {obj}")
        tx.output.guards.ID_MATCH(obj.source, value, "the trace read its id()")
        return ConstantVariable(id(value))

    def _call___new__(self, tx, cls=None, *rest):
        """``object.__new__(cls)``: a new, empty object of a plain class (``copyreg.__newobj__`` in a deepcopy)."""
        from .user_class import UserDefinedClassVariable
        from .new_object import NewObjectVariable

        if self.fn is not object.__new__ or rest or not isinstance(cls, UserDefinedClassVariable):
            return None
        klass = cls.value
        plain = (type(klass) is type and klass.__new__ is object.__new__
                 and not any("__slots__" in vars(k) for k in klass.__mro__)
                 and not issubclass(klass, (BaseException, torch.nn.Module, torch.Tensor)))
        return NewObjectVariable(klass) if plain else None

    def _call_len(self, tx, obj):
        return obj.call_method(tx, "__len__", [], {})

    def _call_isinstance(self, tx, obj, cls):
        value = getattr(cls, "value", None)
        if type(value).__module__ == "typing" and isinstance(getattr(value, "__origin__", None), type) \
                and not hasattr(value, "__args__") \
                and not cls.is_python_constant():
            # ``isinstance(x, typing.Sequence)``: the alias checks its origin class (collections.abc.Sequence)
            return self._call_isinstance(tx, obj, tx.wrap_sourceless(value.__origin__))
        classes = cls.as_python_constant()
        if isinstance(obj, TensorVariable):
            ptype = obj.python_type()
            flat = classes if isinstance(classes, tuple) else (classes,)
            legacy = [c for c in flat if type(c).__name__ == "tensortype"]
            if legacy:
                # ``isinstance(x, torch.FloatTensor)``: the legacy type's metaclass compares
                # dtype, device and layout, which TENSOR_MATCH guards
                if not all(isinstance(c, type) for c in flat):
                    unimplemented("isinstance with a nested tuple of tensor types", gb_id=gb.ISINSTANCE)
                v = obj.example_value
                hit = any(c.dtype == v.dtype and c.is_cuda == (v.device.type == "cuda")
                          and c.layout == v.layout for c in legacy)
                rest = tuple(c for c in flat if c not in legacy)
                return ConstantVariable(hit or (bool(rest) and issubclass(ptype, rest)))
        elif obj.is_python_constant():
            return ConstantVariable(isinstance(obj.as_python_constant(), classes))
        else:
            ptype = obj.python_type()
        return ConstantVariable(issubclass(ptype, classes))

    def _call_getattr(self, tx, obj, name, *default):
        attr = name.as_python_constant()
        if default:
            try:
                return obj.var_getattr(tx, attr)
            except Exception:  # noqa: BLE001
                real = getattr(obj, "value", None) if not isinstance(obj, TensorVariable) else None
                if real is not None and hasattr(real, attr):
                    raise  # the attribute exists: the default would be a wrong value, so break instead
                return default[0]
        return obj.var_getattr(tx, attr)

    def _call_hasattr(self, tx, obj, name):
        from .new_object import NewObjectVariable

        if isinstance(obj, NewObjectVariable) and name.is_python_constant():
            return obj.call_hasattr(tx, name.as_python_constant())
        if obj.is_python_constant():
            return ConstantVariable(hasattr(obj.as_python_constant(), name.as_python_constant()))
        if hasattr(obj, "value") and not isinstance(obj, TensorVariable):
            return ConstantVariable(hasattr(obj.value, name.as_python_constant()))
        if isinstance(obj, TensorVariable):
            return ConstantVariable(hasattr(obj.example_value, name.as_python_constant()))
        return None

    def _call_exc_info(self, tx, *args):
        """``sys.exc_info()`` inside an ``except`` block: the exception being handled (torch's polyfill)."""
        import sys

        return tx.exc_info() if self.fn is sys.exc_info and not args else None

    def _call_exception(self, tx, *args):
        """``sys.exception()`` (3.11+): the exception being handled, or None."""
        import sys

        if self.fn is getattr(sys, "exception", None) and not args:
            return tx.exc_info().items[1]
        return None

    def _call_str(self, tx, *args, **kwargs):
        """``str(e)`` of an exception made in the trace (torch's ExceptionVariable): its message."""
        from .exceptions import ExceptionVariable

        if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVariable):
            return args[0].call_method(tx, "__str__", [], {})
        return None

    def _call_repr(self, tx, *args, **kwargs):
        from .exceptions import ExceptionVariable

        if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVariable):
            return args[0].call_method(tx, "__repr__", [], {})
        return None

    def _call_type(self, tx, obj):
        if obj.is_python_constant():
            return None
        return tx.wrap_sourceless(obj.python_type())

    def _call_callable(self, tx, obj):
        from .functions import BaseUserFunctionVariable

        if isinstance(obj, (BaseUserFunctionVariable, BuiltinVariable)):
            return ConstantVariable(True)
        return None

    def _seq(self, tx, obj):
        return obj.unpack_var_sequence(tx)

    def _call_list(self, tx, obj=None):
        return ListVariable(self._seq(tx, obj) if obj is not None else [])

    def _call_tuple(self, tx, obj=None):
        return TupleVariable(self._seq(tx, obj) if obj is not None else [])

    def _call_set(self, tx, obj=None):
        from .sets import build_set  # Note [A set is a dict of hashable trackers]

        return build_set(tx, obj)

    def _call_frozenset(self, tx, obj=None):
        from .sets import build_set

        if obj is None or obj.is_python_constant():
            return None  # a frozenset of constants is a constant (folded below)
        return build_set(tx, obj, frozenset)

    def _call_dict(self, tx, *args, **kwargs):
        from .dicts import ConstDictVariable

        d = ConstDictVariable({})
        d.items.update(ConstDictVariable({}).items)
        if args:
            src = args[0]
            if isinstance(src, ConstDictVariable):
                d.items.update(src.items)
            else:
                for pair in src.unpack_var_sequence(tx):
                    k, v = pair.unpack_var_sequence(tx)
                    d.items[k.as_python_constant()] = v
        d.items.update(kwargs)
        return d

    def _call_iter(self, tx, obj):
        if isinstance(obj, ListIteratorVariable):
            return obj
        return ListIteratorVariable(self._seq(tx, obj))

    def _call_next(self, tx, it, *default):
        if not isinstance(it, ListIteratorVariable):
            unimplemented("next() on this iterator", gb_id=gb.NEXT, context=f"next() on {it}")
        value = it.next_variable(tx)
        if value is None:
            if default:
                return default[0]
            from .exceptions import raise_observed_exception

            raise_observed_exception(StopIteration, tx)
        return value

    def _call_zip(self, tx, *seqs, **kwargs):
        if any(getattr(s, "lazy", False) for s in seqs):  # a generator, itertools.count, an islice
            return self._zip_lazily(tx, seqs)
        cols = [self._seq(tx, s) for s in seqs]
        return ListIteratorVariable([TupleVariable(list(row)) for row in zip(*cols)])

    def _zip_lazily(self, tx, seqs):
        """``zip(range(3), gen)``: rows taken in lockstep, so a generator (even an endless one) runs only as
        far as eager's zip pulls it, one item past the shortest input at most, as Dynamo's ``ZipVariable``
        (torch/_dynamo/variables/iter.py) pulls each iterator with ``next_variable``."""
        its = [s if getattr(s, "lazy", False) else ListIteratorVariable(self._seq(tx, s)) for s in seqs]
        rows = []
        while its:
            row = []
            for it in its:
                value = it.next_variable(tx)
                if value is None:
                    return ListIteratorVariable(rows)
                row.append(value)
            rows.append(TupleVariable(row))
        return ListIteratorVariable(rows)

    def _call_enumerate(self, tx, seq, start=None):
        first = start.as_python_constant() if start is not None else 0
        items = self._seq(tx, seq)
        return ListIteratorVariable([TupleVariable([ConstantVariable(i + first), v]) for i, v in enumerate(items)])

    def _call_reversed(self, tx, seq):
        return ListIteratorVariable(list(reversed(self._seq(tx, seq))))

    def _call_map(self, tx, fn, *seqs):
        cols = [self._seq(tx, s) for s in seqs]
        return ListIteratorVariable([fn.call_function(tx, list(row), {}) for row in zip(*cols)])

    def _call_filter(self, tx, fn, seq):
        keep = [v for v in self._seq(tx, seq) if fn.call_function(tx, [v], {}).truth(tx)]
        return ListIteratorVariable(keep)

    def _call_sum(self, tx, seq, start=None):
        items = self._seq(tx, seq)
        if all(i.is_python_constant() for i in items) and (start is None or start.is_python_constant()):
            consts = [i.as_python_constant() for i in items]  # the items of an iterator too
            try:
                return ConstantVariable(sum(consts, start.as_python_constant() if start is not None else 0))
            except Exception as e:  # noqa: BLE001 - the user's own error: let eager raise it
                unimplemented(f"sum raised {type(e).__name__}: {e} (eager will raise it)", gb_id=gb.OBSERVED_EXCEPTION)
        acc = start if start is not None else ConstantVariable(0)
        for item in items:
            acc = call_operator(tx, operator.add, [acc, item])
        return acc

    def _minmax(self, tx, args, pick):
        """min/max with tensors: pairwise, as torch's ``_call_min_max_binary``.

        Note [min/max of a tensor and a number]
            Two tensors become ``torch.maximum`` / ``torch.minimum``; a tensor and a
            number become ``torch.clamp(t, min=n)`` for max and ``clamp(t, max=n)`` for
            min, as Dynamo records them. Eager Python would compare with ``>`` and
            call ``bool()`` on the result (an error for a tensor of several elements,
            and for one element it returns one of the two objects, maybe the number);
            we follow torch.compile, the reference here.
        """
        from .torch import TorchInGraphFunctionVariable

        items = self._seq(tx, args[0]) if len(args) == 1 else list(args)
        if all(i.is_python_constant() for i in items):
            return None
        if not items or not all(isinstance(i, TensorVariable) or (
                isinstance(i, ConstantVariable) and type(i.value) in (int, float)) for i in items):
            unimplemented(f"{pick.__name__}() over tensors and other values", gb_id=gb.BUILTIN_OPERATOR)
        acc = items[0]
        for b in items[1:]:
            a = acc
            if isinstance(a, ConstantVariable) and isinstance(b, ConstantVariable):
                acc = ConstantVariable(pick(a.value, b.value))
                continue
            if not isinstance(a, TensorVariable):
                a, b = b, a
            if is_ndarray(a):  # NumPy's: np.maximum / np.clip (torch's _call_min_max_binary)
                import numpy as np

                if isinstance(b, TensorVariable):
                    acc = NumpyVariable(np.maximum if pick is max else np.minimum).call_function(tx, [a, b], {})
                else:
                    acc = NumpyVariable(np.clip).call_function(tx, [a], {"min" if pick is max else "max": b})
            elif isinstance(b, TensorVariable):
                fn = torch.maximum if pick is max else torch.minimum
                acc = TorchInGraphFunctionVariable(fn).call_function(tx, [a, b], {})
            else:
                acc = TorchInGraphFunctionVariable(torch.clamp).call_function(
                    tx, [a], {"min" if pick is max else "max": b})
        return acc

    def _call_max(self, tx, *args, **kwargs):
        return self._minmax_keywords(tx, max, args, kwargs) if kwargs else self._minmax(tx, args, max)

    def _call_min(self, tx, *args, **kwargs):
        return self._minmax_keywords(tx, min, args, kwargs) if kwargs else self._minmax(tx, args, min)

    def _minmax_keywords(self, tx, pick, args, kwargs):
        """``max(..., key=f)``, ``min(..., default=d)``: torch's handler ``_call_min_max`` takes no keywords.

        ``builtin.py`` ``BuiltinVariable._make_handler``: binding the handler raises TypeError, and
        unless every argument is a constant (folded below, by the caller) the call breaks as
        "invalid call to builtin op handler".
        """
        if _all_const(args, kwargs):
            return None
        unimplemented(f"{pick.__name__}() with keyword arguments {sorted(kwargs)} over traced values",
                      "accept the graph break, or drop the keyword argument", gb_id=gb.INVALID_BUILTIN_CALL,
                      context=f"builtin {pick.__name__} with arguments {args!r} {kwargs!r}")

    def _call_sorted(self, tx, seq, key=None, reverse=None):
        """sorted(): the key function is traced once per item (as CPython calls it); keys must be constants."""
        items = self._seq(tx, seq)
        keys = [key.call_function(tx, [v], {}) if key is not None and not _is_none(key) else v for v in items]
        if not all(k.is_python_constant() for k in keys):  # torch's ListVariable.call_method("sort")
            first = next(k for k in keys if not k.is_python_constant())
            unimplemented("sorted() compares keys that are not constants (tensors: their order depends on their data)",
                          "use torch.sort, or sort constants", gb_id=gb.SORT_NON_CONSTANT_KEYS,
                          context=f"sorted(keys) with the key {first}")
        rev = bool(reverse.as_python_constant()) if reverse is not None else False
        order = sorted(range(len(items)), key=lambda i: keys[i].as_python_constant(), reverse=rev)
        return ListVariable([items[i] for i in order])

    def _call_hash(self, tx, x=None, *rest):
        """``hash(tensor)`` is ``id(tensor)`` (object.__hash__): torch's generic_hash gives its (fake) id."""
        if isinstance(x, TensorVariable) and not rest:
            return self._call_id(tx, x)
        return None

    def _call_abs(self, tx, x):
        if isinstance(x, TensorVariable):
            return x.call_method(tx, "abs", [], {})
        return None

    def _call_bool(self, tx, x=None):
        if x is None:
            return ConstantVariable(False)
        if is_ndarray(x):  # torch: ndarray.__bool__ in the graph, whose fake run needs the data (variables/numpy.py)
            return x.call_method(tx, "__bool__", [], {})
        if isinstance(x, TensorVariable):  # torch: bool() calls Tensor.item()
            unimplemented("bool(tensor) needs the tensor's data", "keep it a tensor", gb_id=gb.ITEM)
        return ConstantVariable(x.truth(tx))

    def _scalar(self, tx, x, kind):
        if is_ndarray(x) and kind in (int, float):
            # torch: ndarray.__float__ goes into the graph; its fake run needs the data (variables/numpy.py)
            return x.call_method(tx, f"__{kind.__name__}__", [], {})
        if isinstance(x, TensorVariable):
            if kind in (int, float) and x.example_value.dtype.is_floating_point is (kind is float):
                from minidynamo import config

                if config.capture_scalar_outputs:  # int(t) / float(t): torch's item, an unbacked symbol
                    return x.call_method(tx, "item", [], {})
            unimplemented(f"{kind.__name__}(tensor) needs the tensor's data", "keep it a tensor", gb_id=gb.ITEM)
        return None

    def _call_int(self, tx, x=None, *rest):
        return self._scalar(tx, x, int)

    def _call_float(self, tx, x=None):
        return self._scalar(tx, x, float)

    def _short_circuit(self, tx, seq, stop_on: bool):
        """any/all: pull items one at a time and stop at the first that decides, as CPython does
        (a lazily inlined generator then runs no further than eager's would)."""
        it = seq if isinstance(seq, ListIteratorVariable) else ListIteratorVariable(self._seq(tx, seq))
        while (item := it.next_variable(tx)) is not None:
            if item.truth(tx) == stop_on:
                return ConstantVariable(stop_on)
        return ConstantVariable(not stop_on)

    def _call_all(self, tx, seq):
        return self._short_circuit(tx, seq, False)

    def _call_any(self, tx, seq):
        return self._short_circuit(tx, seq, True)


def is_builtin(value: Any) -> bool:
    return (
        isinstance(value, type(len)) and getattr(value, "__module__", None) in ("builtins", "_operator")
    ) or any(value is t for t in _BUILTIN_TYPES)


_BUILTIN_TYPES = (int, float, bool, str, list, tuple, dict, set, frozenset, range, slice, zip, enumerate,
                  reversed, map, filter, type, complex, object, super, property, staticmethod, classmethod)


__all__ = ["BuiltinVariable", "call_operator", "compare_in", "is_builtin", "builtins", "functools",
           "is_constant_value"]
