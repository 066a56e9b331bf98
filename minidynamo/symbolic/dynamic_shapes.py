"""Dynamic shapes in Dynamo: which sizes become symbols, SymInt graph inputs, shape guards.

Place in the pipeline: between the builder (an input tensor enters the trace) and the
ShapeEnv (``minidynamo/shapes/symbolic_shapes.py``). Decides, per input tensor, which
dims are dynamic (``dynamic=True``, ``mark_dynamic``, or automatic dynamic after a
size change); makes a SymInt placeholder per new symbol; at the end of the trace
adds the ShapeEnv's guards to the entry. It sits below the VariableTrackers and makes
none: ``x.size(0)`` on a symbolic fake becomes a ``SymNodeVariable`` in
``variables/tensor.py`` (``size_variable``), an int input in ``variables/builder.py``. Mirrors ``torch/_dynamo/variables/builder.py``
(``_automatic_dynamic``, ``wrap_symint``), ``torch/_dynamo/decorators.py``
(``mark_dynamic``, ``mark_static``) and the shape part of ``CheckFunctionManager``.

Note [Automatic dynamic]
    Each compiled frame keeps, per input tensor source, the sizes it was traced
    with (torch's ``frame_state`` / ``FrameStateSizeEntry``). With ``dynamic=None``
    (the default) the first trace is static; when a call misses the cache and a
    size differs from the recorded one, that dim is recorded as "changed"
    (``None``), and the new trace gives it a symbol. Later sizes then pass the
    entry's guards (``2 <= L['x'].size()[0]``) and reuse the graph.
    ``dynamic=True`` gives every dim a symbol from the first trace,
    ``dynamic=False`` none, ever. Parameters, buffers and tensors of torch.nn's
    own modules stay static, as in torch (``force_parameter_static_shapes``,
    ``force_nn_module_property_static_shapes``; ``_static_by_rule``).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from minidynamo import events

from .source import AttrSource, SizeSource, Source

__all__ = ["mark_dynamic", "maybe_mark_dynamic", "mark_static", "SizeSource", "dynamic_dims_for",
           "install_shape_guards", "automatic_dynamic_changes",
           "int_input", "float_input"]

_TRACED_DYNAMIC, _STATIC_NOW = "___traced_dynamic", "___static"  # frame_state flags, not sources
_DYNAMIC = "_minidynamo_dynamic_dims"
_STATIC = "_minidynamo_static_dims"
_MAYBE_DYNAMIC = "_minidynamo_maybe_dynamic_dims"
_UNBACKED = "_minidynamo_unbacked_dims"


def mark_dynamic(t: torch.Tensor, dim) -> None:
    """Trace ``t``'s dim ``dim`` (an int or a list) with a symbol from the first call (torch's mark_dynamic)."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"mark_dynamic: dim {d} out of range for a {t.dim()}-d tensor")
    marked = set(getattr(t, _DYNAMIC, set()))
    marked.update(d % t.dim() for d in dims)
    setattr(t, _DYNAMIC, marked)


def maybe_mark_dynamic(t: torch.Tensor, dim) -> None:
    """As ``mark_dynamic``, but a trace that specializes the dim is no error (torch's maybe_mark_dynamic).

    Ours never raises for a specialized marked dim (torch's ``mark_dynamic`` does, with a
    ConstraintViolationError), so the two differ only in that.
    """
    dims = [dim] if isinstance(dim, int) else list(dim)
    marked = set(getattr(t, _MAYBE_DYNAMIC, set()))
    marked.update(d % t.dim() for d in dims if -t.dim() <= d < t.dim())
    setattr(t, _MAYBE_DYNAMIC, marked)


def mark_unbacked(t: torch.Tensor, dim) -> None:
    """Trace ``t``'s dim ``dim`` with an unbacked symbol (torch's ``torch._dynamo.decorators.mark_unbacked``).

    The size gets a symbol ``u0`` with no example value behind it (Note [An unbacked symbol has no
    value], shapes/symbolic_shapes.py): no 0/1 specialization, no guard on it, and a question about it
    that its range (``>= 0``) does not settle is an error, never a guard.
    """
    mark_dynamic(t, dim)
    dims = [dim] if isinstance(dim, int) else list(dim)
    marked = set(getattr(t, _UNBACKED, set()))
    marked.update(d % t.dim() for d in dims)
    setattr(t, _UNBACKED, marked)


def mark_static(t: torch.Tensor, dim=None) -> None:
    """Keep ``t``'s dim ``dim`` (all dims if None) static, even under automatic dynamic."""
    dims = range(t.dim()) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    marked = set(getattr(t, _STATIC, set()))
    marked.update(d % t.dim() for d in dims)
    setattr(t, _STATIC, marked)


# --- which dims are dynamic -----------------------------------------------------------


def _static_by_rule(output, source: Source, value: torch.Tensor) -> bool:
    """The tensors whose sizes torch keeps static (``tensor_always_has_static_shape``, torch/_dynamo/utils.py).

    A parameter, or a tensor of a module's ``_parameters`` / ``_buffers``
    (``force_parameter_static_shapes``); a tensor read from a module of ``torch.nn`` itself
    (``force_nn_module_property_static_shapes``). A tensor attribute of any other object, a
    namedtuple's field or a user module's plain attribute, is an input as any other.
    """
    from minidynamo import config

    chain = [source, *source.bases()]
    if config.force_parameter_static_shapes and (isinstance(value, torch.nn.Parameter) or any(
            getattr(s, "table", "") in ("_parameters", "_buffers") for s in chain)):
        return True
    if config.force_nn_module_property_static_shapes:
        for owner in base_values(output, source):  # an unreadable base is no module's
            if isinstance(owner, torch.nn.Module):  # the nearest module: is it torch.nn's own?
                return type(owner).__module__.startswith("torch.nn.")
    return False


UNREADABLE = object()  # base_values: a base the source cannot read back now


def base_values(output, source: Source):
    """The value of each base of ``source`` now, nearest first, or ``UNREADABLE`` where reading it fails:
    the objects a read went through (is one of them an nn.Module?)."""
    for base in source.bases():
        try:
            yield base.get(output.L, output.root_globals)
        except Exception:  # noqa: BLE001 - the caller decides what an unreadable base means
            yield UNREADABLE


def effective_dynamic(output) -> tuple[bool, bool]:
    """(every dim DUCK from the first trace, automatic dynamic on): ``dynamic=`` over ``minidynamo.config``.

    As ``torch.compile(dynamic=...)`` patches torch._dynamo.config: True sets
    ``assume_static_by_default=False``, False turns ``automatic_dynamic_shapes`` off
    and keeps every size static; None reads the config.
    """
    from minidynamo import config

    mode = getattr(output, "dynamic", None)
    if mode is False:
        return False, False
    return mode is True or not config.assume_static_by_default, config.automatic_dynamic_shapes


def dynamic_dims_for(output, source: Source, value: torch.Tensor) -> tuple:
    """The dims of input ``value`` that get symbols in this trace (Note [Automatic dynamic]).

    Each dim's kind is torch's (``_automatic_dynamic``, torch/_dynamo/variables/builder.py):
    DYNAMIC (a symbol of its own) when its size changed since the last trace or it was
    marked dynamic; else DUCK when every size starts dynamic (``dynamic=True``); else STATIC.
    The kinds are kept in ``output.dim_kinds`` for ``convert_input``. A view's base is decided
    first, as an input of its own read at ``L['x']._base`` with the view's static rule (torch's
    ``_automatic_dynamic(e._base, tx, AttrSource(source, "_base"), static_shapes)``: a slice of a
    parameter under ``dynamic=True`` has a dynamic base); its dims are kept in
    ``output.view_base_dims`` (Note [A view input is fakified through its base], fake/converter.py).
    """
    from minidynamo.fake.converter import through_base

    static_rule = _static_by_rule(output, source, value)
    base_dims = ()
    if through_base(value):
        base_dims = _dims(output, AttrSource(source, "_base"), value._base, static_rule)
        if not hasattr(output, "view_base_dims"):
            output.view_base_dims = {}
        output.view_base_dims[source.name()] = base_dims
    dims = _dims(output, source, value, static_rule)
    return dims if dims or not base_dims else _OnlyStrides()


def _marks(value: torch.Tensor) -> set:
    return getattr(value, _DYNAMIC, set()) | getattr(value, _MAYBE_DYNAMIC, set())


def _dims(output, source: Source, value: torch.Tensor, static_rule: bool) -> tuple:
    """``dynamic_dims_for`` of one tensor, the view or its base."""
    from minidynamo.fake.converter import can_be_dynamic

    all_dynamic, automatic = effective_dynamic(output)
    marked = _marks(value)
    # dynamic=False turns automatic dynamic off, but a dim marked dynamic is still dynamic (torch.compile's
    # dynamic=False patches automatic_dynamic_shapes=False; builder.py still reads the marks)
    if getattr(output, "dynamic", None) is False and not marked or output.frame_state.get(_STATIC_NOW) \
            or value.dim() == 0 or static_rule:
        return ()
    name = source.name()
    shape = tuple(int(s) for s in value.shape)
    state = output.frame_state.get(name)
    if state is None:
        state = list(shape)
    elif len(state) != len(shape):  # torch's pgo.py FrameStateSizeEntry: another rank makes every dim
        state = [None] * len(shape)  # automatic dynamic (``auto_dynamic``), as a changed size makes its dim
    else:
        state = [None if old is None or old != new else old for old, new in zip(state, shape)]
    output.frame_state[name] = state
    static = getattr(value, _STATIC, set())
    kinds = {}
    for i in range(len(shape)):
        if i in static:
            continue
        if i in marked or (automatic and state[i] is None):
            kinds[i] = "DYNAMIC"
        elif all_dynamic:
            kinds[i] = "DUCK"
    wanted = list(kinds)
    strides = _changed_strides(output, name, value, state, automatic, static)
    if not wanted and not strides:
        return ()
    env = shape_env_of(output)
    if not can_be_dynamic(value) or _shares_storage(output, value):
        for i in wanted:
            env.specializations.append(_spec(f"{name}.size()[{i}]", shape[i],
                                             "it shares its storage with another input, or has autograd history "
                                             "and a layout a clone would not keep: our symbolic fakes own their storage"))
        return ()
    if strides:
        env.dynamic_strides[name] = strides
    dims = []
    for i in wanted:
        if shape[i] in (0, 1):
            env.specializations.append(_spec(f"{name}.size()[{i}]", shape[i], f"size {shape[i]} is specialized "
                                             "(0/1 specialization: broadcasting and emptiness depend on it)"))
        else:
            dims.append(i)
    if not hasattr(output, "dim_kinds"):
        output.dim_kinds = {}
    output.dim_kinds.update({(name, i): kinds[i] for i in dims})
    hard = getattr(value, _DYNAMIC, set())  # mark_dynamic, not maybe_mark_dynamic: a promise the trace must keep
    if hard & set(dims):
        if not hasattr(output, "marked_dynamic"):
            output.marked_dynamic = set()
        output.marked_dynamic.update(f"{name}.size()[{i}]" for i in hard & set(dims))
    return tuple(dims) if dims or not strides else _OnlyStrides()


class _OnlyStrides(tuple):
    """No dynamic size, but a dynamic stride (Note [Automatic dynamic strides]) or a view's base with one: still
    the symbolic path."""

    def __bool__(self) -> bool:
        return True


_STRIDES = "___strides"  # frame_state[_STRIDES]: {source: each stride traced, ("infer", i+1), or None once it changed}


def _changed_strides(output, name: str, value: torch.Tensor, sizes: list, automatic: bool, static: set) -> set:
    """Note [Automatic dynamic strides]

    A stride that changed between calls while every size of the tensor stayed the same
    (``arange(8)`` then ``arange(16)[::2]``: stride 1, then 2) gets a symbol of its own in
    the next trace, read from ``L['x'].stride()[0]`` (torch's ``FrameStateSizeEntry.is_stride_dynamic``,
    torch/_dynamo/pgo.py, and ``DimDynamic.DYNAMIC`` strides in builder.py ``_automatic_dynamic``).
    A stride that is the next dim's ``stride * size`` is recorded as that (torch's ``InferStride``),
    so a contiguous tensor whose sizes change never makes one; once a size has changed, no stride does.
    """
    strides, shape = [int(s) for s in value.stride()], [int(s) for s in value.shape]
    seen = [("infer", i + 1) if i + 1 < len(strides) and strides[i] == strides[i + 1] * shape[i + 1] else st
            for i, st in enumerate(strides)]
    record = output.frame_state.setdefault(_STRIDES, {})
    old = record.get(name)
    record[name] = seen if old is None or len(old) != len(seen) else \
        [None if o is None or o != n else o for o, n in zip(old, seen)]
    if not automatic or any(s is None for s in sizes):
        return set()
    return {i for i, st in enumerate(record[name]) if st is None and i not in static}


def _shares_storage(output, value: torch.Tensor) -> bool:
    """Another tensor among the frame's arguments (or their list/tuple/dict items) with ``value``'s storage,
    not through one base.

    Our symbolic fake of a tensor that is no view owns its storage (Note [A symbolic fake],
    fake/converter.py); a view's is made through its base's (Note [A view input is fakified
    through its base]). So inputs that share a storage through one base (``f(b, b.t())``,
    ``f(b[:4], b[4:])``) keep their aliasing, as torch's do; two that share it otherwise
    (``set_``, ``as_strided`` of another's storage, a view that changes the dtype) would lose
    it: such inputs stay static.
    """
    from minidynamo.fake.converter import through_base

    def root(t):  # the base a fake is made through, or None: the fake owns its storage
        return id(t._base) if through_base(t) else None if t._is_view() else id(t)

    seen = getattr(output, "_storages", None)
    if seen is None:
        seen = output._storages = {}
        items = []
        for v in output.L.values():
            items += list(v.values()) if isinstance(v, dict) else list(v) if isinstance(v, (list, tuple)) else [v]
        for v in items:
            if isinstance(v, torch.Tensor) and v.layout == torch.strided and not v.is_nested:
                try:
                    key = v.untyped_storage().data_ptr()
                except Exception:  # noqa: BLE001 - a tensor with no storage to read
                    continue
                seen.setdefault(key, {})[id(v)] = root(v)
    try:
        others = dict(seen.get(value.untyped_storage().data_ptr(), {}))
    except Exception:  # noqa: BLE001
        return False
    others.pop(id(value), None)
    mine = root(value)
    return any(r is None or r != mine for r in others.values()) and value.untyped_storage().nbytes() > 0


def _spec(source: str, value: int, reason: str):
    from minidynamo.shapes.symbolic_shapes import Specialization

    return Specialization(source, value, reason)


def shape_env_of(output):
    """The trace's ShapeEnv, made on first use; the fake mode sees it once a symbol exists."""
    env = getattr(output, "shape_env", None)
    if env is None:
        from minidynamo import config
        from minidynamo.shapes.symbolic_shapes import ShapeEnv

        # torch's OutputGraph: ShapeEnv(allow_scalar_outputs=config.capture_scalar_outputs, ...), so the
        # fake passes of AOTAutograd make unbacked symbols where Dynamo did (fake/unbacked_impls.py)
        env = output.shape_env = ShapeEnv(allow_scalar_outputs=config.capture_scalar_outputs
                                          or getattr(output, "fullgraph", False),  # torch: one_graph or ...
                                          allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops)
    return env


def convert_input(output, source: Source, value: torch.Tensor, dynamic_dims: tuple, new_placeholder: Callable):
    """The fake of a dynamic input, and one SymInt placeholder per symbol it brings (before its own)."""
    env = shape_env_of(output)
    output.fake_mode.shape_env = env
    output.frame_state[_TRACED_DYNAMIC] = True  # Note [A failed dynamic trace is retried static]
    env.unbacked_inputs.update(f"{source.name()}.size()[{i}]" for i in getattr(value, _UNBACKED, ()))
    kinds = getattr(output, "dim_kinds", {})
    duck = {i: kinds.get((source.name(), i), "DUCK") == "DUCK" for i in dynamic_dims}  # Note [Duck sizing]
    base_dims = getattr(output, "view_base_dims", {}).get(source.name(), ())
    base_duck = {i: kinds.get((f"{source.name()}._base", i), "DUCK") == "DUCK" for i in base_dims}
    fake = output.fake_mode.from_tensor(value, dynamic_dims=duck, source=source.name(), view_base_dims=base_duck)
    env.track_fake(source.name(), fake)  # Note [Guards walk the inputs]
    if fake._is_view() and value._is_view():  # torch's builder records the base too (wrap_tensor: ``value._base``)
        env.track_fake(f"{source.name()}._base", output.fake_mode.from_tensor(value._base))
    from .source import TensorPropertySource

    properties = [(SizeSource(source, i), fake.shape[i], int(value.shape[i])) for i in dynamic_dims]
    properties += [(TensorPropertySource(source, "stride", i), st, int(value.stride(i)))
                   for i, st in enumerate(fake.stride())]  # Note [A symbolic fake]: a stride may be a symbol
    properties.append((TensorPropertySource(source, "storage_offset"), fake.storage_offset(), int(value.storage_offset())))
    for prop_source, size, example in properties:
        if not isinstance(size, torch.SymInt) or not size.node.expr.is_Symbol:
            continue
        sym = size.node.expr
        if sym in output.symbol_proxies:
            continue
        node = new_placeholder(str(sym))
        node.type = torch.SymInt  # prints as `s77: torch.SymInt`, as torch's graphs
        node.meta["example_value"] = size
        node.meta["source"] = prop_source.name()
        output.symbol_proxies[sym] = torch.fx.Proxy(node, output.tracer)
        output.graphargs.append((prop_source, node, example))
    _stride_guards(output, source, value, fake)
    return fake


def _stride_guards(output, source: Source, value: torch.Tensor, fake) -> None:
    """A non-contiguous dynamic input's strides in its TENSOR_MATCH: the plain ints checked there.

    The TENSOR_MATCH guard checks the strides that are plain ints (Note [A symbolic fake]);
    a symbolic stride is any stride there, and the ShapeEnv guards it: its range
    (``2 <= L['x'].stride()[0]``) or its expression (``L['x'].stride()[0] == 5*L['x'].stride()[1]``),
    as torch's ``produce_guards`` does (Note [Guards walk the inputs]).
    """
    if value.is_contiguous():
        return
    n, guards = source.name(), output.guards
    spec = []
    for i, st in enumerate(fake.stride()):
        if not isinstance(st, torch.SymInt):
            spec.append(int(st))
            guards.add(source, "TENSOR_MATCH", f"{n}.stride()[{i}] == {int(st)}", "tensor input: the graph was "
                       "traced for its metadata", f"{n}.stride()")
            continue
        spec.append(-1)  # any stride in the C++ check; a shape guard checks it (Note [Guards walk the inputs])
    if n in guards.tensor_specs:
        dtype, device, sizes, _, requires_grad = guards.tensor_specs[n]
        guards.tensor_specs[n] = (dtype, device, sizes, tuple(spec), requires_grad)


# --- int inputs ------------------------------------------------------------------------

_INTS = "___ints"  # frame_state[_INTS]: {source: the int traced, or None once it changed}


def _int_static_by_rule(output, source: Source) -> bool:
    """Ints torch keeps static: globals, defaults, and attributes of modules (``is_int_specialization_case``)."""
    from .source import LocalSource

    chain = [source, *source.bases()]
    if not isinstance(chain[-1], LocalSource):
        return True
    if any(isinstance(s, AttrSource) and s.member in ("__defaults__", "__kwdefaults__") for s in chain):
        return True
    # a source we cannot read back keeps the int static
    return any(v is UNREADABLE or isinstance(v, torch.nn.Module) for v in base_values(output, source))


def int_input(tx, source: Source, value: int):
    """Note [Automatic dynamic for ints]

    An int argument is a constant of the trace (guard ``L['n'] == 2``) until a call
    passes another value; then, as torch's automatic dynamic does for sizes, the next
    trace makes it a ``SymInt`` graph input (``L_n_: torch.SymInt``) and later values
    reuse that graph. ``dynamic=True`` does so from the first call, ``dynamic=False``
    never. An int where a tensor was (or the reverse) counts as a change. Returns
    the placeholder's proxy and its SymInt (the builder wraps them in a ``SymNodeVariable``),
    or None to keep the int a constant.
    """
    from minidynamo import config

    output = tx.output
    mode = getattr(output, "dynamic", None)
    if mode is False or config.specialize_int or output.frame_state.get(_STATIC_NOW) \
            or _int_static_by_rule(output, source):
        return None
    all_dynamic, automatic = effective_dynamic(output)
    name = source.name()
    ints = output.frame_state.setdefault(_INTS, {})
    if name not in ints:
        ints[name] = None if name in output.frame_state else value  # a tensor was here before: changed
    elif ints[name] is not None and ints[name] != value:
        ints[name] = None
    if not all_dynamic and (ints[name] is not None or not automatic):
        return None
    env = shape_env_of(output)
    output.fake_mode.shape_env = env
    output.frame_state[_TRACED_DYNAMIC] = True  # Note [A failed dynamic trace is retried static]
    sym = env.create_int_symbol(value, name)
    symint = env.create_symint(sym, value)
    env.track_fake(name, symint)
    node = output._new_placeholder(source.fx_name(), torch.SymInt)
    node.meta["example_value"] = symint
    node.meta["source"] = name
    proxy = output.symbol_proxies[sym] = torch.fx.Proxy(node, output.tracer)
    output.graphargs.append((source, node, value))
    output.guards.TYPE_MATCH(source, value, "an int input traced as a SymInt (automatic dynamic)")
    return proxy, symint


# --- float inputs ----------------------------------------------------------------------


def float_input(tx, source: Source, value: float):
    """Note [A float input is lifted once it changes]

    torch 2.13 (``specialize_float=False``, torch/_dynamo/config.py) traces a float
    argument as a constant the first time (guard ``L['scale'] == 0.5``). When a call
    passes another value, the frame's record of it says "changed" (the same record an
    int has: a float where an int was, or the reverse, is a change), and the next trace
    lifts it (``VariableBuilder.wrap_symfloat``, torch/_dynamo/variables/builder.py): the
    graph takes a 0-d float64 tensor (``L_scale_``, read at the call as
    ``torch.tensor(L['scale'], dtype=torch.float64)``: torch's ``FloatTensorSource``) and
    calls ``.item()`` on it, a ``SymFloat`` over a backed symbol (``zf72`` for ``L['s']``) (Note [A float
    input becomes a symbol]). Later values reuse that graph. A decision on it
    (``if scale > 1``) is a guard (``L['scale'] > 1``), so a value on the other side
    compiles one more graph, which later values on that side reuse. ``dynamic=True``
    lifts from the first call, ``dynamic=False`` or ``specialize_float=True`` never;
    nan and inf stay constants (torch: "our guard modeling in ShapeEnv cannot deal with
    nan"). Unlike ints, globals, defaults and module attributes are lifted too.

    Simpler than torch: under an AOT backend, torch's ``tensorify_python_scalars``
    (torch/fx/passes/_tensorify_python_scalars.py) rewrites the ``.item()`` uses into
    tensor ops, or restarts the trace with the float a constant where it cannot
    (``TensorifyScalarRestartAnalysis``); ours does the same on the Dynamo graph,
    before AOT (Note [Tensorify before AOT], backends.py). Returns the function that makes
    the ``.item()`` node on first use and the SymFloat (the builder wraps them in a lazy
    ``SymNodeVariable``), or None to keep the float a constant.
    """
    import math

    from minidynamo import config

    output = tx.output
    if config.specialize_float or getattr(output, "dynamic", None) is False or output.frame_state.get(_STATIC_NOW):
        return None
    name = source.name()
    scalars = output.frame_state.setdefault(_INTS, {})
    if name not in scalars:
        scalars[name] = None if name in output.frame_state else value
    elif scalars[name] is not None and scalars[name] != value:
        scalars[name] = None
    if math.isnan(value) or math.isinf(value) or name in output.frame_state.get(_SPECIALIZED_FLOATS, ()):
        return None
    all_dynamic, automatic = effective_dynamic(output)
    if not all_dynamic and (scalars[name] is not None or not automatic):
        return None
    from minidynamo.shapes.symbolic_shapes import SymNode

    from .source import FloatTensorSource

    env = shape_env_of(output)
    output.fake_mode.shape_env = env
    output.frame_state[_TRACED_DYNAMIC] = True  # Note [A failed dynamic trace is retried static]
    output.guards.TYPE_MATCH(source, value, "a float input lifted to a graph input (specialize_float=False)")
    sym = env.create_float_symbol(value, name)
    symfloat = torch.SymFloat(SymNode(sym, env, float, value))
    env.track_fake(name, symfloat)

    def make_proxy():  # the graph input and its .item(), made when the trace first uses the float
        tensor_source = FloatTensorSource(source)
        wrapped = torch.tensor(value, dtype=torch.float64)
        node = output._new_placeholder(tensor_source.fx_name(), torch.Tensor)  # torch's type(wrapped_value)
        node.meta["example_value"] = output.fake_mode.from_tensor(wrapped)
        node.meta["source"] = tensor_source.name()
        output.graphargs.append((tensor_source, node, wrapped))
        proxy = output.create_proxy("call_method", "item", (torch.fx.Proxy(node, output.tracer),), {})
        proxy.node.meta["example_value"] = symfloat
        proxy.node.meta["float_input"] = name
        output.symbol_proxies[sym] = proxy
        return proxy

    return make_proxy, symfloat  # the builder wraps them: SymNodeVariable.lazy (variables/builder.py)


_SPECIALIZED_FLOATS = "___specialized_floats"  # frame_state: float sources a restart made constants


import operator as _op

# where a lifted float may flow for torch's tensorify to turn it into tensor compute: SymFloat
# arithmetic (``_sympy_interp``), and ops that decompose to its SUPPORTED_OPS (mul/add/sub/div
# .Tensor, the comparisons; ``s - x`` is ``aten.rsub.Scalar``, not among them)
_SYMFLOAT_ARITHMETIC = {_op.mul, _op.add, _op.sub, _op.truediv, _op.neg, _op.pow}
_TENSOR_OPS = {_op.mul, _op.add, _op.truediv, _op.sub, torch.mul, torch.add, torch.sub, torch.div, torch.true_divide,
               _op.gt, _op.lt, _op.ge, _op.le, _op.eq, _op.ne, _op.iadd, _op.imul, _op.isub, _op.itruediv}
_TENSOR_METHODS = {"mul", "add", "sub", "div", "true_divide", "mul_", "add_", "sub_", "div_", "gt", "lt", "ge", "le",
                   "eq", "ne", "__mul__", "__add__", "__sub__", "__truediv__"}
_FLIPS_TO_RSUB = {_op.sub, _op.isub, torch.sub}


def check_tensorify(graph: torch.fx.Graph, frame_state: dict, leaving: set = frozenset()) -> None:
    """Note [Tensorify before AOT]

    Under an AOT backend torch lowers the graph to ATen and runs
    ``tensorify_python_scalars``: each ``.item()`` of a lifted float whose uses are all
    SymFloat arithmetic feeding ``aten.mul/add/sub/div.Tensor`` or a comparison is
    rewritten into tensor compute on the 0-d input; if any use is something else
    (``torch.full(..., s)``, ``x.clamp(min=s)``, ``x ** s``, ``s - x``, ``int(s)``, a float
    returned or live at a graph break: torch's graph returns it), the float is marked to specialize and Dynamo restarts
    (``TensorifyScalarRestartAnalysis``), so that graph is traced with the float a
    constant and each new value compiles again. Ours makes the same decision on the
    Dynamo graph, from the torch-level op each use will decompose to, before AOT
    sees it. The eager backend and user callables get
    the graph with its ``.item()``, as torch's do. Where every use qualifies, the
    ``.item()`` is rewritten away as torch's pass does: the arithmetic runs on the 0-d
    tensor, and each tensor op reads it cast to its compute dtype, so AOT traces a
    graph of tensors only.
    """
    failed = set()
    for node in graph.nodes:
        name = node.meta.get("float_input") if node.op == "call_method" else None
        if name and (name in leaving or not _tensorifiable(node)):  # ``leaving``: returned, or live at a break
            failed.add(name)
    if failed:
        from .exc import TensorifyScalarRestartAnalysis

        frame_state.setdefault(_SPECIALIZED_FLOATS, set()).update(failed)
        raise TensorifyScalarRestartAnalysis(failed)
    for node in [n for n in graph.nodes if n.op == "call_method" and n.meta.get("float_input")]:
        _tensorify_uses(graph, node, node.args[0])
        graph.erase_node(node)


def _tensorify_uses(graph: torch.fx.Graph, node: torch.fx.Node, tensor: torch.fx.Node) -> None:
    """``node`` (a SymFloat) is now the 0-d float64 ``tensor``: its arithmetic computes on the tensor, and a
    tensor op reads it cast to the op's compute dtype (torch's ``convert_element_type`` in the same pass)."""
    for user in list(node.users):
        if user.target in _SYMFLOAT_ARITHMETIC and isinstance(user.meta.get("example_value"), torch.SymFloat):
            user.replace_input_with(node, tensor)
            user.meta.pop("example_value", None)  # a 0-d float64 tensor now
            _tensorify_uses(graph, user, user)
            continue
        dtype = user.meta["example_value"].dtype
        if dtype == torch.bool:  # a comparison: no cast, as torch
            user.replace_input_with(node, tensor)
            continue
        compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        with graph.inserting_before(user):
            cast = graph.call_method("to", (tensor, compute))
        user.replace_input_with(node, cast)


def _tensorifiable(node: torch.fx.Node) -> bool:
    for user in node.users:
        value = user.meta.get("example_value")
        if user.op == "call_function" and user.target in _SYMFLOAT_ARITHMETIC and isinstance(value, torch.SymFloat):
            if not _tensorifiable(user):
                return False
        elif user.op == "call_function" and user.target in _TENSOR_OPS and isinstance(value, torch.Tensor):
            if user.target in _FLIPS_TO_RSUB and user.args and user.args[0] is node:
                return False
        elif user.op == "call_method" and user.target in _TENSOR_METHODS and isinstance(value, torch.Tensor):
            if user.args and user.args[0] is node:
                return False
        else:
            return False
    return True


# --- sizes read in the trace --------------------------------------------------------------


def has_symbolic(value: Any) -> bool:
    from minidynamo.shapes.symbolic_shapes import is_symbolic

    if isinstance(value, (tuple, list)):
        return any(is_symbolic(v) for v in value)
    return is_symbolic(value)


# --- guards ---------------------------------------------------------------------------


def install_shape_guards(output) -> None:
    """The ShapeEnv's guards join the entry's (kind SHAPE_ENV, each one readable Python)."""
    env = getattr(output, "shape_env", None)
    if env is None:
        return
    sources = {src for srcs in env.var_to_sources.values() for src in srcs}
    _check_marked_dims_stayed_dynamic(output, env)
    _write_back_specialized_sizes(output, env)
    for expr, why in env.produce_guards():
        read = {src for src in sources if src in expr}  # a guard over one input says what it is now
        output.guards.add(None, "SHAPE_ENV", expr, why, read.pop() if len(read) == 1 else "")
    for spec in env.specializations:
        events.emit("guard", source=spec.source, guard_kind="SPECIALIZATION", expr=f"{spec.source} == {spec.value}", why=spec.reason)


def _write_back_specialized_sizes(output, env) -> None:
    """A size symbol the trace fixed to a constant (``range(x.shape[0])``) is a static size of the tensor's
    TENSOR_MATCH again, as torch's fake sizes are when its guards are built: a call of another size fails
    there first (``tensor 'x' size mismatch at index 0. expected 3, actual 4``)."""
    import sympy

    specs = output.guards.tensor_specs
    for sym, srcs in env.var_to_sources.items():
        fixed = env.simplify(sym)
        if not isinstance(fixed, sympy.Integer):
            continue
        for src in srcs:
            name, _, rest = src.partition(".size()[")
            if not rest or name not in specs:
                continue
            i = int(rest.rstrip("]"))
            dtype, device, sizes, strides, requires_grad = specs[name]
            if i < len(sizes) and sizes[i] == -1:
                specs[name] = (dtype, device, sizes[:i] + (int(fixed),) + sizes[i + 1:], strides, requires_grad)


def _pinned_by_bounds(env, sym):
    """The one value the trace's guards on ``sym`` alone leave it (``s0 >= 2`` and ``s0 <= 2``: 2), else None.

    Those guards bound an interval; the example value is pinned when neither neighbour is in it."""
    import sympy

    hint = env.var_to_val.get(sym)
    own = [env.simplify(g.expr) for g in env.guards]
    own = [e for e in own if getattr(e, "free_symbols", None) == {sym}]
    if hint is None or not own:
        return None

    def allowed(v) -> bool:
        return v >= 2 and all(bool(e.subs(sym, v)) for e in own)  # a size symbol is >= 2 (0/1 specialization)

    try:
        return sympy.Integer(hint) if not allowed(hint - 1) and not allowed(hint + 1) else None
    except TypeError:  # a guard sympy cannot decide at a number (it has another symbol after all)
        return None


def _check_marked_dims_stayed_dynamic(output, env) -> None:
    """A dim marked with ``mark_dynamic`` that the trace fixed to a constant is an error, as torch's
    ``ConstraintViolationError`` (torch/fx/experimental/symbolic_shapes.py ``produce_guards_verbose``):
    ``maybe_mark_dynamic`` is the mark that lets the code specialize it."""
    marked = getattr(output, "marked_dynamic", set())
    if not marked:
        return
    import sympy

    from .exc import ConstraintViolationError

    for sym, srcs in env.var_to_sources.items():
        fixed = env.simplify(sym)
        if not isinstance(fixed, sympy.Number) and any(src in marked for src in srcs):
            fixed = _pinned_by_bounds(env, sym)
        for src in srcs:
            if src in marked and isinstance(fixed, sympy.Number):
                raise ConstraintViolationError(
                    f"Constraints violated ({src})! For more information, run with MINIDYNAMO_LOGS=\"dynamic\".\n"
                    f"  - You marked {src} as dynamic but your code specialized it to be a constant ({fixed}). "
                    "If you're using mark_dynamic, either remove it or use maybe_mark_dynamic.")


def retry_static(frame, frame_state: dict, fallback) -> bool:
    """Note [A failed dynamic trace is retried static]

    A trace with symbolic sizes that fails (an op or construct our ShapeEnv does not
    handle, an internal error) is not the end of the frame: it is traced once more
    with every size static, as before dynamic shapes existed, with a warning that
    names the function and the reason. A static trace that fails is final.
    """
    if not frame_state.pop(_TRACED_DYNAMIC, False) or frame_state.get(_STATIC_NOW):
        return False
    frame_state[_STATIC_NOW] = getattr(fallback, "reason", None) or "the trace raised where eager did not"
    return True


def warn_if_retried(frame, frame_state: dict, entry) -> None:
    """The static retrace worked: say why the frame is static now (once, when it happens)."""
    reason = frame_state.get(_STATIC_NOW)
    if entry is not None and isinstance(reason, str):
        frame_state[_STATIC_NOW] = True
        warnings.warn(f"minidynamo: the dynamic-shape trace of {frame.__name__} failed ({reason}); it was traced "
                      "again with static sizes, and its sizes stay static from now on", stacklevel=5)


def automatic_dynamic_changes(frame_state: dict, L: dict, G: dict, dynamic) -> list[str]:
    """Which recorded input sizes differ now: the dims the next trace makes dynamic (recompile event)."""
    if dynamic is False:
        return []
    changed = []
    for name, state in frame_state.items():
        if name == _INTS:
            # an int that is now another int; one that is now something else (a tensor in the
            # cell that held 2) is a type change, not a size to make dynamic, and `!=` on it
            # would be a tensor (an error of ours at the call)
            changed += [n for n, v in state.items() if v is not None and _int_changed(_read(n, L, G, v), v)]
            continue
        if name.startswith("___"):
            continue
        value = _read(name, L, G, None)
        if not isinstance(value, torch.Tensor) or value.dim() != len(state):
            continue
        changed += [f"{name}.size()[{i}]" for i, (old, new) in enumerate(zip(state, value.shape))
                    if old is not None and old != new]
    return changed


def _int_changed(now, recorded) -> bool:
    """An int or float input that is now another int or float (Note [A float input is lifted once it changes])."""
    return type(now) in (int, float) and now != recorded


def _read(name: str, L: dict, G: dict, default):
    try:
        return eval(name, {"L": L, "G": G})  # noqa: S307 - a source expression of ours
    except Exception:  # noqa: BLE001
        return default
