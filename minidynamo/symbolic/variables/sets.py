"""Sets while tracing: items are trackers, hashed as Python would hash the values behind them.

Place in the pipeline: like dicts and lists (Note [Containers mutate in place and say so]).
Mirrors ``torch/_dynamo/variables/sets.py`` (``SetVariable``, ``FrozensetVariable``) and the
key wrapper of ``torch/_dynamo/variables/hashable.py`` (``HashableTracker``).

Note [A set is a dict of hashable trackers]
    torch's ``SetVariable`` keeps ``items`` as a dict from ``HashableTracker`` to None:
    insertion order, and each item hashed as the value behind it. A constant hashes as
    itself (``1 == 1.0 == True`` are one item); a tensor as itself, that is by identity,
    which is its graph node here (two trackers of one node are one tensor); a module or
    an object from outside by the object. ``{x, x + 1}`` is two items, ``s.add(x)`` again
    changes nothing, ``x * 2 in s`` is False: all decided while tracing, no guard and no
    graph node. A list, dict or set item is eager's ``TypeError: unhashable type``, raised
    in the trace. A set of constants is still a Python constant (``as_python_constant``).
    Ours iterates in insertion order, as torch's (CPython orders tensors by address).
"""

from __future__ import annotations

import operator
from typing import Any

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import VariableTracker
from .constant import ConstantVariable
from .iter import ListIteratorVariable
from .sym_node import specialize_args

_UNHASHABLE = ("ListVariable", "ConstDictVariable", "DictViewVariable", "DequeVariable")


class HashableTracker:
    """A tracker as a key of ``SetVariable.items``: hash and ``==`` of the value it stands for."""

    def __init__(self, tx, vt: VariableTracker):
        vt = specialize_args([vt])[0]  # a SymInt item is fixed to its value (a guard), as torch's specialize_symnode
        self.vt = vt
        self.underlying = _underlying_value(tx, vt)
        self.is_constant = vt.is_python_constant() and not isinstance(vt, SetVariable)

    def __hash__(self) -> int:
        return hash(self.underlying) if self.is_constant else id(self.underlying)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HashableTracker) or self.is_constant != other.is_constant:
            return False
        if self.is_constant:
            return self.underlying == other.underlying
        return self.underlying is other.underlying


def _underlying_value(tx, vt: VariableTracker) -> Any:
    from .tensor import TensorVariable

    if isinstance(vt, SetVariable):
        if vt.user_cls is not frozenset:
            tx.raise_observed_exception(TypeError, ["unhashable type: 'set'"])
        return vt  # a frozenset of trackers: by identity (torch's is by its items; rare)
    if vt.is_python_constant():
        value = vt.as_python_constant()
        try:
            hash(value)
        except TypeError:
            tx.raise_observed_exception(TypeError, [f"unhashable type: '{type(value).__name__}'"])
        return value
    if isinstance(vt, TensorVariable):
        return vt.proxy.node  # a tensor hashes by identity: one node is one tensor
    if type(vt).__name__ in _UNHASHABLE:
        tx.raise_observed_exception(TypeError, [f"unhashable type: '{vt.python_type().__name__}'"])
    if type(vt).__name__ == "NNModuleVariable":
        return vt.as_dict_key()
    value = getattr(vt, "value", None)
    if vt.source is not None and value is not None and type(value).__hash__ is object.__hash__:
        return value  # an object from outside with object's hash: by identity
    if type(vt).__name__ == "NewObjectVariable" and getattr(vt.cls, "__hash__", None) is object.__hash__:
        return vt  # an object made in the trace, with object's hash: this tracker is that object
    unimplemented(f"a {type(vt).__name__} as a set item", "keep constants, tensors or modules in the set",
                  gb_id=gb.UNSUPPORTED_METHOD, context=f"set item {vt}")


def _equal(x: HashableTracker, y: HashableTracker) -> bool:
    """``x == y`` as torch's set polyfills ask it: on a tensor that is a data-dependent branch.

    Note [intersection and isdisjoint compare items with ==]
        torch runs ``set.intersection`` and ``set.isdisjoint`` through Python polyfills
        (torch/_dynamo/polyfills/__init__.py ``set_intersection``: ``any(x == y for y in set2)``,
        ``set_isdisjoint``: ``if x == y``), not through hashing as ``difference`` and ``union``
        do. With a tensor on either side ``x == y`` is a tensor and its truth a data-dependent
        branch: torch breaks there, so ours does too, at the same pair.
    """
    from .tensor import TensorVariable

    if isinstance(x.vt, TensorVariable) or isinstance(y.vt, TensorVariable):
        tensor = x.vt if isinstance(x.vt, TensorVariable) else y.vt
        unimplemented("data-dependent control flow: the branch depends on a tensor's value",
                      "compute both sides with torch.where, or move the test out of the compiled function",
                      gb_id=gb.DATA_DEPENDENT_BRANCH, context=f"attempted to jump with {tensor}")
    return x == y


def _intersection(a: dict, b: dict) -> dict:
    return {k: v for k, v in a.items() if any(_equal(k, y) for y in b)}


def _isdisjoint(a: dict, b: dict) -> bool:
    return not any(_equal(x, y) for x in a for y in b)


def _other_items(tx, other: VariableTracker) -> dict:
    if isinstance(other, SetVariable):
        return other.items
    return {HashableTracker(tx, v): v for v in other.unpack_var_sequence(tx)}


# set methods that build a new set, the operator they are, and the dict operation on the keys
_NEW_SET = {
    "union": lambda a, b: {**a, **b},
    "intersection": _intersection,  # Note [intersection and isdisjoint compare items with ==]
    "difference": lambda a, b: {k: v for k, v in a.items() if k not in b},
    "symmetric_difference": lambda a, b: {**{k: v for k, v in a.items() if k not in b},
                                          **{k: v for k, v in b.items() if k not in a}},
}
_OPERATORS = {operator.or_: "union", operator.and_: "intersection", operator.sub: "difference",
              operator.xor: "symmetric_difference"}
_INPLACE = {operator.ior: "update", operator.iand: "intersection_update", operator.isub: "difference_update",
            operator.ixor: "symmetric_difference_update"}
_COMPARE = {operator.eq: "__eq__", operator.ne: "__ne__", operator.le: "issubset", operator.ge: "issuperset",
            operator.lt: "__lt__", operator.gt: "__gt__"}


class SetVariable(VariableTracker):
    """A set (or frozenset) made in the trace: Note [A set is a dict of hashable trackers]."""

    def __init__(self, items: dict, user_cls: type = set, **kwargs):
        super().__init__(**kwargs)
        self.items = dict(items)  # HashableTracker -> VariableTracker, insertion order
        self.user_cls = user_cls

    @classmethod
    def build(cls, tx, items: list, user_cls: type = set, **kwargs) -> "SetVariable":
        return cls({HashableTracker(tx, v): v for v in items}, user_cls, **kwargs)

    def python_type(self) -> type:
        return self.user_cls

    def is_python_constant(self) -> bool:
        return all(v.is_python_constant() for v in self.items.values())

    def as_python_constant(self) -> Any:
        return self.user_cls(v.as_python_constant() for v in self.items.values())

    def as_proxy(self) -> Any:
        return self.user_cls(v.as_proxy() for v in self.items.values())

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items.values())

    def truth(self, tx) -> bool:
        return bool(self.items)

    def _new(self, items: dict) -> "SetVariable":
        return SetVariable(items, self.user_cls)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        items = self.items
        if kwargs:
            unimplemented(f"set.{name} with keyword arguments", gb_id=gb.UNSUPPORTED_METHOD)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name == "__contains__":
            return ConstantVariable(HashableTracker(tx, args[0]) in items)
        if name == "__iter__":
            return ListIteratorVariable(list(items.values()))
        if name == "copy":
            return self._new(items)
        if name in _NEW_SET:
            result = dict(items)
            for other in args:
                result = _NEW_SET[name](result, _other_items(tx, other))
            return self._new(result)
        if name == "isdisjoint":
            return ConstantVariable(_isdisjoint(items, _other_items(tx, args[0])))
        if name in ("issubset", "issuperset", "__eq__", "__ne__", "__lt__", "__gt__"):
            a, b = set(items), set(_other_items(tx, args[0]))
            if name in ("__eq__", "__ne__", "__lt__", "__gt__") and not isinstance(args[0], SetVariable):
                return ConstantVariable(name == "__ne__")  # a set is never equal to a list
            return ConstantVariable(getattr(a, name)(b))
        if self.user_cls is frozenset:
            return super().call_method(tx, name, args, kwargs)
        mutations = ("add", "discard", "remove", "pop", "clear", "update", "intersection_update",
                     "difference_update", "symmetric_difference_update")
        if name in mutations:
            tx.output.side_effects.mutation(self)
        if name == "add":
            key = HashableTracker(tx, args[0])
            items.setdefault(key, args[0])
            return ConstantVariable(None)
        if name in ("discard", "remove"):
            key = HashableTracker(tx, args[0])
            if key not in items and name == "remove":
                tx.raise_observed_exception(KeyError, [args[0]])
            items.pop(key, None)
            return ConstantVariable(None)
        if name == "pop":
            if not items:
                tx.raise_observed_exception(KeyError, [ConstantVariable("pop from an empty set")])
            key = next(iter(items))  # torch's pops the first inserted item (CPython's an arbitrary one)
            return items.pop(key)
        if name == "clear":
            items.clear()
            return ConstantVariable(None)
        if name.endswith("update"):
            base = name[: -len("_update")] if name != "update" else "union"
            result = dict(items)
            for other in args:
                result = _NEW_SET[base](result, _other_items(tx, other))
            items.clear()
            items.update(result)
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:  # its mutations are written back to it first (side_effects.py)
            return codegen.source_expr(self.source)
        body = ", ".join(codegen.expr(v) for v in self.items.values())
        if self.user_cls is frozenset:
            return f"frozenset({{{body}}})" if body else "frozenset()"
        return "{" + body + "}" if body else "set()"

    def __repr__(self) -> str:
        return f"SetVariable({self.user_cls.__name__}, {list(self.items.values())})"


def call_set_operator(tx, fn, args: list) -> VariableTracker | None:
    """``a | b``, ``a & b``, ``a - b``, ``a ^ b``, their in-place forms and comparisons, when ``a`` is a set."""
    a, b = args
    if not isinstance(a, SetVariable):
        return None
    if fn in _OPERATORS and isinstance(b, SetVariable):
        return a.call_method(tx, _OPERATORS[fn], [b], {})
    if fn in _INPLACE and isinstance(b, SetVariable):
        if a.user_cls is frozenset:  # a frozenset has no in-place method: Python builds a new one
            return a.call_method(tx, _NEW_SET_OF_INPLACE[fn], [b], {})
        a.call_method(tx, _INPLACE[fn], [b], {})
        return a
    if fn in _COMPARE and isinstance(b, SetVariable):
        return a.call_method(tx, _COMPARE[fn], [b], {})
    return None


_NEW_SET_OF_INPLACE = {operator.ior: "union", operator.iand: "intersection", operator.isub: "difference",
                       operator.ixor: "symmetric_difference"}


def build_set(tx, iterable: VariableTracker | None, user_cls: type = set) -> SetVariable:
    """``set(...)`` / ``frozenset(...)`` called in the trace."""
    items = [] if iterable is None else iterable.unpack_var_sequence(tx)
    return SetVariable.build(tx, items, user_cls)
