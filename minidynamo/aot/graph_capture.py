"""FakeTensor pass 3: trace the joint forward+backward into one ATen graph.

Place in the pipeline: after ``collect_metadata`` (pass 2) has produced the
``ViewAndMutationMeta``; before ``partitioners`` splits the joint graph. Mirrors
``torch/_functorch/_aot_autograd/graph_capture.py`` (``aot_dispatch_autograd_graph``,
``aot_dispatch_base_graph``); the functions it traces are built in
``graph_capture_wrappers.py`` (torch's file of the same name).

The traced function is built in three layers, each a wrapper of the one before:

1. ``fn_prepped_for_autograd(fn, meta)``: clones the inputs it will mutate (so
   ``autograd.grad`` sees them before the mutation), calls ``fn`` and returns
   ``(mutated inputs, user outputs, intermediate bases)`` plus a mask of which of
   them get a tangent (graph_capture_wrappers' Note [Which outputs get tangents]).
2. ``create_joint(prepped)``: ``(primals, tangents) -> (forward outputs, input grads)``
   by calling ``torch.autograd.grad`` on the outputs in the mask.
3. ``make_fx`` traces it on fake tensors, with functionalization above the tracer
   (Note [Functionalize above the tracer]), into ONE graph: the joint graph.

Note [Input mutations in the backward]
    A custom ``autograd.Function`` may mutate a tensor it saved in its backward
    (``x.mul_(2)``); eager then leaves the input changed. Functionalization
    turns that into a new value during the joint trace; comparing each input's
    mutation count before and after ``autograd.grad`` finds them, and their new
    values become the joint graph's last outputs (in the backward graph, after
    the gradients). ``CompiledFunction.backward`` copies them into the inputs
    it kept (torch: the same inputs get a ``copy_`` at the end of its backward
    graph).

Note [Which outputs get tangents]
    Aliased outputs (of inputs or of intermediates) get no tangent: the compiled
    forward returns them only so that the runtime wrapper can regenerate the real
    alias; autograd never sees them (they travel in a ``TensorAlias``). An output
    aliasing an intermediate gets its gradient through its ``._base``, which is an
    extra forward output with a tangent of its own. Mutated inputs get a tangent
    when their data changed and they require grad: the wrapper ``copy_``s the new
    value into the user's tensor, and autograd flows through that copy.

Note [Functionalize above the tracer]
    The tracer must only ever see functional ops: the partitioner and every
    compiler after us assume no op mutates, and that no two nodes share memory
    in a way the graph does not show. So a functionalization mode (from
    ``functional_tensor.py``, the same one pass 2 uses) is pushed *above* the
    tracing mode: an in-place ``add_`` reaches it first and leaves it as an
    out-of-place ``add`` whose result becomes the tensor's new value; the tracer
    records only that. At the end we ask the functionalization mode for each
    returned tensor's latest value. Autograd sits above both and sees the user's
    program unchanged, so its backward formulas are those of eager.

Note [AOT traces under the Python dispatcher]
    torch traces every AOT graph with the Python dispatcher on: ``_create_graph``
    (torch/_functorch/_aot_autograd/graph_capture.py) wraps ``make_fx`` in
    ``enable_python_dispatcher()``, for the joint and the inference graph, with or
    without a ShapeEnv, and ``create_aot_state`` (aot_autograd.py) does the same
    around the metadata pass. The dispatcher then sees the ``py_impl`` kernels of
    torch/_ops.py, which the C++ dispatcher does not: a CompositeImplicitAutograd op
    with a Python decomposition runs it, above functionalization and the tracer, so
    the graph records what the decomposition calls. ``aten.dropout``'s
    (torch/_decomp/decompositions.py, ``dropout``) calls ``native_dropout``, which
    draws its mask into the input's strides, where the C++ kernel's ``empty_like`` +
    ``bernoulli_`` draws into a contiguous tensor: on a transposed input the same
    numbers land in other positions, and only the first equals eager. Others: a
    batched ``matmul`` ends in ``view`` (its output a view of the ``bmm``), not
    ``_unsafe_view``; ``F.interpolate``'s ``upsample_*.vec`` become ``_unsafe_index``;
    ``rnn_tanh`` and ``lstm`` unroll into an ``addmm`` per step (the C++ kernels record
    ``mkldnn_rnn_layer``). Ours does the same, in both traces
    and the metadata pass (collect_metadata_analysis.py); the fake dispatch cache keys
    on it (fake/dispatch_cache.py, Note [Which kernel ran is part of the key]);
    tests/test_aot_python_dispatcher_like_torch.py compares the graphs with torch's.

    One exception, on purpose: a joint graph over inputs on the ``meta`` device is traced
    without it. There, under our fake mode, ``mse_loss``'s path reaches
    ``aten.broadcast_tensors`` at a key with no Autograd kernel, and the backward came out
    empty (every gradient ``None``), where torch's gives them (tests/test_devices.py
    ``test_chapter13_model[meta]`` compares with eager). A device without data has no
    strides of random draws to get right, so nothing a learner sees changes.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx as fx

from minidynamo import events
from minidynamo._torch_private import enable_python_dispatcher
from minidynamo.aot.graph_capture_wrappers import (
    _copy_into_inputs,
    _from_fun,
    _functionalization_mode,
    _mutation_counts,
    _to_fun,
    create_joint,
    fn_prepped_for_autograd,
    tangent_mask,
)
from minidynamo.aot.make_fx import make_fx
from minidynamo.aot.schemas import OutputType, ViewAndMutationMeta

__all__ = [
    "JointGraph",
    "fn_prepped_for_autograd",
    "create_joint",
    "aot_dispatch_autograd_graph",
    "aot_dispatch_base_graph",
    "needs_autograd",
    "tangent_mask",
]


@dataclass
class JointGraph:
    """The joint graph before partitioning, and what the partitioner needs to split it.

    ``gm`` takes ``(primals_1, ..., tangents_1, ...)`` and returns
    ``(*forward_outputs, *input_grads)``; ``num_fwd_outputs`` says where the
    forward outputs end. Nodes traced before ``autograd.grad`` was called carry
    ``meta["partitioner_tag"] == "is_forward"`` (torch tags them the same way).
    """

    gm: fx.GraphModule
    num_fwd_outputs: int
    tangent_mask: list[bool]
    num_primals: int
    num_tangents: int
    primals_requiring_grad: list[int] = field(default_factory=list)
    fw_out_requires_grad: list[bool] = field(default_factory=list)
    # primals the backward mutates (Note [Input mutations in the backward]); their new
    # values are the joint graph's last outputs, after the gradients
    bw_mutated_inputs: tuple[int, ...] = ()
    # primals autograd saved and the forward then mutated (Note [A mutated input that autograd saved])
    saved_then_mutated: tuple[int, ...] = ()
    # forward output position -> (sequence number, eager's error) of each stale saved intermediate
    # its backward reaches (Note [A mutated intermediate that autograd saved])
    stale_saved: dict[int, tuple[tuple[int, str], ...]] = field(default_factory=dict)

    def print_readable(self) -> str:
        from minidynamo.graph_text import normalize_graph

        return normalize_graph(self.gm)


def needs_autograd(flat_args: list[Any], meta: ViewAndMutationMeta) -> bool:
    """Trace a backward only if autograd will see the graph (torch: ``create_aot_state``, same test).

    Note [Training or inference graph]
        torch 2.13 does not read grad mode here: a graph needs a backward when
        some input requires grad, *unless* the metadata pass (run under the
        caller's grad mode) found that no output requires grad and no
        grad-requiring input is mutated where autograd would see it. An output
        aliasing a grad-requiring input does not count (views keep
        requires_grad even under no_grad; the runtime wrapper's view replay
        regenerates them), nor does a mutation made under no_grad or hidden from
        autograd. So under an outer ``no_grad`` a graph whose body turns
        ``enable_grad()`` on is a training graph, and in grad mode
        ``return x.detach() * 2`` is an inference graph. The metadata pass ran
        under the caller's grad mode, so the decision still follows it, and each
        grad mode keeps its own compiled variant (aot_autograd's Note [Aliasing
        is part of the compile key]).
    """
    if not any(isinstance(a, torch.Tensor) and a.requires_grad for a in flat_args):
        return False
    output_and_mutation_safe = not any(
        x.requires_grad
        and not (
            x.output_type in (OutputType.alias_of_input, OutputType.is_input)
            and x.base_idx is not None
            and meta.input_info[x.base_idx].requires_grad
        )
        for x in meta.output_info
    ) and not any(
        x.requires_grad
        and x.mutates_data
        and not x.mutations_under_no_grad_or_inference_mode
        and not x.mutations_hidden_from_autograd
        for x in meta.input_info
    )
    return not output_and_mutation_safe


def _make_tangents(meta: ViewAndMutationMeta, fake_mode: Any = None) -> list[torch.Tensor]:
    """One tangent per traced tangent: its shape, dtype and device (contiguous, no grad).

    Note [A tangent lives where its output lives]
        torch traces the joint on ``meta.traced_tangents`` themselves (fakes of the
        output they stand for, ``aot_dispatch_autograd`` in
        ``torch/_functorch/_aot_autograd/graph_capture.py``), so a tangent has its
        output's device. Ours are made fresh: a tangent made without ``device=`` is a
        cpu tensor, and the joint trace of a cuda (or meta) program then mixes devices
        (``FakeTensorError: inputs on different devices ['cpu', 'cuda:0']``) and the
        whole training graph fell back to eager (issue 29). So each tangent is made on
        meta and claims its output's device through the fake mode: no memory is
        allocated, and a device this build cannot allocate on (a fake cuda) works too.
        Torch coerces tangents to contiguous (coerce_tangent_and_suggest_memory_format);
        the runtime wrapper makes the incoming grad_outputs contiguous to match.
    """
    if fake_mode is not None and getattr(fake_mode, "shape_env", None) is not None:
        with fake_mode:  # symbolic sizes (sym_tracing.py): the tangents are fakes with the same SymInts
            return [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in meta.traced_tangents]
    if fake_mode is not None:
        return [fake_mode.from_tensor(torch.empty(t.shape, dtype=t.dtype, device="meta"), device=t.device)
                for t in meta.traced_tangents]
    return [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in meta.traced_tangents]


def _saved_value_hooks(func_mode: Any, info: dict, num_primals: int):
    """Note [A mutated input that autograd saved]: saved tensors keep the value they had when saved.

    ``y = F.linear(x, w); x.add_(1)`` with ``w`` requiring grad: autograd saved
    ``x`` for ``w``'s gradient, then the program mutated it. Under
    functionalization the mutation only swapped the wrapper's value, so the
    backward would read the *new* value; and autograd, seeing the version
    counter move, refuses to trace the backward at all (torch's AOTAutograd
    fails on this program). Eager runs the forward and raises only at
    ``backward()``. So, in the joint trace, every saved tensor is packed with its
    functional value and version (``saved_tensors_hooks``); unpacked, an input
    whose version moved gives the value it had when saved (the graph stays
    functional and correct), and is reported: the compiled forward then also
    ``save_for_backward``s that input and the write-back happens after it, so a
    real ``backward()`` raises eager's own error. A stale saved *intermediate*
    gives its old value too: Note [A mutated intermediate that autograd saved].
    """
    from minidynamo.aot.functional_tensor import FunctionalStorage, FunctionalTensor

    def pack(t):
        if not isinstance(t, FunctionalTensor):
            return t
        return (t, t._version, func_mode.from_fun(t), t.grad_fn, t.output_nr)

    def unpack(packed):
        if not isinstance(packed, tuple):
            return packed
        t, version, value, saved_grad_fn, output_nr = packed
        if t._version == version:
            return t
        primal = next((i for i, p in enumerate(info["fun"][:num_primals]) if p is t), None)
        if primal is None:
            info["stale_hit"] = (t, version, saved_grad_fn, output_nr)
        elif not info.get("walking"):
            info.setdefault("saved_then_mutated", set()).add(primal)
        with func_mode._below():
            return FunctionalTensor(value, FunctionalStorage(value))

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def _stale_message(node: Any, t: torch.Tensor, version: int, saved_grad_fn: Any, output_nr: int) -> str:
    """Eager's text for a saved tensor modified since (autograd's ``SavedVariable::unpack``).

    It names the node that made the tensor's *current* value (the in-place op's),
    except for a tensor its node saved as its own output (exp, sigmoid, tanh):
    autograd keeps no link from that saved value to its tensor, and names the
    saving node.
    """
    grad_fn = node if saved_grad_fn is node else t.grad_fn
    # torch 2.13 names a node without its "Backward0" suffix: "output 0 of Add"
    name = re.sub(r"Backward\d*$", "", grad_fn.name()) if grad_fn is not None else None
    which = f", which is output {output_nr} of {name}," if name else ""
    return (
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{t.type()} [{', '.join(str(d) for d in t.shape)}]]"
        f"{which} is at version {t._version}; expected version {version} instead. Hint: enable anomaly "
        "detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )


def _stale_saved_reach(outs: list[Any], info: dict) -> dict[int, tuple[tuple[int, str], ...]]:
    """Which forward outputs reach a stale saved tensor, and eager's error for each.

    Note [A mutated intermediate that autograd saved]
        ``y = x.sin(); z = y * w; y.add_(1); return z, y`` with ``w`` requiring grad:
        ``mul`` saved ``y`` for ``w``'s gradient, then the program changed ``y``. Eager
        runs the forward, and its ``backward()`` raises when (and only when) the engine
        reaches the node that saved ``y``: a loss of ``z`` raises, a loss of ``y`` alone
        does not. torch's joint trace meets the stale ``y`` in ``autograd.grad`` and its
        compile fails. Ours traces the backward with the value ``y`` had when saved
        (the saved-value hooks), then walks the autograd graph from each forward output,
        touching every node's saved tensors: the unpack hook says which nodes hold a
        stale one. ``CompiledFunction.backward`` raises eager's error when an output
        that reaches such a node receives a gradient (compiled_function's Note [Saved
        tensors go through save_for_backward]); otherwise it runs, and the stale value
        only ever meets zero tangents.
        That is with aot/config.py's ``compile_mutated_saved_intermediates`` only; by
        default ours refuses the program as torch does (graph_compile's Note [A stale
        saved intermediate is refused]).
    """
    reach: dict[int, tuple[tuple[int, str], ...]] = {}
    memo: dict[Any, list[tuple[int, str]]] = {}
    info["walking"] = True
    try:
        for pos, out in enumerate(outs):
            fn = out.grad_fn if isinstance(out, torch.Tensor) else None
            found: list[tuple[int, str]] = []
            stack, seen = [fn], set()
            while stack:
                node = stack.pop()
                if node is None or node in seen:
                    continue
                seen.add(node)
                if node not in memo:
                    memo[node] = _stale_in_node(node, info)
                found += memo[node]
                stack.extend(n for n, _ in node.next_functions)
            if found:
                reach[pos] = tuple(found)
    finally:
        info["walking"] = False
    return reach


def _stale_in_node(node: Any, info: dict) -> list[tuple[int, str]]:
    """The stale saved tensors of one autograd node, as ``(sequence number, eager's message)``."""
    names = [n for n in dir(node) if n.startswith("_saved_")]
    if hasattr(type(node), "saved_tensors"):  # a custom autograd.Function's node
        names.append("saved_tensors")
    hits = []
    for name in names:
        info.pop("stale_hit", None)
        try:
            getattr(node, name)
        except Exception:  # noqa: BLE001 - freed, or not a saved tensor
            continue
        if "stale_hit" in info:
            hits.append((node._sequence_nr(), _stale_message(node, *info.pop("stale_hit"))))
    return hits


def aot_dispatch_autograd_graph(
    flat_fn: Callable, flat_args: list[Any], meta: ViewAndMutationMeta, *, fake_mode: Any = None,
    functionalize: bool = True, saved_value_hooks: bool = False, decompositions: dict | None = None,
) -> JointGraph:
    """Trace the joint graph of ``flat_fn`` on fake copies of ``flat_args``.

    ``saved_value_hooks``: trace under Note [A mutated input that autograd saved]'s
    hooks (the caller retries with them when the plain trace meets a saved input
    that the forward mutated; the plain trace's graph is torch's op for op).
    """
    prepped = fn_prepped_for_autograd(flat_fn, meta)
    primals = list(flat_args)
    tangents = _make_tangents(meta, fake_mode)
    num_primals, num_tangents = len(primals), len(tangents)
    func_mode = _functionalization_mode() if functionalize else None
    info: dict[str, Any] = {}

    kept = meta.mutated_graph_handled_indices

    def forward_done(outs):
        # The forward outputs' functional values (views regenerated) belong to the forward.
        info["fw_values"] = _from_fun(func_mode, outs)
        if kept and func_mode is not None:  # Note [Input mutations kept in the graph]: end of the forward
            _copy_into_inputs(func_mode, info["raw"], info["fun"], kept, meta)
        info["fw_mutations"] = _mutation_counts(info["fun"])
        if saved_value_hooks and func_mode is not None:  # Note [A mutated intermediate that autograd saved]
            info["stale_saved"] = _stale_saved_reach(outs, info)
        # torch: create_joint tags every node traced so far "is_forward".
        for node in info["tracer"].graph.nodes:
            node.meta["partitioner_tag"] = "is_backward" if node.name.startswith("tangents") else "is_forward"

    def joint_flat(*args):
        info["raw"] = args
        args = _to_fun(func_mode, list(args))
        info["fun"] = args
        ps, ts = args[:num_primals], args[num_primals:]
        if func_mode is not None and saved_value_hooks:
            with _saved_value_hooks(func_mode, info, num_primals):
                outs, grads = create_joint(prepped, on_forward_done=forward_done)(ps, ts)
        else:
            outs, grads = create_joint(prepped, on_forward_done=forward_done)(ps, ts)
        info["num_fwd_outputs"] = len(outs)
        info["fw_out_requires_grad"] = [isinstance(o, torch.Tensor) and o.requires_grad for o in outs]
        # Note [Input mutations in the backward]
        after = _mutation_counts(args[:num_primals])
        bw_mutated = tuple(i for i, (b, a) in enumerate(zip(info["fw_mutations"], after)) if a is not None and a > b)
        info["bw_mutated"] = bw_mutated
        new_values = _from_fun(func_mode, [args[i] for i in bw_mutated])
        return (*info["fw_values"], *_from_fun(func_mode, grads), *new_values)

    names = [f"primals_{i + 1}" for i in range(num_primals)] + [f"tangents_{i + 1}" for i in range(num_tangents)]
    tracer = make_fx(
        joint_flat,
        fake_mode=fake_mode,
        placeholder_names=names,
        outer_modes=[func_mode] if func_mode is not None else [],
        pass_name=events.AOT_JOINT,
        on_start=lambda tracer: info.__setitem__("tracer", tracer),
        dead_code_elimination=True,  # torch eliminates dead code right after tracing the joint
        decomposition_table=decompositions,
    )
    on_meta = any(isinstance(p, torch.Tensor) and p.device.type == "meta" for p in primals)
    # Note [AOT traces under the Python dispatcher] (and its one exception, the meta device)
    with contextlib.nullcontext() if on_meta else enable_python_dispatcher():
        gm = tracer(*primals, *tangents)
    for node in gm.graph.nodes:
        node.meta.setdefault("partitioner_tag", "is_backward")
    return JointGraph(
        gm=gm,
        num_fwd_outputs=info["num_fwd_outputs"],
        tangent_mask=tangent_mask(meta),
        num_primals=num_primals,
        num_tangents=num_tangents,
        fw_out_requires_grad=info["fw_out_requires_grad"],
        primals_requiring_grad=[
            i for i, p in enumerate(primals) if isinstance(p, torch.Tensor) and p.requires_grad
        ],
        bw_mutated_inputs=info.get("bw_mutated", ()),
        saved_then_mutated=tuple(sorted(info.get("saved_then_mutated", ()))),
        stale_saved=info.get("stale_saved", {}),
    )


def aot_dispatch_base_graph(
    flat_fn: Callable, flat_args: list[Any], meta: ViewAndMutationMeta, *, fake_mode: Any = None,
    functionalize: bool = True, decompositions: dict | None = None,
) -> fx.GraphModule:
    """The inference path: trace only the functionalized forward (no backward).

    Returns a graph of ``(*args) -> (mutated inputs, user outputs, intermediate bases)``,
    the same forward outputs the joint graph has, so one runtime wrapper serves both.

    Note [Input mutations kept in the graph]
        With ``keep_input_mutations`` (torch's ``aot_eager`` sets
        ``keep_inference_input_mutations``), a data mutation of an input that
        autograd need not see (``MUTATED_IN_GRAPH``: no grad required, or made
        under no_grad) is not returned for the wrapper to copy back: the graph
        ends with ``aten.copy_(input, new_value)`` itself, as torch's does. The
        rest of the graph stays functional; only those last nodes mutate. torch
        keeps them in training graphs too (the flag's name notwithstanding): a
        BatchNorm's running statistics are updated at the end of the joint
        graph's forward, and the partitioners leave those ``copy_`` nodes in the
        forward graph.
    """
    prepped = fn_prepped_for_autograd(flat_fn, meta, fresh_inputs=False)
    func_mode = _functionalization_mode() if functionalize else None

    kept = meta.mutated_graph_handled_indices

    def fw(*args):
        f_args = _to_fun(func_mode, list(args))
        outs, _mask = prepped(*f_args)
        outs = tuple(_from_fun(func_mode, outs))
        if kept and func_mode is not None:  # Note [Input mutations kept in the graph]
            _copy_into_inputs(func_mode, args, f_args, kept, meta)
        return outs

    names = [f"arg{i}_1" for i in range(len(flat_args))]
    tracer = make_fx(
        fw, fake_mode=fake_mode, placeholder_names=names,
        outer_modes=[func_mode] if func_mode is not None else [], pass_name=events.AOT_JOINT,
        dead_code_elimination=True, decomposition_table=decompositions,
    )
    with enable_python_dispatcher():  # Note [AOT traces under the Python dispatcher]
        return tracer(*flat_args)
