"""Guards: the assumptions a compiled entry made, as readable Python checked before every call.

Place in the pipeline: the symbolic interpreter installs guards while it wraps inputs
(``variables/builder.py``); the cache (``eval_frame.py``) evaluates them before every
call. Mirrors ``torch/_dynamo/guards.py`` (``GuardBuilder``: TYPE_MATCH, ID_MATCH,
CONSTANT_MATCH / EQUALS_MATCH, TENSOR_MATCH, LENGTH_CHECK, and the compiled
``CheckFunctionManager``).

Note [A guard is one readable expression]
    Each guard is one Python expression over ``L`` and ``G`` (``L['x'].shape == (2, 3)``)
    with its source and the reason it exists. All guards of an entry are compiled
    once into one function (Note [Each source is read once]), so a steady-state call
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
import re
import sys
from dataclasses import dataclass
from typing import Any, Optional

import torch

from minidynamo import events

from . import tensor_match
from .source import AttrSource, GetItemSource, Source


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
    return all(sum(t is m for t in tensors) == 1 for m in mutated)


# The device types whose autocast state a trace depends on (torch's AutocastState; tensor_match.cpp's list).
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "ipu", "hpu", "xla", "privateuseone", "mps")


def autocast_state() -> tuple:
    """``(device_type, dtype)`` for every device type autocast is on for: ``()`` when it is off everywhere."""
    return tuple((d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES if torch.is_autocast_enabled(d))


def deterministic_algorithms() -> tuple:
    """``torch.use_deterministic_algorithms``' two flags: (on, warn_only)."""
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


# Note [Global state is one guard]
#     A trace depends on state that is in no argument: grad mode decides whether
#     the graph records autograd (AOTAutograd builds a training or an inference
#     graph from it), inference mode and autocast change what every op returns,
#     the default dtype what ``torch.ones(3)`` makes, the deterministic flags which
#     kernels run; and ``torch.is_grad_enabled()`` or ``torch.get_default_dtype()``
#     read while tracing are folded into the trace as constants. So every entry
#     keeps the state it was traced under, as torch's ``GlobalStateGuard``
#     (torch/csrc/dynamo/guards.cpp) does: five readable GLOBAL_STATE guards
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
}

# Names a guard expression may use besides L and G; objects matched by identity are
# added per guard set as ___obj<N>.
_BASE_SCOPE = {"torch": torch, "sys": sys, "___check_not_aliased": check_not_aliased, "___autocast_state": autocast_state,
               "___deterministic_algorithms": deterministic_algorithms}


class GuardSet:
    """The guards of one entry, plus the scope their expressions need."""

    def __init__(self) -> None:
        self.guards: list[Guard] = []
        self.scope: dict[str, Any] = dict(_BASE_SCOPE)
        self._seen: set[str] = set()
        self._obj_names: dict[int, str] = {}
        self.tensor_names: dict[str, None] = {}  # TENSOR_MATCH'd sources in order, for NO_TENSOR_ALIASING
        self.duplicate_sources: set[str] = set()  # ID_MATCHed to an earlier tensor input: the same object
        self.mutated_sources: Optional[set[str]] = None  # inputs the graph writes to; None: not known, all
        # TENSOR_MATCH'd source -> (dtype, device or None for the CPU, sizes, strides or None for
        # "is_contiguous()", requires_grad): what its Python guards test, for the C++ TensorMatch
        self.tensor_specs: dict[str, tuple] = {}
        self.global_state: Optional[Any] = None  # the C++ GlobalState made by GLOBAL_STATE(), when available
        self.module_layouts: dict[str, ModuleLayout] = {}  # NN_MODULE_LAYOUT'd source -> its layout
        self._reads: dict[str, str] = {}  # source name -> read_expr(source), memoized

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
        if events.is_recording():  # str(source) walks the source's chain: not for nobody
            events.emit("guard", source=str(source), guard_kind=kind, expr=expr, why=why)

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
        kind = tensor_match.global_state()
        self.global_state = kind() if kind is not None else None

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
        """TENSOR_MATCH with some sizes symbolic: rank and the static sizes here, no C++ spec.

        A dynamic input is traced as contiguous (Note [A symbolic fake]), so its stride
        guard is ``is_contiguous()`` whatever its sizes.
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
        self.add(source, "TENSOR_MATCH", f"{n}.is_contiguous()", why, f"{n}.stride()")
        self.add(source, "TENSOR_MATCH", f"{n}.requires_grad is {value.requires_grad}", why, f"{n}.requires_grad")


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
#     ``__setattr__`` keeps a table's names out of the instance ``__dict__``. The
#     guards you read (``entry.guards``, ``md.explain``) keep the attribute names.
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

# ``torch.float32`` in a guard, as the check function reads it: a global bound once.
_TORCH_CONSTANT = re.compile(r"(?<![\w.'\]])torch\.([A-Za-z_]\w*)(?![\w.(])")


def _hoist_torch_constants(text: str, scope: dict[str, Any]) -> str:
    """``torch.float32`` -> ``___torch_float32`` (bound in ``scope``): one lookup instead of two."""

    def bind(m: re.Match) -> str:
        value = getattr(torch, m.group(1), None)
        if not isinstance(value, (torch.dtype, type)):
            return m.group(0)
        scope[f"___torch_{m.group(1)}"] = value
        return f"___torch_{m.group(1)}"

    return _TORCH_CONSTANT.sub(bind, text)


def _no_aliasing_guard(guard_set: GuardSet) -> Optional[Guard]:
    """The NO_TENSOR_ALIASING guard for an entry (Note [Distinct tensors stay distinct]).

    Note [Distinct tensors stay distinct]
        The graph was traced with ``a`` and ``b`` as two tensors. Called with
        the same tensor twice, a write through ``a`` would have to show in
        ``b``, and the graph, which read ``b`` as its own input, would give a
        wrong answer. Torch's NO_TENSOR_ALIASING guard (``check_no_aliasing``,
        C++) checks that all tensor inputs are distinct objects; a miss
        recompiles, and the new trace sees one tensor reached twice. Like torch
        (``skip_no_tensor_aliasing_guards_on_parameters``), parameters are left out.

        Only a write can make the difference: a graph that mutates no input
        computes the same values whether or not two inputs are one tensor. So
        ours checks just the inputs the trace wrote to (their fake tensor's
        version counter moved), each against every other tensor input, as
        identity tests: with 3 mutated inputs out of 200 that is 600 of them,
        cheaper than building a set of 200 ids. Where the C++ extension is
        built they run in one call, ``___no_aliasing(3, ___s1, ..., ___s200)``
        (the written ones first; ~12 us as unrolled ``is`` bytecode, under 1 us
        in C); elsewhere as unrolled ``is`` tests. When the
        mutated inputs are not known, every pair is checked, as torch does.
    """
    sources = [n for n in guard_set.tensor_names if n not in guard_set.duplicate_sources]
    mutated = guard_set.mutated_sources
    written = sources if mutated is None else [n for n in sources if n in mutated]
    if len(sources) < 2 or not written:
        return None
    expr = f"___check_not_aliased(({', '.join(written)},), ({', '.join(sources)},))"
    why = "the graph takes these tensors as distinct inputs; the graph writes to " + ", ".join(written)
    return Guard(None, "NO_TENSOR_ALIASING", expr, why, operands=(tuple(written), tuple(sources)))


def _unrolled_not_aliased(guard: Guard, bound: dict[str, str]) -> str:
    """``___s1 is ___s2 or ___s1 is ___s3 ...``: true when some mutated input is another input."""
    written, sources = guard.operands
    tests, done = [], set()
    for w in written:
        done.add(w)
        tests += [f"{bound.get(w, w)} is {bound.get(n, n)}" for n in sources if n not in done]
    return " or ".join(tests) if tests else "False"


def _no_aliasing_call(guard: Guard, bound: dict[str, str]) -> str:
    """``___no_aliasing(2, ___s1, ___s2, ___s3)``: the written inputs first, then the others (tensor_match.cpp)."""
    written, sources = guard.operands
    ordered = list(written) + [n for n in sources if n not in written]
    return f"___no_aliasing({len(written)}, {', '.join(bound.get(n, n) for n in ordered)})"


def _replace_source(expr: str, name: str, local: str) -> str:
    """``expr`` with each ``name`` not followed by ``\\w``, ``'`` or ``]`` replaced by ``local``.

    ``re.sub(re.escape(name) + r"(?![\\w'\\]])", local, expr)`` without compiling one
    pattern per source: 450 sources overflow ``re``'s cache, and compiling them was
    a tenth of a ResNet's first compile.
    """
    parts, start, at = [], 0, expr.find(name)
    while at >= 0:
        end = at + len(name)
        nxt = expr[end:end + 1]
        if nxt and (nxt.isalnum() or nxt in "_']"):
            at = expr.find(name, at + 1)
            continue
        parts += [expr[start:at], local]
        start = end
        at = expr.find(name, end)
    return "".join(parts) + expr[start:] if parts else expr


def _check_fn_source(guards: list[Guard], scope: dict[str, Any],
                     tensor_specs: Optional[dict[str, tuple]] = None, guard_set: Optional[GuardSet] = None) -> str:
    """One function checking every guard, each source read once (Note [Each source is read once]).

    Note [Each source is read once]
        A tensor input has six guards (type, dtype, device, shape, stride,
        requires_grad). Joined naively, ``L['xs'][7]`` would be looked up six
        times per call; with 200 inputs that dominates a call. So the guards are
        grouped by source, in order of first appearance, the source is bound to a
        local once, and its guards test the local. A source inside another one
        (``L['xs'][7]`` inside ``L['xs']``) is read from its parent's local, and
        constants such as ``torch.float32`` are bound once as globals of the check
        function. Real Dynamo's guard managers do the same in C++: one manager per
        source, child managers for items and attributes, the checks as leaves.

    With ``tensor_specs`` (the C++ ``TensorMatch`` is available), a source's
    TENSOR_MATCH guards run as one call (Note [TENSOR_MATCH runs in C++]), and
    with ``guard_set`` a module's layout guards too (Note [A module's layout is one
    C++ call]); sources are read as ``guard_set.read_expr`` says (Note [Module
    attributes are read from their tables]).
    """
    matchers: dict[tuple, str] = {}  # one TensorMatch per distinct spec: 200 alike inputs share one
    module_matchers: dict[tuple, str] = {}  # one ModuleMatch per distinct layout: every ReLU shares one
    layouts = guard_set.module_layouts if guard_set is not None and tensor_match.module_match() is not None else {}
    groups: dict[str, list[Guard]] = {}
    sources: dict[str, Any] = {}
    over_many = [g for g in guards if g.source is None and g.kind == "NO_TENSOR_ALIASING"]  # checked last
    global_state = [g for g in guards if g.kind == "GLOBAL_STATE"]  # checked first, one call
    for g in guards:
        if g.source is None:
            continue
        groups.setdefault(g.source.name(), []).append(g)
        sources.setdefault(g.source.name(), g.source)
    lines = ["def ___check_guards(L, G):"]
    if global_state:  # Note [Global state is one guard]
        tests = "___global_state()" if "___global_state" in scope else \
            " and ".join(f"({_hoist_torch_constants(g.expr, scope)})" for g in global_state)
        lines += [f"    if not ({tests}):", "        return False"]
    for g in guards:  # a flag read as a constant (allow_tf32), warning_once's cache, a class attribute inlined
        if g.source is None and g.kind in ("BACKEND_FLAG", "LRU_CACHE", "CLASS_ATTRIBUTE"):
            test = _class_attribute_test(g.expr, scope) if g.kind == "CLASS_ATTRIBUTE" else None
            lines += [f"    if not ({test or _hoist_torch_constants(g.expr, scope)}):", "        return False"]
    bound: dict[str, str] = {}  # source name -> the local holding it
    for i, (name, group) in enumerate(groups.items()):
        local = f"___s{i}"
        read = guard_set.read_expr(sources[name], bound) if guard_set is not None else \
            _read_from_bound(sources[name], bound)
        bound[name] = local
        lines.append(f"    {local} = {read}")
        spec = tensor_specs.get(name) if tensor_specs else None
        fused = _module_fused(name, group, layouts)
        tests = [f"({_hoist_torch_constants(_replace_source(g.expr, name, local), scope)})" for g in group
                 if (spec is None or g.kind != "TENSOR_MATCH") and g not in fused]  # one C++ call replaces those
        if spec is not None:
            tests.append(f"{_tensor_matcher(spec, scope, matchers)}({local})")
        if fused:
            no_hooks = len(fused) == len(_MODULE_TABLES) + 1
            tests.insert(1, f"{_module_matcher(layouts[name].tables + (no_hooks,), scope, module_matchers)}({local})")
        tests = " and ".join(tests)
        lines.append(f"    if not ({tests}):")
        lines.append("        return False")
    for g in guards:  # sizes of the inputs whose types and ranks are checked above (dynamic_shapes.py)
        if g.kind == "SHAPE_ENV":
            lines += [f"    if not ({g.expr}):", "        return False"]
    no_aliasing = tensor_match.no_aliasing() if tensor_specs else None
    for g in over_many:  # identity tests between the written inputs and the others: one C++ call, or unrolled
        if no_aliasing is not None:
            scope["___no_aliasing"] = no_aliasing
            lines.append(f"    if not {_no_aliasing_call(g, bound)}:")
        else:
            lines.append(f"    if {_unrolled_not_aliased(g, bound)}:")
        lines.append("        return False")
    lines.append("    return True")
    return "\n".join(lines) + "\n"


_CLASS_ATTRIBUTE = re.compile(r"___getattr_static\((\w+), ('\w+'), None\) is (\w+)")


def _class_attribute_test(expr: str, scope: dict[str, Any]) -> Optional[str]:
    """``___getattr_static(C, 'forward', None) is F`` as dict lookups along C's MRO, or None to keep it.

    Note [A class attribute guard without inspect]
        ``inspect.getattr_static(C, name)`` is a Python function of a dozen calls
        (about 3 us), one per class the trace read ``forward`` from: 30 us for a
        small CNN. For a class whose metaclass is ``type`` it returns the first
        ``__dict__`` along ``C.__mro__`` that holds ``name``, so the same test is
        ``C.__mro__ is <the MRO traced> and 'forward' not in <each class before
        the owner>.__dict__ and <owner>.__dict__.get('forward') is F``: a few C
        lookups. A new ``__bases__`` makes a new ``__mro__`` tuple, so the identity
        test sees it. The readable guard stays the ``getattr_static`` one.
    """
    m = _CLASS_ATTRIBUTE.fullmatch(expr)
    if m is None or m.group(1) not in scope or m.group(3) not in scope:
        return None
    cls, name, attr = scope[m.group(1)], eval(m.group(2)), scope[m.group(3)]  # noqa: S307 - a quoted identifier
    if not isinstance(cls, type) or type(cls) is not type or attr is None:
        return None
    owners = [k for k in cls.__mro__ if name in vars(k)]
    if not owners or vars(owners[0])[name] is not attr:
        return None
    before = cls.__mro__[: cls.__mro__.index(owners[0])]
    mro = f"___mro_{m.group(1).lstrip('_')}"
    scope[mro] = cls.__mro__
    tests = [f"{m.group(1)}.__mro__ is {mro}"]
    for k in before:
        tests.append(f"{name!r} not in {_scope_name(k, scope)}.__dict__")
    tests.append(f"{_scope_name(owners[0], scope)}.__dict__.get({name!r}) is {m.group(3)}")
    return " and ".join(tests)


def _scope_name(obj: Any, scope: dict[str, Any]) -> str:
    """A scope name bound to ``obj`` (an existing one if any)."""
    for k, v in scope.items():
        if v is obj and k.startswith("___"):
            return k
    name = f"___cls_{''.join(c if c.isalnum() else '_' for c in obj.__name__)}_{id(obj) % 100000}"
    scope[name] = obj
    return name


def _module_fused(name: str, group: list[Guard], layouts: dict) -> list[Guard]:
    """The guards of a module's group that one ``ModuleMatch`` call replaces (none without the extension)."""
    if name not in layouts:
        return []
    fused = [g for g in group if g.kind == "NN_MODULE_LAYOUT"]
    if len(fused) != len(_MODULE_TABLES):
        return []
    return fused + [g for g in group if g.kind == "NN_MODULE_CALL" and g.expr == _no_hooks_expr(name)][:1]


def _module_matcher(spec: tuple, scope: dict[str, Any], matchers: dict[tuple, str]) -> str:
    """The scope name of the ``ModuleMatch`` for ``spec`` (three layouts, no_hooks), one per distinct spec."""
    if spec not in matchers:
        name = matchers[spec] = f"___module_match_{len(matchers)}"
        scope[name] = tensor_match.module_match()(*spec)
    return matchers[spec]


def _tensor_matcher(spec: tuple, scope: dict[str, Any], matchers: dict[tuple, str]) -> str:
    """The scope name of the ``TensorMatch`` for ``spec``, made once per distinct spec."""
    if spec not in matchers:
        name = matchers[spec] = f"___tensor_match_{len(matchers)}"
        scope[name] = tensor_match.get()(*spec)
    return matchers[spec]


def _read_from_bound(source: Source, bound: dict[str, str]) -> str:
    """``L['xs'][7]`` read as ``___s0[7]`` when ``L['xs']`` is already in local ``___s0``.

    A nested source starts from its nearest enclosing source that an earlier
    guard has bound, so with 200 items of one tuple the tuple is looked up once,
    not 200 times.
    """
    name = source.name()
    for base in source.bases():
        base_name = base.name()
        if base_name in bound and name.startswith(base_name):
            return bound[base_name] + name[len(base_name):]
    return name


class CheckFunction:
    """All guards of an entry compiled into one function (``CheckFunctionManager``)."""

    def __init__(self, guard_set: GuardSet):
        self.guards = list(guard_set.guards)
        no_aliasing = _no_aliasing_guard(guard_set)
        if no_aliasing is not None:
            self.guards.append(no_aliasing)
        self.scope = guard_set.scope
        if guard_set.global_state is not None:
            self.scope["___global_state"] = guard_set.global_state
        specs = guard_set.tensor_specs if tensor_match.get() is not None else None
        self.source = _check_fn_source(self.guards, self.scope, specs, guard_set)
        exec(compile(self.source, "<minidynamo guards>", "exec"), self.scope)  # noqa: S102
        self.fn = self.scope["___check_guards"]

    def __call__(self, L: dict, G: dict) -> bool:
        try:
            return bool(self.fn(L, G))
        except Exception:  # a guard that cannot even be evaluated has failed
            return False

    def first_failure(self, L: dict, G: dict) -> tuple[Optional[Guard], str]:
        """The first guard that fails on this frame, and what the value is now."""
        for guard in self.guards:
            scope = dict(self.scope, L=L, G=G)
            try:
                ok = eval(guard.expr, scope)
            except Exception as e:  # noqa: BLE001
                return guard, f"could not evaluate: {type(e).__name__}: {e}"
            if not ok and guard.kind == "NO_TENSOR_ALIASING":
                return guard, _aliasing_change(guard, scope)
            if not ok:
                try:
                    now = eval(guard.value_expr, scope) if guard.value_expr else "?"
                except Exception as e:  # noqa: BLE001
                    now = f"<{type(e).__name__}>"
                return guard, f"{guard.value_expr or guard.expr} is now {now!r}"
        return None, ""

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.guards)


def _aliasing_change(guard: Guard, scope: dict) -> str:
    """Which inputs are now one tensor: ``L['a'] and L['b'] are now the same tensor``."""
    names = guard.operands[1]
    by_id: dict[int, list[str]] = {}
    for name in names:
        by_id.setdefault(id(eval(name, scope)), []).append(name)  # noqa: S307
    same = [" and ".join(group) for group in by_id.values() if len(group) > 1]
    return "; ".join(f"{s} are now the same tensor" for s in same)
