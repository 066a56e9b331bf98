"""Small trackers: NULL, user objects, loggers, and the attribute lookup they share.

Place in the pipeline: everything that is not a tensor, constant, container, function
or module. Mirrors ``torch/_dynamo/variables/misc.py`` and
``torch/_dynamo/variables/user_defined.py``. Objects made in the trace
(``NewObjectVariable``, ``new_object``) are in ``new_object.py``; a class as a value and
``super()`` in ``user_class.py``; a bound method not yet called (``GetAttrVariable``) in
``base.py``; closure cells (``CellVariable``) in ``functions.py``.
"""

from __future__ import annotations

import inspect
import logging
import sys
import types
import weakref
from typing import Any, Optional

import torch

from ..exc import unimplemented
from .. import graph_break_registry as gb
from ..source import AttrSource
from .base import GetAttrVariable, VariableTracker
from .constant import ConstantVariable
from .dicts import ConstDictVariable as ConstDictVariable_
from .dict_subclass import DictPartMethodVariable, dict_part, inherits_dict_method, is_dict_subclass_instance


_MISSING = object()


class NullVariable(VariableTracker):
    """The NULL that 3.11's ``PUSH_NULL`` / ``LOAD_GLOBAL`` put under a callable."""

    def reconstruct(self, codegen) -> str:
        return "___NULL"

    def __repr__(self) -> str:
        return "NULL"


class StringFormatVariable(VariableTracker):
    """``f"{y}"`` of a tensor: a string built after the graph, from the graph's output.

    Note [An f-string of a tensor is formatted after the graph]
        Formatting a tensor needs its data, which the trace does not have. As torch's
        ``StringFormatVariable`` (torch/_dynamo/variables/misc.py, made by ``FORMAT_VALUE`` ->
        ``BuiltinVariable(format)`` and ``BUILD_STRING``), the string is kept as a format
        string and its arguments: returned or carried across a break, it is rebuilt by
        ``"...{}...".format(y)`` once ``y`` is real. Anything else done with it in the trace
        (its length, a method, printing it) is a graph break, as in torch.
    """

    def __init__(self, format_string: str, args: list, **kwargs):
        super().__init__(**kwargs)
        self.format_string = format_string
        self.args = list(args)

    def python_type(self) -> type:
        return str

    def reconstruct(self, codegen) -> str:
        return f"{self.format_string!r}.format({', '.join(codegen.expr(a) for a in self.args)})"

    def __repr__(self) -> str:
        return f"StringFormatVariable({self.format_string!r}, {self.args!r})"


class BuildClassVariable(VariableTracker):
    """``builtins.__build_class__``, which ``LOAD_BUILD_CLASS`` pushes for a ``class`` statement in the frame.

    As torch with ``config.enable_trace_load_build_class = False`` (its default): pushing it is
    fine, calling it is the graph break ("Invalid call to __build_class__",
    torch/_dynamo/variables/builtin.py), at the CALL, so the class is made eagerly and the
    frame resumes after it.
    """

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        unimplemented("a class statement in the compiled function (its body is not traced)",
                      "define the class outside the compiled function", gb_id=gb.BUILD_CLASS,
                      context=f"Non-constant args to __build_class__: {tuple(args)} {kwargs}")

    def reconstruct(self, codegen) -> str:
        import builtins

        return codegen.constant_expr(builtins.__build_class__)


class LoggerMethodVariable(GetAttrVariable):
    """``logger.warning`` read off a ``logging.Logger``: calling it is a graph break.

    torch/_dynamo/variables/misc.py ``LoggingLoggerVariable.call_method``: any method of
    a logger breaks the graph outside export (unless listed in
    ``torch._dynamo.config.ignore_logging_functions``); the call then runs eagerly.
    """

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        unimplemented(f"logger.{self.name}() logs at run time, which the graph cannot hold",
                      "move it out of the compiled function, or accept the graph break", gb_id=gb.LOGGER_METHOD,
                      context=f"method: {self.obj.value}.{self.name}")


class LoggerAttributeVariable(GetAttrVariable):
    """``logger.name`` / ``root.handlers``: a data attribute of a ``logging.Logger``, read but not known.

    As torch's ``GetAttrVariable(LoggingLoggerVariable(), name)`` (torch/_dynamo/variables/misc.py),
    the read itself is fine; its first use (``len(lg.name)``, ``if root.handlers``) is the graph
    break, at that use's instruction, so a break at a call resumes after it.
    """

    def _unknown(self):
        unimplemented(f"the logger's attribute {self.name!r} is not traced (logging's state is read at run time)",
                      "move the logging call out of the compiled function, or accept the graph break",
                      gb_id=gb.PYTHON_TYPE,
                      context=f"GetAttrVariable(LoggingLoggerVariable(), {self.name}) does not implement python_type()")

    def python_type(self) -> type:
        self._unknown()

    def truth(self, tx) -> bool:
        self._unknown()

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        self._unknown()

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        self._unknown()

    def var_getattr(self, tx, name: str) -> VariableTracker:
        self._unknown()

    def unpack_var_sequence(self, tx) -> list:
        self._unknown()


def lookup_python_attr(tx, obj_var: VariableTracker, value: Any, name: str) -> VariableTracker:
    """Attribute of a real Python object (user object, module): instance dict, then class."""
    pending = tx.output.side_effects.load_attr(obj_var, name)
    if pending is not None:
        return pending
    getattribute = inspect.getattr_static(type(value), "__getattribute__", None)
    if inspect.isfunction(getattribute):  # Note [A class that overrides __getattribute__]
        from .functions import UserMethodVariable

        return UserMethodVariable(getattribute, obj_var).call_function(tx, [ConstantVariable(name)], {})
    return generic_python_attr(tx, obj_var, value, name)


def generic_python_attr(tx, obj_var: VariableTracker, value: Any, name: str) -> VariableTracker:
    """``object.__getattribute__(value, name)``: the instance dict, then the class.

    Note [A class that overrides __getattribute__]
        transformers' configs do (``config.num_hidden_layers`` is ``n_layer`` through
        ``attribute_map``; a mixin checks for per-layer overrides first). As Dynamo's
        ``UserDefinedObjectVariable.var_getattr`` does, the override is inlined with the
        name as a constant; its ``super().__getattribute__(key)`` that reaches
        ``object`` lands here (``ObjectGetattributeVariable``), and
        ``super().__getattribute__("__dict__")`` is the instance dict, read entry by
        entry under presence guards (``InstanceDictVariable``), not guarded whole.
    """
    source = AttrSource(obj_var.source, name) if obj_var.source is not None else None
    if name == "__dict__" and source is not None and isinstance(getattr(value, "__dict__", None), dict):
        stored, deleted = tx.output.side_effects.pending_attrs(obj_var)
        if stored or deleted:  # Note [An instance __dict__ read after the frame wrote attributes]
            return InstanceDictSnapshot.of(tx.variable_builder(source)(value.__dict__), stored, deleted)
    inst_dict = getattr(value, "__dict__", {})
    if name in inst_dict:
        attr = inst_dict[name]
        return tx.variable_builder(source)(attr) if source is not None else tx.wrap_sourceless(attr)
    cls_attr = inspect.getattr_static(type(value), name, None)
    found = class_attribute(tx, obj_var, cls_attr, name, source)
    if found is not None:
        return found
    if cls_attr is not None and not callable(cls_attr):
        # a class-level constant; guard it through the instance
        attr = getattr(value, name)
        return tx.variable_builder(source)(attr) if source is not None else tx.wrap_sourceless(attr)
    if type(value) is torch.backends.cuda.cuBLASModule and name.startswith("allow_") \
            and type(getattr(value, name, None)) is bool:
        # ``torch.backends.cuda.matmul.allow_tf32``: a global flag behind __getattr__, the one
        # object of its class; read as a constant under a guard on the flag, so a change recompiles
        flag = getattr(value, name)
        expr = f"torch.backends.cuda.matmul.{name}"
        tx.output.guards.add(None, "BACKEND_FLAG", f"{expr} is {flag}", "the trace read this backend flag", expr)
        return ConstantVariable(flag)
    if callable(cls_attr) and (obj_var.source is not None or getattr(obj_var, "module_attr", None)):
        return UnsupportedMethodVariable(obj_var, name)  # breaks when called, as torch's GetAttrVariable
    if cls_attr is None and not hasattr(type(value), name):
        found = call_class_getattr(tx, obj_var, type(value), name)
        if found is not None:
            return found
    if cls_attr is None and obj_var.source is not None and not hasattr(value, name) and \
            inspect.getattr_static(type(value), "__getattr__", None) is None:
        # no such attribute: eager raises AttributeError, which the trace raises too (an observed
        # exception, torch's UserDefinedObjectVariable.var_getattr), under a guard that it stays absent
        expr = f"not hasattr({tx.output.guards.read_expr(obj_var.source)}, {name!r})"
        tx.output.guards.add(obj_var.source, "HASATTR", expr, f"the trace found no attribute {name!r}")
        tx.raise_observed_exception(AttributeError, [f"{type(value).__name__!r} object has no attribute {name!r}"])
    unimplemented(f"attribute {name!r} of {type(value).__name__} object", gb_id=gb.UNSUPPORTED_METHOD)


class InstanceDictSnapshot(ConstDictVariable_):
    """``obj.__dict__`` of an object from outside the frame after the frame set some of its attributes.

    Note [An instance __dict__ read after the frame wrote attributes]
        ``ModelOutput.__post_init__`` asks ``self.__dict__.get(name)`` right after its
        dataclass ``__init__`` set the fields. Those stores wait in the side-effect table
        until after the graph, so the real ``__dict__`` does not hold them yet: read as it
        is, the trace would take the branch for fields that are None. So the dict is read
        (and guarded) as it is, then the frame's pending stores are laid over it, as
        torch's ``UserDefinedObjectVariable`` answers ``__dict__`` from its attribute
        mutations. This view is for reading: a write to it is a graph break, never a
        write that would be lost.
    """

    @classmethod
    def of(cls, real, stored: dict, deleted: set) -> "InstanceDictSnapshot":
        items = {k: v for k, v in real.items.items() if k not in deleted}
        items.update(stored)
        return cls(items)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("__setitem__", "update", "pop", "clear", "setdefault", "__delitem__", "popitem"):
            unimplemented(f"__dict__.{name} of an object whose attributes the frame set earlier",
                          gb_id=gb.UNSUPPORTED_METHOD)
        return super().call_method(tx, name, args, kwargs)


def call_class_getattr(tx, obj_var: VariableTracker, cls: type, name: str) -> Optional[VariableTracker]:
    """``obj.name`` that the normal lookup did not find: the class's Python ``__getattr__``, inlined.

    Note [A missing attribute calls __getattr__]
        Python calls ``type(obj).__getattr__(obj, name)`` when ``__getattribute__`` finds
        nothing. As Dynamo's ``UserDefinedObjectVariable.var_getattr``
        (torch/_dynamo/variables/user_defined.py: ``getattr_fn`` is a Python function ->
        ``UserMethodVariable(getattr_fn, self).call_function(tx, [name], {})``), the
        override is inlined with the name as a constant, under a guard that the class's
        ``__getattr__`` is still that function. None when the class has no Python one.
    """
    getattr_fn = inspect.getattr_static(cls, "__getattr__", None)
    if not inspect.isfunction(getattr_fn):
        return None
    from .functions import UserMethodVariable

    guard_class_attribute(tx, cls, "__getattr__", getattr_fn)
    return UserMethodVariable(getattr_fn, obj_var).call_function(tx, [ConstantVariable(name)], {})


class UnsupportedMethodVariable(GetAttrVariable):
    """A C method of a Python object (``sys.stdout.write``): read freely, a graph break when called.

    torch's ``GetAttrVariable.call_function`` (torch/_dynamo/variables/misc.py) breaks at the
    call ("Unsupported method call"), not at the attribute read: the break is at the CALL
    instruction, where the graph can resume after it.
    """

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        cls = type(getattr(self.obj, "value", None)).__name__
        unimplemented(f"{cls}.{self.name}() is a C method minidynamo does not trace (it runs eagerly)",
                      "move it out of the compiled function, or accept the graph break",
                      gb_id=gb.UNSUPPORTED_METHOD, context=f"call_method {self.obj} {self.name} {args} {kwargs}")


def class_attribute(tx, obj_var: VariableTracker, cls_attr: Any, name: str, source=None) -> Optional[VariableTracker]:
    """``obj.name`` when ``name`` was found on the class as ``cls_attr``: the one attribute-lookup helper.

    A property runs its getter on ``obj``, a staticmethod is its function, a
    classmethod and a plain function become methods bound to the class or to ``obj``.
    None for anything else (a class constant, a C descriptor): the caller decides.
    ``lookup_python_attr`` (objects from outside), ``NewObjectVariable`` (objects made
    while tracing) and ``SuperVariable`` (the MRO after a class) all resolve through it.

    Note [A method is guarded through its instance]
        ``obj.step(x)`` with ``step`` defined on the class inlines ``type(obj).step``.
        torch's ``UserDefinedObjectVariable.var_getattr`` (torch/_dynamo/variables/
        user_defined.py: ``resolve_type_attr``, ``get_source_by_walking_mro``) guards the
        lookup, not the function: the instance's type (its ``TYPE_MATCH``) and that the
        instance dict does not hide the name, ``not ___dict_contains('step',
        L['obj'].__dict__)`` (``DICT_NOT_CONTAINS``, guards.py) on an ``L['obj'].__dict__``
        manager. Ours prints the same; an ``obj.step = f`` set later fails it, with torch's
        reason. torch guards nothing that fails when the class's method is replaced
        (``Cls.step = g`` after compile: its entry still runs the old method, a stale
        result); ours keeps one guard on the class for that, ``CLASS_ATTRIBUTE``
        (Note [A class attribute the trace used]), so that call recompiles, as eager would
        have it; the same guard covers a class between the instance's and the owner gaining
        the name, which torch guards with one ``DICT_CONTAINS`` per such class
        (``dict(type(L['obj']).__mro__[1].__dict__)``), and ours does not print. The method
        keeps the attribute's source, so its defaults, closure cells and globals are guarded
        through it. tests/test_bound_methods_like_torch.py.
    """
    from .functions import UserFunctionVariable, UserMethodVariable

    if isinstance(cls_attr, (property, staticmethod, classmethod)) or (inspect.isfunction(cls_attr) and source is None):
        guard_class_attribute(tx, obj_var.python_type(), name, cls_attr)
    if isinstance(cls_attr, property) and cls_attr.fget is not None:
        return UserFunctionVariable(cls_attr.fget).call_function(tx, [obj_var], {})
    from .functional import is_lru_cache_of_user_function

    if is_lru_cache_of_user_function(cls_attr):  # ``@lru_cache`` on a method: its body inlined, as for a function
        guard_class_attribute(tx, obj_var.python_type(), name, cls_attr)
        if obj_var.source is not None:  # the instance dict does not hide it (``obj.g = f`` later recompiles)
            owner = obj_var.source.name()
            tx.output.guards.add(obj_var.source, "NOT_IN_DICT", f"{name!r} not in {owner}.__dict__",
                                 "the trace inlined the class's cached method: no instance attribute hides it", owner)
        return UserMethodVariable(cls_attr.__wrapped__, obj_var)
    if isinstance(cls_attr, staticmethod):
        return tx.wrap_sourceless(cls_attr.__func__)
    if isinstance(cls_attr, classmethod):
        return UserMethodVariable(cls_attr.__func__, tx.wrap_sourceless(obj_var.python_type()))  # a UserDefinedClassVariable (user_class.py)
    if inspect.isfunction(cls_attr):
        if source is not None:  # Note [A method is guarded through its instance]
            guard_not_in_instance_dict(tx, obj_var, name)
            guard_class_attribute(tx, obj_var.python_type(), name, cls_attr)
        return UserMethodVariable(cls_attr, obj_var, source=source)
    return None


def _dict_contains(key: Any, d: dict) -> bool:
    return key in d


def guard_not_in_instance_dict(tx, obj_var: VariableTracker, name: str) -> None:
    """``not ___dict_contains(name, L['obj'].__dict__)``: the instance does not hide the class's ``name``
    (torch's ``DICT_NOT_CONTAINS`` on ``GetGenericDictGuardAccessor``; Note [A method is guarded through its instance])."""
    value = getattr(obj_var, "value", None)
    if obj_var.source is None or not isinstance(getattr(value, "__dict__", None), dict) or name in value.__dict__:
        return
    guards = tx.output.guards
    guards.scope.setdefault("___dict_contains", _dict_contains)
    source = AttrSource(obj_var.source, "__dict__")
    guards.add(source, "DICT_CONTAINS", f"not ___dict_contains({name!r}, {source.name()})",
               f"the trace used {type(value).__name__}.{name} from the class: no instance attribute hides it",
               source.name())


def _user_class(cls: Any) -> bool:
    """A class defined by user code (not the stdlib's, torch's or a skip-listed package's)."""
    from minidynamo.trace_rules import is_library_module

    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    return isinstance(cls, type) and module is not None and not is_library_module(module)


def guard_class_attribute(tx, cls: type, name: str, cls_attr: Any) -> None:
    """Guard that ``cls.name`` is still what the trace used (Note [A class attribute the trace used]).

    Note [A class attribute the trace used]
        A property's getter, a staticmethod or classmethod, a module's ``forward``
        read from the class are inlined; ``Cls.prop = property(g)`` or
        ``Cls.forward = g`` after compile must recompile. The guard reads the
        attribute the way the class's ``__dict__`` chain (MRO) stores it, through
        ``inspect.getattr_static``: ``___getattr_static(___Cls, 'forward') is ___forward``.
        One guard per class and name, however many instances the trace read it through
        (the instances' types are guarded themselves).
    """
    guards = tx.output.guards
    if not isinstance(name, str) or not isinstance(cls, type) or inspect.getattr_static(cls, name, None) is not cls_attr:
        return  # found past the class (``super().name``): the MRO lookup from ``cls`` finds another one
    guards.scope.setdefault("___getattr_static", inspect.getattr_static)
    c, a = guards.name_for(cls, cls.__name__), guards.name_for(cls_attr, name)
    guards.add(None, "CLASS_ATTRIBUTE", f"___getattr_static({c}, {name!r}, None) is {a}",
               f"the trace used {cls.__name__}.{name} as it was then", f"___getattr_static({c}, {name!r}, None)")


def _module_attribute(method) -> bool:
    """Is this bound method what its function's module holds under its name (``random.choice``)?"""
    import sys

    module = sys.modules.get(getattr(method.__func__, "__module__", None) or "")
    return module is not None and getattr(module, method.__name__, None) == method


class UserDefinedObjectVariable(VariableTracker):
    """An instance of a user class, read through its attributes (each one guarded)."""

    def __init__(self, value: Any, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def reconstruct(self, codegen) -> str:
        if self.source is None and isinstance(self.value, types.MethodType) and inspect.ismodule(
                inspect.getmodule(type(self.value.__self__))) and _module_attribute(self.value):
            # ``random.choice``: a library module's bound method (of its one ``Random``), read as a
            # constant; a break at its call runs the same bound method eagerly
            return codegen.constant_expr(self.value)
        if self.source is None and getattr(self, "module_attr", None):
            # Note [A library module's object is read again at run time]
            #     ``sys.stdout`` is read from a library module without a guard (Note [Library code
            #     is the stdlib, torch, ...], trace_rules.py), so it is no constant of the trace:
            #     ``redirect_stdout`` swaps it between calls. Where the code after a break needs it
            #     (``sys.stdout.write`` called eagerly, torch's break at the CALL), it is read again
            #     from its module, as eager reads it: ``sys.modules['sys'].stdout``.
            module, name = self.module_attr
            return f"sys.modules[{module!r}].{name}"
        if self.source is None:
            for name in ("stdout", "stderr"):  # ``print(..., file=sys.stderr)``: read again at run time, as torch's source
                if self.value is getattr(sys, name):
                    return f"{codegen.constant_expr(sys)}.{name}"
        return super().reconstruct(codegen)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .user_defined import is_mapping_method

        if is_mapping_method(self.value, name):
            return GetAttrVariable(self, name)  # called through call_method below
        if isinstance(self.value, logging.Logger) and callable(getattr(type(self.value), name, None)) \
                and not name.startswith("_"):
            return LoggerMethodVariable(self, name)
        if isinstance(self.value, logging.Logger) and not name.startswith("_") \
                and not callable(getattr(self.value, name, None)):
            # torch's LoggingLoggerVariable gives a data attribute (``root.handlers`` in
            # ``logging.warning``) as a GetAttrVariable without a python_type(): its first use breaks
            return LoggerAttributeVariable(self, name)
        if self._keeps_dict_method(name) and name not in getattr(self.value, "__dict__", {}) \
                and tx.output.side_effects.load_attr(self, name) is None:
            return DictPartMethodVariable(self, name)  # Note [The dict inside a dict subclass]
        if name == "__reduce_ex__":
            from ..polyfills import plain_reduce, reduce_ex_user_defined_object
            from .functions import UserMethodVariable

            if plain_reduce(type(self.value)):  # Note [copy.deepcopy of a user object]
                return UserMethodVariable(reduce_ex_user_defined_object, self)
        return lookup_python_attr(tx, self, self.value, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        from .user_defined import mapping_call_method

        result = mapping_call_method(tx, self, name, args, kwargs)
        if result is not None:
            return result
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _keeps_dict_method(self, name: str) -> bool:
        """A dict-subclass instance we can name whose class keeps dict's own ``name``."""
        return self.source is not None and is_dict_subclass_instance(self.value) and inherits_dict_method(
            type(self.value), name)

    def _entries(self, tx, name: str):
        """The dict entries (read and guarded) when the class keeps dict's ``name``, else None."""
        return dict_part(tx, self) if self._keeps_dict_method(name) else None

    def has_unpack_var_sequence(self, tx) -> bool:
        return self._keeps_dict_method("__iter__")  # asking reads nothing: no guard yet

    def unpack_var_sequence(self, tx) -> list:
        part = self._entries(tx, "__iter__")
        if part is None:
            return super().unpack_var_sequence(tx)
        return part.unpack_var_sequence(tx)

    def truth(self, tx) -> bool:
        """``if obj:`` on an object whose class defines neither ``__bool__`` nor ``__len__``: always true,
        as Dynamo's ``generic_jump`` (torch/_dynamo/symbolic_convert.py) decides for a user object
        without either (``if copier:`` in ``copy.copy``, a C method descriptor)."""
        cls = type(self.value)
        if inspect.getattr_static(cls, "__bool__", None) is None and self._keeps_dict_method("__len__"):
            return dict_part(tx, self).truth(tx)
        if inspect.getattr_static(cls, "__bool__", None) is None and inspect.getattr_static(cls, "__len__", None) is None:
            return True
        result = python_bool(tx, self, cls)
        return super().truth(tx) if result is None else result

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        call = inspect.getattr_static(type(self.value), "__call__", None)
        if inspect.isfunction(call):
            from .functions import UserMethodVariable

            return UserMethodVariable(call, self).call_function(tx, args, kwargs)
        if is_supported_random(self.value) and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            return call_random_fn(tx, self.value, args, kwargs)  # Note [A random number is a graph input]
        if isinstance(self.value, (types.MethodDescriptorType, types.WrapperDescriptorType,
                                   types.ClassMethodDescriptorType)):
            # ``list.copy(items)`` through a descriptor read off a class: torch wraps it as a
            # SkipFunctionVariable (trace_rules: a builtin it does not know), a skipped function
            name = getattr(self.value, "__qualname__", repr(self.value))
            unimplemented(f"the builtin `{name}` is not traced (it runs eagerly)",
                          "move it out of the compiled function, or accept the graph break",
                          gb_id=gb.SKIPPED_FUNCTION, context=f"calling {name}")
        if isinstance(self.value, types.MethodType):  # a library's bound method (random.choice): torch skips it
            name = getattr(self.value, "__qualname__", self.value.__name__)
            unimplemented(f"{name} is a method of a library minidynamo does not trace into (it runs eagerly)",
                          "move it out of the compiled function, or accept the graph break",
                          gb_id=gb.SKIPPED_FUNCTION, context=f"calling {name}")
        unimplemented(f"calling a {type(self.value).__name__} object", gb_id=gb.UNSUPPORTED_FUNCTION)

    def __repr__(self) -> str:
        return f"UserDefinedObjectVariable({type(self.value).__name__})"


def python_bool(tx, obj: VariableTracker, cls: type) -> bool | None:
    """``bool(obj)`` through its class's Python ``__bool__``, else its Python ``__len__`` (> 0),
    inlined, as torch's ``generic_bool`` (torch/_dynamo/variables/object_protocol.py, CPython's
    ``PyObject_IsTrue``) for a user object: ``if cache:`` on transformers' ``DynamicCache``
    (its ``__len__`` is ``len(self.layers)``). None when neither is a Python function or the
    result is not a constant (the caller breaks the graph, as torch's ``generic_jump``)."""
    from .functions import UserMethodVariable

    for name in ("__bool__", "__len__"):
        fn = inspect.getattr_static(cls, name, None)
        if fn is None:
            continue
        if not inspect.isfunction(fn):
            return None
        result = UserMethodVariable(fn, obj).call_function(tx, [], {})
        if not result.is_python_constant():
            return None
        value = result.as_python_constant()
        return bool(value) if name == "__bool__" else value > 0
    return None


# Note [A random number is a graph input]
#     ``k = random.randint(1, 3)`` cannot be a constant of the trace (each call draws
#     anew), and a graph break would cut the graph in two. Torch records the call
#     (``call_random_fn``, torch/_dynamo/variables/user_defined.py, for ``random.random``,
#     ``randint``, ``randrange`` and ``uniform`` with constant arguments): the value becomes
#     a graph input ``random_value_0``, a 0-d tensor, and the transformed code draws it
#     before calling the graph (``___random_values = ___gen_rand_values()``, torch's
#     ``_get_gen_rand_values_fn`` in output_graph.py), so each call draws as eager would,
#     in the same order. The draw made while tracing (its value is only an example) does
#     not count: torch restores Python's random state after the trace
#     (``preserve_global_state``, convert_frame.py); ours restores it after each draw.
def _supported_random_functions() -> tuple:
    import random

    return (random.random, random.randint, random.randrange, random.uniform)


def is_supported_random(value: Any) -> bool:
    try:
        return any(value == fn for fn in _supported_random_functions())
    except Exception:  # noqa: BLE001 - an object whose __eq__ raises
        return False


def call_random_fn(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """The value of ``fn(*args, **kwargs)`` as a graph input (Note [A random number is a graph input])."""
    import random

    cargs = [a.as_python_constant() for a in args]
    ckwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
    state = random.getstate()
    try:
        example = fn(*cargs, **ckwargs)
    except Exception as e:  # noqa: BLE001 - eager raises it when the frame runs
        unimplemented(f"{fn.__name__}{tuple(cargs)!r} raised {type(e).__name__}: {e} (eager will raise it)",
                      gb_id=gb.OBSERVED_EXCEPTION, context=f"{fn.__name__}{tuple(cargs)!r}")
    finally:
        random.setstate(state)
    tx.output.random_calls.append((fn, cargs, ckwargs))
    return tx.output.add_random_value_input(example)


def gen_rand_values_fn(random_calls: list):
    """What the transformed code calls before the graph: each recorded draw, in order."""
    calls = list(random_calls)

    def ___gen_rand_values() -> list:
        return [fn(*args, **kwargs) for fn, args, kwargs in calls]

    return ___gen_rand_values


class WeakRefVariable(VariableTracker):
    """``weakref.ref(obj, callback)`` of a value the trace tracks (torch/_dynamo/variables/misc.py ``WeakRefVariable``).

    Note [A weak reference is its referent while tracing]
        Torch builds ``weakref.ref(y)`` as a ``WeakRefVariable`` holding the referent's
        tracker and the callback's (``UserDefinedClassVariable.call_function``,
        torch/_dynamo/variables/user_defined.py); calling it, ``r()``, gives the referent
        back: inside the frame the referent is alive (the frame holds it), so the trace
        never needs to ask whether it died. Only if the reference outlives the graph is a
        real one made, by ``reconstruct``: ``weakref.ref(<referent>, <callback>)``.
    """

    def __init__(self, referent_vt: VariableTracker, callback_vt: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.referent_vt = referent_vt
        self.callback_vt = callback_vt

    def python_type(self) -> type:
        return weakref.ref

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if args or kwargs:
            unimplemented("a weak reference is called with no arguments", gb_id=gb.UNSUPPORTED_FUNCTION)
        return self.referent_vt

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        ref = codegen.constant_expr(weakref.ref)
        return f"{ref}({codegen.expr(self.referent_vt)}, {codegen.expr(self.callback_vt)})"

    def __repr__(self) -> str:
        return f"WeakRefVariable({self.referent_vt!r})"


__all__ = [
    "WeakRefVariable",
    "NullVariable", "UserDefinedObjectVariable", "lookup_python_attr",
    "generic_python_attr", "class_attribute",
]
