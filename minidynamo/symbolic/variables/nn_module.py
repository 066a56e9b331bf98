"""torch.nn.Module while tracing: calls are inlined, parameters become graph inputs.

Place in the pipeline: ``model(x)`` inlines ``forward``; ``self.fc.weight`` is a graph
input whose source is ``L['self']._modules['fc']._parameters['weight']``, guarded like any
input tensor.
Mirrors ``torch/_dynamo/variables/nn_module.py`` (``NNModuleVariable``,
``UnspecializedNNModuleVariable``).

Note [Parameters are inputs]
    Dynamo used to keep parameters inside the graph as ``get_attr`` nodes of a
    module it carried along; since ``inline_inbuilt_nn_modules`` (PyTorch 2.4+) they
    are lifted to graph inputs, so one compiled graph serves every instance with the
    same shapes. We do the same: the graph is a pure function of tensors.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from ..exc import unimplemented
from .. import graph_break_registry as gb
from ..source import AttrSource, GetItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import BaseListVariable, ListVariable, TupleVariable
from .new_object import NewObjectVariable


def _global_hooks() -> bool:
    """Hooks registered for every module (``register_module_forward_hook`` and friends)."""
    mm = torch.nn.modules.module
    return bool(mm._global_forward_pre_hooks or mm._global_forward_hooks or mm._global_backward_pre_hooks
                or mm._global_backward_hooks)  # noqa: SLF001


def is_plain_call(m: torch.nn.Module) -> bool:
    """``m(...)`` would only run ``type(m).forward``: no hooks, no ``forward`` set on the instance.

    Note [A module call is guarded like torch's _call_impl]
        ``m(x)`` is ``nn.Module.__call__``: the forward pre-hooks, then ``m.forward``
        looked up on the instance first (``m.forward = f`` wins over the class), then
        the forward hooks; global hooks (``register_module_forward_hook``) run for every
        module. Torch traces ``_call_impl`` itself and so guards the hook dicts it reads.
        We trace the same steps: each module called gets one NN_MODULE_CALL guard
        that its hooks and its ``forward`` are what the trace saw (no hooks and no
        instance ``forward``, in the common case, one cheap expression); hooks it has
        are inlined in ``_call_impl``'s order, each guarded by its source. A hook or
        a ``forward`` added after compile fails that guard and recompiles. Backward
        hooks and global hooks are not traced: a graph break (guarded absent).
        ``md.compile(m)`` (``OptimizedModule``) runs the compiled ``type(m).forward``
        directly only while ``is_plain_call(m)``; otherwise it compiles the call.
        The class's own ``forward`` reassigned (``M.forward = g``) fails a
        CLASS_ATTRIBUTE guard (Note [A class attribute the trace used], misc.py).
    """
    return not (m._forward_pre_hooks or m._forward_hooks or m._backward_pre_hooks or m._backward_hooks  # noqa: SLF001
                or "forward" in m.__dict__ or _global_hooks())


def _is_none(var: VariableTracker) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None


def _guard_no_global_hooks(tx) -> None:
    """One guard per trace that calls a module: no global module hooks (they are not traced)."""
    from ..source import ModuleSource

    src = ModuleSource("torch.nn.modules.module")
    n = src.name()
    tx.output.guards.add(src, "GLOBAL_HOOKS", f"not ({n}._global_forward_pre_hooks or {n}._global_forward_hooks or "
                         f"{n}._global_backward_pre_hooks or {n}._global_backward_hooks)",
                         "the trace called modules with no global module hooks registered")
    if _global_hooks():
        unimplemented("global module hooks (register_module_forward_hook, ...) are not traced",
                      gb_id=gb.UNSUPPORTED_FUNCTION)


_SPECIAL_METHODS = {"parameters", "named_parameters", "buffers", "named_buffers", "children", "modules",
                    "named_children", "named_modules"}


class NNModuleVariable(VariableTracker):
    def __init__(self, value: torch.nn.Module, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_dict_key(self) -> Any:
        return self.value  # a module keys a dict by identity, as in eager (dicts.py)

    def python_type(self) -> type:
        return type(self.value)

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.value).__name__})"

    def _child(self, tx, key, module) -> "NNModuleVariable":
        if self.source is None:
            return tx.wrap_sourceless(module)
        m = self.value  # the dict that holds the child, for its placeholder's name (Note [A placeholder is
        table = next((t for t in ("_modules", "_parameters", "_buffers")  # named after its source], source.py)
                      if str(key) in m.__dict__.get(t, {})), "")
        src = GetItemSource(self.source, key, table) if isinstance(key, int) else AttrSource(self.source, key, table)
        return tx.variable_builder(src)(module)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            return pending
        m = self.value
        if name in _SPECIAL_METHODS and inspect.getattr_static(type(m), name, None) is getattr(torch.nn.Module, name, 0):
            from .base import GetAttrVariable

            return GetAttrVariable(self, name)  # nn.Module's own method: call_method below handles it
        from .misc import lookup_python_attr

        if name not in m.__dict__ and any(name in vars(k) for k in type(m).__mro__):
            # Note [A class attribute hides a submodule of the same name]
            #     The tables are nn.Module.__getattr__'s, which Python calls only when the
            #     instance dict and the class have no such name: a method ``linear`` of the
            #     class wins over ``self.linear = nn.Linear(...)`` (which lives in
            #     ``_modules``), as eager does (test_modules.py ModuleAttributePrecedence).
            return lookup_python_attr(tx, self, m, name)
        source = AttrSource(self.source, name) if self.source is not None else None
        for table in ("_parameters", "_buffers", "_modules"):
            entries = m.__dict__.get(table, {})
            if name in entries:
                value = entries[name]
                if value is None:
                    return ConstantVariable(None)
                if source is None:
                    unimplemented(f"attribute {name!r} of a module with no source", gb_id="GB0188")
                return tx.variable_builder(AttrSource(self.source, name, table))(value)
        return lookup_python_attr(tx, self, m, name)  # instance dict, then class (as for any object)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """``nn.Module.__call__`` traced (Note [A module call is guarded like torch's _call_impl])."""
        from .functions import UserMethodVariable

        m, src, name = self.value, self.source, type(self.value).__name__
        if src is None:
            unimplemented(f"calling a {name} module reached without a source", gb_id=gb.MODULE_NO_SOURCE)
        _guard_no_global_hooks(tx)
        if m._backward_pre_hooks or m._backward_hooks:  # noqa: SLF001
            unimplemented(f"{name} has backward hooks (not traced)", gb_id=gb.MODULE_BACKWARD_HOOKS)
        pre, post = dict(m._forward_pre_hooks), dict(m._forward_hooks)  # noqa: SLF001
        pre_kw, post_kw = list(m._forward_pre_hooks_with_kwargs), list(m._forward_hooks_with_kwargs)  # noqa: SLF001
        n = src.name()
        own_forward = "forward" in m.__dict__
        if not (pre or post or own_forward):
            tx.output.guards.add(src, "NN_MODULE_CALL", f"not ({n}._forward_pre_hooks or {n}._forward_hooks or "
                                 f"{n}._backward_pre_hooks or {n}._backward_hooks or 'forward' in {n}.__dict__)",
                                 "the trace called this module: no hooks, forward from its class")
        else:
            tx.output.guards.add(src, "NN_MODULE_CALL", f"(list({n}._forward_pre_hooks), list({n}._forward_hooks), "
                                 f"list({n}._forward_pre_hooks_with_kwargs), list({n}._forward_hooks_with_kwargs), "
                                 f"'forward' in {n}.__dict__) == {(list(pre), list(post), pre_kw, post_kw, own_forward)!r}"
                                 f" and not ({n}._backward_pre_hooks or {n}._backward_hooks)",
                                 "the trace called this module and ran these hooks", f"list({n}._forward_hooks)")
        hook_var = lambda table, key: tx.variable_builder(GetItemSource(AttrSource(src, table), key))  # noqa: E731
        if pre or post:  # the hooks see the arguments as a tuple: realized (Note [An inlined call's arguments ...])
            args, kwargs = [tx.realize(a) for a in args], {k: tx.realize(v) for k, v in kwargs.items()}
        args_var = TupleVariable(list(args))
        for key, hook in pre.items():
            fn = hook_var("_forward_pre_hooks", key)(hook)
            if key in pre_kw:
                from .dicts import ConstDictVariable

                out = fn.call_function(tx, [self, args_var, ConstDictVariable(dict(kwargs))], {})
                if not _is_none(out):
                    args_var, kw_var = out.unpack_var_sequence(tx)
                    kwargs = dict(kw_var.items)
            else:
                out = fn.call_function(tx, [self, args_var], {})
                if not _is_none(out):
                    args_var = out if isinstance(out, TupleVariable) else TupleVariable([out])
        args = args_var.unpack_var_sequence(tx)
        if own_forward:
            result = tx.variable_builder(AttrSource(src, "forward"))(m.__dict__["forward"]).call_function(
                tx, list(args), dict(kwargs))
        else:
            forward = inspect.getattr_static(type(m), "forward", None)
            if not inspect.isfunction(forward):
                unimplemented(f"{name}.forward is not a Python function", gb_id=gb.UNSUPPORTED_FUNCTION)
            from .misc import guard_class_attribute

            guard_class_attribute(tx, type(m), "forward", forward)  # ``M.forward = g`` later recompiles
            result = UserMethodVariable(forward, self).call_function(tx, list(args), dict(kwargs))
        for key, hook in post.items():
            fn = hook_var("_forward_hooks", key)(hook)
            if key in post_kw:
                from .dicts import ConstDictVariable

                out = fn.call_function(tx, [self, args_var, ConstDictVariable(dict(kwargs)), result], {})
            else:
                out = fn.call_function(tx, [self, args_var, result], {})
            if not _is_none(out):
                result = out
        return result

    def _children(self, tx) -> list:
        m = self.value  # its children's names are guarded where it was wrapped (NN_MODULE_LAYOUT, builder.py)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [self._child(tx, i, c) for i, c in enumerate(m)]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in m.keys()]
        if isinstance(m, (torch.nn.ParameterList,)):
            return [self._child(tx, i, p) for i, p in enumerate(m)]
        unimplemented(f"iterating over {type(m).__name__}", gb_id=gb.UNSUPPORTED_METHOD)

    def unpack_var_sequence(self, tx) -> list:
        return self._children(tx)

    def _all_modules(self, tx, seen: set, prefix: str = "") -> list:
        """``m.named_modules()``: (name, module) for the module, then each descendant once, depth first."""
        if id(self.value) in seen:
            return []
        seen.add(id(self.value))
        out = [(prefix, self)]
        for key, child in self.value.named_children():
            var = self._child(tx, key, child)
            if not isinstance(var, NNModuleVariable):
                unimplemented(f"Module.modules() reaching a {type(child).__name__} the trace does not wrap as a module",
                              gb_id=gb.MODULE_ATTRIBUTE)
            out += var._all_modules(tx, seen, f"{prefix}.{key}" if prefix else key)  # noqa: SLF001
        return out

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        m = self.value
        if name == "forward":
            return self.call_function(tx, args, kwargs)
        if name == "__len__":
            return ConstantVariable(len(m))
        if name == "__getitem__":
            key = args[0].as_python_constant()
            if isinstance(m, torch.nn.ModuleDict):
                return self._child(tx, key, m[key])
            if isinstance(key, slice) and isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
                from .torch import record_module_init

                # eager builds a new container: its nn.Module.__init__ logs API usage, a node in
                # torch's graph (Note [A call kept in the graph for its effect], variables/torch.py)
                record_module_init(tx)
                children = [self._child(tx, i, m[i]) for i in range(len(m))[key]]
                cls = ModuleListSliceVariable if isinstance(m, torch.nn.ModuleList) else SequentialSliceVariable
                return cls(children, parent=self, key=key)
            if isinstance(key, slice):
                unimplemented("slicing a module container", gb_id=gb.MODULE_GETITEM_KEY)
            if key < 0:
                key += len(m)
            return self._child(tx, key, m[key])
        if name in ("__contains__",) and isinstance(m, torch.nn.ModuleDict):
            return ConstantVariable(args[0].as_python_constant() in m)
        if name in ("children", "modules"):
            if args or kwargs:
                unimplemented(f"Module.{name}() with arguments", gb_id=gb.MODULE_NONCONST_ARG)
            if name == "children":
                return ListVariable([self._child(tx, k, c) for k, c in m.named_children()])
            return ListVariable([var for _, var in self._all_modules(tx, set())])
        if name in ("named_children", "named_modules"):
            if args or kwargs:
                unimplemented(f"Module.{name}() with arguments", gb_id=gb.MODULE_NONCONST_ARG)
            if name == "named_children":
                pairs = [(k, self._child(tx, k, c)) for k, c in m.named_children()]
            else:
                pairs = self._all_modules(tx, set())
            return ListVariable([TupleVariable([ConstantVariable(k), v]) for k, v in pairs])
        if name in ("keys", "values", "items") and isinstance(m, torch.nn.ModuleDict):
            keys = list(m.keys())
            if name == "keys":
                return ListVariable([ConstantVariable(k) for k in keys])
            if name == "values":
                return ListVariable([self._child(tx, k, m[k]) for k in keys])
            return ListVariable([TupleVariable([ConstantVariable(k), self._child(tx, k, m[k])]) for k in keys])
        if name in ("parameters", "named_parameters", "buffers", "named_buffers"):
            return self._tensors(tx, name, args, kwargs)
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _tensors(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """``m.parameters()`` and friends: each tensor wrapped from its own source (so guarded)."""
        from .iter import ListIteratorVariable

        if args or kwargs or self.source is None:
            unimplemented(f"Module.{name}() with arguments or without a source", gb_id="GB0202")
        kind = "parameters" if "param" in name else "buffers"
        items = []
        for qualname, tensor in getattr(self.value, f"named_{kind}")():
            source, *path, last = [self.source, *qualname.split(".")]
            for part in path:  # each a submodule's name: its item of _modules (Note [A module's member ...], source.py)
                source = AttrSource(source, part, "_modules")
            source = AttrSource(source, last, f"_{kind}")
            var = tx.variable_builder(source)(tensor)
            items.append(TupleVariable([ConstantVariable(qualname), var]) if name.startswith("named") else var)
        return ListIteratorVariable(items)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        return codegen.constant_expr(self.value)

    def as_python_constant(self) -> Any:
        unimplemented("a module is not a constant", gb_id=gb.NOT_A_CONSTANT)


def _torch_nn_init(cls: type) -> bool:
    """Every ``__init__`` Python runs for ``cls(...)`` is torch.nn's own code (no user __new__/__call__)."""
    for klass in cls.__mro__:
        if klass is torch.nn.Module:
            return True
        init = klass.__dict__.get("__init__")
        if init is not None and not (getattr(init, "__module__", None) or "").startswith("torch.nn"):
            return False
        if "__new__" in klass.__dict__ or "__call__" in klass.__dict__:
            return False
    return False


class NewModuleVariable(NNModuleVariable):
    """A stateless ``torch.nn`` module constructed inside the trace (``loss_fct = CrossEntropyLoss()``).

    Note [A torch.nn module made in the trace]
        BERT's classification head builds its loss module in ``forward``. Dynamo
        inlines ``__init__`` and tracks the new module (``AttributeMutationNew``). We
        take a shorter road that gives the same result for the classes it accepts:
        a class whose ``__init__`` is torch.nn's own code (a ``torch.nn.modules``
        class, or a user subclass that defines no ``__init__``, ``__new__`` or
        ``__call__``: ``class SmallNN(nn.Module)`` with only a ``forward``) called with
        constant arguments is constructed for real at trace time (its constructor
        runs no user code), and kept only if it holds no parameters, buffers or children. Its
        attributes are then constants of the trace (every call of the frame would
        build the same object), its ``forward`` is inlined, and after a graph break it
        is rebuilt by calling the class again with the same arguments.
    """

    def __init__(self, value: torch.nn.Module, args: tuple, kwargs: dict, **rest):
        super().__init__(value, **rest)
        self.ctor_args, self.ctor_kwargs = args, kwargs

    @staticmethod
    def create(cls: type, args: list, kwargs: dict):
        """The tracker, or None where the class or its arguments are not for this road."""
        if not (issubclass(cls, torch.nn.Module) and type(cls) is type and _torch_nn_init(cls)):
            return None
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            return None
        cargs = tuple(a.as_python_constant() for a in args)
        ckwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
        try:  # a module with weights would draw from the RNG and allocate: on meta, RNG state restored
            with torch.random.fork_rng(devices=[]), torch.device("meta"):
                module = cls(*cargs, **ckwargs)
        except Exception:  # noqa: BLE001  (eager raises the same; let the frame run eagerly)
            return None
        stateful = (module._parameters or module._modules or any(b is not None for b in module._buffers.values())  # noqa: SLF001
                    or any(isinstance(v, torch.Tensor) for v in module.__dict__.values()))
        return None if stateful else NewModuleVariable(module, cargs, ckwargs)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        from .functions import UserMethodVariable

        _guard_no_global_hooks(tx)  # a fresh module has no hooks of its own
        forward = inspect.getattr_static(type(self.value), "forward", None)
        if not inspect.isfunction(forward):
            unimplemented(f"{type(self.value).__name__}.forward is not a Python function",
                          gb_id=gb.UNSUPPORTED_FUNCTION)
        from .misc import guard_class_attribute

        guard_class_attribute(tx, type(self.value), "forward", forward)
        return UserMethodVariable(forward, self).call_function(tx, list(args), dict(kwargs))

    def reconstruct(self, codegen) -> str:
        parts = [codegen.constant_expr(a) for a in self.ctor_args]
        parts += [f"{k}={codegen.constant_expr(v)}" for k, v in self.ctor_kwargs.items()]
        name = f"___tmp_{len(codegen.temps)}"  # built once, shared by every name of it (``m is m``)
        codegen.temps.append(f"{name} = {codegen.constant_expr(type(self.value))}({', '.join(parts)})")
        return name


# what nn.Module.__init__ puts in a module's __dict__ besides ``training``: not tracked on a module made in the trace
_MODULE_STATE = frozenset(torch.nn.Module().__dict__) - {"training"}
# what decides how ``m(x)`` and ``m.name = v`` behave: nn.Module's own code, for the class to be inlined as an object
_MODULE_PROTOCOL = ("__new__", "__call__", "_call_impl", "_wrapped_call_impl", "__setattr__", "__getattr__",
                    "__getattribute__", "__delattr__")


class UnspecializedNNModuleVariable(NewObjectVariable):
    """A user ``nn.Module`` subclass instantiated inside the trace, tracked as a plain new object.

    Note [A user module made in the trace]
        DeBERTa-v2's pooler calls ``ACT2FN[name](x)``: it builds transformers'
        ``GELUActivation()`` (a module whose ``__init__`` is user code) in ``forward``
        and calls it at once. Torch traces it as an ``UnspecializedNNModuleVariable``:
        ``__init__`` inlined on a new object, ``nn.Module.__call__`` inlined down to
        ``forward``. Ours is that object (a ``NewObjectVariable``): its ``__init__`` is
        inlined; ``super().__init__()`` (``nn.Module.__init__``, no arguments) only
        sets ``training = True``, the module's other state (``_parameters``,
        ``_modules``, the hook dicts) is known empty and not tracked, so reading it is a
        graph break; setting an attribute stores it on the object unless the value is a
        tensor or a module (``nn.Module.__setattr__`` would register it: a graph break);
        ``m(x)`` inlines ``m.forward`` (no hooks: a fresh module has none, global ones
        are guarded absent). After a graph break it is rebuilt by ``___new_object``,
        which runs ``nn.Module.__init__`` before restoring its attributes. Only for a
        class that leaves nn.Module's call and attribute protocol (``_MODULE_PROTOCOL``)
        as it is.
    """

    is_new_module = True

    def __init__(self, cls: type, **kwargs):
        super().__init__(cls, **kwargs)
        self.initialized = False

    @staticmethod
    def accepts(cls: type) -> bool:
        return (issubclass(cls, torch.nn.Module) and type(cls) is type and "__slots__" not in cls.__dict__
                and inspect.isfunction(inspect.getattr_static(cls, "__init__", None))
                and all(inspect.getattr_static(cls, n, None) is inspect.getattr_static(torch.nn.Module, n, None)
                        for n in _MODULE_PROTOCOL))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if (name in _MODULE_STATE and name not in self.attrs) or name == "__dict__":  # its __dict__ holds that state too
            unimplemented(f"reading {name} of a {self.cls.__name__} made in the trace (its module state is not tracked)",
                          gb_id=gb.MODULE_NO_SOURCE)
        return self.generic_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        from .tensor import TensorVariable

        kind = value.python_type() if not isinstance(value, TensorVariable) else torch.Tensor
        if (not self.initialized or name in _MODULE_STATE or isinstance(value, (TensorVariable, NNModuleVariable))
                or (isinstance(kind, type) and issubclass(kind, (torch.Tensor, torch.nn.Module)))):
            unimplemented(f"setting {name!r} on a {self.cls.__name__} made in the trace "
                          "(nn.Module.__setattr__ would register it)", gb_id=gb.SETATTR)
        self.attrs[name] = value

    def del_attr(self, tx, name: str) -> None:
        unimplemented(f"delattr on a {self.cls.__name__} made in the trace", gb_id=gb.SETATTR)

    def call_hasattr(self, tx, name: str) -> VariableTracker:
        unimplemented(f"hasattr on a {self.cls.__name__} made in the trace (nn.Module.__getattr__)",
                      gb_id=gb.HASATTR_TYPE)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        _guard_no_global_hooks(tx)  # a fresh module has no hooks of its own
        return self.var_getattr(tx, "forward").call_function(tx, list(args), dict(kwargs))

    def __repr__(self) -> str:
        return f"UnspecializedNNModuleVariable({self.cls.__name__})"


class ModuleInitVariable(VariableTracker):
    """``super().__init__()`` reaching ``nn.Module.__init__`` for a module made in the trace."""

    def __init__(self, module: UnspecializedNNModuleVariable, **kwargs):
        super().__init__(**kwargs)
        self.module = module

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if args or kwargs or self.module.initialized:
            unimplemented(f"nn.Module.__init__ of a {self.module.cls.__name__} with arguments, or twice",
                          gb_id=gb.SUPER_INIT)
        self.module.initialized = True
        self.module.attrs["training"] = ConstantVariable(True)
        from .torch import record_module_init

        record_module_init(tx)  # the node nn.Module.__init__ leaves in torch's graph (Note [A call kept in the graph ...])
        return ConstantVariable(None)


__all__ = ["NNModuleVariable", "NewModuleVariable", "ModuleListSliceVariable", "SequentialSliceVariable",
           "UnspecializedNNModuleVariable", "is_plain_call"]


class ModuleListSliceVariable(BaseListVariable):
    """``layers[:n]`` of an ``nn.ModuleList``: its children, each with its own source.

    Eager builds a new ModuleList of the same children; here it is their list, typed as a
    ModuleList, and rebuilt after a graph break by slicing the real container again.
    """

    kind = torch.nn.ModuleList

    def __init__(self, items: list, parent: VariableTracker, key: slice, **kwargs):
        super().__init__(items, **kwargs)
        self.parent, self.key = parent, key

    def as_python_constant(self) -> Any:
        unimplemented("a slice of a ModuleList is not a constant", gb_id=gb.MODULE_GETITEM_KEY)

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.parent)}[{codegen.constant_expr(self.key)}]"


class SequentialSliceVariable(ModuleListSliceVariable):
    """``seq[:2]`` of an ``nn.Sequential``: eager builds a new Sequential of the same children.

    Called, it runs them in order as ``Sequential.forward`` does (the new container has no
    hooks of its own; each child's call keeps its own).
    """

    kind = torch.nn.Sequential

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if len(args) != 1 or kwargs:
            unimplemented("calling a slice of an nn.Sequential with other than one positional input",
                          gb_id=gb.MODULE_NONCONST_ARG)
        out = args[0]
        for child in self.items:
            out = child.call_function(tx, [out], {})
        return out
