"""The torch internals minidynamo builds on: pytrees, dispatcher switches, op entry points.

Place in the pipeline: under every stage; part of the seam ``minidynamo._torch_private``
(its ``__init__`` says the rule and re-exports every name). What is here, minidynamo
*uses* (a few dispatcher readers kept in the same table also serve chapter 07 as oracles);
the real torch run to compare against is in ``oracles.py``. The sections follow the
pipeline, in chapter order. Mirrors no single torch file: each name says which torch
internal it is (``torch.utils._pytree``, ``torch._C``'s dispatcher bindings,
``torch.fx._lazy_graph_module``...).
"""

from __future__ import annotations

import functools
import sys

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import SUPPORTED_NODES, tree_flatten, tree_unflatten
from torch.utils._pytree import tree_map as _torch_tree_map
from torch.utils._python_dispatch import TorchDispatchMode  # the base class of every dispatch mode of ours


# --- shared: pytrees and graph modules -------------------------------------------------

# torch.utils._pytree: flatten nested containers of tensors (the symbolic interpreter's
# fake values, functionalization, make_fx and aot_function's flat calling convention).
# Imported above: SUPPORTED_NODES, tree_flatten, tree_unflatten.

_CONTAINERS = (tuple, list, dict)


def _plain(tree, depth: int = 0) -> bool:
    """Only exact tuples, lists and dicts over leaves (a leaf: no container, no registered node)."""
    t = type(tree)
    if t is tuple or t is list or t is dict:
        if depth > 8:
            return False  # deep trees take torch's path
        return all(_plain(x, depth + 1) for x in (tree.values() if t is dict else tree))
    return not isinstance(tree, _CONTAINERS) and t not in SUPPORTED_NODES


def _map_plain(fn, tree):
    t = type(tree)
    if t is tuple or t is list:
        return t([_map_plain(fn, x) for x in tree])
    if t is dict:
        return {k: _map_plain(fn, v) for k, v in tree.items()}
    return fn(tree)


def tree_map(fn, tree):
    """torch.utils._pytree.tree_map (used), with a fast path for what most ops receive: leaves in
    plain tuples, lists and dicts (``conv``'s ``stride=[2, 2]`` included), mapped depth first
    without building a TreeSpec (the warm compile calls it three times per op while
    functionalizing). A leaf here is anything neither a tuple, list or dict nor a registered
    pytree node; the structure is checked whole before ``fn`` runs once on any leaf, so a tree
    that takes torch's path (a namedtuple, torch.Size, an OrderedDict) has ``fn`` called once per
    leaf there, in torch's order."""
    if _plain(tree):
        return _map_plain(fn, tree)
    return _torch_tree_map(fn, tree)


def lazy_graph_module(root, graph, class_name: str = "GraphModule"):
    """torch.fx._lazy_graph_module._LazyGraphModule (used): an ``fx.GraphModule`` that writes and
    compiles its Python code when first called or read (``.code``, ``print``), not when built,
    as torch's Dynamo and AOTAutograd make theirs (Note [Graph modules compile their code lazily])."""
    return _lazy_graph_module_class()(root, graph, class_name)


@functools.cache
def _lazy_graph_module_class():
    """``_LazyGraphModule`` whose first run calls the code it just wrote, not ``self(...)``.

    torch's ``_lazy_forward`` writes the code, then calls ``self(*args)``: through
    ``nn.Module.__call__``, so a global forward hook (``register_module_forward_hook``)
    fired on the graph module itself at its first run, and on no later run. Ours calls
    the written ``forward`` directly, as every later call does.
    """
    from torch.fx._lazy_graph_module import _LazyGraphModule

    class _LazyRunGraphModule(_LazyGraphModule):
        def _lazy_forward(self, *args, **kwargs):
            # real_recompile, as torch's: writes the code only while forward is still this method.
            # A backend (``eager``: ``return gm.forward``) keeps this bound method and calls it on
            # every run; writing and compiling the code each time cost 300 us per call.
            self.real_recompile()
            return self.forward(*args, **kwargs)  # the generated code now

        forward = _lazy_forward

    return _LazyRunGraphModule


# --- the symbolic interpreter (our Dynamo), chapters 03-05 and 15 ----------------------


@functools.lru_cache(maxsize=1)
def graph_break_registry() -> dict:
    """torch/_dynamo/graph_break_registry.json of the installed torch, as torch loads it.

    ``{"GB0059": [{"Gb_type": ..., "Context": ..., "Explanation": ..., "Hints": [...]}, ...]}``,
    the newest wording of each id first (torch/_dynamo/exc.py ``_load_gb_type_to_gb_id_map``
    reads the same file). Found beside torch's ``_dynamo`` package without importing it;
    ``{}`` when this torch ships no registry.
    """
    import json
    from pathlib import Path

    path = Path(torch.__file__).parent / "_dynamo" / "graph_break_registry.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def torch_numpy():
    """``torch._numpy``: torch's NumPy written on tensors (``ndarray``, the ``np`` functions,
    ``random``, ``linalg``, ``fft``). A traced NumPy call runs it in the graph
    (symbolic/variables/numpy.py): it is the library the graph calls, not a stage we rebuild."""
    import torch._numpy as tnp

    return tnp


def dynamo_graph_break_fn():
    """torch._dynamo.graph_break: user code may call it; our interpreter breaks there too."""
    import torch._dynamo

    return torch._dynamo.graph_break


def register_hook_op():
    """``torch.ops.higher_order.register_hook`` (torch/_higher_order_ops/register_hook.py): the node torch's
    Dynamo records for ``register_hook`` on an intermediate tensor (``_method_register_hook``)."""
    import torch._higher_order_ops.register_hook as register_hook

    return register_hook.register_hook_op


def inference_mode_enter_exit() -> tuple:
    """``torch.autograd.grad_mode._enter_inference_mode`` and ``_exit_inference_mode``: the two calls
    Dynamo records for ``with torch.inference_mode()`` (torch/_dynamo/variables/ctx_manager.py
    ``InferenceModeVariable``)."""
    from torch.autograd import grad_mode

    return grad_mode._enter_inference_mode, grad_mode._exit_inference_mode  # noqa: SLF001


def autocast_enter_exit() -> tuple:
    """``torch.amp._enter_autocast`` and ``_exit_autocast``: the two calls Dynamo records for
    ``with torch.autocast(...)`` (torch/_dynamo/variables/ctx_manager.py ``AutocastModeVariable``)."""
    return torch.amp._enter_autocast, torch.amp._exit_autocast  # noqa: SLF001


def sym_sqrt():
    """``torch._sym_sqrt``: the graph target Dynamo records for ``math.sqrt`` of a SymInt (dynamic shapes)."""
    return torch._sym_sqrt


def assert_async():
    """``torch._assert_async``: the graph target torch's Dynamo records for ``assert tensor``
    (``generic_jump`` with ``config.rewrite_assert_with_torch_assert``, torch/_dynamo/symbolic_convert.py)."""
    return torch._assert_async


# The global state torch's GlobalStateGuard keeps and its torch-function-mode guards read
# (torch/csrc/dynamo/guards.cpp GlobalStateGuard, torch/_dynamo/guards.py TORCH_FUNCTION_STATE /
# DEFAULT_DEVICE): what our GLOBAL_STATE guards read (symbolic/guards.py).
def cublas_reduced_precision() -> tuple:
    """``torch._C``'s cuBLAS fp16 and bf16 reduced-precision-reduction settings, each (allow, allow_splitk)."""
    return (torch._C._get_cublas_allow_fp16_reduced_precision_reduction(),
            torch._C._get_cublas_allow_bf16_reduced_precision_reduction())


def torch_function_state() -> tuple:
    """(torch function on, all torch function off): ``DisableTorchFunction(Subclass)`` change these."""
    return torch._C._is_torch_function_enabled(), torch._C._is_torch_function_all_disabled()


len_torch_function_stack = torch._C._len_torch_function_stack  # how many TorchFunctionModes are pushed


def torch_function_mode_types() -> tuple:
    """The types of the TorchFunctionModes on the stack, bottom first (torch.overrides' mode stack)."""
    return tuple(type(torch._C._get_function_stack_at(i)) for i in range(torch._C._len_torch_function_stack()))


def default_device_module():
    """``torch.utils._device``, whose ``CURRENT_DEVICE`` ``torch.set_default_device`` sets."""
    import torch.utils._device

    return torch.utils._device


def default_device_constructors() -> set:
    """The factory functions ``DeviceContext.__torch_function__`` gives the default device (torch.utils._device)."""
    return default_device_module()._device_constructors()


# --- fake tensors, chapter 06 ----------------------------------------------------------
# minidynamo.fake runs ATen ops "inside the kernel": Python dispatch off, the Meta
# key forced into the TLS include set, so a FakeTensor (whose backend keys claim
# cpu or cuda) reaches the Meta kernels. These are dispatcher switches, not the
# real FakeTensor; the real one uses the same switches (in_kernel_invocation_manager).
# StorageWeakRef (imported above): a weak key for a storage, for the converter's memo.

disabled_torch_function_impl = torch._C._disabled_torch_function_impl
DisableTorchDispatch = torch._C._DisableTorchDispatch
PreserveDispatchKeyGuard = torch._C._PreserveDispatchKeyGuard
set_meta_in_tls_dispatch_include = torch._C._set_meta_in_tls_dispatch_include
unsafe_set_version_counter = torch._C._autograd._unsafe_set_version_counter


# Note [torch._dynamo on the first meta kernel]
#     torch wraps its Python references (torch._refs, the elementwise decompositions,
#     the Python meta kernels they call) in ``torch._disable_dynamo`` (torch/_compile.py).
#     The wrapper imports torch._dynamo the first time each wrapped function runs, to
#     build ``torch._dynamo.disable(fn)`` and cache it on ``fn.__dynamo_disable``: the
#     first addmm or sum on a FakeTensor cost a learner the whole real Dynamo (about
#     a second; the CPython frame hook of ours never needs it). Until torch._dynamo is
#     in the process no frame hook of torch's can be installed, so the disabling is a
#     no-op. ``defer_dynamo_in_meta_kernels`` fills that cache ahead with
#     ``_DisableWhenDynamoLoaded``: it calls ``fn`` directly while torch._dynamo is not
#     imported and, once it is (a real ``torch.compile`` in the same notebook), builds
#     the real ``disable(fn)``, caches it where torch would and calls it, so torch
#     behaves from then on as if the cache had never been filled. Which functions: every
#     ``_disable_dynamo`` wrapper reachable from the decomposition tables and torch._refs
#     through closures and ``__wrapped__`` (the Meta kernels run nothing else).
#     Not avoidable this way, and measured in the benchmark's import breakdown (Note
#     [Import time of a first compile] in bench/imports.py): the first Python meta kernel
#     imports sympy and torch's ShapeEnv (``torch._check`` imports
#     torch.fx.experimental.symbolic_shapes on every call). torch.distributed.tensor, which
#     torch's C++ subclass dispatch imports to check for DTensor, is kept out by a
#     torch_dispatch rule (Note [The device question has a torch_dispatch rule]).


class _DisableWhenDynamoLoaded:
    """``fn.__dynamo_disable`` until torch._dynamo is imported (Note [torch._dynamo on the first meta kernel])."""

    __slots__ = ("fn", "recursive")

    def __init__(self, fn, recursive: bool):
        self.fn, self.recursive = fn, recursive

    def __call__(self, *args, **kwargs):
        disable = getattr(sys.modules.get("torch._dynamo"), "disable", None)
        if disable is None:  # no torch._dynamo (or half imported): there is nothing to disable
            return self.fn(*args, **kwargs)
        real = disable(self.fn, self.recursive, wrapping=False)
        setattr(self.fn, "__dynamo_disable", real)  # where torch/_compile.py caches it (setattr: no name mangling)
        return real(*args, **kwargs)


_dynamo_deferred = False


def defer_dynamo_in_meta_kernels() -> None:
    """Keep torch's meta kernels from importing torch._dynamo (Note [torch._dynamo on the first meta kernel])."""
    global _dynamo_deferred
    if _dynamo_deferred:
        return
    _dynamo_deferred = True
    if "torch._dynamo" in sys.modules:
        return
    import functools
    import types

    import torch._compile
    import torch._decomp

    inner = torch._compile._disable_dynamo(lambda: None).__code__
    if inner.co_freevars != ("fn", "recursive"):  # another torch: leave it alone
        return
    roots = [f for table in torch._decomp.global_decomposition_table.values() for f in table.values()]
    roots += [f for name, m in list(sys.modules.items()) if m is not None and name.startswith("torch._refs")
              for f in vars(m).values() if callable(f)]
    seen: set[int] = set()
    while roots:
        f = roots.pop()
        if type(f) is not types.FunctionType:
            f = f.func if isinstance(f, functools.partial) else getattr(f, "__wrapped__", None)
            if type(f) is not types.FunctionType:
                continue
        if id(f) in seen:
            continue
        seen.add(id(f))
        cells = f.__closure__ or ()
        if f.__code__ is inner:
            fn, recursive = (c.cell_contents for c in cells)
            if "__dynamo_disable" not in getattr(fn, "__dict__", {}):
                setattr(fn, "__dynamo_disable", _DisableWhenDynamoLoaded(fn, recursive))
        if "__wrapped__" in f.__dict__:
            roots.append(f.__dict__["__wrapped__"])
        for c in cells:
            try:
                v = c.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(v):
                roots.append(v)


# --- the dispatcher, chapter 07 ----------------------------------------------------------
# The dispatcher's own objects and tables (torch._C), used by minidynamo.dispatch to
# register probe kernels and redispatch, and by tests/notebooks as the oracle.
# TorchDispatchMode (imported above): the Python key's modes.

DispatchKey = torch._C.DispatchKey
DispatchKeySet = torch._C.DispatchKeySet
dispatch_keys = torch._C._dispatch_keys  # oracle: a tensor's own key set
dispatch_tls_local_include_set = torch._C._dispatch_tls_local_include_set  # oracle: TLS
dispatch_tls_local_exclude_set = torch._C._dispatch_tls_local_exclude_set  # oracle: TLS
torch_dispatch_stack_len = torch._C._len_torch_dispatch_stack  # oracle: TorchDispatchModeTLS's stack length
dispatch_tls_is_dispatch_key_included = torch._C._dispatch_tls_is_dispatch_key_included  # one TLS bit
dispatch_keyset_full_after = torch._C._dispatch_keyset_full_after
after_autograd_keyset = torch._C._after_autograd_keyset
AutoDispatchBelowAutograd = torch._C._AutoDispatchBelowAutograd
ExcludeDispatchKeyGuard = torch._C._ExcludeDispatchKeyGuard
EnablePreDispatch = torch._C._EnablePreDispatch
dispatch_dump = torch._C._dispatch_dump
dispatch_dump_table = torch._C._dispatch_dump_table
dispatch_has_kernel_for_dispatch_key = torch._C._dispatch_has_kernel_for_dispatch_key
dispatch_has_computed_kernel_for_dispatch_key = torch._C._dispatch_has_computed_kernel_for_dispatch_key
dispatch_has_backend_fallback = torch._C._dispatch_has_backend_fallback
dispatch_get_all_op_names = torch._C._dispatch_get_all_op_names
# torch's C++ functionalization (the Functionalize key), shown beside our Python one
is_functional_tensor = torch._is_functional_tensor
to_functional_tensor = torch._to_functional_tensor
from_functional_tensor = torch._from_functional_tensor
enable_functionalization = torch._enable_functionalization
disable_functionalization = torch._disable_functionalization


def autograd_would_have_decomposed(func, flat_args) -> bool:
    """torch.utils._python_dispatch.autograd_would_have_decomposed (used): a CompositeImplicitAutograd
    op that reached a mode is decomposed there only if the device has no kernel of its own (make_fx)."""
    from torch.utils._python_dispatch import autograd_would_have_decomposed as would

    return would(func, flat_args)


def is_in_torch_dispatch_mode() -> bool:
    """Whether any TorchDispatchMode (user or infra: fake, proxy, functional) is active."""
    from torch.utils._python_dispatch import is_in_torch_dispatch_mode as _is_in

    return _is_in(include_infra_modes=True)


def autograd_node_created_hook(on_node):
    """A context manager: ``on_node()`` is called each time autograd creates a Node.

    For dispatch.trace: seeing the autograd kernel of an aten op run. Anomaly mode
    makes every autograd Node capture the Python stack in its constructor
    (``PyAnomalyMetadata::store_stack`` calls ``torch.fx.traceback.format_stack``);
    the generated autograd kernels create the op's Node *before* they redispatch
    below autograd. Replacing that function for the duration is therefore a report
    from inside the autograd kernel, in the order it ran. ``check_nan=False``:
    nothing else about the call changes.
    """
    import contextlib
    import warnings

    import torch.fx.traceback as fx_traceback

    @contextlib.contextmanager
    def hook():
        original = fx_traceback.format_stack

        def format_stack():
            on_node()
            return []

        fx_traceback.format_stack = format_stack
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
                with torch.autograd.detect_anomaly(check_nan=False):
                    yield
        finally:
            fx_traceback.format_stack = original

    return hook()


# --- the Python dispatcher, chapter 08 ------------------------------------------------


def enable_python_dispatcher():
    """torch._dispatch.python.enable_python_dispatcher(): dispatch through torch/_ops.py
    (sees ``py_impl`` kernels), as make_fx / AOTAutograd do while tracing."""
    from torch._dispatch.python import enable_python_dispatcher as _enable

    return _enable()


_PYTHON_DISPATCHER = torch._C.DispatchKey.PythonDispatcher


def python_dispatcher_enabled() -> bool:
    """Is the Python dispatcher on? (``enable_python_dispatcher`` puts its key in the TLS include set.)"""
    return torch._C._dispatch_tls_is_dispatch_key_included(_PYTHON_DISPATCHER)


def python_dispatcher_kernels(op) -> dict:
    """``op.py_kernels``: kernels only the Python dispatcher sees (key name -> function)."""
    return {getattr(k, "name", str(k)): fn for k, fn in op.py_kernels.items()}


def load_python_kernels() -> None:
    """Import the modules that register torch's Python kernels (py_impl Meta kernels,
    decompositions), so that what kernels_for reports does not depend on import order."""
    import torch._decomp  # noqa: F401
    import torch._meta_registrations  # noqa: F401


def clear_python_dispatch_cache(op) -> None:
    """Forget the Python dispatcher's cached kernel choices for ``op`` (an OpOverload).

    torch/_ops.py caches, per OpOverload, which kernel each dispatch key resolved to
    (``_dispatch_cache``). A torch.library registration made later does not clear it,
    so code that adds or removes kernels (our simulated fused kernels) clears it.
    """
    op._dispatch_cache.clear()


# --- functionalization and metadata (FakeTensor pass 2), chapter 09 ----------------------


def mirror_autograd_meta(src, dst) -> None:
    """torch._mirror_autograd_meta_to: give ``dst`` the requires_grad and leaf-ness of ``src``."""
    torch._mirror_autograd_meta_to(src, dst)


def mirror_conj_neg(src, dst) -> None:
    """torch._C._set_conj / _set_neg: give the wrapper ``dst`` the conjugate and negative bits of ``src``
    (torch's FunctionalTensor mirrors them through ``_extra_dispatch_keys``)."""
    if src.is_conj():
        torch._C._set_conj(dst, True)
    if src.is_neg():
        torch._C._set_neg(dst, True)


def no_dispatch():
    """torch.utils._mode_utils.no_dispatch: run an op on a wrapper's own metadata, no modes, no subclasses."""
    from torch.utils._mode_utils import no_dispatch as _nd

    return _nd()


# Higher-order operators (torch.cond, tag_activation_checkpoint) reach a mode's __torch_dispatch__ as
# one of these when the mode sets supports_higher_order_operators (aot/higher_order.py).
HigherOrderOperator = torch._ops.HigherOrderOperator
# torch._check / torch._check_is_size: facts about unbacked symbols (symbolic/variables/unbacked.py).
TORCH_CHECK_FNS = (torch._check, torch._check_is_size)
torch_check_is_size = torch._check_is_size


def disable_current_modes():
    """torch.utils._python_dispatch._disable_current_modes: every dispatch mode off for a while (a
    higher-order op's branch traced apart from the trace around it, aot/higher_order.py)."""
    from torch.utils._python_dispatch import _disable_current_modes

    return _disable_current_modes()


def pop_current_dispatch_mode_if(mode):
    """Temporarily pop ``mode`` off the dispatch mode stack if it is on top; else do nothing."""
    import contextlib

    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

    if _get_current_dispatch_mode() is mode:
        return _pop_mode_temporarily()
    return contextlib.nullcontext()


# --- the joint graph, partitioning and the runtime, chapters 10-11 ----------------------

OpOverload = torch._ops.OpOverload  # the type of torch.ops.aten.mm.default
# The Python bindings eager calls (torch.sin, F.gelu's backend, x.view): aot/graph_runner.py
# calls a graph's aten op through them when they reach the same overload (building block).
VARIABLE_FUNCTIONS = torch._C._VariableFunctions
NN_FUNCTIONS = torch._C._nn
TENSOR_BASE = torch._C.TensorBase
# The C switch under torch.set_grad_enabled (a Python class: constructing it costs ~1 us per call);
# the inference runtime wrapper flips grad mode with it (building block).
set_grad_enabled_c = torch._C._set_grad_enabled


def graph_target_to_str(graph, target) -> str:
    """fx.Graph._target_to_str: the name torch.fx gives a node for ``target`` ("mm", "add"),
    before it adds a suffix to keep names unique; make_fx names its nodes with it."""
    return graph._target_to_str(target)
