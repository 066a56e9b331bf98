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
import sys
import types
from typing import Any

import torch

from minidynamo import _torch_private as _private
from minidynamo._torch_private import TENSOR_BASE, TORCH_CHECK_FNS
from minidynamo.trace_rules import is_library_module

from ..exc import unimplemented
from .. import graph_break_registry as gb
from ..source import AttrSource
from .base import VariableTracker
from .constant import ConstantVariable

# Torch callables that only look at their (constant) arguments: fold them.
CONSTANT_FOLD = {
    torch.device, torch.Size, torch.finfo, torch.iinfo, torch.is_floating_point, torch.is_complex, torch.is_tensor,
    torch.promote_types, torch.result_type, torch.can_cast,
}
# Asked while tracing, these answer "yes, compiling" (Dynamo folds them the same way), so
# library code takes its compile-friendly path (transformers: is_torchdynamo_compiling()).
COMPILING = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
             torch.compiler.is_exporting: False}


def _fns(*names: str) -> set:
    """The torch callables of these dotted names that this torch has."""
    import operator

    out = set()
    for name in names:
        try:
            out.add(operator.attrgetter(name)(torch))
        except AttributeError:
            pass
    return out


# Note [A folded torch result is guarded or breaks]
#     ``torch.is_grad_enabled()`` has no tensor argument and returns a bool: the trace
#     folds it into a constant, so the entry is only valid while it would return the
#     same. These read the global state that every entry guards (Note [Global state
#     is one guard], guards.py), so they fold safely. The next ones are fixed for the
#     life of the process (torch folds them unguarded too, ``constant_fold_functions``
#     in torch/_dynamo/variables/torch.py). Any other torch callable that returns a
#     non-tensor without reading a tensor (``torch.get_num_threads()``,
#     ``torch.initial_seed()``) depends on state no guard covers: a graph break, so
#     it runs eagerly on every call, never baked in.
FOLD_UNDER_GLOBAL_STATE = _fns(
    "is_grad_enabled", "is_inference_mode_enabled", "get_default_dtype", "is_autocast_enabled", "get_autocast_dtype",
    "is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype", "_C._is_any_autocast_enabled",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
)
PROCESS_CONSTANTS = _fns(
    "cuda.is_available", "cuda.device_count", "accelerator.is_available", "xpu.is_available",
    "distributed.is_available", "backends.mps.is_available", "_C._get_privateuse1_backend_name",
    "nn.functional._Reduction.get_enum", "_utils._get_device_index", "_assert",
    "jit.is_tracing", "jit.is_scripting", "_C._get_tracing_state",  # never under torch.jit while compiled
)
CONSTANT_FOLD |= FOLD_UNDER_GLOBAL_STATE | PROCESS_CONSTANTS
# Note [A call kept in the graph for its effect]
#     ``torch._C._log_api_usage_once("python.nn_module")`` (every ``nn.Module.__init__``,
#     so also the new ModuleList of ``layers[:n]``) returns None and changes no state a trace
#     reads. Torch lists it among its in-graph functions (torch/_dynamo/trace_rules.py
#     ``torch_c_binding_in_graph_functions``): one ``call_function`` node, counted by
#     ``explain``'s ``op_count``. Ours records the same node, never a graph break.
RECORDED_FOR_EFFECT = _fns("_C._log_api_usage_once")


# Note [torch.seed() is a node with a constant result]
#     ``torch.seed()`` reseeds the default generator and returns the new seed. Torch lists
#     ``torch.random.seed`` among its in-graph functions (torch/_dynamo/trace_rules.py
#     ``torch_non_c_binding_in_graph_functions``): the call is a node of the graph, so every
#     run of the graph reseeds, and ``wrap_fx_proxy_cls`` (torch/_dynamo/variables/builder.py)
#     returns its int result as a ``ConstantVariable`` (``torch.seed`` is on its list of
#     int-returning targets): the value seen while tracing is baked in. Ours does the same.
RECORDED_WITH_CONSTANT_RESULT = _fns("seed", "random.seed")


def record_for_effect(tx, fn, *args, **kwargs) -> None:
    """One graph node calling ``fn`` with constant arguments, its result unused (Note [A call kept ...])."""
    tx.output.create_proxy("call_function", fn, args, kwargs)


def record_module_init(tx) -> None:
    """What ``nn.Module.__init__`` leaves in torch's graph: ``_log_api_usage_once("python.nn_module")``."""
    for fn in RECORDED_FOR_EFFECT:
        record_for_effect(tx, fn, "python.nn_module")


# Names of torch callables that change global state (torch.set_num_threads): a graph break before they run.
_STATE_SETTER_PREFIXES = ("set_", "use_", "manual_seed", "seed", "_set_")

# Torch callables with global side effects: a graph break, as in Dynamo.
BREAK = {
    torch.manual_seed: "torch.manual_seed changes the global RNG state",
    torch.set_grad_enabled: "torch.set_grad_enabled changes global autograd state",
    torch.set_default_dtype: "torch.set_default_dtype changes global state",
    torch.save: "torch.save does I/O",
    torch.load: "torch.load does I/O",
}
# Note [The RNG state is read and written eagerly]
#     ``s = torch.get_rng_state(); a = torch.rand(3); torch.set_rng_state(s)`` reads and
#     rewinds the generator between two draws. Torch 2.13 marks these functions skipped
#     (``SkipFunctionVariable`` in ``manual_torch_name_rule_map``, torch/_dynamo/trace_rules.py):
#     calling one is a graph break ("Attempted to call function marked as skipped"), so
#     it runs eagerly between the graphs and the draws are eager's. Ours breaks the same.
for _name in ("get_rng_state", "set_rng_state", "cuda.get_rng_state", "cuda.set_rng_state", "xpu.get_rng_state",
              "xpu.set_rng_state", "random.get_rng_state", "random.set_rng_state"):
    for _fn in _fns(_name):
        BREAK[_fn] = (f"Attempted to call function marked as skipped: torch.{_name} reads or writes the global RNG "
                      "state (torch/_dynamo/trace_rules.py marks it SkipFunctionVariable)")

# ``nn.TransformerEncoder``'s sparsity fast path (eval, no grad, a padding mask, ``mask_check=False``)
# packs the batch into a nested tensor. Torch's trace rules do not list these builtins, so calling
# one is a skipped function there (GB0007, "Dynamo does not know how to trace the builtin"), at the
# library's line; ours breaks the same, before a fake value is asked of an op with no Meta kernel.
for _name in ("_nested_tensor_from_mask", "_nested_tensor_from_mask_left_aligned"):
    for _fn in _fns(_name):
        BREAK[_fn] = (f"Attempted to call function marked as skipped: Dynamo does not know how to trace the builtin "
                      f"`torch._VariableFunctionsClass.{_name}` (not among torch/_dynamo/trace_rules.py's in-graph "
                      "functions)")


def _graph_break_fns() -> tuple:
    """``torch._dynamo.graph_break``, once torch._dynamo is imported; before, no user code can hold it.

    Importing torch._dynamo costs seconds (sympy, the whole of real Dynamo): a first
    compile must not pay that to recognise one function its code does not call.
    """
    if "torch._dynamo" not in sys.modules:
        return ()
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
        from .tensor import TensorVariable

        fn = self.value
        from .higher_order_ops import higher_order_handler

        if fn in TORCH_CHECK_FNS:  # facts about unbacked symbols (unbacked.py)
            from .unbacked import call_check

            return call_check(tx, fn, list(args), dict(kwargs))
        handler = higher_order_handler(fn)
        if handler is not None:  # torch.cond, checkpoint: subgraphs and one node (higher_order_ops.py)
            return handler(tx, list(args), dict(kwargs))
        if is_tensor_method(fn):  # Note [An unbound Tensor method is the method call]
            if args and isinstance(args[0], TensorVariable):
                return args[0].call_method(tx, fn.__name__, list(args[1:]), kwargs)
            unimplemented(f"torch.Tensor.{fn.__name__} called without a tensor as its first argument "
                          f"({args[0] if args else 'no arguments'})", gb_id=gb.UNSUPPORTED_FUNCTION)
        if fn in _graph_break_fns():
            unimplemented("torch._dynamo.graph_break() asks for a graph break", gb_id=gb.GRAPH_BREAK_CALL)
        if fn is torch.from_numpy:  # an ndarray of the trace is a tensor already (variables/numpy.py)
            from minidynamo import config

            if not config.trace_numpy:
                unimplemented("Attempted to call `torch.from_numpy` with config `minidynamo.config.trace_numpy` set "
                              "to `False`.", "set minidynamo.config.trace_numpy = True", gb_id="GB0231")
            return tx.wrap_fx_proxy("call_function", torch.as_tensor, tuple(a.as_proxy() for a in args), {})
        if fn in BREAK:
            unimplemented(BREAK[fn], gb_id=gb.SKIPPED_FUNCTION, context=f"torch.{fn.__name__}")
        if fn in COMPILING:
            return tx.wrap_constant_result(COMPILING[fn])
        if getattr(fn, "__module__", None) == "torch._dynamo.external_utils" and \
                getattr(fn, "__qualname__", None) == "is_compiling":
            return tx.wrap_constant_result(True)  # torch._dynamo.is_compiling(), the older name: folded as well
        if fn in RECORDED_FOR_EFFECT and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            record_for_effect(tx, fn, *[a.as_python_constant() for a in args],
                              **{k: v.as_python_constant() for k, v in kwargs.items()})
            return ConstantVariable(None)
        if fn in RECORDED_WITH_CONSTANT_RESULT and not args and not kwargs:  # Note [torch.seed() is a node ...]
            proxy = tx.output.create_proxy("call_function", fn, (), {})
            proxy.node.meta["example_value"] = value = fn()
            return ConstantVariable(value)
        name = getattr(fn, "__name__", "") or ""
        if name.startswith(_STATE_SETTER_PREFIXES) and not _reads_tensor(args, kwargs):
            unimplemented(f"torch.{name} changes global state", "call it outside the compiled function",
                          gb_id=gb.SKIPPED_FUNCTION)
        const_args = all(a.is_python_constant() for a in args) and all(v.is_python_constant() for v in kwargs.values())
        if fn in CONSTANT_FOLD or (const_args and fn in (torch.is_tensor,)):
            if not const_args and fn in (torch.is_tensor,):
                return tx.wrap_constant_result(isinstance(args[0], TensorVariable))
            if const_args:
                return tx.wrap_constant_result(
                    fn(*[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
                )
        if fn is torch.jit.annotate and len(args) == 2 and not kwargs:
            return args[1]  # a type hint for TorchScript; in Python it returns its value
        if fn is torch.is_tensor:
            return tx.wrap_constant_result(isinstance(args[0], TensorVariable))
        if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
            unimplemented(f"constructing {fn.__name__} inside the compiled function", gb_id=gb.UNSUPPORTED_FUNCTION)
        if fn is torch.tensor and len(args) == 1 and set(kwargs) <= {"dtype", "device"} \
                and _symbolic_data(args[0]) is not None:
            # Note [torch.tensor of a symbolic size]: ``torch.tensor(x.size(0))``, ``torch.tensor([s0, 3])``
            # or ``torch.tensor(x.shape)`` keep the sizes symbolic, as torch does by tracing
            # ``torch._refs.tensor`` (handle_torch_tensor in torch/_dynamo/variables/torch.py), whose
            # ``_recursive_build`` makes each number a ``torch.scalar_tensor`` and stacks them; ours
            # records the same nodes, with the dtype ``_infer_scalar_type`` gives (int64 for ints,
            # the default dtype once a float is among them, bool for bools only).
            dtype = kwargs.get("dtype")
            dtype = dtype.as_python_constant() if dtype is not None else _symbolic_data(args[0])
            device = kwargs.get("device")
            return _tensor_from_data(tx, args[0], dtype, device)
        device = _default_device()
        if device is not None and fn in _private.default_device_constructors() and (
                "device" not in kwargs or (kwargs["device"].is_python_constant()
                                           and kwargs["device"].as_python_constant() is None)):
            kwargs = {**kwargs, "device": ConstantVariable(device)}  # Note [The default device is a mode's work]
        pargs = tuple(a.as_proxy() for a in args)
        pkw = {k: v.as_proxy() for k, v in kwargs.items()}
        result = tx.wrap_fx_proxy("call_function", fn, pargs, pkw)
        if not _has_tensor(result) and not _reads_tensor(args, kwargs):  # Note [A folded torch result is ...]
            unimplemented(f"torch.{name or fn}() returned a non-tensor ({result!r:.60}) that depends on state no "
                          "guard covers", "call it outside the compiled function and pass the value in",
                          gb_id=gb.UNSUPPORTED_FUNCTION)
        return result


# Note [The default device is a mode's work]
#     ``torch.set_default_device('meta')`` pushes a ``DeviceContext``, a TorchFunctionMode
#     whose ``__torch_function__`` adds ``device=meta`` to every factory call that names
#     no device (torch/utils/_device.py). Our trace computes fake values below that mode,
#     so it does the mode's work itself: the graph's ``torch.ones(2)`` becomes
#     ``torch.ones(2, device=device(type='meta'))``, as torch's Dynamo traces the mode.
#     The entry's TORCH_FUNCTION_STATE and DEFAULT_DEVICE guards (guards.py) keep it to
#     calls under the same default device.
def _default_device():
    """``torch.utils._device.CURRENT_DEVICE`` (a torch.device) while a default device is set, else None."""
    module = sys.modules.get("torch.utils._device")
    current = getattr(module, "CURRENT_DEVICE", None)
    return None if current is None else torch.device(current)


def _symbolic_data(var: VariableTracker):
    """The dtype ``torch.tensor(var)`` infers, when ``var`` is a number, a list or a tuple of them (nested)
    holding a symbolic one; else None (the call is traced as it is)."""
    from .lists import ListVariable, TupleVariable
    from .sym_node import SymNodeVariable

    kinds, symbolic = set(), [False]

    def walk(v) -> bool:
        if isinstance(v, SymNodeVariable):
            symbolic[0] = True
            kinds.add(v.python_type())
            return True
        if isinstance(v, (ListVariable, TupleVariable)):
            return bool(v.items) and all(walk(i) for i in v.items)
        if v.is_python_constant() and type(v.as_python_constant()) in (int, float, bool):
            kinds.add(type(v.as_python_constant()))
            return True
        return False

    if not walk(var) or not symbolic[0]:
        return None
    if float in kinds:
        return torch.get_default_dtype()
    return torch.bool if kinds == {bool} else torch.int64


def _tensor_from_data(tx, var: VariableTracker, dtype, device) -> VariableTracker:
    """``torch._refs._recursive_build``: a number is ``scalar_tensor(n, dtype=...)``, a list the stack of its items."""
    from .lists import ListVariable, TupleVariable

    if isinstance(var, (ListVariable, TupleVariable)):
        items = ListVariable([_tensor_from_data(tx, v, dtype, device) for v in var.items])
        return TorchInGraphFunctionVariable(torch.stack).call_function(tx, [items], {})
    kwargs = {"dtype": ConstantVariable(dtype)}
    if device is not None:
        kwargs["device"] = device
    return TorchInGraphFunctionVariable(torch.scalar_tensor).call_function(tx, [var], kwargs)


def _has_tensor(var: VariableTracker) -> bool:
    from .tensor import TensorVariable

    if isinstance(var, TensorVariable):
        return True
    return any(_has_tensor(v) for v in getattr(var, "items", ()) if isinstance(v, VariableTracker))


def _reads_tensor(args: list, kwargs: dict) -> bool:
    return any(_has_tensor(a) for a in [*args, *kwargs.values()])


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
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None:
            return pending
        if not hasattr(self.value, name):
            unimplemented(f"module {self.value.__name__} has no attribute {name!r}", gb_id=gb.OBSERVED_EXCEPTION)
        attr = getattr(self.value, name)
        if self.source is not None and not is_library_module(self.value):
            return tx.variable_builder(AttrSource(self.source, name))(attr)
        if _is_backend_flag(self.value, attr):
            # Note [torch.backends flags are guarded]
            #     ``torch.backends.cudnn.enabled``, ``.benchmark``, ``torch.backends.mkldnn.enabled``...
            #     are process-wide switches a user flips between calls. Read as a constant,
            #     each is guarded by name (``torch.backends.cudnn.enabled is True``), so a
            #     change recompiles instead of running a trace that folded the old value.
            expr = f"{self.value.__name__}.{name}"
            tx.output.guards.add(None, "BACKEND_FLAG", f"{expr} {'is' if attr in (True, False, None) else '=='} {attr!r}",
                                 "the trace read this backend flag", expr)
            return ConstantVariable(attr)
        var = tx.wrap_sourceless(attr)
        if type(var).__name__ == "UserDefinedObjectVariable" and not isinstance(attr, types.MethodType) \
                and getattr(sys.modules.get(self.value.__name__), name, None) is attr:
            # Note [A library module's object is read again at run time]: ``sys.stdout``
            var.module_attr = (self.value.__name__, name)
        return var

    def reconstruct(self, codegen) -> str:
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"PythonModuleVariable({self.value.__name__})"


def _is_backend_flag(module: types.ModuleType, value: Any) -> bool:
    """A switch of ``torch.backends.*`` (Note [torch.backends flags are guarded]): a bool, int, str or None."""
    name = getattr(module, "__name__", "") or ""
    return name.startswith("torch.backends.") and (
        value is None or type(value) in (bool, int, str))


_OP_TYPES = (type(torch.ops.aten.add), type(torch.ops.aten.add.Tensor))


_APPLY_OF: dict = {}


def autograd_function_apply(cls: type):
    """``cls.apply`` of a custom ``torch.autograd.Function``, as a graph node target.

    Note [A custom autograd.Function in the graph]
        ``GeLUFunction.apply(x)`` (transformers' Bloom) is a classmethod bound anew at
        each lookup, and fx prints a target from ``torch`` by its dotted name, which for
        it is ``torch.autograd.function.apply``: not a name that exists. So the node
        calls a function of ours that calls ``cls.apply``, one per class (fx keeps it
        among the graph's globals). The eager backend then runs the user's forward and
        backward as eager does; AOTAutograd traces through the call, backward included.
        Dynamo records the same call as its ``autograd_function_apply`` higher-order op.
        The node is made only where ``forward`` needs a gradient and its speculation traces
        (Note [autograd.Function.apply is speculated, then falls back], autograd_function.py).
    """
    fn = _APPLY_OF.get(cls)
    if fn is None:
        def apply(*args, **kwargs):
            return cls.apply(*args, **kwargs)

        apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
        fn = _APPLY_OF[cls] = apply
    return fn


# Note [An unbound Tensor method is the method call]
#     ``torch.Tensor.sin(x)`` reads the C method descriptor ``sin`` off the class and calls
#     it with the tensor first: the same call as ``x.sin()``. The descriptor has no
#     ``__module__`` (it belongs to ``torch._C.TensorBase``), so it is recognised by its
#     ``__objclass__``; the call becomes ``x``'s method call, one ``call_method`` node, as
#     torch does (``TorchInGraphFunctionVariable.is_tensor_method`` /
#     ``call_tensor_method`` in torch/_dynamo/variables/torch.py). Tensor methods written
#     in Python (``Tensor.split``, in torch/_tensor.py) are ordinary torch functions.
def is_tensor_method(value: Any) -> bool:
    """A C-level method of ``torch.Tensor`` reached through the class (``torch.Tensor.add``)."""
    return isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) \
        and getattr(value, "__objclass__", None) is TENSOR_BASE


# Note [Some torch functions are traced through]
#     Torch's trace rules inline the Python functions of ``torch.nn.functional`` that its
#     in-graph list does not name (``MOD_INLINELIST`` in torch/_dynamo/trace_rules.py), and
#     ``torch.backends.mha.get_fastpath_enabled`` is a ``UserFunctionVariable`` there
#     (``manual_torch_name_rule_map``). ``nn.TransformerEncoder.forward`` calls three of
#     them before any tensor op; recorded whole they return ``None`` or a bool, which is
#     a graph break, so ours traces through these as torch does.
INLINED = _fns("nn.functional._canonical_mask", "nn.functional._none_or_dtype", "backends.mha.get_fastpath_enabled")


def is_torch_callable(value: Any) -> bool:
    if any(value is fn for fn in INLINED):
        return False
    if is_tensor_method(value):
        return True
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
