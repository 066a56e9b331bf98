"""The ``autograd.Function`` that runs the compiled forward and backward graphs.

Place in the pipeline: ``aot_autograd.py`` builds it around the forward and backward
that ``partitioners`` split off the joint graph; ``runtime_wrappers.create_runtime_wrapper``
then wraps its ``apply`` (mutations written back, aliases regenerated). Mirrors the
``CompiledFunction`` of ``torch/_functorch/_aot_autograd/runtime_wrappers.py``
(``AOTDispatchAutograd.post_compile``, ``_AOTDispatchAutogradFunctionFactory``,
``_AutogradSavedState``).
"""

from __future__ import annotations

from typing import Callable

import torch

from minidynamo.aot.schemas import TensorAlias, ViewAndMutationMeta

__all__ = ["create_compiled_function"]


class CompiledFunctionBackward(torch.autograd.Function):
    """Note [No double backward through a compiled graph]

    Under ``backward(create_graph=True)`` autograd records what the backward computes,
    so that it can be differentiated again. The compiled backward graph is not such a
    computation (its saved values are detached, its ops already decomposed), so its
    gradient would be silently wrong. As torch's ``CompiledFunctionBackward``
    (torch/_functorch/_aot_autograd/runtime_wrappers.py), the graph runs inside this
    Function: its outputs stay connected to what requires grad, and differentiating
    them raises instead.
    """

    @staticmethod
    def forward(ctx, run, *args):
        return tuple(run(list(args)))

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("minidynamo's AOTAutograd does not support double backward "
                           "(torch.compile with aot_autograd does not currently support double backward either)")


def create_compiled_function(
    compiled_fw: Callable,
    compiled_bw: Callable,
    meta: ViewAndMutationMeta,
    *,
    tangent_mask: list[bool],
    fw_out_requires_grad: list[bool],
    num_inputs: int,
    bw_mutated: tuple[int, ...] = (),
    version_checked: tuple[int, ...] = (),
    stale_saved: dict[int, tuple[tuple[int, str], ...]] | None = None,
    boxed_bw: bool = False,
) -> type[torch.autograd.Function]:
    """The ``autograd.Function`` that runs the compiled forward and backward (torch: CompiledFunction).

    Forward returns ``(mutated inputs, user outputs, intermediate bases)``, aliases in
    ``TensorAlias`` boxes (runtime_wrappers' Note [Aliased outputs
    are returned, then regenerated]).

    Note [Saved tensors go through save_for_backward]
        The forward's saved values go through ``ctx.save_for_backward``, as
        torch's do (``_AutogradSavedState.save_from_forward``), so autograd
        records each one's version counter: ``out = f(x, w); w.add_(1);
        out.backward()`` raises eager's "modified by an inplace operation"
        error instead of computing a gradient from the new ``w``. A saved view is
        detached first (torch does the same: saving a view would keep its whole
        autograd history alive); ints and other non-tensors stay on ``ctx``.
        ``version_checked`` inputs (graph_capture's Note [A mutated input that
        autograd saved]) are saved too, unused, so that the write-back after the
        forward makes ``backward()`` raise as eager's does, whichever values the
        partitioner chose to save.
        A saved *intermediate* the forward mutated has no tensor left at run time
        whose version could move (the graph is functional): ``stale_saved`` maps
        each forward output whose eager backward reaches such a saved tensor to
        eager's error, and the backward (``_checking_stale_saved``) raises it
        when one of those outputs receives a gradient (graph_capture's Note [A
        mutated intermediate that autograd saved]).

    Note [What a compiled backward still pays that eager does not]
        Measured on mobilenet_v3_small (timm, train mode, process CPU time,
        interleaved with eager in one process): unpacking the saved tensors
        and the rest of ``backward`` outside the graph cost ~0.1 ms (the
        version checks are not the gap), and the saved activations die inside
        the graph at their last use (Note [The backward frees what it has
        read]). What is left runs in the autograd engine after this one node
        returns every parameter's gradient at once (142 here): the engine then
        runs 142 ``AccumulateGrad`` nodes in a row. A Function that only hands
        back those gradients costs 1.2 ms after its backward when ``.grad`` is
        ``None`` (the engine steals each tensor) and 1.7-2.3 ms when it
        ``add_``s into ``.grad`` gradients made long before (out of cache);
        eager runs the same nodes, each right after the node that produced its
        gradient. torch's ``CompiledFunction`` pays the same; accumulating
        inside the graph (what torch's compiled autograd does) is beyond
        ``aot_eager``.
    """
    n_checked = len(version_checked)
    stale_items = sorted(stale_saved.items()) if stale_saved else []
    num_fw_outs = meta.num_forward_returns
    n_mut = meta.num_mutated_inp_runtime_indices
    # Forward-return positions to box: metadata-only mutated inputs and aliased outputs.
    boxed = [
        i for i, idx in enumerate(meta.mutated_inp_runtime_indices)
        if meta.input_info[idx].mutates_metadata and not meta.input_info[idx].mutates_data
    ] + [n_mut + i for i in meta.aliased_out_indices]
    boxed_set = frozenset(boxed)
    unsafe_view = [n_mut + i for i in meta.unsafe_view_out_indices]
    non_differentiable = [i for i, rg in enumerate(fw_out_requires_grad) if not rg and i not in boxed_set]
    tensor_outs = [i for i, o in enumerate(meta.output_info) if issubclass(o.raw_type, torch.Tensor)]
    non_tensor_positions = set(range(num_fw_outs)) - {n_mut + i for i in tensor_outs} - set(range(n_mut)) - set(
        range(n_mut + meta.num_outputs, num_fw_outs)
    )
    non_differentiable = [i for i in non_differentiable if i not in non_tensor_positions]
    tangent_positions = [i for i, m in enumerate(tangent_mask) if m]

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            outs = compiled_fw(*args)
            fw_outs, saved = list(outs[:num_fw_outs]), outs[num_fw_outs:]
            # Note [Saved tensors go through save_for_backward]
            tensors = [s for s in saved if isinstance(s, torch.Tensor)]
            checked = [args[i] for i in version_checked]
            if len(tensors) == len(saved):
                ctx.save_for_backward(*[t.detach() if t._is_view() else t for t in saved], *checked)
                ctx.non_tensors = None
            else:
                ctx.save_for_backward(*[t.detach() if t._is_view() else t for t in tensors], *checked)
                ctx.non_tensors = [(i, s) for i, s in enumerate(saved) if not isinstance(s, torch.Tensor)]
            # torch: Note [Intermediate Bases Optimization]. Hide this aliasing from autograd.
            for i in unsafe_view:
                fw_outs[i] = torch.ops.aten._unsafe_view(fw_outs[i], fw_outs[i].shape)
            for i in boxed:
                fw_outs[i] = TensorAlias(fw_outs[i])
            if non_differentiable:
                ctx.mark_non_differentiable(*[fw_outs[i] for i in non_differentiable])
            if bw_mutated:
                ctx.bw_mutated_inputs = [args[i] for i in bw_mutated]
            if sym_shapes:  # runtime_wrappers' Note [Sizes per call]: this call's shapes, not the trace's
                ctx.out_shapes = {i: fw_outs[i].shape for i in tangent_positions}
            return tuple(fw_outs)

        @staticmethod
        def backward(ctx, *grad_outs):
            # Only the outputs that had a tangent in the joint graph; the boxed aliases' grads are None.
            tangents = []
            for i in tangent_positions:
                g = grad_outs[i]
                if g is None:  # output not used: autograd passes None, the graph wants zeros
                    g = torch.zeros(ctx.out_shapes[i] if sym_shapes else fw_outs_shapes[i], dtype=fw_outs_dtypes[i],
                                    device=fw_outs_devices[i])
                elif not g.is_contiguous():
                    g = g.contiguous()
                tangents.append(g)
            saved = ctx.saved_tensors  # raises here if a saved tensor was modified since (as eager)
            if n_checked:
                saved = saved[:-n_checked]
            all_args = list(saved)
            del saved
            if ctx.non_tensors is not None:
                for i, s in ctx.non_tensors:
                    all_args.insert(i, s)
            all_args += tangents
            del tangents
            if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in all_args):
                # backward(create_graph=True): Note [No double backward through a compiled graph]
                run = compiled_bw if boxed_bw else (lambda args: compiled_bw(*args))
                grads = CompiledFunctionBackward.apply(run, *all_args)
            elif boxed_bw:
                # compilers' Note [The backward frees what it has read]
                ctx.maybe_clear_saved_tensors()
                grads = compiled_bw(all_args)
            else:
                grads = compiled_bw(*all_args)
            if bw_mutated:
                # Note [Input mutations in the backward]: the graph returned their new values last.
                n = len(bw_mutated)
                grads, new_values = grads[:-n], grads[-n:]
                with torch.no_grad():
                    for original, new in zip(ctx.bw_mutated_inputs, new_values):
                        original.copy_(new)
            if len(grads) == num_inputs:
                return tuple(grads)
            return tuple(grads) + (None,) * (num_inputs - len(grads))

    fw_outs_shapes: dict[int, torch.Size] = {}
    fw_outs_dtypes: dict[int, torch.dtype] = {}
    fw_outs_devices: dict[int, torch.device] = {}  # the traced output's device (Dynamo guards it), not cpu
    for pos, t in zip(tangent_positions, meta.traced_tangents):
        fw_outs_shapes[pos], fw_outs_dtypes[pos], fw_outs_devices[pos] = t.shape, t.dtype, t.device
    sym_shapes = any(not isinstance(d, int) for shape in fw_outs_shapes.values() for d in shape)
    if stale_items:
        return _checking_stale_saved(CompiledFunction, stale_items)
    return CompiledFunction


def _checking_stale_saved(fn_cls: type[torch.autograd.Function], stale_items: list) -> type[torch.autograd.Function]:
    """``fn_cls`` whose backward first raises eager's error if it is reached from a stale saved tensor.

    Note [Saved tensors go through save_for_backward] (``stale_saved``): gradients
    are not materialized, so that an output the loss does not use arrives as
    ``None``; ``fn_cls.backward`` then gives it zeros, as before.
    """
    forward, backward = fn_cls.forward, fn_cls.backward

    class CompiledFunction(fn_cls):
        @staticmethod
        def forward(ctx, *args):
            ctx.set_materialize_grads(False)
            return forward(ctx, *args)

        @staticmethod
        def backward(ctx, *grad_outs):
            hits = [hit for i, found in stale_items if grad_outs[i] is not None for hit in found]
            if hits:  # the node that saved a since-mutated intermediate is reached: eager raises
                raise RuntimeError(max(hits)[1])
            return backward(ctx, *grad_outs)

    return CompiledFunction
