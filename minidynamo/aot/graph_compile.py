"""The compile proper: one flat function to a compiled callable (metadata, joint graph, partition, wrappers).

Place in the pipeline: between the entry points (aot_autograd.py: ``aot_function``,
``aot_module_simplified``) and the stages they drive. Mirrors
``torch/_functorch/_aot_autograd/graph_compile.py`` (``aot_stage1_graph_capture``,
``aot_stage2_compile``) and ``aot_autograd.create_aot_dispatcher_function``.

When compiled (Dynamo's backend call, or ``aot_function``'s first call)::

    flatten args (pytree)                  non-tensor args ride along untouched (aot_autograd.py)
    dedupe: same tensor twice -> once      (runtime_wrappers.aot_wrapper_dedupe)
    synthetic base for aliased inputs      (runtime_wrappers.aot_wrapper_synthetic_base)
    collect_metadata        FakeTensor pass 2 -> ViewAndMutationMeta
    joint graph             FakeTensor pass 3 (graph_capture)
    partition_fn            forward graph + backward graph (default or min-cut)
    fw_compiler / bw_compiler                 (default: run the fx graph as is, compilers.py)
    CompiledFunction + runtime wrapper        (compiled_function, runtime_wrappers)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx as fx

import minidynamo.aot.config as aot_config
from minidynamo import events
from minidynamo._torch_private import set_grad_enabled_c
from minidynamo.aot.compilers import _boxed_graph, _run_graph
from minidynamo.aot.graph_capture import aot_dispatch_autograd_graph, aot_dispatch_base_graph, needs_autograd
from minidynamo.aot.partitioners import PartitionResult, default_partition
from minidynamo.aot.runtime_wrappers import (
    aot_wrapper_dedupe,
    aot_wrapper_synthetic_base,
    create_compiled_function,
    create_runtime_wrapper,
)

__all__ = ["AOTConfig", "CompiledArtifacts", "aot_dispatch", "create_aot_dispatcher_function"]


@dataclass
class AOTConfig:
    fw_compiler: Callable = _run_graph
    bw_compiler: Callable | None = None
    partition_fn: Callable = default_partition
    keep_inference_input_mutations: bool = False
    decompositions: dict | None = None  # Note [Decomposing with the backend's table] (make_fx.py)
    inference_compiler: Callable | None = None  # torch's: the inference graph's compiler (default fw_compiler)
    # aot/config.py (read when the AOTConfig is made): Note [A stale saved intermediate is refused]
    compile_mutated_saved_intermediates: bool = field(
        default_factory=lambda: aot_config.compile_mutated_saved_intermediates)


@dataclass
class CompiledArtifacts:
    """What the last compile made, for chapters and tests to look at."""

    meta: Any = None
    joint: Any = None
    partition: PartitionResult | None = None
    fw_module: fx.GraphModule | None = None
    compiled_function: Any = None  # the autograd.Function class (training path)
    wrappers: list[str] = field(default_factory=list)
    fallback: str | None = None  # why the graph runs eagerly (aot_autograd's Note [AOT failures run the graph eagerly])


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
    for n in nodes:  # kept in the graph: copy_(input, new value), traced only if the sizes broadcast
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


def _trace_joint(flat_fn: Callable, flat_args: list[Any], meta: Any, fake_mode: Any, fresh_mode: Callable,
                 config: AOTConfig) -> Any:
    """The joint graph; traced again with saved-value hooks if autograd saw a saved input mutated.

    See graph_capture's Note [A mutated input that autograd saved]: the first trace
    is torch's; only a program on which torch's own joint trace fails is retraced.

    Note [A stale saved intermediate is refused]
        The retrace also finds saved *intermediates* the forward mutated (Note [A
        mutated intermediate that autograd saved]). torch's AOTAutograd refuses
        every such program at compile time (``aot_function``: a RuntimeError at the
        first call; ``torch.compile(backend="aot_eager")``: BackendCompilerFailed),
        with the error eager's ``backward()`` would raise, even where eager runs
        (a loss that never reaches the stale node). By default ours refuses too,
        with that reason: the caller's Note [AOT failures run the graph eagerly]
        turns it into an AOTFallbackWarning, and the graph runs eagerly, so every
        outcome is eager's. With ``config.compile_mutated_saved_intermediates``
        (aot/config.py) ours compiles it instead, its backward raising eager's
        error only when a gradient reaches the stale node.
    """
    try:
        return aot_dispatch_autograd_graph(flat_fn, flat_args, meta, fake_mode=fake_mode,
                                           decompositions=config.decompositions)
    except RuntimeError as exc:
        if "modified by an inplace operation" not in str(exc):
            raise
    joint = aot_dispatch_autograd_graph(flat_fn, flat_args, meta, fake_mode=fresh_mode(), saved_value_hooks=True,
                                        decompositions=config.decompositions)
    if joint.stale_saved and not config.compile_mutated_saved_intermediates:
        eager_error = min(joint.stale_saved.items())[1][0][1]
        raise RuntimeError(
            "torch's AOTAutograd refuses this program at compile time (the forward mutates an intermediate "
            f"that autograd saved; its joint trace raises eager's backward error): {eager_error}"
        )
    return joint


def _restride_saved(part: PartitionResult, strides: list | None, bw_inputs: list[Any]) -> None:
    """Note [Saved activations in the forward's layout]

    A compiler may choose its own layout for what the forward returns (Inductor's
    layout optimization makes a conv's output channels_last). The backward is
    compiled after the forward, for the layouts the saved activations really
    have: each backward input whose forward output the compiler reported a stride
    for (``compiled_fw.output_strides``, torch: ``TracingContext.report_output_strides``)
    gets a fake value of that stride, in the example inputs the backward compiler
    is given (``bw_inputs``); the graph's own values keep the strides they were
    traced with, so its ops still check as traced (a ``view`` of a saved value is
    valid for the traced strides, not always for channels_last). torch does the
    same in ``graph_compile._aot_stage2b_bw_compile`` (``as_strided`` of the
    example input). Saved values are matched by name: the partition gives a saved
    node the same name in both graphs.
    """
    if not strides:
        return
    out_node = next(n for n in reversed(part.fw_module.graph.nodes) if n.op == "output")
    position = {a.name: i for i, a in enumerate(out_node.args[0]) if isinstance(a, fx.Node)}
    placeholders = [n for n in part.bw_module.graph.nodes if n.op == "placeholder"]
    for j, ph in enumerate(placeholders):
        i, val = position.get(ph.name), bw_inputs[j]
        if i is None or i >= len(strides) or strides[i] is None or not isinstance(val, torch.Tensor):
            continue
        stride = tuple(strides[i])
        if tuple(val.stride()) == stride:
            continue
        size, dtype, device = tuple(val.shape), val.dtype, val.device
        with val.fake_mode:
            bw_inputs[j] = torch.empty_strided(size, stride, dtype=dtype, device=device)


def _symbolic_mode(flat_args: list[Any]) -> Any:
    """The fake mode of symbolic inputs (Note [AOT traces Dynamo's symbols], sym_tracing.py), else None.

    Every pass then runs in that one mode: its fakes carry the ShapeEnv's symbols.
    """
    from minidynamo.fake import FakeTensor

    mode = next((a.fake_mode for a in flat_args if isinstance(a, FakeTensor)), None)
    return mode if mode is not None and mode.shape_env is not None else None


def _under_grad_mode(fn: Callable, enabled: bool) -> Callable:
    """``fn`` called with grad mode ``enabled``, whatever the caller's, restored after (torch's RuntimeWrapper).

    The inference graph runs with grad off: its outputs get no ``grad_fn``, as torch's
    inference path under ``torch.no_grad()`` leaves them. A training graph compiled
    under an outer ``no_grad`` (its body turns ``enable_grad()`` on: graph_capture's
    Note [Training or inference graph]) runs with grad on: the outputs eager makes
    inside that block have a ``grad_fn``, and under ``no_grad``
    ``autograd.Function.apply`` would record none. torch turns grad on around every
    training call; ours only wraps the variant compiled with grad off (each grad mode
    has its own, aot_autograd's Note [Aliasing is part of the compile key]), so the
    grad-mode hot path keeps its bare ``apply``. One frame per call: when the mode is
    already right, ``fn`` is called at once; otherwise the C setter (cheaper than
    entering ``torch.no_grad()``) flips it around the call.
    """
    is_grad_enabled = torch.is_grad_enabled
    restore = not enabled

    def under_grad_mode(*args):
        if is_grad_enabled() is enabled:
            return fn(*args)
        set_grad_enabled_c(enabled)
        try:
            return fn(*args)
        finally:
            set_grad_enabled_c(restore)

    return under_grad_mode


def aot_dispatch(flat_fn: Callable, flat_args: list[Any], config: AOTConfig, art: CompiledArtifacts, *,
                 as_strided_inputs: frozenset[int] = frozenset(), meta: Any = None) -> Callable:
    """Compile a flat function with no duplicate and no aliased-and-mutated inputs."""
    from minidynamo.aot.collect_metadata_analysis import collect_metadata
    from minidynamo.fake import FakeTensorMode

    keep = config.keep_inference_input_mutations
    if meta is None or meta.keep_input_mutations != keep:
        meta = collect_metadata(flat_fn, *flat_args, keep_input_mutations=keep)
    training = needs_autograd(flat_args, meta)  # graph_capture's Note [Training or inference graph]
    sym_mode = _symbolic_mode(flat_args)
    if sym_mode is not None and any(i.mutates_metadata for i in meta.input_info):
        raise RuntimeError("an input's metadata is mutated (t_, resize_, set_) in a graph over symbolic sizes")
    fresh_mode = FakeTensorMode if sym_mode is None else (lambda: sym_mode)
    fake_mode = fresh_mode()
    if training:
        joint = _trace_joint(flat_fn, flat_args, meta, fake_mode, fresh_mode, config)
        part = _partition(config, joint, flat_args, meta)
        saved = {n.name for n in part.saved_values}
        if any(f"primals_{i + 1}" in saved or i in joint.saved_then_mutated
               for i in meta.mutated_graph_handled_indices):
            # The backward reads an input the forward's copy_ overwrote: write it back outside
            # instead, after save_for_backward, so its version counter catches it (as eager does).
            meta = collect_metadata(flat_fn, *flat_args, keep_input_mutations=False)
            joint = _trace_joint(flat_fn, flat_args, meta, fresh_mode(), fresh_mode, config)
            part = _partition(config, joint, flat_args, meta)
    art.meta = meta
    if training:
        _check_metadata_mutations_fit(meta, part.fw_module, flat_args)
        art.joint, art.partition, art.fw_module = joint, part, part.fw_module
        events.emit("aot_graph", which="Forward graph", gm=part.fw_module)
        events.emit("aot_graph", which="Backward graph", gm=part.bw_module)
        part.fw_module.meta["fw_metadata"] = meta  # what a compiler may read (torch: TracingContext.fw_metadata)
        compiled_fw = config.fw_compiler(part.fw_module, _example_inputs(part.fw_module))
        bw_inputs = _example_inputs(part.bw_module)
        _restride_saved(part, getattr(compiled_fw, "output_strides", None), bw_inputs)
        bw_compiler = config.bw_compiler or config.fw_compiler
        compiled_bw = (_boxed_graph(part.bw_module) if bw_compiler is _run_graph
                       else bw_compiler(part.bw_module, bw_inputs))
        # torch's convention (functorch.compile.make_boxed_func): a compiled backward marked
        # ``_boxed_call`` takes one list, which it empties (Note [The backward frees what it has read]).
        boxed_bw = bw_compiler is _run_graph or getattr(compiled_bw, "_boxed_call", False)
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
        compiled_fn = fn_cls.apply if torch.is_grad_enabled() else _under_grad_mode(fn_cls.apply, True)
        art.compiled_function = fn_cls
        art.wrappers.append("CompiledFunction")
    else:
        gm = aot_dispatch_base_graph(flat_fn, flat_args, meta, fake_mode=fake_mode,
                                     decompositions=config.decompositions)
        _check_metadata_mutations_fit(meta, gm, flat_args)
        art.fw_module = gm
        events.emit("aot_graph", which="Forward graph", gm=gm)
        inference_compiler = config.inference_compiler or config.fw_compiler
        compiled_fn = _under_grad_mode(inference_compiler(gm, _example_inputs(gm)), False)
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

    if _symbolic_mode(flat_args) is None:
        return aot_wrapper_dedupe(flat_fn, flat_args, after_dedupe, art.wrappers, keep_input_mutations=keep)
    # Note [The Python dispatcher over symbolic sizes]
    #     A CompositeImplicitAutograd op whose C++ kernel reads concrete sizes
    #     (``upsample_linear1d.vec``: ``input.sizes()``) cannot run over SymInts; torch's
    #     ``create_aot_dispatcher_function`` (torch/_functorch/aot_autograd.py) turns the
    #     Python dispatcher on for every pass when the fakes have a ShapeEnv, so such an
    #     op runs its Python decomposition (``torch/_decomp``), which computes sizes
    #     symbolically, above functionalization and the tracer. Ours does the same. (The
    #     metadata pass and the graph capture run under it with or without a ShapeEnv:
    #     graph_capture.py's Note [AOT traces under the Python dispatcher].)
    from minidynamo._torch_private import enable_python_dispatcher

    with enable_python_dispatcher():
        return aot_wrapper_dedupe(flat_fn, flat_args, after_dedupe, art.wrappers, keep_input_mutations=keep)
