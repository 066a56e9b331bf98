"""Dicts while tracing: keys are Python constants, values are trackers.

Place in the pipeline: like lists (Note [Containers mutate in place and say so]).
Mirrors ``torch/_dynamo/variables/dicts.py`` (``ConstDictVariable``).
"""

from __future__ import annotations

import collections
from typing import Any

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import ListVariable, TupleVariable


def _key(v: VariableTracker) -> Any:
    return v.as_dict_key()


def _counter_method(tx, d: "ConstDictVariable", name: str, args: list, kwargs: dict):
    """A ``collections.Counter``'s own behaviour over a dict of constant counts, or None for a dict method.

    Note [A Counter of constants]
        ``Counter("abca")`` made in the trace is a dict of constant counts with
        ``user_cls=Counter`` (containers.py ``_counter``); torch traces Counter's Python code
        as a user dict subclass. A missing key reads 0 (``__missing__``, nothing stored);
        ``update``/``subtract`` add and subtract counts and ``most_common``/``total``/
        ``elements`` are computed on the real Counter of the same counts.
    """
    key_missing = name == "__getitem__" and args and args[0].is_python_constant() \
        and args[0].as_python_constant() not in d.items
    if key_missing:
        return ConstantVariable(0)
    if name not in ("update", "subtract", "most_common", "total", "elements"):
        return None
    if not all(v.is_python_constant() for v in [*d.items.values(), *args, *kwargs.values()]):
        return None
    real = d.as_python_constant()
    out = getattr(real, name)(*[a.as_python_constant() for a in args],
                              **{k: v.as_python_constant() for k, v in kwargs.items()})
    if name in ("update", "subtract"):
        tx.output.side_effects.mutation(d)
        d.items = {k: ConstantVariable(v) for k, v in real.items()}
        return ConstantVariable(None)
    return tx.wrap_sourceless(list(out) if name == "elements" else out)


class ConstDictVariable(VariableTracker):
    """A dict made in the trace or read from outside; ``user_cls`` dict, OrderedDict or defaultdict.

    Note [defaultdict is a dict with a factory]
        ``collections.defaultdict(list)`` (or ``defaultdict.fromkeys(...)``, whose factory
        is None) is this tracker with ``default_factory`` set: a missing key read with
        ``d[k]`` calls the factory while tracing (``list`` gives a new ListVariable) and
        stores the result, as ``__missing__`` does; ``get`` / ``in`` do not. Rebuilt as
        ``defaultdict(factory, {...})``. Mirrors torch's ``DefaultDictVariable``.
    """

    def __init__(self, items: dict, user_cls: type = dict, default_factory=None, **kwargs):
        super().__init__(**kwargs)
        self.items = dict(items)  # python key -> VariableTracker
        self.user_cls = user_cls
        self.default_factory = default_factory  # a tracker, for a defaultdict only (None: no factory)

    def python_type(self) -> type:
        return self.user_cls

    def as_python_constant(self) -> Any:
        items = {k: v.as_python_constant() for k, v in self.items.items()}
        if self.user_cls is collections.defaultdict:
            factory = self.default_factory
            return collections.defaultdict(factory.as_python_constant() if factory is not None else None, items)
        return self.user_cls(items)  # an OrderedDict stays one

    def as_proxy(self) -> Any:
        return {k: v.as_proxy() for k, v in self.items.items()}

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return [tx.wrap_constant_result(k) for k in self.items]

    def truth(self, tx) -> bool:
        return bool(self.items)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        items = self.items
        if self.user_cls is collections.Counter:
            result = _counter_method(tx, self, name, args, kwargs)
            if result is not None:
                return result
        if name == "__getitem__":
            key = _key(args[0])
            if key not in items and self.default_factory is not None:  # Note [defaultdict is a dict with a factory]
                tx.output.side_effects.mutation(self)
                items[key] = self.default_factory.call_function(tx, [], {})
            if key not in items:  # eager's KeyError, raised in the trace (torch's getitem_const_raise_exception_if_absent)
                tx.raise_observed_exception(KeyError, [args[0]])
            return items[key]
        if name == "get":
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return items.get(_key(args[0]), default)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name == "__contains__":
            return ConstantVariable(_key(args[0]) in items)
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewVariable(self, name)  # Note [Dict views are live]
        if name == "copy":
            return ConstDictVariable(items, self.user_cls, self.default_factory)
        # mutations
        if name in ("__setitem__", "update", "pop", "clear", "setdefault", "__delitem__", "popitem"):
            tx.output.side_effects.mutation(self)
        if name == "__setitem__":
            items[_key(args[0])] = args[1]
            return ConstantVariable(None)
        if name == "__delitem__":
            del items[_key(args[0])]
            return ConstantVariable(None)
        if name == "update":
            if args:
                other = args[0]
                if isinstance(other, ConstDictVariable):
                    items.update(other.items)
                else:
                    for pair in other.unpack_var_sequence(tx):
                        k, v = pair.unpack_var_sequence(tx)
                        items[_key(k)] = v
            for k, v in kwargs.items():
                items[k] = v
            return ConstantVariable(None)
        if name == "pop":
            key = _key(args[0])
            if key in items:
                return items.pop(key)
            if len(args) > 1:
                return args[1]
            tx.raise_observed_exception(KeyError, [args[0]])
        if name == "setdefault":
            key = _key(args[0])
            if key not in items:
                items[key] = args[1] if len(args) > 1 else ConstantVariable(None)
            return items[key]
        if name == "clear":
            items.clear()
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        body = ", ".join(f"{codegen.constant_expr(k)}: {codegen.expr(v)}" for k, v in self.items.items())
        if self.user_cls is collections.defaultdict:
            factory = "None" if self.default_factory is None else codegen.expr(self.default_factory)
            return f"{codegen.constant_expr(self.user_cls)}({factory}, {{{body}}})"
        if self.user_cls is not dict:  # OrderedDict (the only other class made here): cls({...}) keeps the order
            return f"{codegen.constant_expr(self.user_cls)}({{{body}}})"
        return "{" + body + "}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "default_factory" and self.user_cls is collections.defaultdict:
            return self.default_factory if self.default_factory is not None else ConstantVariable(None)
        return super().var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"ConstDictVariable({list(self.items)})"


class DictViewVariable(VariableTracker):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view of the dict tracker.

    Note [Dict views are live]
        ``k = d.keys(); d["c"] = 1; list(k)`` gives three keys in Python: a view
        reads the dict each time it is used. So the view keeps the dict's tracker,
        not a copy of its items, and takes them when it is iterated, measured or
        rebuilt (``d.keys()`` again after a graph break). Mirrors torch's
        ``DictKeysVariable`` / ``DictValuesVariable`` / ``DictItemsVariable``.
    """

    def __init__(self, dict_var: ConstDictVariable, kind: str, **kwargs):
        super().__init__(**kwargs)
        self.dict_var = dict_var
        self.kind = kind

    def view_items(self, tx) -> list[VariableTracker]:
        items = self.dict_var.items
        if self.kind == "keys":
            return [tx.wrap_constant_result(k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable([tx.wrap_constant_result(k), v]) for k, v in items.items()]

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return self.view_items(tx)

    def is_python_constant(self) -> bool:
        return self.kind == "keys" or all(v.is_python_constant() for v in self.dict_var.items.values())  # keys are constants

    def as_python_constant(self) -> Any:
        if self.kind == "keys":  # the keys alone: the values may be tensors
            return dict.fromkeys(self.dict_var.items).keys()
        return getattr(self.dict_var.as_python_constant(), self.kind)()

    def truth(self, tx) -> bool:
        return bool(self.dict_var.items)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__len__":
            return ConstantVariable(len(self.dict_var.items))
        if name == "__contains__" and self.kind == "keys":
            return self.dict_var.call_method(tx, "__contains__", args, kwargs)
        if name == "__iter__":
            from .iter import ListIteratorVariable

            return ListIteratorVariable(self.view_items(tx))
        return ListVariable(self.view_items(tx)).call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.dict_var)}.{self.kind}()"

    def __repr__(self) -> str:
        return f"DictViewVariable({self.kind}, {list(self.dict_var.items)})"
