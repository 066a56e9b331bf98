"""The functions the joint trace runs: prepped for autograd, joined with the backward, functionalized.

Place in the pipeline: FakeTensor pass 3's building blocks. ``graph_capture.py``
traces what these build (``aot_dispatch_autograd_graph``: ``create_joint`` of
``fn_prepped_for_autograd``, functionalized; ``aot_dispatch_base_graph``: the forward
alone). Mirrors ``torch/_functorch/_aot_autograd/graph_capture_wrappers.py``
(``fn_prepped_for_autograd``, ``create_joint``, ``apply_in_graph_mutations``, the
``to_fun``/``from_fun`` of ``create_functionalized_fn``) and ``utils.maybe_to_fresh_input``.


"""

from __future__ import annotations

from typing import Any, Callable

import torch

from minidynamo.aot.schemas import OutputType, ViewAndMutationMeta

__all__ = ["fn_prepped_for_autograd", "create_joint", "tangent_mask"]

_TANGENT_OUTPUT_TYPES = (OutputType.non_alias, OutputType.unsafe_view_alias, OutputType.custom_function_view)

def _maybe_to_fresh_input(idx: int, t: Any, meta: ViewAndMutationMeta) -> Any:
    # torch: utils.maybe_to_fresh_input. Autograd must see the input before the mutation.
    if not isinstance(t, torch.Tensor) or idx not in meta.mutated_inp_runtime_indices:
        return t
    info = meta.input_info[idx]
    if info.requires_grad and info.mutates_data:
        return t.clone()
    if info.mutates_metadata:
        return t.view(t.shape)
    return t


def tangent_mask(meta: ViewAndMutationMeta) -> list[bool]:
    """Which forward outputs get a tangent (Note [Which outputs get tangents])."""
    mutated = [
        meta.input_info[i].mutates_data and meta.input_info[i].requires_grad
        for i in meta.mutated_inp_runtime_indices
    ]
    outs = [
        info.output_type in _TANGENT_OUTPUT_TYPES
        and issubclass(info.raw_type, torch.Tensor)
        and info.requires_grad_for_backward
        for info in meta.output_info
    ]
    return mutated + outs + [True] * meta.num_intermediate_bases


def fn_prepped_for_autograd(fn: Callable, meta: ViewAndMutationMeta, *, fresh_inputs: bool = True) -> Callable:
    """``inner(*args) -> (fw_outs, tangent_mask)``; fw_outs = mutated inputs, user outputs, intermediate bases.

    ``fresh_inputs=False`` (the inference path, torch's fn_input_mutations_to_outputs):
    no backward will be traced, so mutated inputs need no clone.
    """

    def inner(*args: Any):
        if fresh_inputs:
            args_maybe_cloned = [_maybe_to_fresh_input(i, t, meta) for i, t in enumerate(args)]
        else:
            args_maybe_cloned = list(args)
        outs = fn(*args_maybe_cloned)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if len(outs) != len(meta.output_info):
            raise RuntimeError(
                f"joint trace: the function returned {len(outs)} outputs but metadata collection saw "
                f"{len(meta.output_info)}"
            )
        mutated = [args_maybe_cloned[i] for i in meta.mutated_inp_runtime_indices]
        bases = [
            o._base
            for o, info in zip(outs, meta.output_info)
            if info.output_type is OutputType.alias_of_intermediate_save_as_output
        ]
        if len(bases) != meta.num_intermediate_bases:
            raise RuntimeError(
                f"joint trace: found {len(bases)} intermediate bases, metadata says {meta.num_intermediate_bases}"
            )
        return [*mutated, *outs, *bases], tangent_mask(meta)

    return inner


def create_joint(fn: Callable, on_forward_done: Callable[[list], None] | None = None) -> Callable:
    """``inner(primals, tangents) -> (fw_outs, grads)``: one grad (or None) per primal."""

    def inner(primals: list[Any], tangents: list[Any]):
        outs, tangent_mask = fn(*primals)
        if on_forward_done is not None:
            on_forward_done(outs)
        outs_to_grad = [o for needs, o in zip(tangent_mask, outs) if needs]
        if len(outs_to_grad) != len(tangents):
            raise RuntimeError(f"joint trace: {len(outs_to_grad)} outputs need tangents, got {len(tangents)}")
        grad_primals = [p for p in primals if isinstance(p, torch.Tensor) and p.requires_grad]
        needed_outs, needed_tangents = [], []
        for out, tangent in zip(outs_to_grad, tangents):
            if isinstance(out, torch.Tensor) and out.requires_grad:
                needed_outs.append(out)
                needed_tangents.append(tangent)
        grads: tuple = ()
        if grad_primals and needed_outs:
            grads = torch.autograd.grad(needed_outs, grad_primals, needed_tangents, allow_unused=True)
        grads_iter = iter(grads)
        input_grads = []
        for p in primals:
            if isinstance(p, torch.Tensor) and p.requires_grad:
                input_grads.append(next(grads_iter, None))
            else:
                input_grads.append(None)
        return outs, input_grads

    return inner


def _functionalization_mode():
    """The functionalization mode pushed above the tracer (graph_capture's Note [Functionalize above the tracer])."""
    from minidynamo.aot import functional_tensor

    return functional_tensor.FunctionalTensorMode()


def _to_fun(mode: Any, values: list[Any]) -> list[Any]:
    """Wrap each traced tensor as a FunctionalTensor (leaf or not, like the input it stands for)."""
    if mode is None:
        return values
    return [mode.to_fun(v) if isinstance(v, torch.Tensor) else v for v in values]


def _from_fun(mode: Any, values: list[Any]) -> list[Any]:
    """Ask the functionalization mode for the latest value of each returned tensor.

    A returned view that a write went through is regenerated from its base's latest
    value (torch's sync does this; functional_tensor's Note [A mutated view stays
    stale]): after ``y = a[1:]; y.add_(1)`` the graph returns ``slice(slice_scatter(...))``,
    a real view with ``y``'s layout, not the bare ``add``. The runtime wrapper reads
    the layout of what the graph returns when it rebuilds the alias. A view nothing
    wrote through is returned as it was made.
    """
    if mode is None:
        return values
    return [mode.from_fun(v) if isinstance(v, torch.Tensor) else v for v in values]


def _mutation_counts(fun: list[Any]) -> list[int | None]:
    """How many data mutations each functional input's storage has seen so far (None: not a tensor)."""
    return [getattr(getattr(t, "storage_", None), "mutation_counter", None) for t in fun]


def _copy_into_inputs(func_mode: Any, raw: tuple, fun: list, indices: list[int], meta: ViewAndMutationMeta) -> None:
    """Trace each kept input mutation at the end of the forward, below functionalization.

    torch's ``apply_in_graph_mutations``: a swapped storage becomes
    ``aten.set_(input, new value)`` (Note [set_() Input Mutations in AOTAutograd]);
    a data mutation ``aten.copy_(input, new value)``; nothing when the value is the
    input itself or only the storage changed.
    """
    for i in indices:
        info = meta.input_info[i]
        new = func_mode.from_fun(fun[i])
        with func_mode._below(), torch.no_grad():
            if info.mutates_storage_metadata:
                torch.ops.aten.set_.source_Tensor(raw[i], new)
            if new is raw[i] or not info.mutates_data:
                continue
            torch.ops.aten.copy_.default(raw[i], new)
