"""Which storage elements a tensor's metadata reaches: aliasing drawn from metadata alone.

Place in the pipeline: none; chapter 06 draws views of one storage with it. It only
reads shape, stride and storage offset, so it answers the same for a real tensor
and for its FakeTensor (which has no data to look at).
Mirrors the overlap test of ``torch/_functorch/_aot_autograd/input_output_analysis.py``
(``compute_overlapping_inputs``), drawn element by element.
"""

from __future__ import annotations

import itertools

import torch

__all__ = ["covered_elements"]


def covered_elements(t: torch.Tensor) -> list[int]:
    """Sorted storage indices (in elements) that ``t`` can read: offset + sum(index * stride)."""
    ranges = [range(n) for n in t.shape]
    reached = {t.storage_offset() + sum(i * s for i, s in zip(idx, t.stride())) for idx in itertools.product(*ranges)}
    return sorted(reached)
