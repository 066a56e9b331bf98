"""``torch.*`` functions and Python modules while tracing.

Place in the pipeline: a call to ``torch.add``, ``torch.nn.functional.relu`` and the like
becomes one ``call_function`` node; it is not traced into. Mirrors
``torch/_dynamo/variables/torch.py`` (``TorchInGraphFunctionVariable``) and
``PythonModuleVariable`` in ``variables/misc.py``.

Note [torch functions go into the graph whole]
    Real Dynamo keeps a list of which torch callables are "in graph" (recorded as a
    node) and which are traced through (``trace_rules.py``). Ours records every
    callable that torch defines, except a short list of ones that change global state
    (those are graph breaks) and a few constant-valued ones that fold.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from ..exc import unimplemented
from ..source import AttrSource
from .base import VariableTracker

# Torch callables that only look at their (constant) arguments: fold them.
CONSTANT_FOLD = {
    torch.device, torch.Size, torch.finfo, torch.iinfo, torch.is_grad_enabled, torch.get_default_dtype,
    torch.is_floating_point, torch.is_complex, torch.is_tensor, torch.promote_types, torch.result_type,
    torch.is_inference_mode_enabled,
}
# Asked while tracing, these answer "yes, compiling" (Dynamo folds them the same way), so
# library code takes its compile-friendly path (transformers: is_torchdynamo_compiling()).
COMPILING = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
             torch.compiler.is_exporting: False}
# Torch callables with global side effects: a graph break, as in Dynamo.
BREAK = {
    torch.manual_seed: "torch.manual_seed changes the global RNG state",
    torch.set_grad_enabled: "torch.set_grad_enabled changes global autograd state",
    torch.set_default_dtype: "torch.set_default_dtype changes global state",
    torch.save: "torch.save does I/O",
    torch.load: "torch.load does I/O",
}


@functools.lru_cache(None)
def _graph_break_fns() -> tuple:
    from minidynamo._torch_private import dynamo_graph_break_fn

    return (dynamo_graph_break_fn(),)


class TorchInGraphFunctionVariable(VariableTracker):
    """A torch callable recorded as one graph node (Note [torch functions go into the graph whole])."""

    def __init__(self, value, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self) -> Any:
        return self.value

    def reconstruct(self, codegen) -> str:
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"TorchInGraphFunctionVariable({getattr(self.value, '__name__', self.value)})"

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        from .builder import wrap_constant_result, wrap_fx_proxy
        from .tensor import TensorVariable

        fn = self.value
        if fn in _graph_break_fns():
            unimplemented("torch._dynamo.graph_break() asks for a graph break")
        if fn in BREAK:
            unimplemented(BREAK[fn])
        if fn in COMPILING:
            return wrap_constant_result(COMPILING[fn])
        const_args = all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values())
        if fn in CONSTANT_FOLD or (const_args and fn in (torch.is_tensor,)):
            if not const_args and fn in (torch.is_tensor,):
                return wrap_constant_result(isinstance(args[0], TensorVariable))
            if const_args:
                return wrap_constant_result(
                    fn(*[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
                )
        if fn is torch.is_tensor:
            return wrap_constant_result(isinstance(args[0], TensorVariable))
        if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
            unimplemented(f"constructing {fn.__name__} inside the compiled function")
        pargs = tuple(a.as_proxy() for a in args)
        pkw = {k: v.as_proxy() for k, v in kwargs.items()}
        return wrap_fx_proxy(tx, "call_function", fn, pargs, pkw)


class PythonModuleVariable(VariableTracker):
    """A Python module used as a value (``torch``, ``F``, ``math``, a user module)."""

    def __init__(self, value: types.ModuleType, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return types.ModuleType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import VariableBuilder, wrap_sourceless

        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            return pending
        if not hasattr(self.value, name):
            unimplemented(f"module {self.value.__name__} has no attribute {name!r}")
        attr = getattr(self.value, name)
        if self.source is not None and not is_library_module(self.value):
            return VariableBuilder(tx, AttrSource(self.source, name))(attr)
        return wrap_sourceless(tx, attr)

    def reconstruct(self, codegen) -> str:
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"PythonModuleVariable({self.value.__name__})"


def is_library_module(module: types.ModuleType) -> bool:
    """torch, the stdlib and third-party packages: their attributes are not guarded."""
    import sys

    name = module.__name__.split(".")[0]
    return name in ("torch", "math", "operator", "functools", "itertools", "collections", "numpy", "builtins",
                    "typing", "dataclasses", "enum") or name in sys.stdlib_module_names


_OP_TYPES = (type(torch.ops.aten.add), type(torch.ops.aten.add.Tensor))


def is_torch_callable(value: Any) -> bool:
    mod = getattr(value, "__module__", None) or ""
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)) and getattr(value, "__self__", None) is not None:
        owner = getattr(value.__self__, "__name__", "") or ""
        if isinstance(owner, str) and owner.startswith("torch"):
            return True
    if isinstance(value, _OP_TYPES):
        return True
    return callable(value) and (mod.startswith("torch") and not mod.startswith("torch.nn.modules")) and not isinstance(
        value, type
    )
