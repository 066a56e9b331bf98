"""torch.nn.Module while tracing: calls are inlined, parameters become graph inputs.

Place in the pipeline: ``model(x)`` inlines ``forward``; ``self.fc.weight`` is a graph
input whose source is ``L['self'].fc.weight``, guarded like any input tensor.
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
from ..source import AttrSource, GetItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import BaseListVariable, ListVariable, TupleVariable


def _has_hooks(m: torch.nn.Module) -> bool:
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks)  # noqa: SLF001


_SPECIAL_METHODS = {"parameters", "named_parameters", "buffers", "named_buffers", "children", "modules"}


class NNModuleVariable(VariableTracker):
    def __init__(self, value: torch.nn.Module, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.value).__name__})"

    def _child(self, tx, key, module) -> "NNModuleVariable":
        from .builder import VariableBuilder, wrap_sourceless

        if self.source is None:
            return wrap_sourceless(tx, module)
        src = GetItemSource(self.source, key) if isinstance(key, int) else AttrSource(self.source, key)
        return VariableBuilder(tx, src)(module)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import VariableBuilder

        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            return pending
        m = self.value
        if name in _SPECIAL_METHODS and inspect.getattr_static(type(m), name, None) is getattr(torch.nn.Module, name, 0):
            from .misc import GetAttrVariable

            return GetAttrVariable(self, name)  # nn.Module's own method: call_method below handles it
        source = AttrSource(self.source, name) if self.source is not None else None
        for table in ("_parameters", "_buffers", "_modules"):
            entries = m.__dict__.get(table, {})
            if name in entries:
                value = entries[name]
                if value is None:
                    return ConstantVariable(None)
                if source is None:
                    unimplemented(f"attribute {name!r} of a module with no source")
                return VariableBuilder(tx, source)(value)
        from .misc import lookup_python_attr

        return lookup_python_attr(tx, self, m, name)  # instance dict, then class (as for any object)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if _has_hooks(self.value):
            unimplemented(f"{type(self.value).__name__} has hooks")
        forward = inspect.getattr_static(type(self.value), "forward", None)
        if not inspect.isfunction(forward):
            unimplemented(f"{type(self.value).__name__}.forward is not a Python function")
        from .functions import UserMethodVariable

        return UserMethodVariable(forward, self).call_function(tx, args, kwargs)

    def _children(self, tx) -> list:
        m = self.value
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)):
            return [self._child(tx, i, c) for i, c in enumerate(m)]
        if isinstance(m, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in m.keys()]
        if isinstance(m, (torch.nn.ParameterList,)):
            return [self._child(tx, i, p) for i, p in enumerate(m)]
        unimplemented(f"iterating over {type(m).__name__}")

    def unpack_var_sequence(self, tx) -> list:
        return self._children(tx)

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
            if isinstance(key, slice) and isinstance(m, torch.nn.ModuleList):
                children = [self._child(tx, i, m[i]) for i in range(len(m))[key]]
                return ModuleListSliceVariable(children, parent=self, key=key)
            if isinstance(key, slice):
                unimplemented("slicing a module container")
            if key < 0:
                key += len(m)
            return self._child(tx, key, m[key])
        if name in ("__contains__",) and isinstance(m, torch.nn.ModuleDict):
            return ConstantVariable(args[0].as_python_constant() in m)
        if name in ("children", "modules"):
            items = [self._child(tx, k, c) for k, c in m.named_children()]
            if name == "modules":
                items = [self] + items
            return ListVariable(items)
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
        from .builder import VariableBuilder
        from .lists import ListIteratorVariable

        if args or kwargs or self.source is None:
            unimplemented(f"Module.{name}() with arguments or without a source")
        kind = "parameters" if "param" in name else "buffers"
        items = []
        for qualname, tensor in getattr(self.value, f"named_{kind}")():
            source = self.source
            for part in qualname.split("."):
                source = AttrSource(source, part)
            var = VariableBuilder(tx, source)(tensor)
            items.append(TupleVariable([ConstantVariable(qualname), var]) if name.startswith("named") else var)
        return ListIteratorVariable(items)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        return codegen.constant_expr(self.value)

    def as_python_constant(self) -> Any:
        unimplemented("a module is not a constant")


__all__ = ["NNModuleVariable", "Any"]


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
        unimplemented("a slice of a ModuleList is not a constant")

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.parent)}[{codegen.constant_expr(self.key)}]"
