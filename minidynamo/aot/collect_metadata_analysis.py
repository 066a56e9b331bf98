"""FakeTensor pass 2: run the function functionalized, on fake tensors, and write down what it did.

Place in the pipeline: the first thing AOTAutograd does with Dynamo's graph (or
any function): before tracing the joint graph it must know which inputs get
mutated and which outputs alias what, because those decide the joint graph's
outputs and the runtime wrappers' work. Mirrors
``torch/_functorch/_aot_autograd/collect_metadata_analysis.py``
(``run_functionalized_fw_and_collect_metadata``); our entry point is
``collect_metadata(fn, *args) -> ViewAndMutationMeta``.

Steps (torch's, in order):

1. Convert the inputs to fake tensors (``minidynamo.fake.FakeTensorMode``; the
   converter keeps aliasing), then wrap each as a FunctionalTensor.
2. Run ``fn`` under the functionalization mode inside
   ``events.pass_scope("aot_metadata")``: every op reaches the fake mode as a
   functional op, and shows up as an op event of pass ``aot_metadata``.
3. Inputs: data mutated (its storage saw a write), metadata mutated (its sizes,
   strides or offset differ from the original), all writes under no_grad, ...
4. Outputs: classify each (Note [Classifying an output]).
5. ``traced_tangents``: the forward outputs that will get a tangent.

Note [Classifying an output]
    In torch's order, for a tensor output ``o``:
    * ``o``'s storage is an input's and ``o`` came out of a custom autograd.Function:
      ``custom_function_view`` (no view replay possible);
    * ``o``'s storage is an input's: ``is_input`` if ``o`` is that very input,
      else ``alias_of_input`` (``base_idx``: that input) -- unless every output
      in that storage came from one multi-output view op (``unbind``) and ``o``
      has a grad_fn: then ``non_alias`` (torch's multi-output view optimization);
    * ``o`` is an autograd view (``o._base``) and both require grad: if ``o`` is
      the only output in its storage (or all but one come from a multi-output
      view), ``unsafe_view_alias`` (Note [Intermediate Bases Optimization]: no
      extra output, the alias is hidden with ``_unsafe_view``); otherwise
      ``alias_of_intermediate_base_is_user_output`` if ``o._base`` is itself an
      output, ``alias_of_intermediate`` if the base was already added as an
      extra output for an earlier output, else ``alias_of_intermediate_save_as_output``
      (and the base becomes the next intermediate base);
    * ``o`` does not require grad but shares storage and metadata with an output
      that does (``return out, out.detach()``): ``alias_of_intermediate_base_is_user_output``;
    * otherwise ``non_alias``.
    "Storage" is our FunctionalStorage (one per group of aliases).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

import torch

from minidynamo import events
from minidynamo.aot.functional_tensor import FunctionalTensor, FunctionalTensorMode
from minidynamo.aot.schemas import (
    InputAliasInfo,
    MutationType,
    OutputAliasInfo,
    OutputType,
    ViewAndMutationMeta,
)

__all__ = ["collect_metadata", "run_functionalized_fw_and_collect_metadata"]


def collect_metadata(fn: Callable, *args: Any, keep_input_mutations: bool = False, fake_mode: Any = None) -> ViewAndMutationMeta:
    """FakeTensor pass 2: ``fn(*args)`` run functionalized on fake copies of ``args``.

    ``fn`` returns one value or a flat tuple/list of tensors and plain values.
    Real tensor ``args`` are converted with ``fake_mode.from_tensor`` (by default
    the mode of any FakeTensor among ``args``, else a fresh
    ``minidynamo.fake.FakeTensorMode``); the real ``args`` are never touched.
    """
    from minidynamo.fake import FakeTensor, FakeTensorMode

    if fake_mode is None:
        # torch: detect_fake_mode(args): inputs that are already fake (Dynamo's) keep their mode.
        fake_mode = next((a.fake_mode for a in args if isinstance(a, FakeTensor)), None)
    if fake_mode is None:
        # Non-fake inputs allowed: ``x[1] = 0.0`` makes a real 0-dim constant (aten.lift_fresh)
        # that must become fake; torch's FakeTensorMode converts such constants too.
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_args = [
        fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) and not isinstance(a, FakeTensor) else a
        for a in args
    ]
    from minidynamo._torch_private import enable_python_dispatcher

    # Note [AOT traces under the Python dispatcher] (graph_capture.py): torch's create_aot_state
    # (torch/_functorch/aot_autograd.py) runs this pass under it, whatever the inputs
    with events.pass_scope(events.AOT_METADATA), fake_mode, enable_python_dispatcher():
        return run_functionalized_fw_and_collect_metadata(fn, keep_input_mutations=keep_input_mutations)(*fake_args)


def run_functionalized_fw_and_collect_metadata(
    fn: Callable, *, keep_input_mutations: bool = False
) -> Callable[..., ViewAndMutationMeta]:
    """Torch's name: returns ``inner(*flat_args) -> ViewAndMutationMeta``; the caller sets up the fake mode."""

    def inner(*flat_args: Any) -> ViewAndMutationMeta:
        _check_arg_types(flat_args)
        mode = FunctionalTensorMode()
        prior_grad = torch.is_grad_enabled()
        with mode:
            # The same tensor passed twice is wrapped once (torch memoizes to_fun too).
            memo: dict[int, Any] = {}
            f_args = []
            for a in flat_args:
                if isinstance(a, torch.Tensor):
                    if id(a) not in memo:
                        memo[id(a)] = mode.to_fun(a)
                    f_args.append(memo[id(a)])
                else:
                    f_args.append(a)
            out = fn(*f_args)
            f_outs = list(out) if isinstance(out, (tuple, list)) else [out]
            input_info = _input_info(mode, flat_args, f_args, keep_input_mutations)
            # grad_fn may trigger autograd's lazy view replay: keep the mode on.
            output_info, intermediate_bases = _output_info(f_args, f_outs, input_info)
            traced_tangents = _traced_tangents(mode, f_args, input_info, f_outs, output_info, intermediate_bases)
        if torch.is_grad_enabled() != prior_grad:
            torch.set_grad_enabled(prior_grad)  # torch records this as grad_enabled_mutation
        return ViewAndMutationMeta(
            input_info=input_info,
            output_info=output_info,
            num_intermediate_bases=len(intermediate_bases),
            keep_input_mutations=keep_input_mutations,
            traced_tangents=traced_tangents,
        )

    return inner


def _check_arg_types(flat_args) -> None:
    for i, a in enumerate(flat_args):
        if not isinstance(a, (torch.Tensor, int, float, bool, str, type(None), torch.SymInt, torch.SymFloat)):
            raise TypeError(
                f"collect_metadata: argument {i} is a {type(a).__name__}; AOTAutograd takes flat "
                "tensors and plain Python values (flatten containers first)"
            )


def _input_info(mode, flat_args, f_args, keep_input_mutations) -> list[InputAliasInfo]:
    infos = []
    for arg, f_arg in zip(flat_args, f_args):
        if not isinstance(f_arg, FunctionalTensor):
            # torch: a non-tensor "mutates" nothing and, vacuously, hides nothing... except it says False.
            infos.append(InputAliasInfo(
                is_leaf=False, mutates_data=False, mutates_metadata=False,
                mutations_hidden_from_autograd=False, mutations_under_no_grad_or_inference_mode=False,
                requires_grad=False, keep_input_mutations=keep_input_mutations,
            ))
            continue
        st = f_arg.storage_
        mutates_data = st.mutation_counter > 0
        # torch: has_metadata_mutation(check_only_storage_mutation=True): a set_() that left
        # the input on another storage (two set_() calls may cancel out).
        mutates_storage_metadata = f_arg.storage_changed and st is not f_arg.original_storage
        mutates_metadata = mutates_storage_metadata or mode.metadata_mutated(f_arg, arg)
        under_no_grad = mutates_data and st.mutation_counter_no_grad_or_inference_mode == st.mutation_counter
        if mutates_storage_metadata:
            mutates_data = False  # torch: the writes went to the new storage, not the input's
        infos.append(InputAliasInfo(
            is_leaf=arg.is_leaf,
            mutates_data=mutates_data,
            mutates_metadata=mutates_metadata,
            # torch compares counters, so with no mutation at all this is (vacuously) True.
            mutations_hidden_from_autograd=st.mutation_counter_hidden_from_autograd == st.mutation_counter,
            mutations_under_no_grad_or_inference_mode=under_no_grad,
            requires_grad=f_arg.requires_grad,
            keep_input_mutations=keep_input_mutations,
            mutates_storage_metadata=mutates_storage_metadata,
        ))
    return infos


def _metadata_key(t: torch.Tensor) -> tuple:
    # a SymInt is not hashable: its expression stands for it (torch's MetadataKey does the same)
    def key(x):
        return x.node.expr if isinstance(x, torch.SymInt) else x

    return (tuple(map(key, t.shape)), tuple(map(key, t.stride())), key(t.storage_offset()), t.layout, t.is_conj(),
            t.is_neg())


def _is_multi_output_view(t: torch.Tensor) -> bool:
    # torch: _functionalize_is_multi_output_view; the flag propagates to views of such views.
    return isinstance(t, FunctionalTensor) and any(step.out_index is not None for step in t.chain)


def _is_custom_function(grad_fn) -> bool:
    return isinstance(grad_fn, torch.autograd.function.BackwardCFunction) or type(grad_fn).__name__ == "CppFunction"


def _output_info(f_args, f_outs, input_info):
    """Note [Classifying an output]. Returns (output_info, intermediate_bases)."""
    # Note [Two storages after set_()]: torch asks the Python wrappers' storages, which set_() never moves.
    inp_storage = {}
    for i, a in enumerate(f_args):
        if isinstance(a, FunctionalTensor):
            inp_storage[id(a.original_storage)] = i  # as torch's dict: the last input of a storage wins
    inp_ids = {id(a) for a in f_args if isinstance(a, torch.Tensor)}
    out_ids = {id(o): i for i, o in enumerate(f_outs)}

    def storage_of(o):
        return id(o.original_storage) if isinstance(o, FunctionalTensor) else id(o)

    alias_count: dict[int, int] = defaultdict(int)
    multi_view_count: dict[int, int] = defaultdict(int)
    grad_outs_by_key: dict[int, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    for o in f_outs:
        if isinstance(o, torch.Tensor):
            s = storage_of(o)
            alias_count[s] += 1
            if _is_multi_output_view(o):
                multi_view_count[s] += 1
            if o.requires_grad:
                grad_outs_by_key[s][_metadata_key(o)].append(o)

    base_id_to_idx: dict[int, int] = {}
    intermediate_bases: list[torch.Tensor] = []
    infos: list[OutputAliasInfo] = []
    for o in f_outs:
        if not isinstance(o, torch.Tensor):
            infos.append(OutputAliasInfo(OutputType.non_alias, type(o), None, None, False, False))
            continue
        s = storage_of(o)
        grad_fn = o.grad_fn
        not_multi = alias_count[s] - multi_view_count[s]
        same_meta_grad = [x for x in grad_outs_by_key[s][_metadata_key(o)] if x is not o]
        base_idx = None
        # torch: _functionalize_was_storage_changed(o): after a set_(), storages do not tell inputs apart
        storage_changed = isinstance(o, FunctionalTensor) and o.storage_changed
        if s in inp_storage and grad_fn is not None and _is_custom_function(grad_fn):
            out_type = OutputType.custom_function_view
        elif s in inp_storage and storage_changed and id(o) in inp_ids:
            out_type, base_idx = OutputType.is_input, inp_storage[s]
        elif s in inp_storage and not storage_changed:
            base_idx = inp_storage[s]
            if grad_fn is not None and not_multi == 0:
                out_type, base_idx = OutputType.non_alias, base_idx  # torch keeps base_idx here
            elif id(o) in inp_ids:
                out_type = OutputType.is_input
            else:
                out_type = OutputType.alias_of_input
        elif o._base is not None and o.requires_grad and o._base.requires_grad:
            if alias_count[s] == 1 or not_multi <= 1:
                out_type = OutputType.unsafe_view_alias
            elif id(o._base) in out_ids:
                out_type, base_idx = OutputType.alias_of_intermediate_base_is_user_output, out_ids[id(o._base)]
            elif id(o._base) in base_id_to_idx:
                out_type, base_idx = OutputType.alias_of_intermediate, base_id_to_idx[id(o._base)]
            else:
                out_type = OutputType.alias_of_intermediate_save_as_output
                base_idx = base_id_to_idx[id(o._base)] = len(intermediate_bases)
                intermediate_bases.append(o._base)
        elif alias_count[s] > 1 and same_meta_grad and not o.requires_grad:
            out_type, base_idx = OutputType.alias_of_intermediate_base_is_user_output, out_ids[id(same_meta_grad[0])]
        else:
            out_type = OutputType.non_alias

        # The view chain, for view replay at runtime (torch saves it in the same cases).
        chain = None
        if out_type in (
            OutputType.alias_of_intermediate,
            OutputType.alias_of_intermediate_save_as_output,
            OutputType.alias_of_intermediate_base_is_user_output,
        ) or (out_type is OutputType.alias_of_input and not input_info[base_idx].mutates_metadata):
            chain = o.chain if isinstance(o, FunctionalTensor) else None
        infos.append(OutputAliasInfo(
            output_type=out_type,
            raw_type=torch.Tensor,  # torch records FunctionalTensor here; we record what the user gets
            base_idx=base_idx,
            dynamic_dims=set(),
            requires_grad=o.requires_grad,
            requires_grad_for_backward=o.requires_grad and (o._base is None or grad_fn is not None),
            view_meta_sequence=chain,
            layout=(tuple(o.shape), tuple(o.stride()), o.storage_offset()),
        ))
    return infos, intermediate_bases


def _traced_tangents(mode, f_args, input_info, f_outs, output_info, intermediate_bases) -> list:
    """Fake values standing for the tangents of the joint graph (torch's order)."""
    tangents = [
        f for f, info in zip(f_args, input_info)
        if info.mutation_type == MutationType.MUTATED_OUT_GRAPH and info.mutates_data and info.requires_grad
    ]
    tangents += [
        o for o, info in zip(f_outs, output_info)
        if info.output_type in (OutputType.non_alias, OutputType.unsafe_view_alias, OutputType.custom_function_view)
        and isinstance(o, torch.Tensor)
        and info.requires_grad_for_backward
    ]
    tangents += intermediate_bases
    # torch also views each tangent (t.view(t.shape)) and coerces it to contiguous.
    out = []
    for t in tangents:
        v = mode.from_fun(t)
        with mode._below():
            out.append(v.contiguous() if not v.is_contiguous() else v)
    return out
