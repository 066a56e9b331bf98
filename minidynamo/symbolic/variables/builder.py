"""Turning real values into trackers: inputs (with a source, so guarded) and results.

Place in the pipeline: the first time the interpreter reads an argument, a global or
an attribute, ``VariableBuilder`` wraps the real value, installs the guards that protect
what the trace will assume about it, and (for tensors) adds a graph input.
``wrap_fx_proxy`` wraps the result of a traced op. Mirrors
``torch/_dynamo/variables/builder.py`` (``VariableBuilder``, ``SourcelessBuilder``,
``wrap_fx_proxy``).

Note [Guards are installed where values enter]
    A value gets its guards when it is first wrapped: a tensor input gets
    TENSOR_MATCH (type, dtype, device, shape, stride, requires_grad), an int or str
    gets CONSTANT_MATCH (its value is folded into the trace), a function or module gets
    ID_MATCH, a list gets a length check. Values the trace never reads get no guard.
"""

from __future__ import annotations

import collections
import enum
import functools
import operator
import types
from typing import Any

import torch

from ..exc import unimplemented
from .. import graph_break_registry as gb
from ..fake_values import get_fake_value
from ..resume_execution import ResumeIterator
from ..source import AttrSource, GetItemSource, Source
from .base import VariableTracker
from .builtin import BuiltinVariable, is_builtin
from .constant import ConstantLikeVariable, ConstantVariable, is_constant_like, is_constant_value
from .containers import DequeVariable
from .ctx_manager import GRAD_MODE_CLASSES, GradModeClassVariable
from .dicts import ConstDictVariable
from .functional import FunctoolsPartialVariable, is_functional, is_lru_cache_of_user_function
from .functions import SkipFunctionVariable, UserFunctionVariable, UserMethodVariable
from .iter import ListIteratorVariable
from .lists import ListVariable, TupleVariable
from .misc import UserDefinedObjectVariable
from .nn_module import NNModuleVariable
from .sets import SetVariable
from .numpy import NumpyNdarrayVariable, NumpyVariable, is_numpy_callable  # registers Tensor.numpy() (tensor.py)
from .tensor import TensorVariable
from .torch import PythonModuleVariable, TorchInGraphFunctionVariable, is_torch_callable
from .user_class import UserDefinedClassVariable

# md.compile'd functions (``eval_frame.OptimizedFunction``), which the trace inlines: eval_frame
# registers its class here when imported, as the frame hook sits above the builder and the
# builder never imports it (the import contracts of pyproject.toml, tests/test_import_contracts.py)
COMPILED_FUNCTION_TYPES: tuple[type, ...] = ()


def _identity_key(key: Any) -> bool:
    """A dict key compared by identity: a class or ``typing.Union``-like object with object's ``==`` and hash."""
    return (isinstance(key, type) or type(key).__module__ == "typing") \
        and type(key).__eq__ is object.__eq__ and type(key).__hash__ is object.__hash__


def _dict_with_object_keys(tx, source: Source, value: dict) -> VariableTracker:
    """A dict read from outside whose keys are classes (huggingface_hub's ``_BASIC_TYPE_VALIDATORS``,
    reached by a config's validated ``__setattr__``): torch's ``DICT_KEYS_MATCH`` guards such keys
    by identity and reads each value through the key's position (``ConstDictKeySource``,
    torch/_dynamo/variables/builder.py); ours writes the keys guard with each key by its scope name."""
    from ..guards import _is_literal
    from ..source import DictGetItemByKeyIndexSource

    guards = tx.output.guards
    guards.TYPE_MATCH(source, value, "the trace read this dict")
    keys = ", ".join(repr(k) if _is_literal(k) else guards.name_for(k, getattr(k, "__name__", "key")) for k in value)
    guards.add(source, "DICT_KEYS", f"list({source.name()}) == [{keys}]", "the trace read these keys (classes by identity)",
               f"list({source.name()})")
    items = {k: VariableBuilder(tx, DictGetItemByKeyIndexSource(source, i))(v) for i, (k, v) in enumerate(value.items())}
    return ConstDictVariable(items, user_cls=type(value), source=source)


def _builtin_module(value) -> bool:
    """A module of torch.nn itself, not a container (torch's ``UnspecializedBuiltinNNModuleSource``, builder.py)."""
    module = type(value).__module__
    return module.startswith(("torch.nn.modules", "torch.ao.")) and not module.startswith("torch.nn.modules.container")


class VariableBuilder:
    """Wrap a real value that came from ``source`` (installs guards; see the Note)."""

    def __init__(self, tx, source: Source):
        self.tx = tx
        self.source = source

    def __call__(self, value: Any) -> VariableTracker:
        cache = self.tx.output.input_source_to_var
        key = self.source.name()
        if key in cache:
            return cache[key]
        same = self._same_object(value)
        if same is not None:
            cache[key] = same
            return same
        var = self._wrap(value)
        cache[key] = var
        if _tracked_by_identity(value):
            self.tx.output.side_effects.objects[id(value)] = (var, value)
        return var

    def _same_object(self, value: Any):
        """The tracker of an object already reached through another source (Note [One object, one tracker])."""
        if not _tracked_by_identity(value):
            return None
        entry = self.tx.output.side_effects.objects.get(id(value))
        if entry is None or entry[1] is not value:
            return None
        first = entry[0]
        n = self.source.name()
        self.tx.output.guards.add(self.source, "ID_MATCH", f"{first.source.name()} is {n}",  # torch's DUPLICATE_INPUT text
                                  "the trace saw these two as one object (a write through one shows in the other)", n)
        return first

    def _wrap(self, value: Any) -> VariableTracker:
        tx, source = self.tx, self.source
        guards = tx.output.guards
        if _from_numpy(value):
            numpy_var = _wrap_numpy(tx, source, value)  # Note [NumPy is traced through torch._numpy]
            if numpy_var is not None:
                return numpy_var
        if isinstance(value, torch.Tensor):
            if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.layout != torch.strided \
                    or value.is_quantized or value.is_nested:
                _untraced_tensor(source, value)  # (our own FakeTensor passes: the converter takes it as it is)
            from ..dynamic_shapes import dynamic_dims_for

            duplicate = id(value) in tx.output._tensor_ids  # one input already: DUPLICATE_INPUT (output_graph.py)
            dims = dynamic_dims_for(tx.output, source, value) if not duplicate else ()
            if not duplicate:
                guards.TENSOR_MATCH(source, value, "tensor input: the graph was traced for its metadata",
                                    dynamic_dims=dims)
            var = tx.output.add_graph_input(source, value, dynamic_dims=dims)
            var.class_type = type(value)  # what type(x) and isinstance see: Tensor, Parameter, a subclass
            return var
        if type(value) is int:  # Note [Automatic dynamic for ints] (dynamic_shapes.py)
            from ..dynamic_shapes import int_input
            from .sym_node import SymNodeVariable

            symbolic = int_input(tx, source, value)
            if symbolic is not None:
                return SymNodeVariable(*symbolic, source=source)
        if type(value) is float:  # Note [A float input is lifted once it changes] (dynamic_shapes.py)
            from ..dynamic_shapes import float_input
            from .sym_node import SymNodeVariable

            lifted = float_input(tx, source, value)  # (make_proxy, SymFloat): the node is made on first use
            if lifted is not None:
                return SymNodeVariable.lazy(*lifted, source=source)
        if isinstance(value, torch.Size) or (is_constant_value(value) and not isinstance(value, tuple)):
            guards.CONSTANT_MATCH(source, value, "Python value folded into the trace")
            return ConstantVariable(value, source=source)
        if isinstance(value, (list, tuple)):
            named = isinstance(value, tuple) and hasattr(type(value), "_fields")
            if type(value) not in (list, tuple) and not named:
                unimplemented(f"a {type(value).__name__} (list/tuple subclass) input", gb_id=gb.SOURCELESS)
            guards.LENGTH_CHECK(source, value, "the trace unrolled this sequence")
            if type(value) is tuple and _constant_tuple_of_a_module(tx.output, source, value):
                # Note [A module's tuple of constants is one guard]
                guards.CONSTANT_MATCH(source, value, "a module's tuple of constants, folded into the trace")
                return TupleVariable([ConstantVariable(v) for v in value], source=source)
            # a namedtuple's items are its fields, ``L['p'].a``, as torch's builder reads them (``AttrSource`` for
            # each of ``namedtuple_fields``, torch/_dynamo/variables/builder.py ``VariableBuilder._wrap``)
            item_sources = [AttrSource(source, f) for f in type(value)._fields] if named and \
                len(type(value)._fields) == len(value) else [GetItemSource(source, i) for i in range(len(value))]
            items = [VariableBuilder(tx, s)(v) for s, v in zip(item_sources, value)]
            if isinstance(value, list):
                return ListVariable(items, source=source)
            return TupleVariable(items, tuple_cls=type(value), source=source)
        if type(value) in (dict, collections.OrderedDict):  # an OrderedDict: a module's hook dicts
            from ..guards import _is_literal

            if not all(_is_literal(k) for k in value):
                if all(_is_literal(k) or _identity_key(k) for k in value):
                    return _dict_with_object_keys(tx, source, value)
                # the keys guard and each item's source are written as Python literals; a module
                # or any object as a key has none (torch guards such keys by identity)
                unimplemented("a dict whose keys are not Python literals (a dtype, an enum, a module or another object as a key)",
                              gb_id=gb.DICT_KEYS_NONCONST)
            guards.TYPE_MATCH(source, value, "the trace read this dict")
            guards.add(source, "DICT_KEYS", f"list({source.name()}) == {list(value)!r}", "the trace read these keys",
                       f"list({source.name()})")
            items = {k: VariableBuilder(tx, GetItemSource(source, k))(v) for k, v in value.items()}
            return ConstDictVariable(items, user_cls=type(value), source=source)
        if type(value) in (set, frozenset):  # Note [A set is a dict of hashable trackers] (sets.py)
            if any(isinstance(v, torch.Tensor) for v in value):  # torch: its order is the tensors' addresses
                unimplemented("a set of tensors read from outside the frame (its order would be the tensors' "
                              "addresses)", "use a dict whose keys are the tensors",
                              gb_id=gb.gb_id_of("Attempted to wrap a set with tensors"),
                              context="Python set containing torch.Tensor elements")
            if all(is_constant_value(v) for v in value):
                # a copy: an empty set (``set()`` is no literal) is compared with an object bound in the
                # guards' scope, which must not be the user's set that later mutations change
                guards.CONSTANT_MATCH(source, value.copy(), "the trace read this set's items")
                return SetVariable.build(None, [ConstantVariable(v) for v in value], type(value), source=source)
        if type(value) is collections.deque:  # Note [A deque made in the trace]: one from outside too
            guards.TYPE_MATCH(source, value, "the trace read this deque")
            guards.LENGTH_CHECK(source, value, "the trace unrolled this deque")
            guards.CONSTANT_MATCH(AttrSource(source, "maxlen"), value.maxlen, "the trace used this deque's bound")
            items = [VariableBuilder(tx, GetItemSource(source, i))(v) for i, v in enumerate(value)]
            return DequeVariable(items, value.maxlen, source=source)
        if isinstance(value, ResumeIterator):  # a for-loop iterator passed to a resume function
            guards.TYPE_MATCH(source, value, "a loop iterator carried over a graph break")
            items_src = AttrSource(source, "resume_items")
            guards.add(source, "LENGTH_CHECK", f"len({items_src.name()}) - {source.name()}.resume_index == "
                       f"{len(value.resume_items) - value.resume_index}", "the trace unrolled the rest of this loop")
            items = [VariableBuilder(tx, GetItemSource(items_src, i))(v) for i, v in enumerate(value.resume_items)]
            return ListIteratorVariable(items, value.resume_index, source=source)
        if isinstance(value, torch.nn.Module):
            if "_modules" not in value.__dict__:  # its own __init__ traced as a frame, before nn.Module.__init__ ran
                unimplemented(f"a {type(value).__name__} whose nn.Module.__init__ has not run yet",
                              gb_id=gb.UNINITIALIZED_MODULE)
            # Note [Modules are guarded by type and structure]: not by identity, so one entry
            # serves every layer of a model (torch: inline_inbuilt_nn_modules); each attribute
            # the trace reads is guarded through its own source, parameters are graph inputs.
            guards.module_sources[source.name()] = _builtin_module(value)  # Note [Guards in torch's order]
            guards.TYPE_MATCH(source, value, "the trace inlined this module's forward")
            guards.NN_MODULE_LAYOUT(source, value, "the trace read this module's children, parameters and buffers")
            # hooks and forward: the NN_MODULE_CALL guard of each module the trace calls (nn_module.py)
            return NNModuleVariable(value, source=source)
        if isinstance(value, types.ModuleType):
            guards.ID_MATCH(source, value, "the trace read attributes of this module")
            return PythonModuleVariable(value, source=source)
        if is_builtin(value) or is_functional(value):
            guards.ID_MATCH(source, value, "the trace called this builtin")
            return BuiltinVariable(value, source=source)
        if type(value) is functools.partial:  # Dynamo: FunctoolsPartialVariable, each part guarded by its source
            guards.TYPE_MATCH(source, value, "the trace called this functools.partial")
            func = VariableBuilder(tx, AttrSource(source, "func"))(value.func)
            args = VariableBuilder(tx, AttrSource(source, "args"))(value.args)
            keywords = VariableBuilder(tx, AttrSource(source, "keywords"))(value.keywords)
            return FunctoolsPartialVariable(func, args.items, keywords.items, source=source)
        if is_lru_cache_of_user_function(value):  # traced through __wrapped__, as Dynamo does
            guards.ID_MATCH(source, value, "the trace inlined this cached function's body")
            return UserFunctionVariable(value.__wrapped__, source=AttrSource(source, "__wrapped__"))
        if isinstance(value, types.MethodType) and type(value.__self__) in (torch.no_grad, torch.enable_grad) \
                and value.__func__.__name__ == "clone":
            # ``ctx_factory`` in torch's decorate_context: a function under ``@torch.no_grad()`` called
            # from the trace enters ``no_grad.clone()``, a new block like ``torch.no_grad()``
            # (Note [A grad-mode decorator], ctx_manager.py)
            guards.ID_MATCH(source, value, "the trace entered a block made by this grad-mode decorator")
            return GradModeClassVariable(type(value.__self__), source=source)
        if is_torch_callable(value):
            guards.ID_MATCH(source, value, "the trace recorded this torch function")
            return TorchInGraphFunctionVariable(value, source=source)
        if isinstance(value, COMPILED_FUNCTION_TYPES):  # calling another md.compile'd function: inline its body
            guards.ID_MATCH(source, value, "the trace inlined this compiled function's body")
            return UserFunctionVariable(value.fn, source=AttrSource(source, "fn"))
        if isinstance(value, types.FunctionType):
            # Note [A function is guarded by its code]
            #     Torch guards a function it inlines by its ``__code__`` alone (``CLOSURE_MATCH``,
            #     torch/_dynamo/guards.py; ``UserFunctionVariable.create_with_source``,
            #     variables/functions.py): its defaults and closure cells are read through
            #     sources (``G['f'].__defaults__[0]``, ``G['f'].__closure__[0].cell_contents``) and
            #     guarded where the trace reads them, and what else the trace took from the
            #     function is its code. So a closure made anew by each call of its parent, or a
            #     global rebound to another function of the same code, serves the same entry;
            #     one of other code recompiles, naming ``___check_obj_id(G['f'].__code__, ...)``.
            guards.ID_MATCH(AttrSource(source, "__code__"), value.__code__, "the trace inlined this function's code")
            return UserFunctionVariable(value, source=source)
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            # both halves through their sources: ``m.forward = MethodType(g, m)`` later must fail
            # a guard on ``__func__``, not only on ``__self__`` (test_modules.py::test_module_patch)
            VariableBuilder(tx, AttrSource(source, "__func__"))(value.__func__)
            obj = VariableBuilder(tx, AttrSource(source, "__self__"))(value.__self__)
            return UserMethodVariable(value.__func__, obj, source=source)
        if any(value is c for c in GRAD_MODE_CLASSES):
            return GradModeClassVariable(value, source=source)
        if isinstance(value, type):
            guards.ID_MATCH(source, value, "the trace used this class")
            return UserDefinedClassVariable(value, source=source)
        if isinstance(value, types.MethodWrapperType):  # Note [A tensor's bound method read from outside the frame]
            from .base import GetAttrVariable

            obj = VariableBuilder(tx, AttrSource(source, "__self__"))(value.__self__)
            return GetAttrVariable(obj, value.__name__, source=source)
        if _bound_to_torch_object(value):  # Note [A tensor's bound method read from outside the frame]
            return SkipFunctionVariable(value, source=source)
        if isinstance(value, types.BuiltinMethodType) and type(value.__self__) in _CONTAINER_TYPES:
            # A container's bound method (``logged.append`` on a resume function's stack, after a
            # break inside ``logged.append(loss.item())``): the call goes to the container, read
            # through ``__self__``, so it is traced as a side effect. Dynamo:
            # ``bound_builtin_method_descriptor`` and ``BoundBuiltinMethodVariable`` (variables/builder.py).
            from .base import GetAttrVariable

            obj = VariableBuilder(tx, AttrSource(source, "__self__"))(value.__self__)
            return GetAttrVariable(obj, value.__name__, source=source)
        if callable(value) and isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            guards.ID_MATCH(source, value, "the trace called this builtin")
            return BuiltinVariable(value, source=source)
        if is_constant_like(value):  # Note [A regex is a constant of the trace] (constant.py): torch's ID_MATCH
            guards.ID_MATCH(source, value, "the trace folded calls of this compiled regex or match")
            return ConstantLikeVariable(value, source=source)
        guards.TYPE_MATCH(source, value, "the trace read attributes of this object")
        return UserDefinedObjectVariable(value, source=source)


_CONTAINER_TYPES = (list, dict, set, collections.deque, collections.OrderedDict, collections.defaultdict)


def _bound_to_torch_object(value: Any) -> bool:
    """Note [A tensor's bound method read from outside the frame]

    ``m = x.mul`` carried over a graph break reaches the resume function as a local
    holding a bound C method, a new object at each ``x.mul``. torch's
    ``VariableBuilder._wrap`` (torch/_dynamo/variables/builder.py) hands a bound builtin
    method of an object of a torch class (``is_torch_class``, so
    ``bound_builtin_method_descriptor`` declines it) to ``trace_rules.lookup``: a
    ``SkipFunctionVariable``, whose ``create_with_source`` (variables/functions.py)
    installs no guard for a builtin bound to an object (its id changes at every
    lookup); calling it is a graph break. Ours is the same: no ``ID_MATCH`` on ``m``,
    which failed for every new tensor, so the resume function no longer recompiles at
    each call; the call breaks as torch's. A method-wrapper (``x.__getitem__``) is
    torch's ``MethodWrapperVariable``: its ``__self__`` is built through
    ``AttrSource(source, "__self__")`` (a tensor: a graph input, ``TENSOR_MATCH`` on
    ``L['m'].__self__``) and the call is the object's method, traced. A resume function
    whose locals hold only such a method has no tensor in it, and torch skips it
    (convert_frame.py ``has_tensor_in_frame``); ours traces it (Note [A frame that traced
    no ops is skipped for good], frame_cache.py: our resume functions are not skipped), so
    ``return m(0) * 2`` after ``m = x.__getitem__`` is one graph more in ours.
    tests/test_bound_methods_like_torch.py.
    """
    owner = getattr(value, "__self__", None)
    if not isinstance(value, types.BuiltinMethodType) or owner is None or isinstance(owner, (type, types.ModuleType)):
        return False
    module = getattr(type(owner), "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


_LITERAL_ITEM_TYPES = (int, float, bool, str, type(None))


def _constant_tuple_of_a_module(output, source: Source, value: tuple) -> bool:
    """Note [A module's tuple of constants is one guard]

    A tuple of constants read from an nn.Module (a conv's ``stride``, ``padding``,
    ``dilation``, a layer norm's ``normalized_shape``) is one constant of the trace, as in
    torch's ``VariableBuilder.wrap_listlike`` (``torch/_dynamo/variables/builder.py``:
    tuples are immutable, so the items of one from an unspecialized module are static):
    its type and length, then ``L['self'].stride == (1, 1)``, one guard, where item by item
    it was four (``L['self'].stride[0]``'s type and value, then ``[1]``'s). On a
    timm MobileNetV3 that is 318 fewer checks in every call's guard function. A tuple
    elsewhere (an argument, a global) keeps its items' own guards: an int item of an
    argument can become dynamic.
    """
    def literal(v: Any) -> bool:
        return type(v) in _LITERAL_ITEM_TYPES or (type(v) is tuple and all(literal(x) for x in v))

    if not all(literal(v) for v in value):
        return False
    from ..dynamic_shapes import UNREADABLE, base_values

    for owner in base_values(output, source):
        if owner is UNREADABLE:  # a base we cannot read back: keep the items' own guards
            return False
        if isinstance(owner, torch.nn.Module):
            return True
    return False


def _from_numpy(value: Any) -> bool:
    """Made by NumPy (an ndarray, a NumPy scalar, an ``np`` function or scalar type): worth a look."""
    if type(value).__module__ == "numpy":
        return True
    if isinstance(value, (torch.Tensor, int, float, str, tuple, list, dict)) or value is None:
        return False
    try:
        module = getattr(value, "__module__", None)
    except Exception:  # noqa: BLE001 - an object whose attribute lookup raises: not NumPy's
        return False
    return isinstance(module, str) and (module == "numpy" or module.startswith("numpy."))


def _wrap_numpy(tx, source, value: Any):
    """An ndarray, a NumPy scalar or an ``np`` function read from the frame (torch: ``wrap_numpy_ndarray``).

    An ndarray (a NumPy scalar as a 0-d one) is a graph input: the tensor
    ``torch.as_tensor(L['a'])`` shares its memory and is guarded as any tensor input.
    None: not ours (the caller wraps it as any other object).
    """
    import numpy as np

    from minidynamo import config

    from ..dynamic_shapes import dynamic_dims_for
    from ..source import NumpyTensorSource

    guards = tx.output.guards
    if is_numpy_callable(value):
        guards.ID_MATCH(source, value, "the trace called this NumPy function")
        return NumpyVariable(value, source=source)
    # an ndarray under trace_numpy; a NumPy scalar (a 0-d one) always, as torch's builder does
    if not (isinstance(value, np.generic) or config.trace_numpy and isinstance(value, np.ndarray)) \
            or value.dtype.kind not in "biufc":
        return None
    guards.TYPE_MATCH(source, value, "an ndarray the trace read as a tensor")
    readonly = isinstance(value, np.ndarray) and not value.flags.writeable  # torch clones it (wrap_numpy_ndarray)
    tsource = NumpyTensorSource(source, copy=readonly)
    tensor = torch.tensor(value) if readonly else torch.as_tensor(value)  # as tsource reads it on each call
    dims = dynamic_dims_for(tx.output, tsource, tensor)  # a size that changed between calls: a symbol, as a tensor's
    guards.TENSOR_MATCH(tsource, tensor, "an ndarray input: the graph was traced for its metadata", dynamic_dims=dims)
    var = tx.output.add_graph_input(tsource, tensor, dynamic_dims=dims)
    return NumpyNdarrayVariable(var.proxy, var.example_value, source=tsource)


def _tracked_by_identity(value: Any) -> bool:
    """Mutable objects whose writes the trace replays: one tracker per object, however reached.

    Note [One object, one tracker]
        ``f(l, l)`` or a global list also passed as an argument: two sources, one
        list. A write through one name must be seen through the other, and written
        back once. So, as torch's ``SideEffects`` keys its entries by the object,
        the builder hands out the tracker made for the first source, with a guard
        that the second source is the same object (``L['a'] is L['b']``, torch's DUPLICATE_INPUT text).
        An enum member is a constant, each source guarded on its own (torch's EnumVariable). The
        opposite case, traced with two objects and called with one, is guarded at
        the end of the trace for the objects it wrote to (``SideEffects.aliasing_guards``).
    """
    return isinstance(value, (list, dict, collections.deque, torch.nn.Module)) or (
        type(value).__module__ not in ("builtins", "torch") and not isinstance(value, (type, types.ModuleType,
                                                                                       types.FunctionType, tuple,
                                                                                       enum.Enum))
        and hasattr(value, "__dict__") and not callable(value))


def wrap_constant_result(value: Any) -> VariableTracker:
    """The result of folding on constants (a tuple stays a tuple of trackers)."""
    if isinstance(value, tuple) and type(value) is tuple:
        return TupleVariable([wrap_constant_result(v) for v in value])
    if isinstance(value, list):
        return ListVariable([wrap_constant_result(v) for v in value])
    if isinstance(value, dict):
        return ConstDictVariable({k: wrap_constant_result(v) for k, v in value.items()})
    if is_constant_value(value) or isinstance(value, (torch.finfo, torch.iinfo)):
        return ConstantVariable(value)
    if type(value) is set and all(is_constant_value(v) for v in value):  # made in the trace: a set of constants
        return SetVariable.build(None, [ConstantVariable(v) for v in value])  # constants need no tx
    if isinstance(value, type):
        return BuiltinVariable(value) if is_builtin(value) else UserDefinedClassVariable(value)
    unimplemented(f"a {type(value).__name__} value produced while tracing", gb_id=gb.SOURCELESS)


def wrap_sourceless(tx, value: Any) -> VariableTracker:
    """A value with no source (a default, a constant of the code, a library attribute)."""
    if isinstance(value, torch.Tensor):
        unimplemented("a tensor with no source (e.g. a tensor default argument or a tensor constant)",
                      gb_id=gb.SOURCELESS)
    if isinstance(value, torch.nn.Module):
        unimplemented("a module reached without a source", gb_id=gb.SOURCELESS)
    if isinstance(value, types.ModuleType):
        return PythonModuleVariable(value)
    if _from_numpy(value):
        if is_numpy_callable(value):  # np.sum read from the np module (Note [NumPy is traced through torch._numpy])
            return NumpyVariable(value)
    if is_builtin(value) or is_functional(value):
        return BuiltinVariable(value)
    if type(value) is functools.partial:
        return FunctoolsPartialVariable(wrap_sourceless(tx, value.func), [wrap_sourceless(tx, a) for a in value.args],
                                        {k: wrap_sourceless(tx, v) for k, v in value.keywords.items()})
    if is_lru_cache_of_user_function(value):
        return UserFunctionVariable(value.__wrapped__)
    if is_torch_callable(value):
        return TorchInGraphFunctionVariable(value)
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(value)
    if any(value is c for c in GRAD_MODE_CLASSES):
        return GradModeClassVariable(value)
    if isinstance(value, type):
        return UserDefinedClassVariable(value)
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        items = [wrap_sourceless(tx, v) for v in value]
        return TupleVariable(items) if isinstance(value, tuple) else ListVariable(items)
    if type(value) is dict:
        return ConstDictVariable({k: wrap_sourceless(tx, v) for k, v in value.items()})
    if is_constant_value(value) or isinstance(value, (torch.finfo, torch.iinfo)):
        return ConstantVariable(value)
    if is_constant_like(value):  # Note [A regex is a constant of the trace] (constant.py)
        return ConstantLikeVariable(value)
    if callable(value) and isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return BuiltinVariable(value)
    return UserDefinedObjectVariable(value)


def _example(arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        return arg.meta["example_value"]
    return arg


def wrap_fx_proxy(tx, kind: str, target: Any, args: tuple, kwargs: dict) -> VariableTracker:
    """Add one node to the graph, compute its fake value, and wrap the result.

    ``args``/``kwargs`` may hold Proxies. Real Dynamo: ``wrap_fx_proxy`` +
    ``get_fake_value`` (FakeTensor pass 1: every op runs once on fake tensors).
    """
    output = tx.output
    proxy = output.create_proxy(kind, target, args, kwargs)
    node = proxy.node
    fargs = torch.fx.node.map_arg(node.args, _example)
    fkwargs = torch.fx.node.map_arg(node.kwargs, _example)
    what = f"{target}" if isinstance(target, str) else getattr(target, "__name__", str(target))
    if kind == "call_method":
        fn = lambda *a, **k: getattr(a[0], target)(*a[1:], **k)  # noqa: E731
        what = f"Tensor.{target}"
    else:
        fn = target
    try:
        from .unbacked import dynamic_output_shape

        example = get_fake_value(output.fake_mode, fn, fargs, fkwargs, what,
                                 dynamic_output=lambda f, a, k: dynamic_output_shape(tx, target, a, k))
    except BaseException:
        output.graph.erase_node(node)
        raise
    return wrap_example(tx, proxy, example)


def wrap_example(tx, proxy, example: Any) -> VariableTracker:
    node = proxy.node
    node.meta["example_value"] = example
    if isinstance(example, torch.Tensor):
        return TensorVariable(proxy, example)
    if isinstance(example, (tuple, list)) and any(isinstance(e, torch.Tensor) for e in example):
        items = []
        for i, e in enumerate(example):
            if isinstance(e, torch.Tensor):
                p = tx.output.create_proxy("call_function", operator.getitem, (proxy, i), {})
                p.node.meta["example_value"] = e
                items.append(TensorVariable(p, e))
            else:
                items.append(wrap_constant_result(e))
        if isinstance(example, tuple):
            return TupleVariable(items, tuple_cls=type(example))
        return ListVariable(items)
    if isinstance(example, (torch.SymInt, torch.SymBool, torch.SymFloat)):  # a symbolic size or decision (dynamic_shapes.py)
        from .sym_node import SymNodeVariable

        return SymNodeVariable(proxy, example)
    # A non-tensor result (a size, a flag): fold it, and drop the node if unused.
    if not node.users:
        tx.output.graph.erase_node(node)
    return wrap_constant_result(example)


def _untraced_tensor(source, value: torch.Tensor) -> None:
    """Note [Tensor subclasses are not traced]

    Our FakeTensor models a dense strided ``torch.Tensor`` (or ``nn.Parameter``). A
    subclass input would need what torch builds for it: for a ``__torch_function__``
    subclass, ``TensorWithTFOverrideVariable`` (the override inlined at every torch call,
    the outputs rewrapped in the subclass); for a ``__torch_dispatch__`` wrapper subclass,
    AOTAutograd's subclass desugaring (``aot_dispatch_subclass``: the graph sees the inner
    tensors). Neither is built here, and tracing the subclass as a plain tensor would give
    eager's values with the wrong type, or skip the override. So the frame (or the rest of
    it) runs eagerly, with one warning per subclass that says so.
    """
    from minidynamo.fake.fake_tensor import FakeTensor

    from ..source import LocalSource

    if isinstance(value, FakeTensor):
        return
    where = source.name()
    if isinstance(source, LocalSource):
        where = ("a value live at a graph break" if source.local_name.startswith("___stack") else
                 f"argument {source.local_name}")
    cls = type(value)
    if cls not in (torch.Tensor, torch.nn.Parameter):
        kind = ("a __torch_dispatch__ subclass" if "__torch_dispatch__" in _overrides(cls) else
                "a __torch_function__ subclass" if "__torch_function__" in _overrides(cls) else "a subclass")
        unimplemented(f"{where} is a {cls.__module__}.{cls.__qualname__}, {kind} of torch.Tensor; minidynamo "
                      "traces only torch.Tensor and nn.Parameter (Note [Tensor subclasses are not traced])",
                      hint="torch.compile traces tensor subclasses", warn=f"{cls.__module__}.{cls.__qualname__}",
                      gb_id=gb.TENSOR_SUBCLASS)
    layout = "quantized" if value.is_quantized else "nested" if value.is_nested else str(value.layout)
    unimplemented(f"{where} is a {layout} tensor; minidynamo traces only dense strided tensors", warn=layout,
                  gb_id=gb.SPARSE_TENSOR)


def _overrides(cls: type) -> set:
    """The tensor hooks a subclass defines itself (not inherited from torch.Tensor)."""
    return {name for name in ("__torch_function__", "__torch_dispatch__")
            if any(name in vars(k) for k in cls.__mro__ if k not in torch.Tensor.__mro__)}
