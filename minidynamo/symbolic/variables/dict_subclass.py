"""The dict inside an instance of a dict subclass: ``super().__setitem__``, ``self.keys()``.

Place in the pipeline: an object from outside the frame whose class subclasses ``dict``
or ``OrderedDict`` (transformers' ``ModelOutput``, a registry) is a
``UserDefinedObjectVariable``; the dict methods its class does not override, and those
its overrides reach through ``super()``, land here. Mirrors torch's
``UserDefinedDictVariable`` (torch/_dynamo/variables/user_defined.py, whose ``_base_vt``
is a ``ConstDictVariable`` of the instance's entries) and ``_manual_dict_setitem``
(torch/_dynamo/side_effects.py, which writes them back).

Note [The dict inside a dict subclass]
    A ``ModelOutput`` is a dataclass and an ``OrderedDict`` at once: ``out.loss = t``
    runs its ``__setattr__``, which asks ``name in self.keys()``, calls
    ``super().__setitem__`` and then ``super().__setattr__``. So a frame that fills one
    (its ``__init__``, called eagerly after a break) reads and writes the entries of
    the dict the instance *is*, through ``dict``'s own methods. As torch's
    ``UserDefinedDictVariable``, the entries are read once per trace into a
    ``ConstDictVariable`` (its keys under one guard, ``list(dict.keys(L['o'])) ==
    [...]``, each value through ``dict.__getitem__``), every later read and write goes
    to it, and after the graph the entries are written back through the base class,
    never through the subclass's overrides (``ModelOutput.update`` raises):
    ``OrderedDict.clear(o)``, then ``OrderedDict.__setitem__(o, k, v)`` for each entry,
    torch's ``_manual_dict_setitem``. The instance's attributes are written after,
    with ``object.__setattr__`` where the trace reached it through ``super()``.
"""

from __future__ import annotations

import collections
import inspect
from typing import Any

from .. import graph_break_registry as gb
from ..exc import unimplemented
from ..source import DictGetItemSource, GetItemSource
from .base import GetAttrVariable, VariableTracker

# the methods of dict and OrderedDict a trace can run on the entries
DICT_METHODS = frozenset({"__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__", "get",
                          "keys", "values", "items", "update", "pop", "setdefault", "clear", "copy"})


def dict_base(cls: type) -> type:
    """The class whose methods hold the entries: ``OrderedDict`` for its subclasses, else ``dict``."""
    return collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict


def is_dict_subclass_instance(value: Any) -> bool:
    """An instance of a user subclass of dict (not dict, OrderedDict, defaultdict or Counter themselves)."""
    return isinstance(value, dict) and type(value) not in (dict, collections.OrderedDict, collections.defaultdict,
                                                          collections.Counter)


def inherits_dict_method(cls: type, name: str) -> bool:
    """Does ``cls.name`` resolve to the dict base's own method (the subclass does not override it)?"""
    if name not in DICT_METHODS:
        return False
    base = dict_base(cls)
    return inspect.getattr_static(cls, name, None) is inspect.getattr_static(base, name, None)


def dict_part(tx, obj: VariableTracker):
    """The entries of ``obj`` (a dict-subclass instance with a source), read once per trace."""
    from ..guards import _is_literal
    from .dicts import ConstDictVariable

    side_effects = tx.output.side_effects
    if obj.source is None:
        unimplemented(f"the entries of a {type(obj.value).__name__} made where the trace cannot name it",
                      gb_id=gb.DICT_ACCESS)
    key = obj.source.name()
    part = side_effects.dict_parts.get(key)
    if part is not None:
        return part
    value, source = obj.value, obj.source
    cls = type(value)
    base = dict_base(cls)
    keys = list(base.keys(value))
    if not all(_is_literal(k) for k in keys):
        unimplemented(f"a {cls.__name__} whose keys are not Python literals", gb_id=gb.DICT_KEYS_NONCONST)
    guards = tx.output.guards
    guards.TYPE_MATCH(source, value, "the trace read the entries of this dict subclass")
    if base is dict:
        keys_expr = f"list(dict.keys({source.name()}))"
    else:  # an OrderedDict keeps its own order: read it as OrderedDict.keys does
        guards.scope.setdefault("___odict_keys", collections.OrderedDict.keys)
        keys_expr = f"list(___odict_keys({source.name()}))"
    guards.add(source, "DICT_KEYS", f"{keys_expr} == {keys!r}", "the trace read the entries of this dict subclass",
               keys_expr)
    plain_getitem = inspect.getattr_static(cls, "__getitem__", None) is inspect.getattr_static(base, "__getitem__")
    items = {}
    for k in keys:
        item_source = GetItemSource(source, k) if plain_getitem else DictGetItemSource(source, k)
        items[k] = tx.variable_builder(item_source)(dict.__getitem__(value, k))
    part = ConstDictVariable(items, user_cls=base, source=source)
    part.written_through = base  # Note [The dict inside a dict subclass]: written back through the base class
    side_effects.dict_parts[key] = part
    return part


class DictPartMethodVariable(GetAttrVariable):
    """``obj.keys`` / ``super().__setitem__`` of a dict subclass: the base's method, run on the entries."""

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if self.name == "copy" and dict_base(type(self.obj.value)) is not dict:
            # OrderedDict.copy makes ``self.__class__(self)``: the subclass's __init__ runs
            unimplemented(f"copy() of a {type(self.obj.value).__name__} (an OrderedDict subclass)",
                          gb_id=gb.UNSUPPORTED_METHOD)
        part = dict_part(tx, self.obj)
        if self.name == "__iter__" and not args and not kwargs:
            from .iter import ListIteratorVariable

            return ListIteratorVariable(part.unpack_var_sequence(tx))
        return part.call_method(tx, self.name, args, kwargs)


def dict_part_method(obj: VariableTracker, name: str) -> VariableTracker:
    return DictPartMethodVariable(obj, name)


__all__ = ["DICT_METHODS", "dict_base", "is_dict_subclass_instance", "inherits_dict_method", "dict_part",
           "DictPartMethodVariable", "dict_part_method"]
