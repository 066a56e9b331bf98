"""Compare two ViewAndMutationMeta field by field: ours (``minidynamo.aot``) vs torch's.

Place in the pipeline: beside FakeTensor pass 2 (``minidynamo.aot.collect_metadata``),
for the chapter-09 table and ``tests/test_aot_metadata.py``. The real counterpart is
the ``ViewAndMutationMeta`` dataclass of torch/_functorch/_aot_autograd/schemas.py;
torch compares two of them with ``==`` (every field, including its C++ ViewMeta
objects), which cannot compare ours with theirs, so this names the fields that must agree.
"""

from __future__ import annotations

import torch

__all__ = ["INPUT_FIELDS", "OUTPUT_FIELDS", "INDEX_FIELDS", "KNOWN_DIFFERENCES", "metadata_differences"]

INPUT_FIELDS = (
    "is_leaf",
    "mutates_data",
    "mutates_metadata",
    "mutates_storage_metadata",
    "requires_grad",
    "mutations_hidden_from_autograd",
    "mutations_under_no_grad_or_inference_mode",
    "keep_input_mutations",
)
OUTPUT_FIELDS = ("output_type", "base_idx", "requires_grad", "requires_grad_for_backward")
# Precomputed by ViewAndMutationMeta.__post_init__ (Note [Precomputed index lists]).
INDEX_FIELDS = (
    "mutated_inp_runtime_indices",
    "mutated_graph_handled_indices",
    "aliased_out_indices",
    "unsafe_view_out_indices",
    "num_outputs",
    "num_outputs_non_aliased",
    "num_outputs_aliased_to_inputs",
    "num_outputs_aliased_to_intermediates",
    "num_forward_returns",
)

# Cases where ours differs from torch on purpose: name -> reason. (Shown in chapter 09.)
# Fields that differ on purpose for every case are not compared:
#   raw_type (torch records FunctionalTensor, the type it saw; we record torch.Tensor, what the user gets),
#   view_meta_sequence (torch's C++ ViewMeta objects; ours are schemas.ViewMeta; tests/test_aot_metadata.py compares them by replay),
#   dynamic_dims (ours is static-shape).
KNOWN_DIFFERENCES: dict[str, str] = {}


def metadata_differences(a, b) -> list[str]:
    """Each field above that differs, ours (a) vs torch's (b), as a line of text; [] when they agree."""
    diffs = []
    if len(a.input_info) != len(b.input_info):
        diffs.append(f"{len(a.input_info)} vs {len(b.input_info)} inputs")
    for i, (x, y) in enumerate(zip(a.input_info, b.input_info)):
        diffs += [f"input {i} {f}: {getattr(x, f)} vs {getattr(y, f)}" for f in INPUT_FIELDS if getattr(x, f) != getattr(y, f)]
    if len(a.output_info) != len(b.output_info):
        diffs.append(f"{len(a.output_info)} vs {len(b.output_info)} outputs")
    for i, (x, y) in enumerate(zip(a.output_info, b.output_info)):
        for f in OUTPUT_FIELDS:
            xv, yv = getattr(x, f), getattr(y, f)
            if f == "output_type":
                xv, yv = xv.name, yv.name
            if xv != yv:
                diffs.append(f"output {i} {f}: {xv} vs {yv}")
        if (x.view_meta_sequence is None) != (y.view_meta_sequence is None):
            diffs.append(f"output {i}: view chain recorded {x.view_meta_sequence is not None} vs {y.view_meta_sequence is not None}")
        if issubclass(x.raw_type, torch.Tensor) != issubclass(y.raw_type, torch.Tensor):
            diffs.append(f"output {i} raw_type: {x.raw_type.__name__} vs {y.raw_type.__name__}")
    if a.num_intermediate_bases != b.num_intermediate_bases:
        diffs.append(f"num_intermediate_bases: {a.num_intermediate_bases} vs {b.num_intermediate_bases}")
    ta = [(tuple(t.shape), t.dtype) for t in a.traced_tangents]
    tb = [(tuple(t.shape), t.dtype) for t in b.traced_tangents]
    if ta != tb:
        diffs.append(f"traced_tangents: {ta} vs {tb}")
    diffs += [f"{f}: {getattr(a, f)} vs {getattr(b, f)}" for f in INDEX_FIELDS if getattr(a, f) != getattr(b, f)]
    return diffs
