"""Guards: the assumptions a compiled entry made, as readable Python checked before every call.

Place in the pipeline: the symbolic interpreter installs guards while it wraps inputs
(``variables/builder.py``) into a ``GuardSet``; ``guard_codegen.py`` compiles them into
one check function that the cache (``frame_cache.py``) calls before every call. Mirrors
``GuardBuilder`` in ``torch/_dynamo/guards.py`` (TYPE_MATCH, ID_MATCH, CONSTANT_MATCH /
EQUALS_MATCH, TENSOR_MATCH, LENGTH_CHECK, GLOBAL_STATE); the compiled
``CheckFunctionManager`` is ``guard_codegen.py``.

Note [A guard is one readable expression]
    Each guard is one Python expression over ``L`` and ``G`` (``L['x'].shape == (2, 3)``)
    with its source and the reason it exists. All guards of an entry are compiled
    once into one function (Note [Each source is read once], guard_codegen.py), so a steady-state call
    costs one Python call. Only when it says no do we evaluate the guards one by one to name
    the one that failed and show what changed. Real Dynamo builds a tree of C++ guard
    managers (``GuardManager``) for speed; TENSOR_MATCH checks dtype, device, shape,
    stride, requires_grad and dispatch keys in one C++ call. Ours runs a tensor's
    TENSOR_MATCH guards in one C++ call too (Note [TENSOR_MATCH runs in C++]), and
    its GLOBAL_STATE guards in another (Note [Global state is one guard]).
"""

from __future__ import annotations

import builtins
import enum
import math
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import torch

from minidynamo import _torch_private as _private
from minidynamo import events

from . import tensor_match
from .source import AttrSource, GetItemSource, LocalSource, Source


@dataclass
class Guard:
    """One assumption: ``expr`` must be true for the compiled entry to be reused."""

    source: Optional[Source]
    kind: str  # TYPE_MATCH, ID_MATCH, CONSTANT_MATCH, TENSOR_MATCH, LENGTH_CHECK
    expr: str
    why: str
    value_expr: str = ""  # the part of expr that shows "what changed" ("L['x'].shape")
    operands: tuple = ()  # NO_TENSOR_ALIASING: (mutated source names, all tensor source names)

    @property
    def reason(self) -> str:
        return self.why

    def __str__(self) -> str:
        return f"{self.expr:<48}  # {self.kind}: {self.why}"


# Note [A constant guard is valid Python]
#     ``repr()`` is not always Python that gives the value back: ``inf``, ``nan``,
#     ``<Mode.NONE: 'none'>`` (an enum), ``torch.Size([2])`` or ``device(type='cpu')``
#     without ``torch.`` in scope. A guard that cannot be evaluated fails on every
#     call, so the frame would recompile each time. So a constant is written as a
#     literal only when evaluating its repr gives an equal value of the same type;
#     an enum member (a singleton) is compared with ``is``, nan with ``x != x``, and
#     any other value is bound once in the guard's scope and compared with ``==``.
#     tests/test_state_changes.py checks every kind holds for the value it was traced with.
def _is_literal(value: Any) -> bool:
    try:
        again = eval(repr(value), {"__builtins__": {}})  # noqa: S307 - our own repr of a constant
    except Exception:  # noqa: BLE001
        return False
    return type(again) is type(value) and again == value


def check_not_aliased(mutated: tuple, tensors: tuple) -> bool:
    """True when each mutated tensor is passed once among ``tensors`` (which include it)."""
    if len(mutated) == len(tensors):  # every pair (Note [Distinct tensors stay distinct], guard_codegen.py)
        return len({id(t) for t in tensors}) == len(tensors)
    return all(sum(t is m for t in tensors) == 1 for m in mutated)


# The device types whose autocast state a trace depends on (torch's AutocastState; tensor_match.cpp's list).
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "ipu", "hpu", "xla", "privateuseone", "mps")


def autocast_state() -> tuple:
    """``(device_type, dtype)`` for every device type autocast is on for: ``()`` when it is off everywhere."""
    return tuple((d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES if torch.is_autocast_enabled(d))


def deterministic_algorithms() -> tuple:
    """``torch.use_deterministic_algorithms``' two flags: (on, warn_only)."""
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


# Note [The torch function mode stack is guarded]
#     ``torch.set_default_device('meta')`` pushes a ``DeviceContext`` (a TorchFunctionMode)
#     that makes ``torch.ones(3)`` a meta tensor; ``torch.set_default_device('cpu')`` later
#     keeps the mode and changes ``torch.utils._device.CURRENT_DEVICE``. A graph traced
#     without the mode has the CPU baked into its factory calls. So, as torch's
#     ``OutputGraph.init_ambient_guards`` (torch/_dynamo/output_graph.py) installs
#     TORCH_FUNCTION_STATE (the stack's mode types, ``make_torch_function_mode_stack_guard``
#     in torch/_dynamo/guards.py) and DEFAULT_DEVICE (``CURRENT_DEVICE``) on every entry,
#     every entry of ours keeps both; with no mode pushed the first is one C call,
#     ``___len_torch_function_stack() == 0``.

# Note [Global state is one guard]
#     A trace depends on state that is in no argument: grad mode decides whether
#     the graph records autograd (AOTAutograd builds a training or an inference
#     graph from it), inference mode and autocast change what every op returns,
#     the default dtype what ``torch.ones(3)`` makes, the deterministic flags which
#     kernels run; and ``torch.is_grad_enabled()`` or ``torch.get_default_dtype()``
#     read while tracing are folded into the trace as constants. So every entry
#     keeps the state it was traced under, as torch's ``GlobalStateGuard``
#     (torch/csrc/dynamo/guards.cpp) does, with its fields (cuBLAS TF32 and
#     reduced-precision reductions, the thread count, torch function on or off,
#     the autocast cache, besides the five here): readable GLOBAL_STATE guards
#     (``torch.is_grad_enabled() is True``, ...), the ones you read and the ones
#     ``first_failure`` evaluates to name what changed. On the hot path they are
#     one C++ call, ``___global_state()``, a ``GlobalState`` made at compile time
#     that compares the same fields (tensor_match.cpp); where the extension is
#     missing the five Python expressions run instead (about 8 us against 0.1 us:
#     autocast alone asks eight device types).
_GLOBAL_STATE_WHY = {
    "grad": "grad mode when traced (the graph records autograd or not)",
    "inference": "inference mode when traced",
    "autocast": "autocast when traced: the device types it is on for, with their dtype",
    "dtype": "the default dtype when traced (torch.ones(3) makes this dtype)",
    "deterministic": "torch.use_deterministic_algorithms(on, warn_only) when traced",
    "tf32": "torch.backends.cuda.matmul.allow_tf32 when traced (which cuBLAS matmul kernels run)",
    "reduced_precision": "cuBLAS fp16/bf16 reduced-precision reductions (allow, allow_splitk) when traced",
    "num_threads": "torch.get_num_threads() when traced",
    "torch_function": "torch function on / all off when traced (DisableTorchFunction(Subclass) change them)",
    "autocast_cache": "the autocast weight cache when traced",
}
_TORCH_FUNCTION_WHY = ("the TorchFunctionMode stack when traced, by type (torch.set_default_device pushes a "
                       "DeviceContext): torch's TORCH_FUNCTION_STATE guard")
_DEFAULT_DEVICE_WHY = "the default device when traced (torch.set_default_device): torch's DEFAULT_DEVICE guard"

# Names a guard expression may use besides L and G; objects matched by identity are
# added per guard set as ___obj<N>.
_BASE_SCOPE = {"torch": torch, "sys": sys, "math": math, "___check_not_aliased": check_not_aliased, "___autocast_state": autocast_state,
               "___deterministic_algorithms": deterministic_algorithms,
               "___cublas_reduced_precision": _private.cublas_reduced_precision,
               "___torch_function_state": _private.torch_function_state,
               "___len_torch_function_stack": _private.len_torch_function_stack,
               "___torch_function_mode_types": _private.torch_function_mode_types}


def _guard_event_details(source, kind: str, expr: str, why: str) -> dict[str, Any]:
    """A guard event's details, built when read (Note [Events are formatted when read], events.py)."""
    return {"source": str(source), "guard_kind": kind, "expr": expr, "why": why}


class GuardSet:
    """The guards of one entry, plus the scope their expressions need."""

    def __init__(self) -> None:
        self.guards: list[Guard] = []
        self.scope: dict[str, Any] = dict(_BASE_SCOPE)
        self._seen: set[str] = set()
        self._obj_names: dict[int, str] = {}
        self.tensor_names: dict[str, None] = {}  # TENSOR_MATCH'd sources in order, for NO_TENSOR_ALIASING
        self.duplicate_sources: set[str] = set()  # ID_MATCHed to an earlier tensor input: the same object
        self.module_sources: dict[str, bool] = {}  # a module's source -> torch.nn's own (Note [Guards in torch's order])
        self.mutated_sources: Optional[set[str]] = None  # inputs the graph writes to; None: not known, all
        # TENSOR_MATCH'd source -> (dtype, device or None for the CPU, sizes, strides or None for
        # "is_contiguous()", requires_grad): what its Python guards test, for the C++ TensorMatch
        self.tensor_specs: dict[str, tuple] = {}
        self.global_state: Optional[Any] = None  # the C++ GlobalState made by GLOBAL_STATE(), when available
        self.module_layouts: dict[str, ModuleLayout] = {}  # NN_MODULE_LAYOUT'd source -> its layout
        self._reads: dict[str, str] = {}  # source name -> read_expr(source), memoized
        self.id_matched_objs: dict[str, Any] = {}  # local name -> weakref of an ID_MATCHed module (cache_size.py)

    def name_for(self, obj: Any, hint: str = "obj") -> str:
        """A stable scope name for an object that a guard compares by identity."""
        key = id(obj)
        if key not in self._obj_names:
            clean = "".join(c if c.isalnum() else "_" for c in hint)[:30]
            name = f"___{clean}_{len(self._obj_names)}"
            self._obj_names[key] = name
            self.scope[name] = obj
        return self._obj_names[key]

    def name_for_constant(self, value: Any) -> str:
        """A scope name for a constant compared by ``==`` (a ``torch.device``): one name per value.

        ``L['x'].device == ___device_cuda_0`` compares with a device made once, at
        compile time; ``L['x'].device.type == 'cuda'`` would build a string on every
        call, and a call with 200 tensor inputs pays that 200 times.
        """
        clean = "".join(c if c.isalnum() else "_" for c in str(value))[:30]
        name = f"___{type(value).__name__}_{clean}"
        self.scope.setdefault(name, value)
        return name

    def add(self, source, kind, expr, why, value_expr="") -> None:
        if expr in self._seen:
            return
        self._seen.add(expr)
        guard = Guard(source, kind, expr, why, value_expr)
        self.guards.append(guard)
        if events.is_recording():  # str(source) walks the source's chain: only when read
            events.emit_lazy("guard", _guard_event_details, source, kind, expr, why)

    # --- the GuardBuilder methods (torch/_dynamo/guards.py) -------------------
    def GLOBAL_STATE(self) -> None:
        """The state of now, that the trace depends on (Note [Global state is one guard])."""
        dtype = str(torch.get_default_dtype())
        self.add(None, "GLOBAL_STATE", f"torch.is_grad_enabled() is {torch.is_grad_enabled()}",
                 _GLOBAL_STATE_WHY["grad"], "torch.is_grad_enabled()")
        self.add(None, "GLOBAL_STATE", f"torch.is_inference_mode_enabled() is {torch.is_inference_mode_enabled()}",
                 _GLOBAL_STATE_WHY["inference"], "torch.is_inference_mode_enabled()")
        autocast = ", ".join(f"({d!r}, {dt})" for d, dt in autocast_state())
        self.add(None, "GLOBAL_STATE", f"___autocast_state() == ({autocast}{',' if autocast else ''})",
                 _GLOBAL_STATE_WHY["autocast"], "___autocast_state()")
        self.add(None, "GLOBAL_STATE", f"torch.get_default_dtype() == {dtype}", _GLOBAL_STATE_WHY["dtype"],
                 "torch.get_default_dtype()")
        self.add(None, "GLOBAL_STATE", f"___deterministic_algorithms() == {deterministic_algorithms()!r}",
                 _GLOBAL_STATE_WHY["deterministic"], "___deterministic_algorithms()")
        # the rest of torch's GlobalStateGuard (torch/csrc/dynamo/guards.cpp): GlobalStateGuard().__getstate__() lists them
        self.add(None, "GLOBAL_STATE", f"torch.backends.cuda.matmul.allow_tf32 is {torch.backends.cuda.matmul.allow_tf32}",
                 _GLOBAL_STATE_WHY["tf32"], "torch.backends.cuda.matmul.allow_tf32")
        self.add(None, "GLOBAL_STATE", f"___cublas_reduced_precision() == {_private.cublas_reduced_precision()!r}",
                 _GLOBAL_STATE_WHY["reduced_precision"], "___cublas_reduced_precision()")
        self.add(None, "GLOBAL_STATE", f"torch.get_num_threads() == {torch.get_num_threads()}",
                 _GLOBAL_STATE_WHY["num_threads"], "torch.get_num_threads()")
        self.add(None, "GLOBAL_STATE", f"___torch_function_state() == {_private.torch_function_state()!r}",
                 _GLOBAL_STATE_WHY["torch_function"], "___torch_function_state()")
        self.add(None, "GLOBAL_STATE", f"torch.is_autocast_cache_enabled() is {torch.is_autocast_cache_enabled()}",
                 _GLOBAL_STATE_WHY["autocast_cache"], "torch.is_autocast_cache_enabled()")
        self.TORCH_FUNCTION_STATE()
        kind = tensor_match.global_state()
        self.global_state = kind() if kind is not None else None

    def TORCH_FUNCTION_STATE(self) -> None:
        """The TorchFunctionMode stack by type, and the default device (Note [The torch function mode stack is guarded])."""
        types = _private.torch_function_mode_types()
        if not types:
            self.add(None, "TORCH_FUNCTION_STATE", "___len_torch_function_stack() == 0", _TORCH_FUNCTION_WHY,
                     "___torch_function_mode_types()")
        else:
            names = ", ".join(self.name_for(t, t.__name__) for t in types)
            self.add(None, "TORCH_FUNCTION_STATE", f"___torch_function_mode_types() == ({names},)", _TORCH_FUNCTION_WHY,
                     "___torch_function_mode_types()")
        device_module = _private.default_device_module()
        self.scope["___utils_device"] = device_module
        current = device_module.CURRENT_DEVICE
        test = "___utils_device.CURRENT_DEVICE is None" if current is None else \
            f"___utils_device.CURRENT_DEVICE == {self.name_for_constant(torch.device(current))}"
        self.add(None, "DEFAULT_DEVICE", test, _DEFAULT_DEVICE_WHY, "___utils_device.CURRENT_DEVICE")

    def TYPE_MATCH(self, source: Source, value: Any, why: str) -> None:
        t = type(value)
        tname = f"torch.{t.__name__}" if getattr(torch, t.__name__, None) is t else self.name_for(t, t.__name__)
        if t is torch.nn.Parameter:
            tname = "torch.nn.Parameter"
        elif t is type(None):
            tname = "type(None)"
        elif getattr(builtins, t.__name__, None) is t:
            tname = t.__name__
        self.add(source, "TYPE_MATCH", f"type({source.name()}) is {tname}", why, f"type({source.name()})")

    def ID_MATCH(self, source: Source, value: Any, why: str) -> None:
        hint = getattr(value, "__name__", type(value).__name__)
        if isinstance(source, LocalSource) and isinstance(value, torch.nn.Module):  # torch's id_matched_objs
            self.id_matched_objs[source.local_name] = weakref.ref(value)
        self.add(source, "ID_MATCH", f"{source.name()} is {self.name_for(value, hint)}", why, source.name())

    def CONSTANT_MATCH(self, source: Source, value: Any, why: str) -> None:
        """``L['c'] == <value>``, written so that it holds for ``value`` (Note [A constant guard is valid Python])."""
        self.TYPE_MATCH(source, value, why)
        n = source.name()
        if value is None or isinstance(value, bool) or isinstance(value, enum.Enum):
            test = f"{n} is {value!r}" if not isinstance(value, enum.Enum) else \
                f"{n} is {self.name_for(value, f'{type(value).__name__}_{value.name}')}"
        elif isinstance(value, float) and value != value:  # nan equals nothing, itself included
            test = f"{n} != {n}"
        elif isinstance(value, (torch.dtype, torch.device)):
            test = f"{n} == {self.name_for(value, str(value))}"
        elif _is_literal(value):
            test = f"{n} == {value!r}"
        else:  # inf, a torch.Size, a frozenset: compared with the value itself, bound in the scope
            test = f"{n} == {self.name_for(value, type(value).__name__)}"
        self.add(source, "CONSTANT_MATCH", test, why, n)

    def NN_MODULE_LAYOUT(self, source: Source, value: torch.nn.Module, why: str) -> None:
        """The names in ``_modules``, ``_parameters``, ``_buffers``, in order, and which hold None."""
        n = source.name()
        tables = []
        for table in _MODULE_TABLES:
            layout = [(k, v is None) for k, v in getattr(value, table).items()]
            self.add(source, "NN_MODULE_LAYOUT", f"[(k, v is None) for k, v in {n}.{table}.items()] == {layout!r}",
                     why, f"{n}.{table}")
            tables.append(tuple(layout))
        self.module_layouts.setdefault(n, _module_layout(value, tuple(tables)))

    def read_expr(self, source: Source, bound: Optional[dict[str, str]] = None) -> str:
        """How generated code reads ``source``: its name, with module attributes read from their tables.

        ``L['m'].layer1[0].conv1.weight`` is read as
        ``L['m']._modules['layer1']._modules['0']._modules['conv1']._parameters['weight']``
        where each module on the way is NN_MODULE_LAYOUT-guarded (Note [Module attributes
        are read from their tables]); with ``bound`` (source name -> local) the read
        starts from the nearest enclosing source already in a local.
        """
        name = source.name()
        if bound is not None and name in bound:
            return bound[name]
        if bound is None and name in self._reads:
            return self._reads[name]
        base = getattr(source, "base", None)
        expr = name
        if isinstance(base, Source):
            base_name, base_expr = base.name(), self.read_expr(base, bound)
            layout = self.module_layouts.get(base_name)
            if isinstance(source, AttrSource) and layout is not None and source.member in layout.members:
                expr = f"{base_expr}.{layout.members[source.member]}[{source.member!r}]"
            elif isinstance(source, GetItemSource) and layout is not None and type(source.index) in (int, str) \
                    and source.index in layout.items:
                expr = f"{base_expr}._modules[{layout.items[source.index]!r}]"
            elif name.startswith(base_name):
                expr = base_expr + name[len(base_name):]
            elif isinstance(source, AttrSource):  # getattr(base, 'not an identifier')
                expr = f"getattr({base_expr}, {source.member!r})"
        if bound is None:
            self._reads[name] = expr
        return expr

    def LENGTH_CHECK(self, source: Source, value: Any, why: str) -> None:
        self.TYPE_MATCH(source, value, why)
        self.add(source, "LENGTH_CHECK", f"len({source.name()}) == {len(value)}", why, f"len({source.name()})")

    def TENSOR_MATCH(self, source: Source, value: torch.Tensor, why: str, dynamic_dims: tuple = ()) -> None:
        n = source.name()
        if dynamic_dims:  # a dynamic input's sizes are checked by its SHAPE_ENV guards (dynamic_shapes.py)
            return self._dynamic_tensor_match(source, value, why, dynamic_dims)
        self.TYPE_MATCH(source, value, why)
        if type(value) is not torch.nn.Parameter:
            self.tensor_names.setdefault(n)
        self.add(source, "TENSOR_MATCH", f"{n}.dtype == {value.dtype}", why, f"{n}.dtype")
        on_cpu = value.device.type == "cpu"
        if on_cpu:  # the cheapest exact test: a CPU device has no index
            self.add(source, "TENSOR_MATCH", f"{n}.is_cpu", why, f"{n}.device")
        else:
            self.add(source, "TENSOR_MATCH", f"{n}.device == {self.name_for_constant(value.device)}", why, f"{n}.device")
        self.add(source, "TENSOR_MATCH", f"{n}.shape == {tuple(value.shape)!r}", why, f"{n}.shape")
        contiguous = value.is_contiguous() and all(d > 1 for d in value.shape)
        if contiguous:  # Note [is_contiguous() as the stride guard]
            self.add(source, "TENSOR_MATCH", f"{n}.is_contiguous()", why, f"{n}.stride()")
        else:
            self.add(source, "TENSOR_MATCH", f"{n}.stride() == {tuple(value.stride())!r}", why, f"{n}.stride()")
        self.add(source, "TENSOR_MATCH", f"{n}.requires_grad is {value.requires_grad}", why, f"{n}.requires_grad")
        self.tensor_specs.setdefault(n, (value.dtype, None if on_cpu else value.device, tuple(value.shape),
                                         None if contiguous else tuple(value.stride()), value.requires_grad))

    def _dynamic_tensor_match(self, source: Source, value: torch.Tensor, why: str, dynamic_dims: tuple) -> None:
        """TENSOR_MATCH with some sizes symbolic: rank and the static sizes here; in C++ a size -1 matches any.

        A contiguous dynamic input's stride guard is ``is_contiguous()`` whatever its sizes; a
        non-contiguous one's strides are guarded once its fake has them, a symbolic stride as
        -1 in C++ (``dynamic_shapes._stride_guards``, Note [A symbolic fake]).
        """
        n = source.name()
        self.TYPE_MATCH(source, value, why)
        if type(value) is not torch.nn.Parameter:
            self.tensor_names.setdefault(n)
        self.add(source, "TENSOR_MATCH", f"{n}.dtype == {value.dtype}", why, f"{n}.dtype")
        if value.device.type == "cpu":
            self.add(source, "TENSOR_MATCH", f"{n}.is_cpu", why, f"{n}.device")
        else:
            self.add(source, "TENSOR_MATCH", f"{n}.device == {self.name_for_constant(value.device)}", why, f"{n}.device")
        static = [f"{n}.size()[{i}] == {int(s)}" for i, s in enumerate(value.shape) if i not in dynamic_dims]
        self.add(source, "TENSOR_MATCH", " and ".join([f"{n}.dim() == {value.dim()}"] + static), why, f"{n}.shape")
        if value.is_contiguous():  # else each stride is guarded once the fake has them (dynamic_shapes._stride_guards)
            self.add(source, "TENSOR_MATCH", f"{n}.is_contiguous()", why, f"{n}.stride()")
        self.add(source, "TENSOR_MATCH", f"{n}.requires_grad is {value.requires_grad}", why, f"{n}.requires_grad")
        sizes = tuple(-1 if i in dynamic_dims else int(s) for i, s in enumerate(value.shape))  # -1: any size
        self.tensor_specs.setdefault(n, (value.dtype, None if value.device.type == "cpu" else value.device, sizes,
                                         None, value.requires_grad))


_MODULE_TABLES = ("_modules", "_parameters", "_buffers")


@dataclass
class ModuleLayout:
    """What NN_MODULE_LAYOUT fixed about one module, and the reads it makes exact."""

    tables: tuple  # for each of _MODULE_TABLES: ((name, value is None), ...), in order
    members: dict  # attribute -> the table Module.__getattr__ finds it in ("_parameters", ...)
    items: dict  # index -> _modules key, for Sequential / ModuleList / ModuleDict's own __getitem__


# Note [Module attributes are read from their tables]
#     ``m.weight`` on an nn.Module is not an attribute of the object: Python looks in
#     the class and the instance ``__dict__``, finds nothing, and calls
#     ``Module.__getattr__`` (a Python function, about 0.3 us), which looks in
#     ``_parameters``, ``_buffers`` and ``_modules``. ``seq[0]`` on a Sequential runs
#     two Python functions and an iterator. A ResNet-18 call read about 600 such
#     attributes in its guards and again to fetch the graph's arguments. Once the
#     module's NN_MODULE_LAYOUT guards hold, its type is the traced one and its
#     tables hold the traced names in the traced order, so ``m.weight`` is
#     ``m._parameters['weight']`` and ``seq[0]`` is ``seq._modules['0']``: the guards and
#     the transformed function read those (``GuardSet.read_expr``), dict lookups, as
#     torch's guard sources do (``L['m']._modules['fc']._parameters['weight']``). Only
#     where the class does not define the name itself (no property, no class
#     attribute) and does not override ``__getattr__``/``__getitem__``; Module's own
#     ``__setattr__`` keeps a table's names out of the instance ``__dict__``. A member the
#     trace found in a table is named by that table's item already (Note [A module's
#     member is an item of its table], source.py); what is left for this read is an item
#     of a Sequential whose children have names of their own (``seq[0]`` is
#     ``seq._modules['conv']``).
def _module_layout(value: torch.nn.Module, tables: tuple) -> ModuleLayout:
    cls = type(value)
    members: dict[str, str] = {}
    if cls.__getattr__ is torch.nn.Module.__getattr__ and cls.__getattribute__ is object.__getattribute__:
        in_class = set().union(*(vars(c) for c in cls.__mro__))
        for table in ("_parameters", "_buffers", "_modules"):  # the order Module.__getattr__ looks in
            for k in getattr(value, table):
                if isinstance(k, str) and k.isidentifier() and k not in in_class and k not in vars(value):
                    members.setdefault(k, table)
    keys = [k for k, _ in tables[0]]
    getitem = getattr(cls, "__getitem__", None)
    items: dict = {}
    if getitem is torch.nn.Sequential.__getitem__:  # the idx-th of _modules.values()
        items = {i: k for i, k in enumerate(keys)} | {i - len(keys): k for i, k in enumerate(keys)}
    elif getitem is torch.nn.ModuleList.__getitem__:  # _modules[str(idx mod len)]
        items = {i: str(i % len(keys)) for i in range(-len(keys), len(keys)) if str(i % len(keys)) in keys}
    elif getitem is torch.nn.ModuleDict.__getitem__:
        items = {k: k for k in keys if isinstance(k, str)}
    return ModuleLayout(tables, members, items)


# Note [A module's layout is one C++ call]
#     Every module the trace reads has three NN_MODULE_LAYOUT guards, and every one it
#     calls one NN_MODULE_CALL guard (no hooks, no ``forward`` of its own): as Python,
#     three list comprehensions and five attribute reads, about 2 us per module, 60
#     us for a small CNN's 30 modules. Where the C++ extension is built, the check
#     function runs them as one ``ModuleMatch`` call per module
#     (``___module_match_0(___s4)``), which reads the same dicts from the module's
#     ``__dict__`` and compares the same (name, is None) pairs (tensor_match.cpp);
#     modules alike (every ReLU) share one. As for TENSOR_MATCH, the readable guards
#     stay the Python ones, and ``first_failure`` evaluates them to name a failure.
def _no_hooks_expr(n: str) -> str:
    """The NN_MODULE_CALL guard of a module called without hooks (variables/nn_module.py writes it)."""
    return (f"not ({n}._forward_pre_hooks or {n}._forward_hooks or {n}._backward_pre_hooks or "
            f"{n}._backward_hooks or 'forward' in {n}.__dict__)")


# Note [is_contiguous() as the stride guard]
#     Once the shape guard has passed, ``x.is_contiguous()`` says the same as
#     ``x.stride() == (12, 4, 1)`` when no dimension has size 0 or 1:
#     is_contiguous ignores only the strides of size-1 dimensions, and here there
#     are none. It is cheaper (no tuple is built), which counts with 200 tensor
#     inputs; a tensor with a size-1 dimension keeps the exact stride guard.
#     Real Dynamo compares the strides in C++.

# Note [TENSOR_MATCH runs in C++]
#     A tensor input has five TENSOR_MATCH guards (dtype, device, shape, stride,
#     requires_grad). In Python each is an attribute read through torch's getter
#     (a torch-function check, a new torch.Size or bool): about 80 ns each, so a
#     call with 200 tensor inputs spent ~85 us in its guards, against ~30 us for
#     torch's C++ guards, and lost to torch on per-call overhead however lean
#     the rest was. Writing the same reads in C through the Python C-API did not
#     help (the getters are the cost, not the bytecode). So, as torch does
#     (``TensorCheck`` in torch/csrc/dynamo/guards.cpp), ``tensor_match.cpp``
#     reads the five fields from the C++ tensor: one call per tensor,
#     ``___tensor_match_0(___s1)``, ~15 us for 200 inputs. It tests exactly what
#     the Python guards test, so the guards you read (``entry.check.guards``) and
#     the ones ``first_failure`` evaluates to name a failure stay the Python ones;
#     tests/test_tensor_match.py compares the two on every pair of many layouts.
#     Inputs with the same metadata share one TensorMatch. Where the extension
#     cannot be built (``tensor_match.reason()``), the Python guards run.
