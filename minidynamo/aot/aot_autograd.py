"""``aot_function``, ``aot_module``, ``aot_module_simplified``: the whole mini AOTAutograd.

Place in the pipeline: the entry points. Dynamo's ``aot_eager`` backend calls
``aot_module_simplified`` on each captured graph; a reader can call ``aot_function``
on any function. Mirrors ``torch/_functorch/aot_autograd.py`` and
``_aot_autograd/graph_compile.py`` (``aot_stage1_graph_capture``,
``aot_stage2_compile``).

When compiled (Dynamo's backend call, or ``aot_function``'s first call)::

    flatten args (pytree)                  non-tensor args ride along untouched
    dedupe: same tensor twice -> once      (runtime_wrappers.aot_wrapper_dedupe)
    synthetic base for aliased inputs      (runtime_wrappers.aot_wrapper_synthetic_base)
    collect_metadata        FakeTensor pass 2 -> ViewAndMutationMeta
    joint graph             FakeTensor pass 3 (graph_capture)
    partition_fn            forward graph + backward graph (default or min-cut)
    fw_compiler / bw_compiler                 (default: run the fx graph as is)
    CompiledFunction + runtime wrapper        (runtime_wrappers)

Note [Compiled once, like torch's aot_function]
    torch's ``aot_function`` compiles on the first call and reuses the result
    for every later call without checking the arguments again: guarding is
    Dynamo's job. Ours does the same, except for the two things Dynamo does not
    guard for us (Note [Aliasing is part of the compile key]), so the per-call
    cost is the runtime wrapper's plus one grad-mode check.

Note [Aliasing is part of the compile key]
    Whether the graph is a training or an inference graph follows grad mode
    when it is compiled; a call in the other grad mode must not reuse it (a first
    call under ``no_grad`` would freeze an inference graph for later training).
    Dynamo's global-state guard already keeps each graph in its grad mode;
    ``aot_function`` checks it too (one C call), and compiles a variant per mode.
    Which inputs share a storage decides the dedupe and synthetic-base
    wrappers, but only matters when the graph mutates an input: then every call
    checks the inputs' aliasing (storages, identities, offsets) against the one
    compiled for (Note [The aliasing check per call]), and a new aliasing compiles
    its own variant. torch instead adds storage-overlap guards to Dynamo for the
    inputs it found overlapping, and checks nothing for inputs it did not: after
    ``f(x, y)``, torch's ``f(x, x[:])`` with ``x`` mutated reuses the graph
    compiled for two storages (``x[:]`` does not see the write).

Note [AOT failures run the graph eagerly]
    Any exception inside AOT (an op functionalization does not handle, a joint
    trace autograd refuses) makes that graph run eagerly, with an
    ``AOTFallbackWarning`` naming the graph, the user's function, the op and its
    source line, and the reason. At call time only the compiled graphs and the
    wrappers run, so nothing of AOT's is raised there that eager would not raise.
"""

from __future__ import annotations

import collections
import functools
import inspect
import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx as fx

from minidynamo import events
from minidynamo._torch_private import SUPPORTED_NODES, set_grad_enabled_c, tree_flatten, tree_unflatten
from minidynamo.aot.graph_capture import aot_dispatch_autograd_graph, aot_dispatch_base_graph, needs_autograd
from minidynamo.aot.graph_runner import run_graph_fast
from minidynamo.aot.partitioners import PartitionResult, default_partition
from minidynamo.aot.sym_tracing import SymbolicAOTFailed, is_dynamic_graph
from minidynamo.aot.runtime_wrappers import (
    aot_wrapper_dedupe,
    aot_wrapper_synthetic_base,
    create_compiled_function,
    create_runtime_wrapper,
)

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "AOTConfig", "AOTFallbackWarning", "CompiledArtifacts",
           "SymbolicAOTFailed"]


def _run_graph(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
    """The default compiler: run the fx graph as it is (the "aot_eager" way).

    The graph's function rather than ``gm``: the graph has no hooks, so the
    ``nn.Module.__call__`` machinery would only add a few microseconds per call;
    and each aten op is called through its cheapest faithful entry point
    (graph_runner's Note [Calling aten ops without OpOverload.__call__]).
    """
    return run_graph_fast(gm)


class _BoxedCodeGen(fx.graph.CodeGen):
    """fx code taking one list of inputs, which it empties first (torch: ``fx.graph._BoxedCodeGen``).

    Note [The backward frees what it has read]
        Eager's autograd engine frees each node's saved tensors as soon as that
        node has run; a compiled backward called as ``bw(*saved, *tangents)``
        keeps every saved activation alive until it returns (the argument tuple
        holds them), so the whole backward runs at the forward's peak memory
        and the allocator hands out fresh, cold pages all the way (measured on
        mobilenet_v3_small: the backward graph took ~25% longer than eager's).
        As torch's ``CompiledFunction`` does, ours clears ``ctx``'s saved
        tensors once unpacked (``ctx.maybe_clear_saved_tensors()``: a no-op
        under ``retain_graph=True``) and calls the graph "boxed": it takes a
        list and clears it, so each input dies at its last use (fx's code
        already sets a value to ``None`` after its last use).
    """

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str, **kwargs: Any) -> str:
        names = [v.split(":")[0].split("=")[0].strip() for v in free_vars if v != "self"]
        lines = [f"def {self._func_name}(self, args_list){maybe_return_annotation}:"]
        if names:
            lines.append(f"    {', '.join(names)}, = args_list")
        lines.append("    args_list.clear()")
        return "\n".join(lines)


def _boxed_graph(gm: fx.GraphModule) -> Callable:
    """``gm``'s graph, copied, called with one list it empties (Note [The backward frees what it has read])."""
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    graph.set_codegen(_BoxedCodeGen())
    return run_graph_fast(gm, graph)


@dataclass
class AOTConfig:
    fw_compiler: Callable = _run_graph
    bw_compiler: Callable | None = None
    partition_fn: Callable = default_partition
    keep_inference_input_mutations: bool = False


@dataclass
class CompiledArtifacts:
    """What the last compile made, for chapters and tests to look at."""

    meta: Any = None
    joint: Any = None
    partition: PartitionResult | None = None
    fw_module: fx.GraphModule | None = None
    compiled_function: Any = None  # the autograd.Function class (training path)
    wrappers: list[str] = field(default_factory=list)
    fallback: str | None = None  # why the graph runs eagerly (Note [AOT failures run the graph eagerly])


@dataclass
class _Entry:
    """One compiled variant: for a grad mode and, if it mutates inputs, an aliasing of its inputs."""

    compiled: Callable
    alias_sig: tuple | None  # None: aliasing does not matter (no input is mutated)
    art: CompiledArtifacts
    fast: Callable | None = None
    variants: dict = field(default_factory=dict)  # other alias signatures, same grad mode
    alias_ok: Callable | None = None  # args -> whether they alias as alias_sig says; None: no check


def _aliasing_check(sig: tuple | None, flat_args: list[Any]) -> Callable[[tuple], bool] | None:
    """The per-call check that arguments alias as ``sig`` says, chosen once (Note [The aliasing check per call]).

    Note [The aliasing check per call]
        A graph that mutates no input checks nothing. One compiled for inputs of
        which no two share a storage (``sig == ()``, by far the common case)
        checks exactly that: the tensors' storages, one C call each through
        ``map``, are all distinct (a storage has one Python object while it is
        alive: PyObject preservation, so a ``set`` of them counts the distinct
        ones). Any sharing, or an argument that is not a tensor where one was,
        falls to the full ``_alias_signature``, which picks or compiles the
        variant for it. Only a graph compiled for shared storages computes the
        full signature on every call. What this cannot see is two storages over
        the same memory (two ``torch.from_numpy`` of one array), as torch's
        guards cannot either.
    """
    if sig is None:
        return None
    if sig:
        return lambda args: _alias_signature(args) == sig
    positions = [i for i, a in enumerate(flat_args) if isinstance(a, torch.Tensor)]
    count = len(positions)
    if count < 2:
        return lambda args: True
    if count == len(flat_args):
        def no_shared_storage(args: tuple) -> bool:
            try:
                return len(set(map(_untyped_storage, args))) == count
            except Exception:  # a non-tensor, or a tensor without a storage
                return _alias_signature(args) == ()
    else:
        pick = operator.itemgetter(*positions)

        def no_shared_storage(args: tuple) -> bool:
            try:
                return len(set(map(_untyped_storage, pick(args)))) == count
            except Exception:
                return _alias_signature(args) == ()
    return no_shared_storage


def _example_inputs(gm: fx.GraphModule) -> list[Any]:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _partition(config: AOTConfig, joint: Any, flat_args: list[Any], meta: Any) -> PartitionResult:
    """Call the partitioner; one that takes them gets torch's hints (static inputs, mutated inputs)."""
    params = inspect.signature(config.partition_fn).parameters
    kwargs: dict[str, Any] = {"num_fwd_outputs": joint.num_fwd_outputs}
    if "static_lifetime_input_indices" in params:
        kwargs["static_lifetime_input_indices"] = [
            i for i, a in enumerate(flat_args) if isinstance(a, torch.nn.Parameter)]
    if "mutated_input_indices" in params:
        kwargs["mutated_input_indices"] = [
            i for i in meta.mutated_inp_runtime_indices if meta.input_info[i].mutates_data
        ] + list(meta.mutated_graph_handled_indices)
    return config.partition_fn(joint.gm, **kwargs)


def _check_metadata_mutations_fit(meta: Any, fw_module: fx.GraphModule, flat_args: list[Any]) -> None:
    """Note [A resize_ that grows an input]: refuse it at compile time, not at the first call.

    Functionalization lets ``x.resize_(n)`` grow an input (a fresh, bigger value),
    and metadata collection agrees with torch's; but the user's tensor keeps its
    storage, so the wrapper's ``as_strided_`` would fail on every call (torch's
    compiled function does fail there: ``setStorage: ... out of bounds``). The
    forward graph returns each metadata-mutated input's final value first; if its
    layout does not fit the input's storage, the graph runs eagerly instead.
    So does one whose data mutation changed its sizes (``resize_as_``, ``set_()``
    replace the value, Note [An inplace_view op that is no view]): the copy_ back
    (in the graph or the wrapper) cannot resize the caller's tensor; torch's
    compiled function raises there, or broadcasts silently.
    """
    _check_data_mutations_fit(meta, fw_module, flat_args)
    if not meta.mutated_inp_runtime_indices:
        return
    out_node = next(n for n in fw_module.graph.nodes if n.op == "output")
    for pos, idx in enumerate(meta.mutated_inp_runtime_indices):
        if not meta.input_info[idx].mutates_metadata:
            continue
        val = out_node.args[0][pos].meta.get("val") if isinstance(out_node.args[0][pos], fx.Node) else None
        inp = flat_args[idx]
        if not isinstance(val, torch.Tensor) or not isinstance(inp, torch.Tensor) or val.numel() == 0:
            continue
        last = val.storage_offset() + sum((n - 1) * st for n, st in zip(val.shape, val.stride()))
        need = (last + 1) * val.element_size()
        have = inp.untyped_storage().nbytes()
        if need > have:
            try:  # the error torch's compiled function raises at call time (its wrapper's as_strided_)
                torch.empty(have // inp.element_size(), dtype=inp.dtype, device="meta").as_strided_(
                    val.shape, val.stride(), val.storage_offset())
                theirs = "setStorage ... out of bounds"
            except RuntimeError as exc:
                theirs = str(exc).splitlines()[0]
            raise RuntimeError(
                f"input {idx} grows from a storage of {have} bytes to a layout needing {need} (resize_ to a "
                "larger size): the compiled function could not write that back to the caller's tensor "
                f"(torch's fails at run time: {theirs})"
            )


def _check_data_mutations_fit(meta: Any, fw_module: fx.GraphModule, flat_args: list[Any]) -> None:
    """An input mutated in its data only, whose new value has other sizes: see Note [A resize_ that grows an input]."""
    nodes = list(fw_module.graph.nodes)
    out_node = nodes[-1]
    new_values = {idx: out_node.args[0][pos] for pos, idx in enumerate(meta.mutated_inp_runtime_indices)}
    placeholders = [n for n in nodes if n.op == "placeholder"]
    for n in nodes:  # kept in the graph: copy_(input, new value)
        if n.target is torch.ops.aten.copy_.default and n.args[0] in placeholders[:len(flat_args)]:
            new_values[placeholders.index(n.args[0])] = n.args[1]
    for idx, node in new_values.items():
        info, inp = meta.input_info[idx], flat_args[idx]
        val = node.meta.get("val") if isinstance(node, fx.Node) else None
        if info.mutates_metadata or not isinstance(val, torch.Tensor) or not isinstance(inp, torch.Tensor) \
                or tuple(val.shape) == tuple(inp.shape):
            continue
        try:  # what torch's compiled function meets at call time
            torch.empty(inp.shape, device="meta").copy_(torch.empty(val.shape, device="meta"))
            theirs = "broadcasts it silently"
        except RuntimeError as exc:
            theirs = f"fails at run time: {str(exc).splitlines()[0]}"
        raise RuntimeError(
            f"input {idx} changes its sizes from {tuple(inp.shape)} to {tuple(val.shape)} by a data mutation "
            "(resize_as_, set_()): the compiled function could not write that back to the caller's tensor "
            f"(torch's {theirs})"
        )


def _trace_joint(flat_fn: Callable, flat_args: list[Any], meta: Any, fake_mode: Any, fresh_mode: Callable) -> Any:
    """The joint graph; traced again with saved-value hooks if autograd saw a saved input mutated.

    See graph_capture's Note [A mutated input that autograd saved]: the first trace
    is torch's; only a program on which torch's own joint trace fails is retraced.
    """
    try:
        return aot_dispatch_autograd_graph(flat_fn, flat_args, meta, fake_mode=fake_mode)
    except RuntimeError as exc:
        if "modified by an inplace operation" not in str(exc):
            raise
    return aot_dispatch_autograd_graph(flat_fn, flat_args, meta, fake_mode=fresh_mode(), saved_value_hooks=True)


def _symbolic_mode(flat_args: list[Any]) -> Any:
    """The fake mode of symbolic inputs (Note [AOT traces Dynamo's symbols], sym_tracing.py), else None.

    Every pass then runs in that one mode: its fakes carry the ShapeEnv's symbols.
    """
    from minidynamo.fake import FakeTensor

    mode = next((a.fake_mode for a in flat_args if isinstance(a, FakeTensor)), None)
    return mode if mode is not None and mode.shape_env is not None else None


def aot_dispatch(flat_fn: Callable, flat_args: list[Any], config: AOTConfig, art: CompiledArtifacts, *,
                 as_strided_inputs: frozenset[int] = frozenset(), meta: Any = None) -> Callable:
    """Compile a flat function with no duplicate and no aliased-and-mutated inputs."""
    from minidynamo.aot.collect_metadata_analysis import collect_metadata
    from minidynamo.fake import FakeTensorMode

    training = needs_autograd(flat_args)
    keep = config.keep_inference_input_mutations
    if meta is None or meta.keep_input_mutations != keep:
        meta = collect_metadata(flat_fn, *flat_args, keep_input_mutations=keep)
    sym_mode = _symbolic_mode(flat_args)
    if sym_mode is not None and any(i.mutates_metadata for i in meta.input_info):
        raise RuntimeError("an input's metadata is mutated (t_, resize_, set_) in a graph over symbolic sizes")
    fresh_mode = FakeTensorMode if sym_mode is None else (lambda: sym_mode)
    fake_mode = fresh_mode()
    if training:
        joint = _trace_joint(flat_fn, flat_args, meta, fake_mode, fresh_mode)
        part = _partition(config, joint, flat_args, meta)
        saved = {n.name for n in part.saved_values}
        if any(f"primals_{i + 1}" in saved or i in joint.saved_then_mutated
               for i in meta.mutated_graph_handled_indices):
            # The backward reads an input the forward's copy_ overwrote: write it back outside
            # instead, after save_for_backward, so its version counter catches it (as eager does).
            meta = collect_metadata(flat_fn, *flat_args, keep_input_mutations=False)
            joint = _trace_joint(flat_fn, flat_args, meta, fresh_mode(), fresh_mode)
            part = _partition(config, joint, flat_args, meta)
    art.meta = meta
    if training:
        _check_metadata_mutations_fit(meta, part.fw_module, flat_args)
        art.joint, art.partition, art.fw_module = joint, part, part.fw_module
        compiled_fw = config.fw_compiler(part.fw_module, _example_inputs(part.fw_module))
        bw_compiler = config.bw_compiler or config.fw_compiler
        boxed_bw = bw_compiler is _run_graph
        compiled_bw = (_boxed_graph(part.bw_module) if boxed_bw
                       else bw_compiler(part.bw_module, _example_inputs(part.bw_module)))
        fn_cls = create_compiled_function(
            compiled_fw, compiled_bw, meta,
            tangent_mask=joint.tangent_mask,
            fw_out_requires_grad=joint.fw_out_requires_grad,
            num_inputs=len(flat_args),
            bw_mutated=joint.bw_mutated_inputs,
            version_checked=joint.saved_then_mutated,
            stale_saved=joint.stale_saved,
            boxed_bw=boxed_bw,
        )
        compiled_fn = fn_cls.apply
        art.compiled_function = fn_cls
        art.wrappers.append("CompiledFunction")
    else:
        gm = aot_dispatch_base_graph(flat_fn, flat_args, meta, fake_mode=fake_mode)
        _check_metadata_mutations_fit(meta, gm, flat_args)
        art.fw_module = gm
        compiled = config.fw_compiler(gm, _example_inputs(gm))
        is_grad_enabled = torch.is_grad_enabled

        def compiled_fn(*args):
            if not is_grad_enabled():
                return compiled(*args)
            set_grad_enabled_c(False)  # the C call: cheaper than entering torch.no_grad()
            try:
                return compiled(*args)
            finally:
                set_grad_enabled_c(True)

        art.wrappers.append("inference")
    art.wrappers.append("RuntimeWrapper")
    # Note [A runtime wrapper with nothing to do]: apply() returns a tuple, and so does fx's code.
    returns_tuple = training or config.fw_compiler is _run_graph
    if sym_mode is not None:  # Note [Sizes per call] (runtime_wrappers.py)
        from minidynamo.aot.sym_tracing import size_resolver

        return create_runtime_wrapper(compiled_fn, meta, as_strided_inputs=as_strided_inputs,
                                      resolve=size_resolver(flat_args), returns_tuple=returns_tuple)
    return create_runtime_wrapper(compiled_fn, meta, as_strided_inputs=as_strided_inputs, returns_tuple=returns_tuple)


def create_aot_dispatcher_function(flat_fn: Callable, flat_args: list[Any], config: AOTConfig,
                                   art: CompiledArtifacts) -> Callable:
    """Dedupe, then synthetic bases, then the compile proper (torch: same order of wrappers)."""
    keep = config.keep_inference_input_mutations

    def after_dedupe(fn, args, meta=None):
        return aot_wrapper_synthetic_base(
            fn, args, lambda f, a, **kw: aot_dispatch(f, a, config, art, **kw), art.wrappers, meta=meta,
            keep_input_mutations=keep,
        )

    return aot_wrapper_dedupe(flat_fn, flat_args, after_dedupe, art.wrappers, keep_input_mutations=keep)


# Arguments pytree would look into; anything else is a leaf.
_CONTAINERS = (tuple, list, dict)


def _all_leaves(args: tuple) -> bool:
    """True when pytree would flatten ``args`` to itself: no argument is a container.

    Checked per distinct type (usually one: ``torch.Tensor``), so 200 tensor
    arguments cost one ``set(map(type, args))``, not 200 ``isinstance`` calls.
    """
    return not any(k in SUPPORTED_NODES or issubclass(k, _CONTAINERS) for k in set(map(type, args)))


def _fast_call(compiled: Callable, out_spec: Any, returns_tuple: bool | None = True) -> Callable:
    """``compiled`` plus the output unflatten, specialised once for the common output shapes.

    Note [The hot path skips pytree]
        Every call of a compiled function would flatten its arguments and
        unflatten its outputs. When the first call's arguments were already flat
        (positional tensors, no containers), later calls like it pass straight
        through; a tuple of tensors comes back as it is. Anything else takes the
        pytree path, which also checks that the structure is the compiled one.
    """
    if out_spec.is_leaf():
        return lambda *args: compiled(*args)[0]
    if out_spec.type is tuple and all(out_spec.child(i).is_leaf() for i in range(out_spec.num_children)):
        return compiled if returns_tuple else lambda *args: tuple(compiled(*args))
    return lambda *args: tree_unflatten(list(compiled(*args)), out_spec)


_Parameter = torch.nn.Parameter
_PLAIN = frozenset({int, float, bool, type(None), str})
_untyped_storage = torch.Tensor.untyped_storage


def _alias_signature(flat_args: tuple) -> tuple:
    """Which flat arguments share a storage, and how (Note [Aliasing is part of the compile key]).

    Tensors are grouped by their storage (a view, ``x.detach()``, ``y.set_(x.untyped_storage())``
    all share ``x``'s). ``()`` when no two share one; else one entry per argument:
    ``None`` for a non-tensor or a tensor alone, else ``(first position in its group,
    same object as that one, storage offset)``. Per call, Note [The aliasing check per call]
    decides when this is needed.
    """
    first: dict[int, int] = {}
    keys: list[int | None] = []
    shared = False
    for i, a in enumerate(flat_args):
        t = type(a)  # isinstance on a Parameter costs ~0.4 us (a Python __instancecheck__): test the type first
        if t is torch.Tensor or t is _Parameter or (t not in _PLAIN and isinstance(a, torch.Tensor)):
            try:
                k = id(a.untyped_storage())  # alive as long as ``a`` is: ids cannot be reused meanwhile
            except Exception:  # no storage (sparse, ...): its autograd base stands for it
                base = a._base
                k = id(a if base is None else base)
            if k in first:
                shared = True
            else:
                first[k] = i
            keys.append(k)
        else:
            keys.append(None)
    if not shared:
        return ()
    counts = collections.Counter(keys)
    return tuple(
        None if k is None or counts[k] == 1
        else (first[k], flat_args[first[k]] is flat_args[i], flat_args[i].storage_offset())
        for i, k in enumerate(keys)
    )


class AOTFallbackWarning(UserWarning):
    """A graph AOTAutograd could not compile runs eagerly instead (the message says why)."""


def _failure_reason(exc: BaseException) -> str:
    where = getattr(exc, "_md_aot_node", None)
    reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if where is not None:
        op, line = where
        return f"at {op}" + (f" (line {line})" if line else "") + f": {reason}"
    return reason


def aot_function(fn: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None, *,
                 partition_fn: Callable = default_partition, keep_inference_input_mutations: bool = False,
                 name: str | None = None) -> Callable:
    """Compile ``fn`` through mini AOTAutograd (Note [Compiled once, like torch's aot_function]).

    ``fw_compiler(gm, example_inputs)`` / ``bw_compiler`` return a callable taking
    the graph's inputs positionally; the default runs the graph. The returned
    function has ``.artifacts`` (meta, joint graph, partition) of its latest compile,
    and ``.compile_now(*flat_args)``, which compiles for those arguments right away
    (the Dynamo backend calls it at Dynamo's compile time).
    """
    config = AOTConfig(fw_compiler or _run_graph, bw_compiler, partition_fn, keep_inference_input_mutations)
    label = name or getattr(fn, "__qualname__", repr(fn))
    state: dict[str, Any] = {}
    # Note [Aliasing is part of the compile key]: grad mode -> the entry compiled for it.
    by_grad: dict[bool, _Entry] = {}

    def flat_fn_for(in_spec):
        def flat_fn(*flat):
            a, kw = tree_unflatten(list(flat), in_spec)
            out = fn(*a, **kw)
            flat_out, out_spec = tree_flatten(out)
            state["out_spec"] = out_spec
            return tuple(flat_out)
        return flat_fn

    def compile_flat(flat_args: list[Any], in_spec: Any, flat: bool) -> _Entry:
        grad = torch.is_grad_enabled()
        sig = _alias_signature(flat_args)
        entry = by_grad.get(grad)
        if entry is not None and (entry.alias_sig is None or entry.alias_sig == sig):
            return entry
        if entry is not None and sig in entry.variants:
            return entry.variants[sig]
        art = CompiledArtifacts()
        flat_fn = flat_fn_for(in_spec)
        try:
            compiled = create_aot_dispatcher_function(flat_fn, flat_args, config, art)
            mutates = art.meta is not None and any(
                i.mutates_data or i.mutates_metadata for i in art.meta.input_info)
        except Exception as exc:  # Note [AOT failures run the graph eagerly]
            warnings.warn(
                f"minidynamo.aot: {label} runs eagerly, AOTAutograd could not compile it {_failure_reason(exc)}",
                AOTFallbackWarning, stacklevel=3,
            )
            art.fallback = _failure_reason(exc)
            compiled, mutates = flat_fn, False
        returned_function.artifacts = art
        new = _Entry(compiled, sig if mutates else None, art)
        new.alias_ok = _aliasing_check(new.alias_sig, flat_args)
        if "out_spec" in state and flat and not art.fallback:
            new.fast = _fast_call(compiled, state["out_spec"], returns_tuple=True)
        if entry is None:
            by_grad[grad] = new
        else:
            entry.variants[sig] = new
        return new

    def returned_function(*args, **kwargs):
        entry = by_grad.get(torch.is_grad_enabled())
        if (entry is not None and entry.fast is not None and not kwargs and len(args) == state["num_args"]
                and _all_leaves(args) and (entry.alias_ok is None or entry.alias_ok(args))):
            return entry.fast(*args)  # the hot path: flat positional arguments flatten to themselves
        flat_args, in_spec = tree_flatten((args, kwargs))
        if "in_spec" not in state:
            state["num_args"], state["in_spec"] = len(flat_args), in_spec
        elif in_spec != state["in_spec"]:
            raise TypeError(
                f"aot_function: compiled for arguments shaped {state['in_spec']}, called with {in_spec} "
                "(a new structure needs a new aot_function)"
            )
        flat = not kwargs and _all_leaves(args)
        entry = compile_flat(flat_args, in_spec, flat)
        outs = entry.compiled(*flat_args)
        if entry.fast is None and flat and not entry.art.fallback:
            entry.fast = _fast_call(entry.compiled, state["out_spec"], returns_tuple=type(outs) is tuple)
        return tree_unflatten(list(outs), state["out_spec"])

    def compile_now(*flat_args):
        """Compile for these flat arguments now (under the current grad mode), without running."""
        _, in_spec = tree_flatten((flat_args, {}))
        if "in_spec" not in state:
            state["num_args"], state["in_spec"] = len(flat_args), in_spec
        compile_flat(list(flat_args), in_spec, True)

    def call_flat(*flat_args):
        """Like the function, for callers that promise flat positional leaves (Dynamo's backend entry)."""
        entry = by_grad.get(torch.is_grad_enabled())
        if (entry is not None and entry.fast is not None and len(flat_args) == state["num_args"]
                and (entry.alias_ok is None or entry.alias_ok(flat_args))):
            return entry.fast(*flat_args)
        return returned_function(*flat_args)

    returned_function.artifacts = CompiledArtifacts()
    returned_function.call_flat = call_flat
    returned_function.compile_now = compile_now
    returned_function.__wrapped__ = fn
    return returned_function


def aot_module(module: torch.nn.Module, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
               **kwargs: Any) -> torch.nn.Module:
    """An ``nn.Module`` whose forward runs ``module`` through ``aot_function``, parameters as inputs."""
    names = [n for n, _ in module.named_parameters()] + [n for n, _ in module.named_buffers()]

    def functional_call(params_and_buffers, *args, **kw):
        return torch.func.functional_call(module, dict(zip(names, params_and_buffers)), args, kw)

    compiled = aot_function(functional_call, fw_compiler, bw_compiler, **kwargs)

    class AOTModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.orig_module = module

        def forward(self, *args, **kw):
            params = [p for _, p in module.named_parameters()] + [b for _, b in module.named_buffers()]
            return compiled(params, *args, **kw)

    out = AOTModule()
    out.artifacts = compiled.artifacts
    return out


class _SourceLineInterpreter(fx.Interpreter):
    """Runs Dynamo's graph node by node, each node's FakeTensor ops stamped with its user source line.

    Note [AOT ops carry Dynamo's source lines]
        Dynamo records on every node the line of user code it was interpreting
        (``node.meta["source_line"]``, ``OutputGraph.create_proxy``). The AOT
        passes (metadata collection, joint capture) run that graph; run through
        this interpreter, each forward op event carries the same line, so the
        pass timeline lights one source line in all three passes. Backward ops
        come from the autograd engine, not from a node, and carry none. Only the
        tracing passes use it: the compiled function runs the captured graph.
    """

    def run_node(self, n: fx.Node) -> Any:
        with events.source_line(n.meta.get("source_line")):
            try:
                return super().run_node(n)
            except Exception as exc:  # name the user's op in the fallback warning
                if not hasattr(exc, "_md_aot_node"):
                    exc._md_aot_node = (_node_label(n), n.meta.get("source_line"))
                raise


def _node_label(n: fx.Node) -> str:
    t = n.target
    return getattr(t, "__name__", None) or str(t) if n.op == "call_function" else f"{n.op} {t}"


class _SourceLined(torch.nn.Module):
    """``gm`` as a submodule (so ``functional_call`` can swap its parameters), run by the interpreter."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__()
        self.gm = gm

    def forward(self, *args: Any) -> Any:
        return _SourceLineInterpreter(self.gm).run(*args)


def aot_module_simplified(gm: torch.nn.Module, example_inputs: list[Any], fw_compiler: Callable | None = None,
                          bw_compiler: Callable | None = None, *, partition_fn: Callable = default_partition,
                          keep_inference_input_mutations: bool = False) -> Callable:
    """The Dynamo backend entry: ``gm``'s parameters and buffers become graph inputs.

    Note [Compiled inside the backend call]
        Like torch's, ours compiles right away, at Dynamo's compile time, for the
        grad mode that is on now (Dynamo's global-state guard keeps later calls
        in it; a call in another grad mode compiles its own variant rather than
        reuse this one). Every pass runs on fake copies of ``example_inputs``
        (the converter keeps their aliasing), so the real tensors' data is never
        read or written. If any pass fails, the graph runs eagerly (Note [AOT
        failures run the graph eagerly]): nothing AOT raises reaches a call.
    """
    named = [*gm.named_parameters(), *gm.named_buffers()]
    names, params = [n for n, _ in named], [p for _, p in named]
    num_params = len(params)
    num_example = len(example_inputs)
    lined = _SourceLined(gm) if isinstance(gm, fx.GraphModule) else None

    def flat_module_fn(*flat):
        ps, args = flat[:num_params], flat[num_params:]
        if lined is None:
            return torch.func.functional_call(gm, dict(zip(names, ps)), tuple(args))
        return torch.func.functional_call(lined, {f"gm.{n}": p for n, p in zip(names, ps)}, tuple(args))

    user = getattr(gm, "meta", {}).get("user_code")
    label = f"graph {type(gm).__name__} of {user}" if user else type(gm).__name__
    compiled = aot_function(flat_module_fn, fw_compiler, bw_compiler, partition_fn=partition_fn,
                            keep_inference_input_mutations=keep_inference_input_mutations, name=label)
    if is_dynamic_graph(gm):  # Note [AOT traces Dynamo's symbols] (sym_tracing.py)
        from minidynamo.aot.sym_tracing import compile_symbolic

        return compile_symbolic(gm, compiled, params, example_inputs, label, fw_compiler=fw_compiler,
                                 bw_compiler=bw_compiler, partition_fn=partition_fn,
                                 keep_inference_input_mutations=keep_inference_input_mutations)
    compiled.compile_now(*params, *example_inputs)
    if compiled.artifacts.fallback is not None:
        eager = functools.partial(gm.forward)
        eager.artifacts = compiled.artifacts  # type: ignore[attr-defined]
        return eager
    call_flat = compiled.call_flat  # Dynamo passes tensors and ints, never containers: no pytree per call

    def forward(*runtime_args):
        if len(runtime_args) != num_example:
            raise TypeError(f"aot_module_simplified: compiled for {num_example} inputs, got {len(runtime_args)}")
        return call_flat(*params, *runtime_args)

    forward.artifacts = compiled.artifacts
    forward.aot_function = compiled
    forward.zero_grad = lambda: None
    return forward

