"""Which inputs may share memory: the question behind a synthetic base.

Place in the pipeline: ``runtime_wrappers.aot_wrapper_synthetic_base`` asks it, at
compile time, of the inputs that share a storage with a mutated one. Mirrors
``compute_overlapping_inputs`` of ``torch/_functorch/_aot_autograd/input_output_analysis.py``
and the overlap test it calls, ``compute_overlapping_tensors`` in ``torch/csrc/dynamo/guards.cpp``.
"""

from __future__ import annotations

import torch

__all__ = ["compute_overlapping_inputs"]


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """The storage elements ``t`` may touch: [first, last]."""
    last = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0)
    return t.storage_offset(), last


def compute_overlapping_inputs(tensors: list[torch.Tensor]) -> set[int]:
    """Positions of the tensors that may share a storage element with another one (torch: same name).

    Two tensors in one storage may not overlap at all (``x[0]`` and ``x[1]``); torch
    then makes no synthetic base. Like torch (``compute_overlapping_tensors`` in
    ``torch/csrc/dynamo/guards.cpp``) this asks only whether they *definitely* do
    not overlap (Note [Overlap is decided conservatively]).
    """
    overlapping: set[int] = set()
    for i in range(len(tensors)):
        for j in range(i):
            if not _definitely_do_not_overlap(tensors[i], tensors[j]):
                overlapping.update((i, j))
    return overlapping


def _definitely_do_not_overlap(x: torch.Tensor, y: torch.Tensor) -> bool:
    """torch's ``tensors_definitely_do_not_overlap`` for static shapes.

    Note [Overlap is decided conservatively]
        torch proves "no overlap" in three cases only: both tensors contiguous
        with disjoint ranges; the range of the one that starts first ending
        before the other starts; two 2-d tensors with contiguous rows and the
        same row stride whose rows interleave without meeting. Anything else
        counts as overlapping, even when no element is shared (the even and
        the odd elements of one vector, two columns of a matrix): those inputs
        get a synthetic base too. Ours answers the same, so that the same
        programs get a synthetic base (chapter 11 shows both cases).
    """
    if x is y:
        return False
    if x.numel() == 0 or y.numel() == 0:
        return True
    if x.storage_offset() > y.storage_offset():
        x, y = y, x
    if x.is_contiguous() and y.is_contiguous():
        return x.storage_offset() + x.numel() <= y.storage_offset()
    if _extent(x)[1] < y.storage_offset():
        return True
    if x.dim() == 2 and y.dim() == 2 and x.stride(1) == 1 and y.stride(1) == 1 and x.stride(0) == y.stride(0):
        delta = y.storage_offset() - x.storage_offset()
        if delta < x.size(1):
            return False
        if x.stride(0) * (x.size(0) - 1) + x.size(1) <= delta:
            return True
        return delta % x.stride(0) + y.size(1) <= x.stride(0)
    return False
