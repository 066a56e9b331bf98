"""A class as a value while tracing: its attributes, a call that makes an object, ``super()``.

Place in the pipeline: the top of the VariableTrackers, under the builder only. Calling
a class in the trace makes what the class makes: a torch.nn module (``nn_module.py``),
a plain object (``new_object.py``), a deque or defaultdict (``containers.py``), a named
tuple (``lists.py``); ``super()`` looks a name up along the MRO and can find
``nn.Module.__init__`` or ``object.__setattr__``. So this module imports those, and none
of them imports it (pyproject.toml's "dynamo-variables" contract). Mirrors
``UserDefinedClassVariable`` of ``torch/_dynamo/variables/user_defined.py`` and
``SuperVariable`` of ``torch/_dynamo/variables/misc.py``.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import inspect
import types
import weakref
from typing import Any

import torch

from ..exc import unimplemented
from .. import graph_break_registry as gb
from ..source import AttrSource
from .base import GetAttrVariable, VariableTracker
from .autograd_function import AutogradFunctionApplyVariable, is_plain_apply
from .constant import ConstantVariable, is_constant_value
from .dict_subclass import DICT_METHODS, DictPartMethodVariable, is_dict_subclass_instance
from .misc import UserDefinedObjectVariable, _user_class, class_attribute, guard_class_attribute
from .user_defined import DataclassDictVariable, DictBaseVariable


class DataclassBaseMethodVariable(GetAttrVariable):
    """``super().__setitem__`` in a ModelOutput made in the trace: OrderedDict's method on its entries."""

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.obj.base_method(tx, self.name, args, kwargs)


class SuperVariable(VariableTracker):
    """``super()`` inside an inlined method: attribute lookup starts after ``cls`` in the MRO."""

    def __init__(self, cls: type, obj: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.cls = cls
        self.obj = obj

    def var_getattr(self, tx, name: str) -> VariableTracker:
        obj_type = self.obj.python_type()
        mro = obj_type.__mro__
        from .exceptions import ExceptionVariable

        if isinstance(self.obj, ExceptionVariable) and name == "__init__" and not any(
                "__init__" in vars(k) and inspect.isfunction(vars(k)["__init__"]) for k in mro[mro.index(self.cls) + 1:]):
            # super().__init__(msg) reaching BaseException's, in a user exception's __init__: torch 2.13
            # does not trace it (SuperVariable.call_method in torch/_dynamo/variables/misc.py), nor do we
            unimplemented("super().__init__ of an exception class is not a function or method torch traces",
                          "Ensure the attribute accessed via `super()` is a standard method or function.",
                          gb_id=gb.SUPER_ATTRIBUTE, context=f"call_method SuperVariable() {name}")
        if self.cls not in mro:  # super() in a classmethod: the second argument is a class
            unimplemented(f"super().{name} whose second argument is a {obj_type.__name__}, not a "
                          f"{self.cls.__name__} (super() in a classmethod)", gb_id=gb.SUPER)
        for klass in mro[mro.index(self.cls) + 1 :]:
            if name in klass.__dict__:
                if klass is torch.nn.Module and name == "__init__" and getattr(self.obj, "is_new_module", False):
                    from .nn_module import ModuleInitVariable

                    return ModuleInitVariable(self.obj)  # Note [A user module made in the trace]
                attr = klass.__dict__[name]
                found = class_attribute(tx, self.obj, attr, name)
                if found is not None:
                    return found
                from .new_object import NewObjectVariable, ObjectGetattributeVariable, ObjectSetattrVariable

                if klass is object and name == "__getattribute__":  # Note [A class that overrides __getattribute__]
                    return ObjectGetattributeVariable(self.obj)
                if klass in (dict, collections.OrderedDict) and isinstance(self.obj, DataclassDictVariable):
                    return DataclassBaseMethodVariable(self.obj, name)  # Note [ModelOutput]
                if klass is object and name == "__setattr__" and isinstance(self.obj, DataclassDictVariable):
                    return ObjectSetattrVariable(self.obj)
                if klass is object and name == "__setattr__" and (isinstance(self.obj, NewObjectVariable) or (
                        isinstance(self.obj, UserDefinedObjectVariable) and self.obj.source is not None)):
                    return ObjectSetattrVariable(self.obj)
                if klass in (dict, collections.OrderedDict) and name in DICT_METHODS and isinstance(
                        self.obj, UserDefinedObjectVariable) and self.obj.source is not None and \
                        is_dict_subclass_instance(self.obj.value) and (
                        name not in ("get", "__getitem__", "__contains__")
                        or self.obj.source.name() in tx.output.side_effects.dict_parts):
                    return DictPartMethodVariable(self.obj, name)  # Note [The dict inside a dict subclass]
                if klass is dict and name in ("get", "__getitem__", "__contains__"):
                    return GetAttrVariable(DictBaseVariable(self.obj), name)  # super().get of a dict subclass
                break
        unimplemented(f"super().{name}", gb_id=gb.SUPER)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)


def _plain_namedtuple(cls) -> bool:
    """A ``collections.namedtuple`` class, or a subclass adding only methods (no own __new__/__init__)."""
    if not (isinstance(cls, type) and issubclass(cls, tuple) and type(cls) is type):
        return False
    for klass in cls.__mro__:
        if "_fields" in klass.__dict__ and "_make" in klass.__dict__:
            return True  # the class namedtuple() made; everything above it checked below
        if "__new__" in klass.__dict__ or "__init__" in klass.__dict__:
            return False
    return False


def _new_namedtuple(tx, cls, args: list, kwargs: dict) -> VariableTracker:
    """``NT(a, b=...)`` in the trace: a TupleVariable that keeps its class (Note [Named tuples])."""
    from .lists import TupleVariable

    fields = cls._fields
    if len(args) > len(fields) or any(k not in fields for k in kwargs):
        unimplemented(f"constructing a {cls.__name__} with these arguments", gb_id=gb.UNSUPPORTED_FUNCTION)
    values = dict(zip(fields, args))
    for k, v in kwargs.items():
        if k in values:
            unimplemented(f"constructing a {cls.__name__}: {k!r} given twice", gb_id=gb.OBSERVED_EXCEPTION)
        values[k] = v
    for k in fields:
        if k not in values:
            if k not in cls._field_defaults or not is_constant_value(cls._field_defaults[k]):
                unimplemented(f"constructing a {cls.__name__} without a constant value for {k!r}",
                              gb_id=gb.NOT_A_CONSTANT)
            values[k] = tx.wrap_constant_result(cls._field_defaults[k])
    return TupleVariable([values[k] for k in fields], tuple_cls=cls)


class UserDefinedClassVariable(VariableTracker):
    """A class (user or library) used as a value: isinstance targets, class attributes."""

    def __init__(self, value: type, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .functional import CLASS_METHODS

        if any(self.value is owner and name == n for owner, n in CLASS_METHODS):  # OrderedDict.fromkeys
            return tx.wrap_sourceless(getattr(self.value, name))  # a BuiltinVariable
        if is_plain_apply(self.value, name):  # Note [autograd.Function.apply is speculated, then falls back]
            return AutogradFunctionApplyVariable(self.value, source=self.source and AttrSource(self.source, name))
        attr = inspect.getattr_static(self.value, name, None)
        metaclass_slot = isinstance(attr, (types.GetSetDescriptorType, types.MemberDescriptorType)) and isinstance(
            self.value, attr.__objclass__)  # cls.__name__: type's own descriptor, not the class's value
        if isinstance(attr, (staticmethod, classmethod, types.ClassMethodDescriptorType)) or metaclass_slot:
            attr = getattr(self.value, name)
        elif attr is None:
            unimplemented(f"class {self.value.__name__} has no attribute {name!r}", gb_id=gb.OBSERVED_EXCEPTION)
        if self.source is not None:
            return tx.variable_builder(AttrSource(self.source, name))(attr)
        if not metaclass_slot and _user_class(self.value):
            # Note [A class read through cls is guarded]: ``cls.K`` in a classmethod called
            # as ``obj.f(x)`` reads ``type(obj).K``, a class with no source here; the value
            # is folded into the trace, so ``M.K = 5`` later must recompile, as torch's
            # guard on ``type(L['obj']).K`` makes it. A CLASS_ATTRIBUTE guard keeps it.
            guard_class_attribute(tx, self.value, name, inspect.getattr_static(self.value, name, None))
        return tx.wrap_sourceless(attr)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        from .user_defined import DataclassDictVariable, is_dataclass_dict

        cls = self.value
        from .exceptions import ExceptionVariable, is_exception_class

        if is_exception_class(cls):  # ValueError("no"), a user's MyError(...): Note [An exception object in the trace]
            return ExceptionVariable.create(tx, cls, args, kwargs)
        from ..polyfills import class_polyfill

        polyfill = class_polyfill(cls, args, kwargs)  # Note [operator.itemgetter in the trace]
        if polyfill is not None:
            from .functions import UserFunctionVariable

            return UserFunctionVariable(polyfill).call_function(tx, args, kwargs)
        if cls is weakref.ref and 1 <= len(args) <= 2 and not kwargs:  # Note [A weak reference is its referent ...]
            from .misc import WeakRefVariable

            return WeakRefVariable(args[0], args[1] if len(args) == 2 else ConstantVariable(None))
        if cls is contextlib._GeneratorContextManager and len(args) == 3 and not kwargs:  # noqa: SLF001
            from .ctx_manager import ContextlibContextManagerVariable

            return ContextlibContextManagerVariable.create(tx, *args)  # Note [A @contextmanager function is its generator]
        if cls is torch.Size and not kwargs and all(a.is_python_constant() for a in args):
            return ConstantVariable(torch.Size(*[a.as_python_constant() for a in args]))  # a shape of ints
        if cls in (torch.finfo, torch.iinfo) and args and not kwargs and all(a.is_python_constant() for a in args):
            return ConstantVariable(cls(*[a.as_python_constant() for a in args]))  # torch.finfo(x.dtype).min
        if _plain_namedtuple(cls):
            return _new_namedtuple(tx, cls, args, kwargs)
        if is_dataclass_dict(cls):
            return DataclassDictVariable.create(tx, cls, args, kwargs)  # Note [ModelOutput]
        from .containers import construct

        made = construct(tx, cls, args, kwargs)  # deque, defaultdict, OrderedDict
        if made is not None:
            return made
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            from .nn_module import NewModuleVariable

            module = NewModuleVariable.create(cls, args, kwargs)  # Note [A torch.nn module made in the trace]
            if module is not None:
                return module
            from .nn_module import UnspecializedNNModuleVariable

            if UnspecializedNNModuleVariable.accepts(cls):  # Note [A user module made in the trace]
                from .functions import UserMethodVariable

                module = UnspecializedNNModuleVariable(cls)
                UserMethodVariable(inspect.getattr_static(cls, "__init__"), module).call_function(tx, args, kwargs)
                return module
        init = inspect.getattr_static(cls, "__init__", None)
        no_init = init is object.__init__ and not args and not kwargs  # `class Empty: pass`, then Empty()
        plain = (
            type(cls) in (type, abc.ABCMeta)  # ABCMeta: a collections.abc.Sequence subclass (_PerLayerConfigView)
            and cls.__new__ is object.__new__
            and (inspect.isfunction(init) or no_init)
            and not issubclass(cls, (BaseException, torch.nn.Module, torch.Tensor))
            and "__slots__" not in cls.__dict__
        )
        if not plain and type(cls) is type and cls.__module__ != "builtins" and _c_new(cls) \
                and not issubclass(cls, (BaseException, torch.nn.Module, torch.Tensor)):
            # a C class of a library module (``_json.Encoder``): torch's polyfill
            # ``instantiate_user_defined_class_object`` calls ``cls.__new__(cls, ...)``, a method it
            # cannot trace ("Unsupported method call", torch/_dynamo/variables/user_defined.py)
            unimplemented(f"constructing a {cls.__name__} object calls its C `__new__`",
                          "construct it outside the compiled function", gb_id=gb.UNSUPPORTED_METHOD,
                          context=f"call_method UserDefinedClassVariable({cls}) __new__")
        if not plain:
            unimplemented(f"constructing a {cls.__name__} object", "construct it outside the compiled function",
                          gb_id=gb.SKIPPED_FUNCTION)
        from .functions import UserMethodVariable
        from .new_object import NewObjectVariable

        obj = NewObjectVariable(cls)
        if not no_init:
            UserMethodVariable(init, obj).call_function(tx, args, kwargs)
        return obj

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"UserDefinedClassVariable({self.value.__name__})"


__all__ = ["SuperVariable", "UserDefinedClassVariable"]


def _c_new(cls: type) -> bool:
    """Does ``cls`` itself define a ``__new__`` written in C (not ``object.__new__``, not Python)?"""
    new = cls.__dict__.get("__new__")
    return new is not None and not inspect.isfunction(getattr(new, "__func__", new)) and new is not object.__new__
