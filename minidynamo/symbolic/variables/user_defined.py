"""User mappings while tracing: ``in``/``.get`` on a Mapping, ``os.environ``, ModelOutput.

Place in the pipeline: ``UserDefinedObjectVariable.call_method`` asks here first, and
constructing a dataclass-dict (Note [ModelOutput]) lands here. Mirrors
the mapping cases of ``torch/_dynamo/variables/user_defined.py`` and ``os.environ`` in
``torch/_dynamo/variables/misc.py``.

Note [Mapping methods without exceptions]
    ``collections.abc.Mapping`` implements ``key in m`` and ``m.get(key, default)`` as
    ``try: self[key] except KeyError: ...``. Real Dynamo traces that try/except; ours cannot
    trace a raised exception, so for a class that keeps the ABC's own methods we trace
    ``m[key]`` (the user's ``__getitem__``, inlined, its reads guarded): when it returns,
    ``key in m`` is True and ``m.get`` is that value. When the user's ``__getitem__`` would
    raise, tracing it is a graph break, never a wrong answer.

Note [os.environ is read while tracing]
    ``os.environ.get("FLAG", "0")`` is folded to the value the variable has while tracing,
    as Dynamo folds it; no guard watches the environment, so setting the variable later
    does not recompile (in either).
"""

from __future__ import annotations

import collections.abc
import os
from typing import Optional

from .. import graph_break_registry as gb
from .base import VariableTracker
from .constant import ConstantVariable

_ENVIRON_METHODS = ("get", "__getitem__", "__contains__")


def is_mapping_method(value, name: str) -> bool:
    """Does ``mapping_call_method`` handle ``value.name(...)``?"""
    if value is os.environ:
        return name in _ENVIRON_METHODS
    own = getattr(type(value), name, None) if isinstance(value, collections.abc.Mapping) else None
    return own is not None and own in (collections.abc.Mapping.__contains__, collections.abc.Mapping.get)


def mapping_call_method(tx, obj, name: str, args: list, kwargs: dict) -> Optional[VariableTracker]:
    """``obj.name(*args)`` for the mapping protocol of a user object, or None (not ours to do)."""
    value = obj.value
    if value is os.environ and name in _ENVIRON_METHODS and not kwargs and all(a.is_python_constant() for a in args):
        key, *rest = [a.as_python_constant() for a in args]  # Note [os.environ is read while tracing]
        if name == "__getitem__" and key not in os.environ:
            return None
        return ConstantVariable(getattr(os.environ, name)(key, *rest))
    if not isinstance(value, collections.abc.Mapping) or kwargs:
        return None
    own = getattr(type(value), name, None)
    if name == "__contains__" and own is collections.abc.Mapping.__contains__ and len(args) == 1:
        obj.call_method(tx, "__getitem__", args, {})  # Note [Mapping methods without exceptions]
        return ConstantVariable(True)
    if name == "get" and own is collections.abc.Mapping.get and len(args) in (1, 2):
        return obj.call_method(tx, "__getitem__", args[:1], {})
    if is_mapping_method(value, name):
        from ..exc import unimplemented

        unimplemented(f"{type(value).__name__}.{name} with these arguments", gb_id=gb.UNSUPPORTED_METHOD)
    return None




def is_dataclass_dict(cls: type) -> bool:
    """A dataclass that is also an OrderedDict: transformers' ``ModelOutput`` pattern."""
    import collections
    import dataclasses

    return isinstance(cls, type) and dataclasses.is_dataclass(cls) and issubclass(cls, collections.OrderedDict)


class DataclassDictVariable(VariableTracker):
    """A ``ModelOutput`` built while tracing: its attributes and its entries, each a tracker.

    Note [ModelOutput]
        transformers' outputs are dataclasses that are also OrderedDicts: a field set to
        a value that is not None is also a key, ``out[0]`` is the first such value,
        ``out.to_tuple()`` all of them. Real Dynamo models them in
        ``variables/dicts.py`` (``UserDefinedDictVariable`` / the former
        ``CustomizedDictVariable``). Ours supports construction from keyword (or
        positional) fields whose first value is a tensor or None -- the only path of
        ``ModelOutput.__post_init__`` that models take -- and reads. A write
        (``out.loss = t``, ``out["logits"] = t``) runs the class's own ``__setattr__`` /
        ``__setitem__``, inlined: their ``super().__setitem__`` writes the entries and
        their ``super().__setattr__`` the attributes, which can then differ (``out.loss =
        t`` on a field that was None sets the attribute and adds no key, as in eager).
        After the graph it is rebuilt by calling the class with its fields when the two
        still agree, else as ``___rebuild_dict_dataclass`` writes each through the base
        classes (torch's ``_manual_dict_setitem``).
    """

    def __init__(self, cls: type, fields: dict, **kwargs):
        super().__init__(**kwargs)
        self.cls = cls
        self.fields = fields  # name -> tracker: the attributes, every field of the dataclass first
        self.entries = {k: v for k, v in fields.items() if not _is_none(v)}  # the OrderedDict's own items

    @classmethod
    def create(cls, tx, klass: type, args: list, kwargs: dict) -> "DataclassDictVariable":
        import dataclasses

        from ..exc import unimplemented
        from .tensor import TensorVariable

        names = [f.name for f in dataclasses.fields(klass) if f.init]
        if len(args) > len(names) or any(k not in names for k in kwargs):
            unimplemented(f"constructing a {klass.__name__} with these arguments", gb_id=gb.NAMEDTUPLE_CONSTRUCT)
        values = dict(zip(names, args), **kwargs)
        fields = {n: values.get(n, ConstantVariable(None)) for n in names}
        first = fields[names[0]] if names else None
        others_none = all(_is_none(fields[n]) for n in names[1:])
        if first is None or (others_none and not isinstance(first, TensorVariable) and not _is_none(first)):
            unimplemented(f"constructing a {klass.__name__} from an iterator or dict (ModelOutput's other path)",
                          gb_id=gb.NAMEDTUPLE_CONSTRUCT)
        return cls(klass, fields)

    def python_type(self) -> type:
        return self.cls

    def keys(self) -> list:
        return list(self.entries)

    def to_tuple(self):
        from .lists import TupleVariable

        return TupleVariable(list(self.entries.values()))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        import inspect

        from ..exc import unimplemented
        from .functions import UserFunctionVariable, UserMethodVariable
        from .base import GetAttrVariable

        if name in self.fields:
            return self.fields[name]
        if name in ("to_tuple", "keys", "values", "items", "get", "__getitem__", "__contains__", "__len__"):
            return GetAttrVariable(self, name)
        attr = inspect.getattr_static(self.cls, name, None)
        if isinstance(attr, property) and attr.fget is not None:
            return UserFunctionVariable(attr.fget).call_function(tx, [self], {})
        if inspect.isfunction(attr):  # ModelOutput._replace_old_cache_name, called by its __setattr__
            return UserMethodVariable(attr, self)
        if name == "__dataclass_fields__":
            return tx.wrap_sourceless(attr)
        unimplemented(f"attribute {name!r} of a {self.cls.__name__}", gb_id=gb.UNSUPPORTED_METHOD)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``out.name = value``: the class's own ``__setattr__``, inlined (Note [ModelOutput])."""
        import inspect

        setattr_ = inspect.getattr_static(self.cls, "__setattr__", None)
        if inspect.isfunction(setattr_):
            from .functions import UserMethodVariable

            UserMethodVariable(setattr_, self).call_function(tx, [ConstantVariable(name), value], {})
        else:
            self.object_setattr(name, value)

    def object_setattr(self, name: str, value: VariableTracker) -> None:
        """``object.__setattr__(out, name, value)``: the attribute only."""
        self.fields[name] = value

    def base_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """``OrderedDict.<name>(out, ...)`` reached through ``super()``: the entries only."""
        from ..exc import unimplemented

        if not kwargs and name == "__setitem__" and len(args) == 2 and args[0].is_python_constant():
            self.entries[args[0].as_python_constant()] = args[1]
            return ConstantVariable(None)
        if not kwargs and name == "__delitem__" and len(args) == 1 and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if key not in self.entries:
                tx.raise_observed_exception(KeyError, [args[0]])
            del self.entries[key]
            return ConstantVariable(None)
        if name in ("keys", "values", "items", "__len__", "get", "__getitem__", "__contains__"):
            return self.call_method(tx, name, args, kwargs)
        unimplemented(f"super().{name} of a {self.cls.__name__}", gb_id=gb.SUPER)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        import inspect

        from ..exc import unimplemented
        from .lists import ListVariable, TupleVariable

        own = inspect.getattr_static(self.cls, name, None)
        if name == "__setitem__" and inspect.isfunction(own):  # ModelOutput.__setitem__, inlined
            from .functions import UserMethodVariable

            return UserMethodVariable(own, self).call_function(tx, args, kwargs)
        keys = self.keys()
        if name == "to_tuple" and not args:
            return self.to_tuple()
        if name == "keys" and not args:
            return ListVariable([ConstantVariable(k) for k in keys])
        if name == "values" and not args:
            return ListVariable(list(self.entries.values()))
        if name == "items" and not args:
            return ListVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.entries.items()])
        if name == "__len__":
            return ConstantVariable(len(keys))
        if name in ("__getitem__", "get", "__contains__") and args and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if name == "__contains__":
                return ConstantVariable(key in keys)
            if isinstance(key, str):
                if key in keys:
                    return self.entries[key]
                if name == "get":
                    return args[1] if len(args) > 1 else ConstantVariable(None)
                unimplemented(f"{self.cls.__name__}[{key!r}]: no such key (eager raises KeyError)",
                              gb_id=gb.KEY_NOT_FOUND)
            if name == "__getitem__" and isinstance(key, (int, slice)):
                return self.to_tuple().call_method(tx, "__getitem__", args, {})
        unimplemented(f"{self.cls.__name__}.{name}", gb_id=gb.UNSUPPORTED_METHOD)

    def unpack_var_sequence(self, tx) -> list:
        return [ConstantVariable(k) for k in self.keys()]

    def reconstruct(self, codegen) -> str:
        agree = list(self.entries) == [k for k, v in self.fields.items() if not _is_none(v)] and all(
            self.entries[k] is self.fields[k] for k in self.entries)
        if agree:
            body = ", ".join(f"{k}={codegen.expr(v)}" for k, v in self.fields.items())
            return f"{codegen.constant_expr(self.cls)}({body})"
        entries = ", ".join(f"{k!r}: {codegen.expr(v)}" for k, v in self.entries.items())
        attrs = ", ".join(f"{k!r}: {codegen.expr(v)}" for k, v in self.fields.items())
        return f"___rebuild_dict_dataclass({codegen.constant_expr(self.cls)}, {{{entries}}}, {{{attrs}}})"

    def __repr__(self) -> str:
        return f"DataclassDictVariable({self.cls.__name__})"


def _is_none(v: VariableTracker) -> bool:
    return v.is_python_constant() and v.as_python_constant() is None




class DictBaseVariable(VariableTracker):
    """``super().get(key)`` inside a dict subclass: the dict's own entries, read through the source.

    Note [super() of a dict subclass]
        A registry such as transformers' ``_CanRecordRegistry(dict)`` reads its entries
        with ``super().get(key)``. With a constant key and an object we can name (a
        source), the entry is read now and guarded like any input: the key's presence
        (``key in obj``) and then the value through ``obj[key]``. Reached through the
        globals of a library function we cannot name, it is read as a constant, like
        every other value of those globals. Real Dynamo models the
        subclass as a ``UserDefinedDictVariable`` over its dict.
    """

    def __init__(self, obj: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.obj = obj

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        from ..exc import unimplemented
        from ..source import GetItemSource

        value, source = self.obj.value, self.obj.source
        cls = type(value)
        plain_reads = cls.__getitem__ is dict.__getitem__ and cls.__contains__ is dict.__contains__
        if (not plain_reads and name == "__getitem__" and not kwargs and len(args) == 1 and source is not None
                and args[0].is_python_constant() and isinstance(args[0].as_python_constant(), str)
                and cls.__contains__ is dict.__contains__):
            return _own_getitem_entry(tx, value, source, args[0].as_python_constant())
        if not plain_reads or kwargs or not args or not args[0].is_python_constant():
            unimplemented(f"super().{name} of a {cls.__name__} we cannot read plainly", gb_id=gb.SUPER)
        key = args[0].as_python_constant()
        if not isinstance(key, (str, int)):
            unimplemented(f"super().{name} with a {type(key).__name__} key", gb_id=gb.SUPER)
        present = dict.__contains__(value, key)
        if source is not None:
            tx.output.guards.add(source, "DICT_CONTAINS", f"({key!r} in {source.name()}) is {present}",
                                 "the trace read this entry of a dict subclass", f"{key!r} in {source.name()}")
        if name == "__contains__":
            return ConstantVariable(present)
        if present and source is None:  # read through globals we cannot name: a constant, as those globals are
            return tx.wrap_sourceless(dict.__getitem__(value, key))
        if present:
            return tx.variable_builder(GetItemSource(source, key))(dict.__getitem__(value, key))
        if name == "get":
            return args[1] if len(args) > 1 else ConstantVariable(None)
        unimplemented(f"super().__getitem__({key!r}): no such key (eager raises KeyError)", gb_id=gb.KEY_NOT_FOUND)


def _own_getitem_entry(tx, value, source, key: str) -> VariableTracker:
    """``super().__getitem__(key)`` in a dict subclass that overrides ``__getitem__`` (transformers' ACT2FN).

    ``obj[key]`` would run the override, so the guard reads the entry as ``dict.__getitem__``
    does: ``___dict_getitem(obj, key) is <entry>``. Only for an entry that is a class
    (an identity guard fixes all of it); anything else is a graph break.
    """
    from ..exc import unimplemented

    if not dict.__contains__(value, key):
        unimplemented(f"super().__getitem__({key!r}): no such key (eager raises KeyError)", gb_id=gb.KEY_NOT_FOUND)
    entry = dict.__getitem__(value, key)
    if not isinstance(entry, type):
        unimplemented(f"super().__getitem__({key!r}) of a {type(value).__name__}: an entry that is not a class",
                      gb_id=gb.SUPER)
    guards = tx.output.guards
    guards.scope.setdefault("___dict_getitem", dict.__getitem__)
    guards.add(source, "DICT_ENTRY", f"___dict_getitem({source.name()}, {key!r}) is {guards.name_for(entry, entry.__name__)}",
               "the trace read this entry of a dict subclass", f"___dict_getitem({source.name()}, {key!r})")
    return tx.wrap_sourceless(entry)  # a UserDefinedClassVariable (user_class.py)


class InstanceDictVariable(DictBaseVariable):
    """``obj.__dict__`` read from an inlined ``__getattribute__`` (Note [A class that overrides __getattribute__])."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .base import GetAttrVariable

        if name in ("get", "__getitem__", "__contains__"):
            return GetAttrVariable(self, name)
        return self.whole(tx).var_getattr(tx, name)

    def whole(self, tx) -> VariableTracker:
        """The whole dict, every key and value read (and guarded): ``copy.deepcopy`` of the instance needs them."""
        from ..exc import unimplemented

        if self.obj.source is None:
            unimplemented("the __dict__ of an object we cannot name, read whole", gb_id=gb.DICT_ACCESS)
        return tx.variable_builder(self.obj.source)(self.obj.value)

    def python_type(self) -> type:
        return dict

    def truth(self, tx) -> bool:
        return self.whole(tx).truth(tx)

    def has_unpack_var_sequence(self, tx) -> bool:
        return True

    def unpack_var_sequence(self, tx) -> list:
        return self.whole(tx).unpack_var_sequence(tx)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("get", "__getitem__", "__contains__"):
            return super().call_method(tx, name, args, kwargs)
        return self.whole(tx).call_method(tx, name, args, kwargs)


_READS = ("items", "keys", "values", "__len__", "copy")


class NewObjectDictVariable(VariableTracker):
    """``y.__dict__`` of an object made in the trace: its attributes, read and written in place.

    ``copy._reconstruct`` fills a new object with ``y.__dict__.update(state)``
    (Note [copy.deepcopy of a user object]); reads and writes go to the
    ``NewObjectVariable``'s own attributes, so the object rebuilt after the graph has them.
    """

    def __init__(self, obj, **kwargs):
        super().__init__(**kwargs)
        self.obj = obj

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .base import GetAttrVariable

        if name in ("update", "get", "__getitem__", "__setitem__", "__contains__") + _READS:
            return GetAttrVariable(self, name)
        return super().var_getattr(tx, name)

    def python_type(self) -> type:
        return dict

    def snapshot(self) -> VariableTracker:
        """The attributes as they are now, as a dict of the trace (for reads only)."""
        from .dicts import ConstDictVariable

        return ConstDictVariable(dict(self.obj.attrs))

    def truth(self, tx) -> bool:
        return bool(self.obj.attrs)

    def has_unpack_var_sequence(self, tx) -> bool:
        return True

    def unpack_var_sequence(self, tx) -> list:
        return self.snapshot().unpack_var_sequence(tx)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        from ..exc import unimplemented
        from .dicts import ConstDictVariable

        if name in _READS:
            if name in ("keys", "values", "items"):  # a list of what they are now: nothing mutates them in between
                from .lists import ListVariable

                return ListVariable(self.snapshot().call_method(tx, name, args, kwargs).unpack_var_sequence(tx))
            return self.snapshot().call_method(tx, name, args, kwargs)
        attrs = self.obj.attrs
        keys_const = all(a.is_python_constant() and isinstance(a.as_python_constant(), str) for a in args[:1])
        if name == "update" and not kwargs and len(args) == 1 and isinstance(args[0], ConstDictVariable):
            new = {}
            for k, v in args[0].items.items():
                key = k.as_python_constant() if hasattr(k, "as_python_constant") and k.is_python_constant() else k
                if not isinstance(key, str):
                    unimplemented("__dict__.update with a key that is not a constant string",
                                  gb_id=gb.DICT_KEY_NONSTRING)
                new[key] = v
            attrs.update(new)
            return ConstantVariable(None)
        if kwargs or not args or not keys_const:
            unimplemented(f"__dict__.{name} of a new {self.obj.cls.__name__} with these arguments",
                          gb_id=gb.UNSUPPORTED_METHOD)
        key = args[0].as_python_constant()
        if name == "__setitem__" and len(args) == 2:
            attrs[key] = args[1]
            return ConstantVariable(None)
        if name == "__contains__":
            return ConstantVariable(key in attrs)
        if key in attrs and name in ("get", "__getitem__"):
            return attrs[key]
        if name == "get":
            return args[1] if len(args) > 1 else ConstantVariable(None)
        unimplemented(f"__dict__[{key!r}] of a new {self.obj.cls.__name__}: no such key (eager raises KeyError)",
                      gb_id=gb.KEY_NOT_FOUND)


__all__ = ["NewObjectDictVariable", "InstanceDictVariable", "mapping_call_method", "is_mapping_method", "is_dataclass_dict", "DataclassDictVariable", "DictBaseVariable"]
