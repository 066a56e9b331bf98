"""The metadata AOTAutograd collects about a function: who is mutated, who aliases whom.

Place in the pipeline: produced by FakeTensor pass 2 (``collect_metadata_analysis``),
read by joint tracing (``graph_capture``), partitioning and the runtime wrappers.
Mirrors ``torch/_functorch/_aot_autograd/schemas.py``: ``ViewAndMutationMeta``,
``InputAliasInfo``, ``OutputAliasInfo``, ``OutputType``, ``MutationType`` and
``TensorAlias`` keep torch's names and field names. The real ``ViewAndMutationMeta``
also carries tensor-subclass, RNG, effect-token and cache bookkeeping; ours keeps
only what plain dense tensors need.

Note [Precomputed index lists]
    The runtime wrapper runs on every call. It must never scan all inputs to
    find the few that were mutated, nor all outputs to find the aliases, so
    ``ViewAndMutationMeta.__post_init__`` computes those index lists once, at
    compile time (``mutated_inp_runtime_indices``, ``aliased_out_indices``, ...),
    exactly as torch does.

Note [The view chain]
    An output that aliases an input or an intermediate is not returned by the
    compiled graph; the runtime wrapper regenerates it from its base. Torch
    records, per output, the ``ViewMeta`` sequence functionalization saw (C++
    objects that can re-run a view op on another tensor). Ours records a tuple
    of :class:`ViewMeta` (an ATen view op and its non-tensor arguments) from the
    *root* base to the output; ``replay_views(base, chain)`` re-applies it.
    When no chain is known (the alias came from an op we do not track) the
    wrapper falls back to ``as_strided`` with the output's size/stride/offset.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

import torch

__all__ = [
    "OutputType",
    "MutationType",
    "ViewMeta",
    "replay_views",
    "OutputAliasInfo",
    "InputAliasInfo",
    "ViewAndMutationMeta",
    "TensorAlias",
]


# Member names and order exactly as torch's (its values are 1..8 in this order too).
OutputType = Enum(
    "OutputType",
    (
        # output is not an alias
        "non_alias",
        # output aliases an input
        "alias_of_input",
        # output **is** an input tensor
        "is_input",
        # output's ._base is a graph intermediate that must be added as an extra graph output
        "alias_of_intermediate_save_as_output",
        # same, but the ._base already is an extra graph output (another output shares it)
        "alias_of_intermediate",
        # same, but the ._base already is a user output: regenerate from user_outputs[base_idx]
        "alias_of_intermediate_base_is_user_output",
        # See torch's Note [Intermediate Bases Optimization]
        "unsafe_view_alias",
        # alias produced by a custom autograd.Function: no view replay
        "custom_function_view",
    ),
)


class MutationType(Enum):
    NOT_MUTATED = 1
    MUTATED_IN_GRAPH = 2
    MUTATED_OUT_GRAPH = 3


@dataclass(frozen=True)
class ViewMeta:
    """One step of a view chain: ``op(base, *args, **kwargs)[out_index]``.

    ``op`` is the ATen view overload (``aten.transpose.int``); ``args`` are its
    non-tensor arguments after the base; ``out_index`` picks one result of a
    multi-output view (``split``, ``unbind``, ``chunk``), else ``None``.
    Torch's counterpart is the C++ ``ViewMeta`` (``torch/csrc/functionalization``).
    """

    op: Any
    args: tuple = ()
    kwargs: tuple = ()  # sorted (key, value) pairs, so the record is hashable
    out_index: int | None = None

    def replay(self, base: torch.Tensor) -> torch.Tensor:
        out = self.op(base, *self.args, **dict(self.kwargs)) if self.kwargs else self.op(base, *self.args)
        return out if self.out_index is None else out[self.out_index]

    def __str__(self) -> str:
        args = ", ".join(map(repr, self.args))
        idx = "" if self.out_index is None else f"[{self.out_index}]"
        return f"{self.op}({args}){idx}"


def replay_views(base: torch.Tensor, view_chain: tuple[ViewMeta, ...]) -> torch.Tensor:
    """Re-run a view chain on ``base`` (view replay; see Note [The view chain])."""
    out = base
    for step in view_chain:
        out = step.replay(out)
    return out


@dataclass(frozen=True)
class OutputAliasInfo:
    """What one user output is, alias-wise (torch: same name, same fields)."""

    output_type: OutputType
    # torch.Tensor, int, float, torch.SymInt, ...
    raw_type: type
    # non_alias: None. alias_of_input / is_input: index into the user inputs.
    # alias_of_intermediate*: index into the intermediate bases appended to the forward outputs.
    # alias_of_intermediate_base_is_user_output: index into the user outputs.
    base_idx: int | None
    # torch records the dynamic dims of a tensor output; ours is static-shape: None.
    dynamic_dims: set[int] | None
    requires_grad: bool
    # Whether the output takes part in backward as a tangent (False for views made
    # under no_grad that inherit requires_grad without a grad_fn).
    requires_grad_for_backward: bool = False
    # The view chain from the base to this output (Note [The view chain]), or None.
    # torch: view_meta_sequence (a ViewMetaSequence of C++ ViewMeta objects).
    view_meta_sequence: tuple[ViewMeta, ...] | None = field(default=None, compare=False)
    # (size, stride, storage offset) the output had in metadata collection, on the inputs'
    # own layouts: what an alias of an input is rebuilt to (torch reads the fake output too).
    layout: tuple | None = field(default=None, compare=False)


def _check_if_mutation_can_be_in_graph(
    keep_input_mutations: bool,
    mutates_data: bool,
    mutates_metadata: bool,
    mutations_hidden_from_autograd: bool,
    mutations_under_no_grad_or_inference_mode: bool,
    mutates_storage_metadata: bool,
    mutation_inductor_storage_resize: bool,
    requires_grad: bool,
) -> bool:
    """torch (functional_utils.py), same rule and same refusal.

    Note [set_() Input Mutations in AOTAutograd]
        A ``set_()`` on an input can only be replayed by the graph itself
        (``aten.set_(input, new_value)`` as its last node): the wrapper cannot
        swap a user's storage from outside without autograd noticing. So it needs
        ``keep_input_mutations`` and every mutation of the input made where
        autograd does not look (under no_grad); otherwise torch refuses the
        program with this message, and so do we.
    """
    if keep_input_mutations:
        in_graph = (mutates_data or mutates_storage_metadata or mutation_inductor_storage_resize) and (
            (not mutates_metadata and not requires_grad)
            or mutations_hidden_from_autograd
            or mutations_under_no_grad_or_inference_mode
        )
    else:
        in_graph = False
    if mutation_inductor_storage_resize or mutates_storage_metadata:
        op_name = "resize_" if mutation_inductor_storage_resize else "set_"
        if not in_graph:
            raise AssertionError(f"""\
Encountered a {op_name} on a graph input, but the input has other mutations that we cannot
keep in the graph. This is not supported today. Current state:
  keep_input_mutations={keep_input_mutations}
  mutates_data={mutates_data}
  mutates_metadata={mutates_metadata}
  mutations_hidden_from_autograd={mutations_hidden_from_autograd}
  mutations_under_no_grad_or_inference_mode={mutations_under_no_grad_or_inference_mode}
  mutation_inductor_storage_resize={mutation_inductor_storage_resize}
  requires_grad={requires_grad}""")
    return in_graph


@dataclass(frozen=True)
class InputAliasInfo:
    """What happened to one user input (torch: same name, same fields)."""

    is_leaf: bool
    mutates_data: bool
    mutates_metadata: bool
    # every data mutation happened under no_grad or on a tensor autograd cannot see
    mutations_hidden_from_autograd: bool
    mutations_under_no_grad_or_inference_mode: bool
    requires_grad: bool
    keep_input_mutations: bool
    # torch: the input's storage was swapped by set_() (Note [set_() Input Mutations in AOTAutograd]);
    # inductor's storage resize (resize_storage_bytes_), which ours never sets.
    mutates_storage_metadata: bool = False
    mutation_inductor_storage_resize: bool = False

    @functools.cached_property
    def mutation_type(self) -> MutationType:
        if not self.mutates_data and not self.mutates_metadata and not self.mutation_inductor_storage_resize:
            return MutationType.NOT_MUTATED
        if _check_if_mutation_can_be_in_graph(
            self.keep_input_mutations,
            self.mutates_data,
            self.mutates_metadata,
            self.mutations_hidden_from_autograd,
            self.mutations_under_no_grad_or_inference_mode,
            self.mutates_storage_metadata,
            self.mutation_inductor_storage_resize,
            self.requires_grad,
        ):
            return MutationType.MUTATED_IN_GRAPH
        return MutationType.MUTATED_OUT_GRAPH


_NOT_ALIASED = (OutputType.non_alias, OutputType.unsafe_view_alias, OutputType.custom_function_view)
_ALIASED_TO_INPUTS = (OutputType.alias_of_input, OutputType.is_input)
_ALIASED_TO_INTERMEDIATES = (
    OutputType.alias_of_intermediate,
    OutputType.alias_of_intermediate_save_as_output,
    OutputType.alias_of_intermediate_base_is_user_output,
)


@dataclass(eq=False)
class ViewAndMutationMeta:
    """Everything the compiled function's wrappers need to know (torch: same name).

    ``traced_tangents``: one fake tensor per forward output that gets a tangent in
    the joint graph, in torch's order: the runtime-mutated inputs whose data
    changed and that require grad, then the non-aliased user outputs that take
    part in backward (``requires_grad_for_backward``), then every intermediate
    base. Only their shapes and dtypes matter.
    """

    input_info: list[InputAliasInfo]
    output_info: list[OutputAliasInfo]
    num_intermediate_bases: int
    keep_input_mutations: bool
    traced_tangents: list[Any]

    def __post_init__(self) -> None:
        # Note [Precomputed index lists]
        self.mutated_inp_runtime_indices = [
            i for i, m in enumerate(self.input_info) if m.mutation_type == MutationType.MUTATED_OUT_GRAPH
        ]
        self.num_mutated_inp_runtime_indices = len(self.mutated_inp_runtime_indices)
        self.mutated_graph_handled_indices = [
            i for i, m in enumerate(self.input_info) if m.mutation_type == MutationType.MUTATED_IN_GRAPH
        ]
        self.num_mutated_graph_handled_indices = len(self.mutated_graph_handled_indices)
        self.mutated_graph_handled_indices_seen_by_autograd = [
            i for i in self.mutated_graph_handled_indices if not self.input_info[i].mutations_hidden_from_autograd
        ]
        self.num_mutated_graph_handled_indices_seen_by_autograd = len(
            self.mutated_graph_handled_indices_seen_by_autograd
        )
        # Of the runtime-mutated inputs, those with a metadata-only / data mutation.
        self.mutated_inp_data_indices = [i for i in self.mutated_inp_runtime_indices if self.input_info[i].mutates_data]
        self.mutated_inp_metadata_only_indices = [
            i
            for i in self.mutated_inp_runtime_indices
            if self.input_info[i].mutates_metadata and not self.input_info[i].mutates_data
        ]

        self.aliased_out_indices = [
            i for i, o in enumerate(self.output_info) if o.output_type not in _NOT_ALIASED
        ]
        self.unsafe_view_out_indices = [
            i for i, o in enumerate(self.output_info) if o.output_type is OutputType.unsafe_view_alias
        ]
        self.num_outputs = len(self.output_info)
        self.num_outputs_non_aliased = sum(o.output_type in _NOT_ALIASED for o in self.output_info)
        self.num_outputs_aliased_to_inputs = sum(o.output_type in _ALIASED_TO_INPUTS for o in self.output_info)
        self.num_unsafe_view_outputs = len(self.unsafe_view_out_indices)
        self.num_outputs_aliased_to_intermediates = sum(
            o.output_type in _ALIASED_TO_INTERMEDIATES for o in self.output_info
        )
        self.num_outputs_aliased = self.num_outputs_aliased_to_inputs + self.num_outputs_aliased_to_intermediates
        self.dynamic_outputs = any(o.dynamic_dims for o in self.output_info)
        # The compiled forward returns (mutated inputs, user outputs, intermediate bases, saved...).
        self.num_forward_returns = self.num_mutated_inp_runtime_indices + self.num_outputs + self.num_intermediate_bases
        self.num_forward = self.num_forward_returns
        # Runtime types of the tangents (torch: output_types), fake tensors -> torch.Tensor.
        self.output_types = [torch.Tensor if isinstance(t, torch.Tensor) else type(t) for t in self.traced_tangents]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ViewAndMutationMeta):
            return NotImplemented
        return (
            self.input_info == other.input_info
            and self.output_info == other.output_info
            and self.num_intermediate_bases == other.num_intermediate_bases
            and self.keep_input_mutations == other.keep_input_mutations
            and len(self.traced_tangents) == len(other.traced_tangents)
            and all(
                _same_meta(x, y) for x, y in zip(self.traced_tangents, other.traced_tangents)
            )
        )

    def table(self) -> str:
        """A small text table of the inputs and outputs (for chapters and error messages)."""
        lines = ["inputs:"]
        for i, m in enumerate(self.input_info):
            flags = [n for n in ("mutates_data", "mutates_metadata", "mutations_hidden_from_autograd",
                                 "mutations_under_no_grad_or_inference_mode", "requires_grad") if getattr(m, n)]
            lines.append(f"  [{i}] {', '.join(flags) or '-'}")
        lines.append("outputs:")
        for i, o in enumerate(self.output_info):
            chain = "" if not o.view_meta_sequence else "  via " + " -> ".join(map(str, o.view_meta_sequence))
            rg = " requires_grad" if o.requires_grad else ""
            lines.append(f"  [{i}] {o.output_type.name} base_idx={o.base_idx}{rg}{chain}")
        lines.append(f"num_intermediate_bases={self.num_intermediate_bases}")
        return "\n".join(lines)


def _same_meta(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x.shape == y.shape and x.dtype == y.dtype
    return type(x) is type(y)


@dataclass(frozen=True)
class TensorAlias:
    """An aliased output, hidden from ``autograd.Function`` so it gets no gradient.

    The compiled autograd.Function returns aliased outputs wrapped in this opaque
    box; the runtime wrapper unwraps them and regenerates the real alias.
    """

    alias: torch.Tensor


ViewReplayFn = Callable[[torch.Tensor], torch.Tensor]
