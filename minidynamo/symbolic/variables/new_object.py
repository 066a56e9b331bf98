"""Objects created while tracing: a plain class called in the trace, its instance and its lookups.

Place in the pipeline: ``UserDefinedClassVariable.call_function`` (``user_class.py``) makes a
``NewObjectVariable`` and inlines its ``__init__``; its attributes live on the tracker,
reads and writes go through the class's own ``__getattribute__``/``__setattr__`` when it
has Python ones, and the object is rebuilt (``new_object``) if it outlives the graph.
Mirrors ``torch/_dynamo/variables/user_defined.py`` (``UserDefinedObjectVariable`` of an
object made in the trace) with ``AttributeMutationNew`` of ``torch/_dynamo/side_effects.py``,
and ``ObjectVariable``'s ``object.__getattribute__``/``__setattr__`` handling.
"""

from __future__ import annotations

import collections.abc
import inspect

import torch

from .. import graph_break_registry as gb
from ..exc import Unsupported, unimplemented
from ..source import AttrSource
from .base import VariableTracker
from .constant import ConstantVariable
from .misc import (_MISSING, UserDefinedObjectVariable, call_class_getattr, class_attribute, generic_python_attr,
                   guard_class_attribute)


class ObjectGetattributeVariable(VariableTracker):
    """``object.__getattribute__`` bound to ``obj``: ``super().__getattribute__(name)`` in an override."""

    def __init__(self, obj: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.obj = obj

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        from .user_defined import InstanceDictVariable

        if kwargs or len(args) != 1 or not args[0].is_python_constant() or not isinstance(args[0].as_python_constant(), str):
            unimplemented("object.__getattribute__ with a name that is not a constant string",
                          gb_id=gb.GETATTR_NONCONST)
        name, obj = args[0].as_python_constant(), self.obj
        if isinstance(obj, NewObjectVariable):
            return obj.generic_getattr(tx, name)
        if not isinstance(obj, UserDefinedObjectVariable):
            unimplemented(f"object.__getattribute__ of {obj}", gb_id=gb.UNSUPPORTED_METHOD)
        if name == "__dict__" and type(getattr(obj.value, "__dict__", None)) is dict:
            source = AttrSource(obj.source, "__dict__") if obj.source is not None else None
            return InstanceDictVariable(UserDefinedObjectVariable(obj.value.__dict__, source=source), source=source)
        return generic_python_attr(tx, obj, obj.value, name)


class ObjectSetattrVariable(VariableTracker):
    """``object.__setattr__`` bound to a new object, or to one from outside the frame (with a source):
    ``super().__setattr__(key, value)`` in an override."""

    def __init__(self, obj: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.obj = obj

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if kwargs or len(args) != 2 or not args[0].is_python_constant() or not isinstance(args[0].as_python_constant(), str):
            unimplemented("object.__setattr__ with a name that is not a constant string", gb_id=gb.NOT_A_CONSTANT)
        name = args[0].as_python_constant()
        if isinstance(self.obj, NewObjectVariable):
            self.obj.attrs[name] = args[1]
            return ConstantVariable(None)
        if hasattr(self.obj, "object_setattr"):  # a ModelOutput made in the trace (Note [ModelOutput])
            self.obj.object_setattr(name, args[1])
            return ConstantVariable(None)
        # an object from outside the frame (Note [The dict inside a dict subclass], dict_subclass.py):
        # written after the graph as object.__setattr__ writes it, past the class's own __setattr__
        cls_attr = inspect.getattr_static(type(self.obj.value), name, None)
        if hasattr(type(cls_attr), "__set__") or hasattr(type(cls_attr), "__delete__"):
            unimplemented(f"object.__setattr__ of {name!r}, a data descriptor of {type(self.obj.value).__name__}",
                          gb_id=gb.SETATTR)
        tx.output.side_effects.store_attr(self.obj, name, args[1], generic=True)
        return ConstantVariable(None)


class ObservedAttributeError(Unsupported):
    """An attribute a new object of the trace does not have: eager raises AttributeError here.

    Note [hasattr through a __getattribute__ override]
        ``hasattr(y, "__setstate__")`` on a new ``PretrainedConfig`` (a deepcopy's
        ``_reconstruct``) runs the class's ``__getattribute__``, which ends in
        ``object.__getattribute__`` finding nothing: AttributeError, so False. We trace the
        override; the lookup that finds nothing raises this (a graph break anywhere else),
        and ``hasattr`` alone turns it into False, as Dynamo's ``ObservedAttributeError``.
        Only for an override without a try block of its own (it cannot catch the error)
        and a class without ``__getattr__`` (which would be called next).
    """


class NewObjectVariable(VariableTracker):
    """An instance of a plain Python class created while tracing (its __init__ was inlined).

    Its attributes live here; if it must exist after the graph, it is rebuilt with
    ``___new_object(cls, {...})``. Real Dynamo: ``UserDefinedObjectVariable`` with a
    ``AttributeMutationNew`` in SideEffects.
    """

    def __init__(self, cls: type, **kwargs):
        super().__init__(**kwargs)
        self.cls = cls
        self.attrs: dict[str, VariableTracker] = {}

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx, name: str) -> VariableTracker:
        getattribute = inspect.getattr_static(self.cls, "__getattribute__", None)
        if inspect.isfunction(getattribute):  # the class's own lookup (PretrainedConfig's attribute_map), inlined
            from .functions import UserMethodVariable

            return UserMethodVariable(getattribute, self).call_function(tx, [ConstantVariable(name)], {})
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """``object.__getattribute__(obj, name)``: the instance's attributes, then its class.

        Note [A descriptor's Python __get__ is inlined]
            A class attribute whose type has a Python ``__get__`` (``functools.cached_property``,
            a user's descriptor class) is read as Python reads it: ``type(d).__get__(d, obj, cls)``,
            inlined, as torch's ``UserDefinedObjectVariable.var_getattr``
            (torch/_dynamo/variables/user_defined.py). cached_property's body then stores the
            value in the instance dict (``obj.__dict__[name] = val``), so a second read finds it
            there. From 3.12 that body has no lock, and torch traces it whole.
        """
        if name in self.attrs:
            return self.attrs[name]
        if name == "__dict__":
            from .user_defined import NewObjectDictVariable

            return NewObjectDictVariable(self)
        if name == "__reduce_ex__":  # a copy of a copy (Whisper's config, deep-copied twice in one forward)
            from ..polyfills import plain_reduce, reduce_ex_user_defined_object
            from .functions import UserMethodVariable

            if plain_reduce(self.cls):  # Note [copy.deepcopy of a user object]
                return UserMethodVariable(reduce_ex_user_defined_object, self)
        cls_attr = inspect.getattr_static(self.cls, name, None)
        found = class_attribute(tx, self, cls_attr, name)
        if found is not None:
            return found
        get = inspect.getattr_static(type(cls_attr), "__get__", None) if cls_attr is not None else None
        if inspect.isfunction(get):  # Note [A descriptor's Python __get__ is inlined]
            from .functions import UserMethodVariable

            guard_class_attribute(tx, self.cls, name, cls_attr)
            return UserMethodVariable(get, tx.wrap_sourceless(cls_attr)).call_function(
                tx, [self, tx.wrap_sourceless(self.cls)], {})
        if cls_attr is not None:
            return tx.wrap_sourceless(cls_attr)
        found = call_class_getattr(tx, self, self.cls, name)  # Note [A missing attribute calls __getattr__]
        if found is not None:
            return found
        raise ObservedAttributeError(f"{self.cls.__name__} object has no attribute {name!r} (eager raises AttributeError)")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def truth(self, tx) -> bool:
        """``if obj:``: its class's Python ``__bool__`` or ``__len__``, inlined, else true (torch's ``generic_bool``)."""
        from .misc import python_bool

        if inspect.getattr_static(self.cls, "__bool__", None) is None and inspect.getattr_static(self.cls, "__len__", None) is None:
            return True
        result = python_bool(tx, self, self.cls)
        return super().truth(tx) if result is None else result

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """``obj(x)``: ``type(obj).__call__`` inlined (Python looks it up on the class, never the instance)."""
        call = inspect.getattr_static(self.cls, "__call__", None)
        if not inspect.isfunction(call):
            unimplemented(f"calling a {self.cls.__name__} object (its class has no Python __call__)",
                          gb_id=gb.UNSUPPORTED_FUNCTION)
        from .functions import UserMethodVariable

        guard_class_attribute(tx, self.cls, "__call__", call)
        return UserMethodVariable(call, self).call_function(tx, list(args), dict(kwargs))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``obj.name = value`` / ``setattr``: through the class's ``__setattr__`` when it has one in Python."""
        setattr_ = inspect.getattr_static(self.cls, "__setattr__", object.__setattr__)
        if setattr_ is object.__setattr__:
            self.attrs[name] = value
        elif inspect.isfunction(setattr_):  # PretrainedConfig maps names through attribute_map
            from .functions import UserMethodVariable

            UserMethodVariable(setattr_, self).call_function(tx, [ConstantVariable(name), value], {})
        else:
            unimplemented(f"setting {name!r} on a {self.cls.__name__} (its class has a C __setattr__)",
                          gb_id=gb.DUNDER_INLINE)

    def del_attr(self, tx, name: str) -> None:
        if inspect.getattr_static(self.cls, "__delattr__", object.__delattr__) is not object.__delattr__:
            unimplemented(f"delattr on a {self.cls.__name__} (its class overrides __delattr__)", gb_id=gb.DUNDER_INLINE)
        if name not in self.attrs:
            unimplemented(f"delattr({self.cls.__name__}, {name!r}): no such instance attribute (eager raises AttributeError)",
                          gb_id=gb.OBSERVED_EXCEPTION)
        del self.attrs[name]

    def call_hasattr(self, tx, name: str) -> VariableTracker:
        """``hasattr(obj, name)`` of an object made in the trace: its own attributes, then its class."""
        if name in self.attrs:
            return ConstantVariable(True)
        getattr_, getattribute = [inspect.getattr_static(self.cls, n, None) for n in ("__getattr__", "__getattribute__")]
        if (inspect.isfunction(getattribute) and not inspect.isfunction(getattr_)
                and not getattribute.__code__.co_exceptiontable):
            # Note [hasattr through a __getattribute__ override]: trace the override; the
            # AttributeError it would raise (object.__getattribute__ finding nothing) is False
            from .functions import UserMethodVariable

            try:
                UserMethodVariable(getattribute, self).call_function(tx, [ConstantVariable(name)], {})
            except ObservedAttributeError:
                return ConstantVariable(False)
            return ConstantVariable(True)
        if inspect.isfunction(getattr_) or inspect.isfunction(getattribute):
            unimplemented(f"hasattr on a {self.cls.__name__} (its class overrides attribute lookup)",
                          gb_id=gb.HASATTR_TYPE)
        cls_attr = inspect.getattr_static(self.cls, name, _MISSING)
        if cls_attr is _MISSING:
            return ConstantVariable(False)
        if isinstance(cls_attr, property):  # the getter may raise AttributeError: trace it (a raise breaks)
            self.var_getattr(tx, name)
        return ConstantVariable(True)

    def has_unpack_var_sequence(self, tx) -> bool:
        return _abc_sequence_iter(self.cls)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        """``for x in obj`` over a ``collections.abc.Sequence`` subclass (Note [Iterating a Sequence]),
        or over a class whose ``__iter__`` is a Python function (inlined: ``a, b = Pair()``)."""
        own_iter = inspect.getattr_static(self.cls, "__iter__", None)
        if inspect.isfunction(own_iter) and not _abc_sequence_iter(self.cls):
            from .functions import UserMethodVariable

            guard_class_attribute(tx, self.cls, "__iter__", own_iter)
            return UserMethodVariable(own_iter, self).call_function(tx, [], {}).unpack_var_sequence(tx)
        if not _abc_sequence_iter(self.cls):
            unimplemented(f"iterating over {self}", gb_id=gb.BUILTIN_OPERATOR)
        n = self.call_method(tx, "__len__", [], {})
        if not n.is_python_constant() or not isinstance(n.as_python_constant(), int):
            unimplemented(f"iterating over {self}: len() is not a constant int", gb_id=gb.NOT_A_CONSTANT)
        return [self.call_method(tx, "__getitem__", [ConstantVariable(i)], {}) for i in range(n.as_python_constant())]

    def reconstruct(self, codegen) -> str:
        cls = codegen.constant_expr(self.cls)
        body = ", ".join(f"{k!r}: {codegen.expr(v)}" for k, v in self.attrs.items())
        return f"___new_object({cls}, {{{body}}})"

    def __repr__(self) -> str:
        return f"NewObjectVariable({self.cls.__name__})"


def _abc_sequence_iter(cls: type) -> bool:
    """Iteration comes from ``collections.abc.Sequence.__iter__``, over a Python ``__len__`` and ``__getitem__``.

    Note [Iterating a Sequence]
        ``Sequence.__iter__`` is a generator that calls ``self[i]`` for i = 0, 1, ...
        until ``IndexError``. We do not trace generators or exceptions, so we unroll
        it as the ABC's contract states it: ``len(obj)`` items, ``obj[0] .. obj[len-1]``,
        both inlined (so their reads are guarded like any other). transformers'
        ``_PerLayerConfigView`` (``for layer_config in config.per_layer_config``) is one.
        Real Dynamo inlines the generator itself (``LocalGeneratorObjectVariable``).
    """
    return (
        inspect.getattr_static(cls, "__iter__", None) is collections.abc.Sequence.__iter__
        and inspect.isfunction(inspect.getattr_static(cls, "__len__", None))
        and inspect.isfunction(inspect.getattr_static(cls, "__getitem__", None))
    )


def new_object(cls: type, attrs: dict):
    """Rebuild an object created while tracing (used by transformed functions)."""
    obj = object.__new__(cls)
    if isinstance(obj, torch.nn.Module):  # a user module made in the trace (UnspecializedNNModuleVariable)
        torch.nn.Module.__init__(obj)
    obj.__dict__.update(attrs)
    return obj
